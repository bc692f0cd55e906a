"""Coordinator placement and failover: kill -9 the broker coordinating a consuming group. The
``__consumer_offsets`` partition's leadership moves (RF 3), the new leader loads the group
from ZooKeeper, the consumer finds it and goes on from the committed offsets; no committed
offset is lost and every message is consumed."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TOPIC, GROUP = "failover", "failover-group"
PARTITIONS, PER_PARTITION = 3, 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"offsets.topic.replication.factor": "3",
                                    "offsets.topic.num.partitions": "3",
                                    "zookeeper.session.timeout.ms": "6000"}) as local:
        yield local


def find_coordinator(cluster: LocalCluster, exclude: int | None = None) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for broker_id in (1, 2, 3):
            if broker_id == exclude:
                continue
            try:
                with BrokerConnection("127.0.0.1", cluster.broker(broker_id).port) as c:
                    _, found = c.request(ApiKey.FIND_COORDINATOR,
                                         api.APIS[ApiKey.FIND_COORDINATOR].request(
                                             key=GROUP, key_type=0), version=2)
            except Exception:
                continue
            if found.error_code == 0 and found.node_id != exclude:
                return int(found.node_id)
        time.sleep(0.3)
    raise AssertionError("no coordinator")


def committed_in_zookeeper(zk: KazooClient) -> dict[int, int]:
    result = {}
    for p in range(PARTITIONS):
        path = f"/consumers/{GROUP}/offsets/{TOPIC}/{p}"
        if zk.exists(path):
            result[p] = int(zk.get(path)[0])
    return result


def test_kill_coordinator_during_consumption(cluster: LocalCluster) -> None:
    done = subprocess.run(
        [str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server", cluster.bootstrap_servers,
         "--create", "--topic", TOPIC, "--partitions", str(PARTITIONS),
         "--replication-factor", "3"], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=f"{p}:{i}".encode(), partition=p)
    assert producer.flush(60) == 0

    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=10)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "enable.partition.eof": False})
    seen: list[str] = []
    pending: dict[int, int] = {}
    commit_failures = 0

    def consume_batch() -> None:
        nonlocal commit_failures
        for message in consumer.consume(100, 0.2):
            if message.error() is None:
                seen.append(message.value().decode())
                pending[message.partition()] = message.offset() + 1
        if pending:
            try:
                consumer.commit(offsets=[CkTopicPartition(TOPIC, p, o)
                                         for p, o in pending.items()], asynchronous=False)
                pending.clear()
            except KafkaException:
                commit_failures += 1  # the coordinator is moving: commit again next round

    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while len(seen) < PARTITIONS * PER_PARTITION // 3:
            assert time.monotonic() < deadline, "the group does not consume"
            consume_batch()
        coordinator = find_coordinator(cluster)
        before = committed_in_zookeeper(zk)
        assert sum(before.values()) > 0
        cluster.broker(coordinator).kill()  # SIGKILL: no controlled shutdown
        new_coordinator = find_coordinator(cluster, exclude=coordinator)
        assert new_coordinator != coordinator
        deadline = time.monotonic() + 120
        while committed_in_zookeeper(zk) != dict.fromkeys(range(PARTITIONS), PER_PARTITION):
            assert time.monotonic() < deadline, (
                f"stuck at {committed_in_zookeeper(zk)} after {len(seen)} messages")
            consume_batch()
            after = committed_in_zookeeper(zk)
            # No committed offset is lost or goes back.
            assert all(after.get(p, 0) >= offset for p, offset in before.items())
    finally:
        consumer.close()
        zk.stop()
        zk.close()
    expected = {f"{p}:{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    assert set(seen) == expected
    # Consumption resumed from the committed offsets: at most the messages processed but not
    # yet committed when the coordinator died are read again.
    duplicates = len(seen) - len(expected)
    assert duplicates <= 100 * (commit_failures + 1) * PARTITIONS, duplicates


def test_too_few_brokers_for_the_offsets_topic() -> None:
    """offsets.topic.replication.factor 3 on one broker: as Kafka, __consumer_offsets is not
    created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE (clients keep retrying)."""
    with LocalCluster(1, overrides={"offsets.topic.replication.factor": "3"}) as single:
        with BrokerConnection("127.0.0.1", single.broker(1).port) as connection:
            for _ in range(3):
                _, found = connection.request(ApiKey.FIND_COORDINATOR,
                                              api.APIS[ApiKey.FIND_COORDINATOR].request(
                                                  key=GROUP, key_type=0), version=3)
                assert (found.error_code, found.node_id) == (15, -1)  # COORDINATOR_NOT_AVAILABLE
                time.sleep(0.2)
        zk = KazooClient(hosts=single.zookeeper_connect, timeout=10.0)
        zk.start(timeout=10)
        try:
            assert zk.exists("/brokers/topics/__consumer_offsets") is None
        finally:
            zk.stop()
            zk.close()
