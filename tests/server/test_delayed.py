"""The purgatory on a task.Clock; the admin requests' delayed operations over a metadata
cache fed UpdateMetadata requests; and the leader's ISR writes to a real ZooKeeper
(ZkIsrManager: conditional on the state znode's version, announced under
/isr_change_notification after Kafka's quiet period)."""

from __future__ import annotations

import json

from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.delayed.admin import (
    DelayedCreatePartitions,
    DelayedDeleteTopics,
    DelayedElectLeader,
)
from kafkaclone.server.delayed.purgatory import DelayedOperation, DelayedOperationPurgatory
from kafkaclone.server.metadata_cache import LEADER_DURING_DELETE, MetadataCache
from kafkaclone.server.replica_manager import ZkIsrManager
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartitionStateZNode,
)


class Waiting(DelayedOperation):
    def __init__(self, delay_ms: int, ready: list[bool]) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.events: list[str] = []

    def try_complete(self) -> bool:
        self.events.append("try")
        return self.ready[0] and self.force_complete()

    def on_complete(self) -> None:
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.events.append("expire")


def test_completes_at_once_when_it_can() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("t", Clock())
    op = Waiting(1000, [True])
    assert purgatory.try_complete_else_watch(op, ["a"])
    assert op.events == ["try", "complete"] and purgatory.watched == 0


def test_watch_then_complete_by_key_once() -> None:
    clock = Clock()
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("t", clock)
    ready = [False]
    op = Waiting(1000, ready)
    assert not purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.delayed == 1 and purgatory.watched == 2
    assert purgatory.check_and_complete("other") == 0
    assert purgatory.check_and_complete("a") == 0
    ready[0] = True
    assert purgatory.check_and_complete("b") == 1
    assert purgatory.check_and_complete("a") == 0  # already done: not tried again
    clock.advance(2)
    assert op.events == ["try", "try", "try", "complete"]
    assert purgatory.delayed == 0
    assert not clock.getDelayedCalls()


def test_check_and_complete_all_tries_each_operation_once() -> None:
    """A follower's fetch watching thousands of partitions, all touched by one
    LeaderAndIsr: one try, not one per partition."""
    clock = Clock()
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("t", clock)
    ready = [False]
    wide = Waiting(1000, ready)
    narrow = Waiting(1000, ready)
    assert not purgatory.try_complete_else_watch(wide, range(1000))
    assert not purgatory.try_complete_else_watch(narrow, [7])
    assert purgatory.check_and_complete_all(range(500)) == 0
    assert wide.events == ["try", "try"] and narrow.events == ["try", "try"]
    ready[0] = True
    assert purgatory.check_and_complete_all([3, 7, 999, "other"]) == 2
    assert wide.events == ["try", "try", "try", "complete"]
    assert narrow.events == ["try", "try", "try", "complete"]
    assert purgatory.delayed == 0
    assert purgatory.check_and_complete_all(range(1000)) == 0  # nothing tried again
    assert wide.events[-1] == "complete" and len(wide.events) == 4


def test_expiry_calls_on_expiration_then_on_complete() -> None:
    clock = Clock()
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("t", clock)
    op = Waiting(500, [False])
    purgatory.try_complete_else_watch(op, ["a"])
    clock.advance(0.499)
    assert op.events == ["try"]
    clock.advance(0.002)
    assert op.events == ["try", "expire", "complete"]
    assert purgatory.watched == 0
    assert not op.force_complete()


def test_shutdown_completes_waiting_operations() -> None:
    clock = Clock()
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("t", clock)
    ops = [Waiting(10_000, [False]) for _ in range(3)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i, "shared"])
    purgatory.shutdown()
    assert all(op.events == ["try", "expire", "complete"] for op in ops)
    assert not clock.getDelayedCalls()


def test_purge_drops_completed_watchers() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory(
        "t", Clock(), purge_interval=3)
    ops = [Waiting(10_000, [False]) for _ in range(2)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a", "b"])
    ops[0].force_complete()
    assert purgatory.watched == 4
    purgatory.try_complete_else_watch(Waiting(10_000, [False]), ["c"])  # third: purges
    assert purgatory.watched == 3


_UPDATE = APIS[ApiKey.UPDATE_METADATA].request


def publish(cache: MetadataCache, topic: str, leaders: dict[int, int]) -> None:
    """An UpdateMetadata v7 naming ``topic``'s partitions with these leaders."""
    s = _UPDATE.structs
    cache.update_metadata(_UPDATE(
        controller_id=1, controller_epoch=1, broker_epoch=-1, live_brokers=[],
        topic_states=[s["UpdateMetadataTopicState"](topic_name=topic, partition_states=[
            s["UpdateMetadataPartitionState"](
                partition_index=p, controller_epoch=1, leader=leader, leader_epoch=0,
                isr=[1, 2], zk_version=0, replicas=[1, 2], offline_replicas=[])
            for p, leader in leaders.items()])]), 7)


def test_delayed_create_partitions_waits_for_every_leader() -> None:
    clock, cache = Clock(), MetadataCache(1)
    purgatory: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
        "topic", clock)
    answers: list[set[str]] = []
    op = DelayedCreatePartitions(5000, {"t": {0, 1}}, cache, answers.append)
    assert not purgatory.try_complete_else_watch(op, ["t"])
    publish(cache, "t", {0: 1, 1: -1})  # partition 1 has no leader yet
    assert purgatory.check_and_complete("t") == 0 and answers == []
    publish(cache, "t", {1: 2})
    assert purgatory.check_and_complete("t") == 1
    assert answers == [set()] and not clock.getDelayedCalls()


def test_delayed_create_partitions_answers_the_leaderless_topics_at_the_timeout() -> None:
    clock, cache = Clock(), MetadataCache(1)
    purgatory: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
        "topic", clock)
    answers: list[set[str]] = []
    publish(cache, "ready", {0: 1})
    purgatory.try_complete_else_watch(
        DelayedCreatePartitions(200, {"ready": {0}, "slow": {0}}, cache, answers.append),
        ["ready", "slow"])
    clock.advance(0.199)
    assert answers == []
    clock.advance(0.002)
    assert answers == [{"slow"}] and purgatory.watched == 0


def test_delayed_delete_topics_waits_until_the_cache_drops_them() -> None:
    clock, cache = Clock(), MetadataCache(1)
    purgatory: DelayedOperationPurgatory[DelayedOperation] = DelayedOperationPurgatory(
        "topic", clock)
    publish(cache, "a", {0: 1})
    publish(cache, "b", {0: 1})
    answers: list[set[str]] = []
    purgatory.try_complete_else_watch(
        DelayedDeleteTopics(1000, ["a", "b"], cache, answers.append), ["a", "b"])
    publish(cache, "a", {0: LEADER_DURING_DELETE})
    assert purgatory.check_and_complete("a") == 0
    clock.advance(1.001)
    assert answers == [{"b"}]
    # Nothing left to wait for: complete at once.
    purgatory.try_complete_else_watch(
        DelayedDeleteTopics(1000, ["a"], cache, answers.append), ["a"])
    assert answers == [{"b"}, set()]


def test_delayed_elect_leader_waits_for_the_elected_leader() -> None:
    clock, cache = Clock(), MetadataCache(1)
    purgatory: DelayedOperationPurgatory[DelayedElectLeader] = DelayedOperationPurgatory(
        "ElectLeader", clock)
    publish(cache, "t", {0: 1, 1: 1})
    answers: list[set[TopicPartition]] = []
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    purgatory.try_complete_else_watch(
        DelayedElectLeader(1000, {t0: 2, t1: 2}, cache, answers.append), [t0, t1])
    publish(cache, "t", {0: 2})
    assert purgatory.check_and_complete(t0) == 0
    publish(cache, "t", {1: 2})
    assert purgatory.check_and_complete(t1) == 1 and answers == [set()]
    purgatory.try_complete_else_watch(
        DelayedElectLeader(1000, {t0: 1, t1: 2}, cache, answers.append), [t0, t1])
    clock.advance(1.001)
    assert answers == [set(), {t0}]


def test_isr_update_is_conditional_and_announced(zk_client: KafkaZkClient) -> None:
    tp = TopicPartition("isr-topic", 0)
    run(_create_state(zk_client, tp))
    clock = Clock()
    clock.advance(1_000_000)
    manager = ZkIsrManager(zk_client, clock)
    new_version = run(manager.submit(tp, 1, 0, (1, 2), 0, 1))
    assert new_version == 1
    state = run(zk_client.get_topic_partition_state(tp))
    assert state is not None and state.leader_and_isr.isr == (1, 2)
    assert state.leader_and_isr.zk_version == 1
    # Written at a version that is not the znode's any more: refused, nothing changes.
    assert run(manager.submit(tp, 1, 0, (1,), 0, 1)) is None
    state = run(zk_client.get_topic_partition_state(tp))
    assert state is not None and state.leader_and_isr.isr == (1, 2)
    # Announced once no change came for 5 s.
    clock.advance(4)
    assert manager.maybe_propagate() is None
    clock.advance(1.5)
    announced = manager.maybe_propagate()
    assert announced is not None
    run(announced)
    children = run(zk_client.get_children("/isr_change_notification"))
    assert len(children) == 1 and children[0].startswith("isr_change_")
    data = run(zk_client.get_data_and_stat(f"/isr_change_notification/{children[0]}"))
    assert data is not None
    assert json.loads(data[0]) == {"version": 1, "partitions": [
        {"topic": "isr-topic", "partition": 0}]}
    assert manager.maybe_propagate() is None  # nothing new


async def _create_state(zk_client: KafkaZkClient, tp: TopicPartition) -> None:
    await zk_client.create_recursive(
        TopicPartitionStateZNode.path(tp),
        TopicPartitionStateZNode.encode(
            LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2, 3]), 1)))
