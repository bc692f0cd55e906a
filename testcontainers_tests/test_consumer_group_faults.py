"""Scenario 5: a consumer group whose coordinator is killed (SIGKILL) mid-consumption.

30,000 values are produced first (acks=all, idempotent, no fault). Consumer A of group
``g1`` reads them, committing after every batch; at a third of the way, the broker
coordinating the group is killed. The coordinator moves with the leadership of its
``__consumer_offsets`` partition; A finds the new one, rejoins and goes on. At two thirds
A commits and leaves: the committed offsets are in ZooKeeper under
``/consumers/g1/offsets``, and consumer B of the same group starts exactly there. Every
value is read, none at two positions, no poll out of order except after a (re)assignment.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from kafkaclone.testing.history import CheckResult, History

from .checks import check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import IDEMPOTENT, QUIET, Writer, create_topic, high_watermarks, records_by_partition

SESSION_TIMEOUT_MS = 6000
TOPIC = "grouped"
GROUP = "g1"
PARTITIONS = 6
VALUES = 30_000


class GroupReader:
    """One member of the group, recording its polls; commits after every batch."""

    def __init__(self, cluster: ContainerCluster, name: str, history: History) -> None:
        self.name = name
        self.history = history
        self.read = 0
        self.commit_errors: list[str] = []
        self.first_offsets: dict[int, int] = {}
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "range", "fetch.wait.max.ms": 100, **QUIET,
        })
        self.consumer.subscribe([TOPIC], on_assign=self._assigned)

    def _assigned(self, consumer: Any, partitions: list[CkTopicPartition]) -> None:
        # A (re)assignment resumes from the committed offsets: reading back is legitimate.
        for tp in partitions:
            self.history.reset(self.name, tp.topic, tp.partition)

    def read_until(self, total: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.read < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} read {self.read} of {total} values")
            if self.read_batch():
                self.commit()

    def read_batch(self) -> bool:
        """One consume() call, recorded; whether it returned any record."""
        by_partition = records_by_partition(self.consumer.consume(500, timeout=1.0))
        for partition, records in by_partition.items():
            self.history.poll(self.name, TOPIC, partition, records)
            self.first_offsets.setdefault(partition, records[0][0])
            self.read += len(records)
        return bool(by_partition)

    def commit(self) -> dict[int, int] | None:
        """Commit the current positions (explicitly: a plain commit() of unchanged offsets
        is refused locally); what was committed, or None if the coordinator refused."""
        offsets = [tp for tp in self.consumer.position(self.consumer.assignment())
                   if tp.offset >= 0]
        if not offsets:
            return None
        try:
            answer = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:  # the coordinator is moving: the next batch retries
            self.commit_errors.append(exc.args[0].name())
            return None
        errors = [tp.error.name() for tp in answer or [] if tp.error is not None]
        self.commit_errors += errors
        return None if errors else {tp.partition: tp.offset for tp in offsets}

    def settle(self, timeout: float) -> dict[int, int]:
        """Read on until a commit of the current positions goes through; then the offsets
        the coordinator holds for the group. (A partition read to its end before the last
        rebalance has no position until something new arrives: its committed offset
        stays.)"""
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} could not commit "
                                   f"(errors: {sorted(set(self.commit_errors))})")
            self.read_batch()
            positions = self.commit()
            if positions is not None:
                break
        wanted = [CkTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset
                     for tp in self.consumer.committed(wanted, timeout=15) if tp.offset >= 0}
        assert all(committed[p] == offset for p, offset in positions.items()), (
            committed, positions)
        return committed


def coordinator(cluster: ContainerCluster) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
    description = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=15)
    return int(description.coordinator.id)


def zookeeper_offsets(cluster: ContainerCluster) -> dict[int, int]:
    path = f"/consumers/{GROUP}/offsets/{TOPIC}"
    return {int(p): int(cluster.zk.get(f"{path}/{p}")[0]) for p in cluster.zk.get_children(path)}


@pytest.mark.timeout(420)
def test_the_group_resumes_from_its_committed_offsets_after_the_coordinator_dies(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    # Idempotent: the check at the end holds each partition to the order the values were sent.
    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=VALUES, seconds=120,
                    config=IDEMPOTENT).start()
    writer.join(timeout=180)
    assert writer.acked() == VALUES, f"produce errors: {sorted(set(writer.errors))}"

    first = GroupReader(cluster, "A", history)
    try:
        first.read_until(VALUES // 3, 120)
        victim = wait_until(lambda: coordinator(cluster), 30, f"the coordinator of {GROUP}")
        before_kill = wait_until(lambda: zookeeper_offsets(cluster), 30,
                                 f"offsets of {GROUP} in ZooKeeper")
        progress(f"A read {first.read}; committed in ZooKeeper: {before_kill}; killing the "
                 f"coordinator, broker {victim}")
        cluster.brokers[victim].kill()
        first.read_until(2 * VALUES // 3 + 2300, 180)  # stop inside a partition
        new = wait_until(lambda: (c := coordinator(cluster)) != victim and c, 60,
                         "a new coordinator")
        served = first.settle(90)
        progress(f"A read {first.read}, committed {served} (commit errors during the failover: "
                 f"{sorted(set(first.commit_errors))}); broker {new} coordinates {GROUP}")
    finally:
        first.consumer.close()

    committed = zookeeper_offsets(cluster)
    # The offsets committed before the kill survived it (never went back), and what the
    # new coordinator serves is what ZooKeeper holds.
    assert all(committed[p] >= offset for p, offset in before_kill.items()), (committed,
                                                                             before_kill)
    assert committed == served

    second = GroupReader(cluster, "B", history)
    try:
        second.read_until(VALUES - sum(committed.values()), 180)
    finally:
        second.consumer.close()
    # B started each partition it read exactly at the committed offset (at the start where
    # the group had committed nothing).
    marks = high_watermarks(cluster, TOPIC, PARTITIONS)
    started = {p: committed.get(p, 0) for p in range(PARTITIONS)
               if committed.get(p, 0) < marks[p]}
    assert started, "A read everything: nothing left to check B against"
    assert {p: second.first_offsets.get(p) for p in started} == started
    cluster.brokers[victim].restart()
    cluster.wait_for_brokers([1, 2, 3], timeout=60)
    final = zookeeper_offsets(cluster)
    assert final == marks, json.dumps({"committed": final, "high watermarks": marks})
    check_history(history, min_acked=VALUES, anomalies=CheckResult.ANOMALIES)
