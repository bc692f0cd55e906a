"""The state machines' transition tables refuse illegal changes loudly and change nothing."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from kazoo.client import KazooClient

from kafkaclone.common.log_summary import EXAMPLES
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.channel_manager import ControllerBrokerRequestBatch
from kafkaclone.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    PartitionState,
    ReplicaState,
)
from kafkaclone.controller.election import (
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
)
from kafkaclone.controller.state_machines import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    IllegalStateTransitionError,
    PartitionStateMachine,
    ReplicaStateMachine,
    check_partition_transition,
)
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from tests.controller.helpers import FakeChannel, Sent, broker_info

TP = TopicPartition("t", 0)


def machines() -> tuple[ControllerContext, PartitionStateMachine, ReplicaStateMachine,
                        list[Sent]]:
    sent: list[Sent] = []
    context = ControllerContext()
    batch = ControllerBrokerRequestBatch(1, context, FakeChannel(sent))
    no_zk = cast(Any, None)  # an illegal transition must not touch ZooKeeper
    return (context, PartitionStateMachine(1, context, no_zk, batch, False),
            ReplicaStateMachine(1, context, no_zk, batch), sent)


def test_partition_transitions_are_data() -> None:
    assert PARTITION_TRANSITIONS[PartitionState.NEW] == {PartitionState.NON_EXISTENT}
    assert PARTITION_TRANSITIONS[PartitionState.NON_EXISTENT] == {PartitionState.OFFLINE}
    with pytest.raises(IllegalStateTransitionError, match="NonExistentPartition"):
        check_partition_transition(TP, PartitionState.NON_EXISTENT, PartitionState.ONLINE)


def test_illegal_partition_transition_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    context, psm, _, sent = machines()
    result = run(psm.handle_state_changes([TP], PartitionState.ONLINE))
    assert isinstance(result[TP], IllegalStateTransitionError)
    assert context.partition_state(TP) == PartitionState.NON_EXISTENT
    assert "failed to change state" in caplog.text
    context.partition_states[TP] = PartitionState.ONLINE
    result = run(psm.handle_state_changes([TP], PartitionState.NON_EXISTENT))
    assert isinstance(result[TP], IllegalStateTransitionError)
    assert context.partition_state(TP) == PartitionState.ONLINE
    assert sent == []


@pytest.mark.parametrize("count", [1, EXAMPLES + 2])
def test_state_changes_of_many_partitions_log_one_line(
        caplog: pytest.LogCaptureFixture, count: int) -> None:
    """Kafka's "Changed partition" line per partition for a few; past EXAMPLES of them one
    line for all (each at DEBUG): 10,000 lines held the reactor thread for seconds."""
    context, psm, _, _ = machines()
    partitions = [TopicPartition("t", p) for p in range(count)]
    for tp in partitions:
        context.partition_states[tp] = PartitionState.ONLINE
    with caplog.at_level("INFO", logger="kafkaclone.controller.state_change"):
        run(psm.handle_state_changes(partitions, PartitionState.OFFLINE))
    assert all(context.partition_state(tp) == PartitionState.OFFLINE for tp in partitions)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Changed")]
    if count == 1:
        assert lines == ["Changed partition t-0 from OnlinePartition to OfflinePartition"]
    else:
        assert lines == [f"Changed {count} partitions to OfflinePartition: "
                         + ", ".join(f"t-{p} from OnlinePartition" for p in range(EXAMPLES))
                         + ", ..."]


def test_illegal_replica_transitions_are_refused() -> None:
    context, _, rsm, sent = machines()
    replica = PartitionAndReplica(TP, 2)
    for target in (ReplicaState.ONLINE, ReplicaState.DELETION_STARTED,
                   ReplicaState.DELETION_SUCCESSFUL, ReplicaState.NON_EXISTENT):
        assert ReplicaState.NON_EXISTENT not in REPLICA_TRANSITIONS[target]
        failures = run(rsm.handle_state_changes([replica], target))
        assert isinstance(failures[replica], IllegalStateTransitionError)
        assert context.replica_state(replica) == ReplicaState.NON_EXISTENT
    assert run(rsm.handle_state_changes([replica], ReplicaState.NEW)) == {}
    assert context.replica_state(replica) == ReplicaState.NEW
    assert sent == []


def test_election_rules() -> None:
    assert offline_partition_leader_election([3, 1, 2], [1, 2], [1, 2, 3], False) == 1
    assert offline_partition_leader_election([3, 1, 2], [3], [1, 2], False) is None
    assert offline_partition_leader_election([3, 1, 2], [3], [1, 2], True) == 1
    assert controlled_shutdown_partition_leader_election([1, 2, 3], [1, 2, 3], [1, 2, 3],
                                                         {1}) == 2


@pytest.mark.timeout(60)
def test_isr_removal_and_election_start_from_the_cached_states(
        zk_client: KafkaZkClient, zk: KazooClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first write of each partition is made from the state the controller holds, with
    its zkVersion: only the states that changed behind it (here a leader's ISR change) and
    those whose cached state asks for no write are read again; the outcome is the same."""
    epoch, epoch_zk_version = run(zk_client.register_controller_and_increment_controller_epoch(1))
    tps = [TopicPartition("t", p) for p in range(4)]
    run(zk_client.create_topic_assignment("t", None, {tp.partition: [3, 1, 2] for tp in tps}))
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(3, [3, 1, 2]), epoch)
    run(zk_client.create_topic_partition_states(dict.fromkeys(tps, initial), epoch_zk_version))
    sent: list[Sent] = []
    context = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
    context.set_live_brokers({b: (broker_info(b), 10) for b in (1, 2)})
    for tp in tps:
        context.update_partition_full_replica_assignment(tp, ReplicaAssignment((3, 1, 2)))
        context.partition_states[tp] = PartitionState.ONLINE
    context.partition_leadership_info.update(run(zk_client.get_topic_partition_states(tps)))
    # Behind the controller: t-1's leader shrank the ISR; t-2's state is cached without 3.
    stale = "/brokers/topics/t/partitions/1/state"
    zk.set(stale, json.dumps({"version": 1, "leader": 3, "leader_epoch": 0, "isr": [3, 1],
                              "controller_epoch": epoch}).encode())
    cached = context.partition_leadership_info[tps[2]]
    context.partition_leadership_info[tps[2]] = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(3, 0, (1, 2), cached.leader_and_isr.zk_version), epoch)
    reads: list[list[TopicPartition]] = []
    original = zk_client.get_topic_partition_states

    async def counted(partitions: Any) -> Any:
        reads.append(sorted(partitions))
        return await original(partitions)

    monkeypatch.setattr(zk_client, "get_topic_partition_states", counted)
    batch = ControllerBrokerRequestBatch(1, context, FakeChannel(sent, {1, 2}))
    rsm = ReplicaStateMachine(1, context, zk_client, batch)
    for tp in tps:
        context.replica_states[PartitionAndReplica(tp, 3)] = ReplicaState.ONLINE
    failures = run(rsm.handle_state_changes([PartitionAndReplica(tp, 3) for tp in tps],
                                            ReplicaState.OFFLINE))
    assert failures == {}
    assert reads == [[tps[1], tps[2]]]  # the stale one after its failed write, the unsure one
    states = run(original(tps))
    assert {tp: (s.leader_and_isr.leader, s.leader_and_isr.isr) for tp, s in states.items()} == {
        tp: (-1, (1, 2)) if tp != tps[1] else (-1, (1,)) for tp in tps}
    assert all(context.partition_leadership_info[tp] == states[tp] for tp in tps)

    reads.clear()
    psm = PartitionStateMachine(1, context, zk_client, batch, False)
    for tp in tps:
        context.partition_states[tp] = PartitionState.OFFLINE
    elected = run(psm.handle_state_changes(tps, PartitionState.ONLINE))
    assert reads == []  # every cached state was current
    assert {tp: (r.leader, r.isr) for tp, r in elected.items()  # type: ignore[union-attr]
            } == {tp: (1, (1, 2)) if tp != tps[1] else (1, (1,)) for tp in tps}
