"""Rack awareness on local clusters of broker processes with ``broker.rack`` set: replicas
of each partition on different racks (CreateTopics, kafka-topics.sh --zookeeper,
auto-create), Kafka's refusal on a cluster where only some brokers have a rack, and
follower fetching (KIP-392) with confluent-kafka consumers that set ``client.rack``.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.wait import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
FETCH = APIS[ApiKey.FETCH].request


def kafka_topics(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPTS / "kafka-topics.sh"), *args], capture_output=True,
                          text=True, timeout=60, cwd="/")


def assignment(cluster: LocalCluster, topic: str) -> dict[int, list[int]]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10)
    try:
        data = json.loads(client.get(f"/brokers/topics/{topic}")[0])
    finally:
        client.stop()
        client.close()
    return {int(p): replicas for p, replicas in data["partitions"].items()}


# -- placement ----------------------------------------------------------------------------------


def test_six_brokers_in_three_racks() -> None:
    racks = {b: f"rack-{(b - 1) % 3}" for b in range(1, 7)}
    with LocalCluster(6, broker_overrides={b: {"broker.rack": r} for b, r in racks.items()},
                      overrides={"num.partitions": "6",
                                 "default.replication.factor": "3"}) as cluster:
        created = kafka_topics("--bootstrap-server", cluster.bootstrap_servers, "--create",
                               "--topic", "spread", "--partitions", "30",
                               "--replication-factor", "3")
        assert created.returncode == 0, created.stdout + created.stderr
        created = kafka_topics("--zookeeper", cluster.zookeeper_connect, "--create",
                               "--topic", "spread-zk", "--partitions", "30",
                               "--replication-factor", "3")
        assert created.returncode == 0, created.stdout + created.stderr
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        producer.list_topics("auto-created", timeout=30)  # auto-create: RackAwareMode.Safe
        for topic, partitions in (("spread", 30), ("spread-zk", 30), ("auto-created", 6)):
            placed = wait_until(lambda t=topic: assignment(cluster, t), 30, topic)
            assert sorted(placed) == list(range(partitions))
            for replicas in placed.values():
                assert len(replicas) == 3
                assert len({racks[b] for b in replicas}) == 3, (topic, replicas)
            leaders = Counter(replicas[0] for replicas in placed.values())
            assert leaders == {b: partitions // 6 for b in racks}, (topic, leaders)
        described = kafka_topics("--bootstrap-server", cluster.bootstrap_servers,
                                 "--describe", "--topic", "spread")
        assert described.returncode == 0 and described.stdout.count("Partition: ") == 30


def test_a_mixed_rack_cluster_refuses_rack_aware_creation() -> None:
    with LocalCluster(2, broker_overrides={1: {"broker.rack": "a"}}) as cluster:
        refused = kafka_topics("--bootstrap-server", cluster.bootstrap_servers, "--create",
                               "--topic", "t", "--partitions", "2", "--replication-factor", "2")
        assert refused.returncode == 1
        assert ("Not all brokers have rack information for replica rack aware assignment."
                in refused.stdout + refused.stderr)
        refused = kafka_topics("--zookeeper", cluster.zookeeper_connect, "--create", "--topic",
                               "t", "--partitions", "2", "--replication-factor", "2")
        assert refused.returncode == 1
        assert ("Not all brokers have rack information. Add --disable-rack-aware in command "
                "line to make replica assignment without rack information."
                in refused.stdout + refused.stderr)
        created = kafka_topics("--zookeeper", cluster.zookeeper_connect, "--create", "--topic",
                               "t", "--partitions", "2", "--replication-factor", "2",
                               "--disable-rack-aware")
        assert created.returncode == 0, created.stdout + created.stderr
        assert sorted(assignment(cluster, "t")) == [0, 1]


# -- follower fetching ----------------------------------------------------------------------------


def fetch_v11(cluster: LocalCluster, broker_id: int, topic: str, offset: int,
              rack: str) -> Any:
    """One partition of a consumer's Fetch v11 sent to ``broker_id``."""
    s = FETCH.structs
    body = FETCH(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=[s["FetchTopic"](topic=topic, partitions=[s["FetchPartition"](
                     partition=0, current_leader_epoch=-1, fetch_offset=offset,
                     last_fetched_epoch=-1, log_start_offset=-1,
                     partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id=rack)
    with BrokerConnection("127.0.0.1", cluster.broker(broker_id).port,
                          request_timeout_ms=10_000) as conn:
        _, response = conn.request(ApiKey.FETCH, body, max_version=11)
    return response.responses[0].partitions[0]


def produce(cluster: LocalCluster, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 5})
    for i in values:
        producer.produce(topic, value=b"%d" % i, partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


class RackConsumer:
    """A confluent-kafka consumer of partition 0 in rack ``rack``, reading in a thread; its
    statistics say which broker it fetches the partition from."""

    def __init__(self, cluster: LocalCluster, topic: str, rack: str) -> None:
        self.values: list[int] = []
        self.fetched_from: list[int] = []
        self._stop = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": f"near-{rack}",
            "client.rack": rack, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "statistics.interval.ms": 200, "stats_cb": self._stats,
            "topic.metadata.refresh.interval.ms": 2000})
        self._consumer.assign([CkTopicPartition(topic, 0, 0)])
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _stats(self, raw: str) -> None:
        partition = json.loads(raw).get("topics", {}).get(self._topic, {}).get(
            "partitions", {}).get("0")
        if partition is not None and partition.get("broker", -1) >= 0:
            self.fetched_from.append(partition["broker"])

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.values.append(int(message.value()))

    def wait_for(self, count: int, timeout: float = 90) -> None:
        wait_until(lambda: len(self.values) >= count, timeout, f"{count} records")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def test_consumers_read_from_the_follower_in_their_rack() -> None:
    racks = {1: "a", 2: "b", 3: "c"}
    with LocalCluster(3, broker_overrides={b: {"broker.rack": r} for b, r in racks.items()},
                      overrides={"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
                                 "replica.lag.time.max.ms": "4000"}) as cluster:
        created = kafka_topics("--bootstrap-server", cluster.bootstrap_servers, "--create",
                               "--topic", "near", "--replica-assignment", "1:2:3")
        assert created.returncode == 0, created.stdout + created.stderr
        produce(cluster, "near", range(2000))
        # The protocol: the leader (broker 1, rack a) sends rack b to broker 2, which serves.
        redirect = wait_until(lambda: fetch_v11(cluster, 1, "near", 0, "b"), 30, "a fetch")
        assert (redirect.error_code, redirect.preferred_read_replica) == (0, 2)
        assert not bytes(redirect.records or b"")
        assert fetch_v11(cluster, 1, "near", 0, "c").preferred_read_replica == 3
        assert fetch_v11(cluster, 1, "near", 0, "a").preferred_read_replica == -1
        # The follower learns the high watermark with its next fetch, then serves up to it.
        served = wait_until(lambda: (lambda d: d if d.high_watermark == 2000 else None)(
            fetch_v11(cluster, 2, "near", 0, "b")), 10, "the follower's high watermark")
        assert served.error_code == 0 and bytes(served.records or b"")

        consumers = {rack: RackConsumer(cluster, "near", rack) for rack in ("b", "c")}
        try:
            for rack, consumer in consumers.items():
                consumer.wait_for(2000)
                assert consumer.values == list(range(2000))
                follower = 2 if rack == "b" else 3
                wait_until(lambda c=consumer, f=follower: f in c.fetched_from, 30,
                           f"rack {rack} fetching from broker {follower}")
            # Rack b's follower dies: its consumer goes back to the leader and misses nothing.
            cluster.broker(2).kill()
            produce(cluster, "near", range(2000, 3000))
            near_b = consumers["b"]
            near_b.wait_for(3000, timeout=120)
            assert near_b.values == list(range(3000))
            seen = len(near_b.fetched_from)
            wait_until(lambda: 1 in near_b.fetched_from[seen - 1:], 30,
                       "rack b fetching from the leader")
            consumers["c"].wait_for(3000)
            assert consumers["c"].values == list(range(3000))
        finally:
            for consumer in consumers.values():
                consumer.close()
