"""Brokers in three racks (issue 20): six brokers, two per rack (``broker.rack``), Kafka's
``RackAwareReplicaSelector`` (KIP-392). A topic of 30 partitions at RF 3 gets each
partition's replicas in three racks; one confluent-kafka consumer per rack (``client.rack``)
reads every partition, from the replica in its own rack (its statistics name the broker it
fetches each partition from), while an idempotent acks=all writer keeps sending. Then one
rack's brokers are killed: every partition keeps one replica in each of the two other racks
in its ISR, a topic created meanwhile still spreads its replicas over racks, the consumer of
the dead rack falls back to the leaders, and every consumer reads every record of every
partition, in order, exactly once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.testing.history import History

from .checks import check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import QUIET, Writer, create_topic, high_watermarks, records_by_partition

TOPIC = "racked"
PARTITIONS = 30
RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
DOWN = "a"
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class RackConsumer:
    """A consumer in ``rack`` assigned every partition from the start, polling in a thread
    into the History; its statistics say which broker it fetches each partition from."""

    def __init__(self, cluster: ContainerCluster, rack: str, history: History) -> None:
        self.rack = rack
        self.name = f"rack-{rack}"
        self.history = history
        self.fetching_from: dict[int, int] = {}
        self.next_offset = dict.fromkeys(range(PARTITIONS), 0)
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": self.name,
            "client.rack": rack, "enable.auto.commit": False, "fetch.wait.max.ms": 100,
            "statistics.interval.ms": 500, "stats_cb": self._stats,
            "topic.metadata.refresh.interval.ms": 2000, **QUIET})
        self._consumer.assign([CkTopicPartition(TOPIC, p, OFFSET_BEGINNING)
                               for p in range(PARTITIONS)])
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _stats(self, raw: str) -> None:
        partitions = json.loads(raw).get("topics", {}).get(TOPIC, {}).get("partitions", {})
        for key, partition in partitions.items():
            if int(key) >= 0 and partition.get("broker", -1) >= 0:
                self.fetching_from[int(key)] = partition["broker"]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                by_partition = records_by_partition(self._consumer.consume(1000, timeout=0.5))
                for partition, records in by_partition.items():
                    self.history.poll(self.name, TOPIC, partition, records)
                    self.next_offset[partition] = records[-1][0] + 1
        except BaseException as exc:
            self._failure = exc

    def caught_up(self, ends: dict[int, int]) -> bool:
        return all(self.next_offset[p] >= end for p, end in ends.items())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()
        if self._failure is not None:
            raise RuntimeError(f"consumer {self.name} failed") from self._failure


def racks_of(replicas: list[int]) -> list[str]:
    return [RACKS[broker] for broker in replicas]


@pytest.mark.timeout(420)
def test_replicas_spread_over_racks_and_consumers_read_from_their_rack(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(
        6, overrides={"replica.selector.class": SELECTOR},
        broker_overrides={broker: {"broker.rack": rack} for broker, rack in RACKS.items()})
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    placement = cluster.replica_assignment(TOPIC)
    assert sorted(placement) == list(range(PARTITIONS))
    for partition, replicas in placement.items():
        assert sorted(racks_of(replicas)) == ["a", "b", "c"], (partition, replicas)
    progress(f"{TOPIC}: every partition's replicas in racks a, b and c")

    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=200_000, seconds=240, rate=400,
                    config={"enable.idempotence": True,
                            "max.in.flight.requests.per.connection": 5}).start()
    consumers = {rack: RackConsumer(cluster, rack, history) for rack in ("a", "b", "c")}
    try:
        writer.wait_for_acks(2000, 90)

        def local_replica(partition: int, rack: str) -> int:
            return next(b for b in placement[partition] if RACKS[b] == rack)

        # Each consumer fetches every partition from the replica in its rack (the leader's
        # or a follower's: two thirds are followers).
        for rack, consumer in consumers.items():
            wanted = {p: local_replica(p, rack) for p in range(PARTITIONS)}
            wait_until(lambda c=consumer, w=wanted: c.fetching_from == w, 60,
                       f"the consumer in rack {rack} fetching from its rack's replicas")
            followers = sum(1 for p, b in wanted.items() if b != cluster.leader(TOPIC, p))
            progress(f"rack {rack}: fetching {followers} partitions from followers")
            assert followers >= PARTITIONS // 2

        # One rack goes down.
        down = [broker for broker, rack in RACKS.items() if rack == DOWN]
        for broker in down:
            cluster.brokers[broker].kill()
        acked = writer.acked()
        for broker in down:
            cluster.wait_for_deregistration(broker)

        def survivors_in_isr() -> bool:
            for partition in range(PARTITIONS):
                state = cluster.partition_state(TOPIC, partition)
                if state["leader"] in down or sorted(racks_of(state["isr"])) != ["b", "c"]:
                    return False
            return True
        wait_until(survivors_in_isr, 60, "every partition led and in sync in racks b and c")
        progress(f"rack {DOWN} down: every partition led in racks b/c with one in-sync "
                 f"replica in each")
        create_topic(cluster, "racked-later", 6, replication_factor=2)
        for partition, replicas in cluster.replica_assignment("racked-later").items():
            assert sorted(racks_of(replicas)) == ["b", "c"], (partition, replicas)

        writer.wait_for_acks(acked + 2000, 90)
        leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
        wait_until(lambda: consumers[DOWN].fetching_from == leaders, 60,
                   f"the consumer in rack {DOWN} fetching from the leaders")
        for rack in ("b", "c"):
            wanted = {p: local_replica(p, rack) for p in range(PARTITIONS)}
            wait_until(lambda c=consumers[rack], w=wanted: c.fetching_from == w, 60,
                       f"the consumer in rack {rack} still fetching from its rack")
        writer.stop()
        writer.join()
        ends = high_watermarks(cluster, TOPIC, PARTITIONS)
        for rack, consumer in consumers.items():
            wait_until(lambda c=consumer: c.caught_up(ends), 90,
                       f"the consumer in rack {rack} to read up to {ends}")
    finally:
        writer.stop()
        for consumer in consumers.values():
            consumer.close()

    result = check_history(history, min_acked=4000, anomalies=(
        "lost", "duplicates", "inconsistent_offsets", "nonmonotonic_polls", "unexpected",
        "reordered"))
    # Every consumer read every offset of every partition, in order, once.
    for rack in consumers:
        for partition in range(PARTITIONS):
            offsets = [offset for poll in history.polls
                       if poll.consumer == f"rack-{rack}" and poll.partition == partition
                       for offset, _ in poll.records]
            assert offsets == list(range(ends[partition])), (rack, partition)
    progress(f"3 consumers read all {result.read_positions} records in order")
