"""Transactions end to end on a local cluster of three broker processes, with
confluent-kafka's transactional producer: committed records are visible to a
read_committed consumer and aborted ones are not (they are to read_uncommitted); a second
producer with the same transactional id fences the first."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic

pytestmark = pytest.mark.timeout(300)

TOPIC = "txn-out"
PARTITIONS = 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"transaction.state.log.num.partitions": "3",
                                    "zookeeper.session.timeout.ms": "6000"}) as local:
        create_topic(local, TOPIC, partitions=PARTITIONS, replication_factor=3,
                     configs={"min.insync.replicas": "2"})
        yield local


def producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                  "transactional.id": transactional_id, "transaction.timeout.ms": 60_000})
    p.init_transactions(60)
    return p


def send(p: Producer, tag: str, count: int) -> None:
    for i in range(count):
        p.produce(TOPIC, key=b"%d" % i, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)


def consume(cluster: LocalCluster, isolation: str, expected: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": isolation,
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (len(values) < expected
                                               or len(at_end) < PARTITIONS):
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    continue
                raise KafkaException(error)
            at_end.discard(message.partition())
            values.append(message.value().decode())
    finally:
        consumer.close()
    return sorted(values)


def test_commit_visible_abort_invisible_and_fencing(cluster: LocalCluster) -> None:
    first = producer(cluster, "tx-e2e")
    first.begin_transaction()
    send(first, "committed", 10)
    first.commit_transaction(60)
    first.begin_transaction()
    send(first, "aborted", 6)
    first.abort_transaction(60)
    first.begin_transaction()
    send(first, "again", 4)
    first.commit_transaction(60)
    committed = sorted([f"committed-{i}" for i in range(10)] + [f"again-{i}" for i in range(4)])
    assert consume(cluster, "read_committed", 14) == committed
    assert consume(cluster, "read_uncommitted", 20) == sorted(
        committed + [f"aborted-{i}" for i in range(6)])

    # A second producer with the same id fences the first: its commit fails and nothing it
    # wrote after the fence is visible.
    first.begin_transaction()
    send(first, "zombie", 2)
    second = producer(cluster, "tx-e2e")
    with pytest.raises(KafkaException):
        first.commit_transaction(30)
    second.begin_transaction()
    send(second, "second", 2)
    second.commit_transaction(60)
    assert consume(cluster, "read_committed", 16) == sorted(
        [*committed, "second-0", "second-1"])
