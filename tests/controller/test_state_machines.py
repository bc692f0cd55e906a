"""The state machines' transition tables refuse illegal changes loudly and change nothing."""

from __future__ import annotations

from typing import Any, cast

import pytest

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
from tests.controller.helpers import FakeChannel, Sent

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
