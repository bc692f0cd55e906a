"""The purgatory on a task.Clock, and the leader's ISR writes to a real ZooKeeper
(ZkIsrManager: conditional on the state znode's version, announced under
/isr_change_notification after Kafka's quiet period)."""

from __future__ import annotations

import json

from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.purgatory import DelayedOperation, DelayedOperationPurgatory
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
