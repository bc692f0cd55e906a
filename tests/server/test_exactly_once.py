"""Consume-transform-produce with confluent-kafka (issue 15): a read_committed consumer in a
group and a transactional producer that sends the consumer's offsets to its transaction.
Every input record reaches the output exactly once (an aborted transaction's output and
offsets vanish and its input is processed again), and the group's committed offsets (under
/consumers in ZooKeeper) end at the input's end. A transaction's offsets survive kill -9 of
the group coordinator (they are in the __consumer_offsets log)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic
from tests.server.test_transactions import (
    NONE,
    find_coordinator,
    offset_fetch,
    offsets_partition,
    txn_offset_commit,
    write_markers,
)

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 2
RECORDS = 300


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={"transaction.state.log.num.partitions": "2",
                                    "transaction.state.log.replication.factor": "2",
                                    "transaction.state.log.min.isr": "1",
                                    "offsets.topic.num.partitions": "2",
                                    "offsets.topic.replication.factor": "2"}) as local:
        yield local


def read_all(cluster: LocalCluster, topic: str, expected: int) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and len(values) < expected:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        # Nothing more arrives after the expected records.
        extra = consumer.poll(2.0)
        if extra is not None and extra.error() is None:
            values.append(extra.value().decode())
    finally:
        consumer.close()
    return values


def test_consume_transform_produce_exactly_once(cluster: LocalCluster) -> None:
    source, sink, group = "eos-in", "eos-out", "eos-group"
    create_topic(cluster, source, partitions=PARTITIONS, replication_factor=2)
    create_topic(cluster, sink, partitions=PARTITIONS, replication_factor=2)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(RECORDS):
        plain.produce(source, value=b"%d" % i, partition=i % PARTITIONS)
    assert plain.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": "eos-tx", "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    processed, transactions, aborted = 0, 0, False
    deadline = time.monotonic() + 120
    try:
        while processed < RECORDS and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(50, 1.0) if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, value=b"out-" + message.value(),
                                 partition=message.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                30)
            transactions += 1
            if transactions == 2 and not aborted:
                # Abort one: its output vanishes and its input is read again.
                aborted = True
                producer.abort_transaction(30)
                for tp in consumer.committed(consumer.assignment(), 30):
                    consumer.seek(CkTopicPartition(tp.topic, tp.partition,
                                                   max(tp.offset, 0)))
                continue
            producer.commit_transaction(30)
            processed += len(messages)
        committed = consumer.committed(
            [CkTopicPartition(source, p) for p in range(PARTITIONS)], 30)

    finally:
        consumer.close()
    assert aborted and processed == RECORDS
    out = read_all(cluster, sink, RECORDS)
    assert sorted(out) == sorted(f"out-{i}" for i in range(RECORDS))
    assert sorted((tp.partition, tp.offset) for tp in committed) == [
        (p, RECORDS // PARTITIONS) for p in range(PARTITIONS)]


def test_txn_offsets_survive_group_coordinator_failover(cluster: LocalCluster) -> None:
    """The offsets of a TxnOffsetCommit are in the __consumer_offsets log: after kill -9 of
    the group coordinator, the COMMIT marker sent to the new leader writes them."""
    topic, group, pid = "eos-failover", "failover-group", 7300
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    coordinator = find_coordinator(cluster, group)
    assert txn_offset_commit(cluster, coordinator, group, pid, topic, 77) == NONE
    cluster.broker(coordinator).kill()
    survivor = 2 if coordinator == 1 else 1
    deadline = time.monotonic() + 60
    while find_coordinator(cluster, group, via=survivor) != survivor:
        assert time.monotonic() < deadline, "no new group coordinator"
        time.sleep(0.5)
    partition = offsets_partition(group, partitions=2)
    while write_markers(cluster, survivor,
                        [(pid, 0, True, "__consumer_offsets", [partition], 0)]) != [NONE]:
        assert time.monotonic() < deadline, "the marker was never written"
        time.sleep(0.5)
    assert offset_fetch(cluster, survivor, group, topic) == (NONE, 77)
