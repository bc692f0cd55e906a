"""Consumer groups with the project's Consumer on a real cluster: subscribe, the
assignors, rebalances, commits, and a group shared with confluent-kafka consumers."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import pytest

from kafkaclone.clients import Consumer, Producer, TopicPartition
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.testing.cluster import LocalCluster

pytestmark = pytest.mark.timeout(180)
FAST = {"heartbeat.interval.ms": 300, "session.timeout.ms": 6000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={"auto.create.topics.enable": "false"}) as local:
        yield local


def new_topic(cluster: LocalCluster, partitions: int, prefix: str = "g") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with AdminClient(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(name, partitions, 1)]) == {name: None}
    probe = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = probe.list_topics(name, timeout=10).topics[name]
            if meta.error is None and len(meta.partitions) == partitions and all(
                    p.leader >= 0 for p in meta.partitions.values()):
                return name
            time.sleep(0.1)
    finally:
        probe.close()
    raise AssertionError("no leaders")


def produce(cluster: LocalCluster, topic: str, count: int, tag: str = "v") -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(count):
        producer.send(topic, f"{tag}{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0
    producer.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Member:
    """One of our consumers polling on its own thread (a JoinGroup blocks until every
    member has joined, so members must poll concurrently)."""

    def __init__(self, conf: dict[str, Any], topics: Any) -> None:
        self.consumer = Consumer(conf)
        self.records: list[Any] = []
        self.assigned: list[list[TopicPartition]] = []
        self.revoked: list[list[TopicPartition]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        member = self

        class Listener:
            def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
                member.assigned.append(sorted(partitions))

            def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
                member.revoked.append(sorted(partitions))

        self.consumer.subscribe(topics, Listener())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 120
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                records = self.consumer.poll(0.2)
                with self._lock:
                    self.records += records
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def current(self) -> list[TopicPartition]:
        return self.assigned[-1] if self.assigned else []

    def values(self) -> list[bytes]:
        with self._lock:
            return [r.value for r in self.records]

    def stop(self, close: bool = True) -> None:
        self._stop.set()
        self.thread.join(30)
        if close:
            self.consumer.close()
        assert not self.errors, self.errors


def test_two_members_split_a_topic_and_a_leaving_member_hands_over(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster, 4)
    group = f"grp-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", **FAST}
    a = Member(conf, [topic])
    wait_for(lambda: len(a.current()) == 4, 30, "the first member to own everything")
    b = Member(conf, [topic])
    wait_for(lambda: len(a.current()) == 2 and len(b.current()) == 2, 30, "a 2/2 split")
    assert sorted(a.current() + b.current()) == [TopicPartition(topic, p) for p in range(4)]
    # The coordinator's view (DescribeGroups) matches what each member was given.
    with AdminClient(cluster.bootstrap_servers) as admin:
        description = admin.describe_consumer_groups([group])[group]
    assert not isinstance(description, Exception)
    assert description.state == "Stable" and description.partition_assignor == "range"
    assert sorted(sorted(m.assignment) for m in description.members) == sorted(
        sorted((tp.topic, tp.partition) for tp in member.current()) for member in (a, b))
    produce(cluster, topic, 200)
    wait_for(lambda: len(a.values()) + len(b.values()) >= 200, 30, "200 records")
    assert sorted(a.values() + b.values()) == sorted(f"v{i}".encode() for i in range(200))
    # Records of a partition go to its owner only.
    owned_by_a = {tp.partition for tp in a.current()}
    with a._lock:
        assert all(r.partition in owned_by_a for r in a.records)

    held_by_b = b.current()
    b.stop()  # commits its positions and leaves: a takes over everything
    assert b.revoked[-1] == held_by_b  # close revokes what it held
    wait_for(lambda: len(a.current()) == 4, 30, "the survivor to own everything")
    produce(cluster, topic, 40, tag="late")
    wait_for(lambda: sum(v.startswith(b"late") for v in a.values()) >= 40, 30, "late records")
    late = [v for v in a.values() if v.startswith(b"late")]
    assert sorted(late) == sorted(f"late{i}".encode() for i in range(40))
    a.stop()

    # Everything consumed was committed (auto-commit on close and before rebalances).
    checker = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    committed = checker.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    checker.close()
    high = {tp.partition: tp.offset for tp in committed}
    assert sum(high.values()) == 240


def test_a_group_shared_with_confluent_kafka_uses_the_range_split(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster, 6)
    group = f"mixed-{uuid.uuid4().hex[:6]}"
    ours = Member({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                   "auto.offset.reset": "earliest", **FAST}, [topic])
    wait_for(lambda: len(ours.current()) == 6, 30, "our member to own everything")
    theirs_assigned: list[list[int]] = []
    theirs = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
        "partition.assignment.strategy": "range", "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    theirs.subscribe([topic], on_assign=lambda c, parts: theirs_assigned.append(
        sorted(p.partition for p in parts)))
    got: list[bytes] = []
    produce(cluster, topic, 120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
            theirs_assigned and len(ours.current()) == 3 and
            len(got) + len([v for v in ours.values()]) >= 120):
        message = theirs.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
    assert theirs_assigned and len(theirs_assigned[-1]) == 3
    mine = sorted(tp.partition for tp in ours.current())
    # Range over member ids: one member takes 0-2, the other 3-5.
    assert sorted([mine, theirs_assigned[-1]]) == [[0, 1, 2], [3, 4, 5]]
    theirs.close()
    ours.stop()
    assert len(set(got) | set(ours.values())) == 120


@pytest.mark.parametrize("strategy", ["roundrobin", "sticky"])
def test_other_assignors_and_pattern_subscriptions(cluster: LocalCluster,
                                                   strategy: str) -> None:
    prefix = f"pat{uuid.uuid4().hex[:4]}"
    topics = [new_topic(cluster, 2, prefix) for _ in range(2)]
    conf = {"bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{strategy}-{uuid.uuid4().hex[:6]}",
            "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
            "metadata.max.age.ms": 1000, **FAST}
    a = Member(conf, re.compile(f"{prefix}-.*"))
    b = Member(conf, f"^{prefix}-.*")
    wait_for(lambda: len(a.current()) == 2 and len(b.current()) == 2, 40, "a 2/2 split")
    everything = sorted(a.current() + b.current())
    assert everything == sorted(TopicPartition(t, p) for t in topics for p in range(2))
    if strategy == "roundrobin":
        # Sorted partitions dealt in turn: each member gets one of each topic.
        assert {tp.topic for tp in a.current()} == set(topics)
    for topic in topics:
        produce(cluster, topic, 30, tag=topic)
    wait_for(lambda: len(a.values()) + len(b.values()) >= 60, 30, "60 records")
    a.stop()
    b.stop()


def test_manual_commits_and_committed_offsets(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, 2)
    produce(cluster, topic, 20)
    group = f"manual-{uuid.uuid4().hex[:6]}"
    # The Spark source's commit path: a consumer with a group, no subscription.
    committer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    result = committer.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)],
                              asynchronous=False)
    assert result is not None and {(tp.partition, tp.offset) for tp in result} == {(0, 7), (1, 3)}
    assert [tp.offset for tp in committer.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)] == [7, 3]
    committer.close()

    # confluent-kafka reads the same committed offsets.
    reference = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                          "group.id": group})
    found = reference.committed([confluent_kafka.TopicPartition(topic, 0),
                                 confluent_kafka.TopicPartition(topic, 1)], timeout=10)
    reference.close()
    assert [tp.offset for tp in found] == [7, 3]

    # A manual assignment without offsets starts at the committed ones.
    seen: list[str] = []

    class Interceptor:
        def on_consume(self, records: list[Any]) -> list[Any]:
            seen.append(f"consume {len(records)}")
            return records

        def on_commit(self, offsets: list[TopicPartition], error: Any) -> None:
            seen.append(f"commit {sum(tp.offset for tp in offsets)} {error}")

    resumed = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                        "enable.auto.commit": False, "interceptor.classes": [Interceptor()]})
    resumed.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert resumed.position([TopicPartition(topic, 0), TopicPartition(topic, 1)]) == [
        TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)]
    _, high0 = resumed.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    _, high1 = resumed.get_watermark_offsets(TopicPartition(topic, 1), timeout=10)
    assert high0 + high1 == 20
    records: list[Any] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(records) < (high0 - 7) + (high1 - 3):
        records += resumed.poll(0.3)
    assert sorted((r.partition, r.offset) for r in records) == \
        [(0, o) for o in range(7, high0)] + [(1, o) for o in range(3, high1)]
    resumed.commit(asynchronous=True)
    resumed.close()
    assert sum(int(e.split()[1]) for e in seen if e.startswith("consume")) == len(records)
    assert seen[-1] == f"commit {high0 + high1} None"
    checker = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    assert [tp.offset for tp in checker.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)] == [high0, high1]
    checker.close()


def test_a_member_that_stops_polling_leaves_after_max_poll_interval(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster, 2)
    group = f"slow-{uuid.uuid4().hex[:6]}"
    base = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", **FAST}
    slow = Consumer({**base, "max.poll.interval.ms": 1500})
    lost: list[list[TopicPartition]] = []

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            pass

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            pass

        def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
            lost.append(sorted(partitions))

    slow.subscribe([topic], Listener())
    deadline = time.monotonic() + 30
    while len(slow.assignment()) < 2 and time.monotonic() < deadline:
        slow.poll(0.2)
    assert len(slow.assignment()) == 2
    healthy = Member(base, [topic])
    # slow does not poll: after max.poll.interval.ms its heartbeat thread leaves the group
    # and the healthy member gets every partition.
    wait_for(lambda: len(healthy.current()) == 2, 30, "the healthy member to own everything")
    # Back in poll, the slow member has lost its partitions and joins again.
    deadline = time.monotonic() + 30
    while not lost and time.monotonic() < deadline:
        slow.poll(0.2)
    assert lost == [[TopicPartition(topic, 0), TopicPartition(topic, 1)]]
    wait_for(lambda: len(healthy.current()) == 1, 30, "a 1/1 split again")
    healthy.stop()
    slow.close()
