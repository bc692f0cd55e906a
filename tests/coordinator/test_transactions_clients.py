"""Transactions end to end on a local cluster of three broker processes, with
confluent-kafka's transactional producer: committed records are visible to a
read_committed consumer and aborted ones are not (they are to read_uncommitted); offsets sent
to a transaction commit with it and are dropped by an abort; a second
producer with the same transactional id fences the first; a transaction survives the
kill -9 of its coordinator's broker (the new leader of its __transaction_state partition
loads it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.common.topic import TRANSACTION_STATE_TOPIC_NAME
from kafkaclone.coordinator.transaction.state_manager import partition_for
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic, wait_for_leaders

pytestmark = pytest.mark.timeout(300)

TOPIC = "txn-out"
FAILOVER_TOPIC = "txn-failover"
PARTITIONS = 2
TXN_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"transaction.state.log.num.partitions": str(TXN_PARTITIONS),
                                    "transaction.state.log.replication.factor": "3",
                                    "transaction.state.log.min.isr": "2",
                                    "zookeeper.session.timeout.ms": "6000"}) as local:
        for topic in (TOPIC, FAILOVER_TOPIC):
            create_topic(local, topic, partitions=PARTITIONS, replication_factor=3,
                         configs={"min.insync.replicas": "2"})
        yield local


def producer(cluster: LocalCluster, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                  "transactional.id": transactional_id, "transaction.timeout.ms": 60_000})
    p.init_transactions(60)
    return p


def send(p: Producer, tag: str, count: int, topic: str = TOPIC) -> None:
    for i in range(count):
        p.produce(topic, key=b"%d" % i, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)


def consume(cluster: LocalCluster, isolation: str, expected: int, topic: str = TOPIC
            ) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": isolation,
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
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


def test_a_transaction_survives_its_coordinators_kill_9(cluster: LocalCluster) -> None:
    p = producer(cluster, "tx-failover")
    p.begin_transaction()
    send(p, "before", 6, FAILOVER_TOPIC)
    p.commit_transaction(60)
    txn_partition = partition_for("tx-failover", TXN_PARTITIONS)
    coordinator = wait_for_leaders(cluster, TRANSACTION_STATE_TOPIC_NAME,
                                   TXN_PARTITIONS)[txn_partition]
    p.begin_transaction()
    send(p, "during", 6, FAILOVER_TOPIC)
    cluster.broker(coordinator).kill()
    try:
        p.commit_transaction(90)
        p.begin_transaction()
        send(p, "after", 2, FAILOVER_TOPIC)
        p.abort_transaction(60)
        expected = sorted([f"before-{i}" for i in range(6)] + [f"during-{i}" for i in range(6)])
        assert consume(cluster, "read_committed", 12, FAILOVER_TOPIC) == expected
    finally:
        cluster.restart_broker(coordinator)


def test_kafka_python_and_aiokafka_transactions(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    topic = "txn-others"
    create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3,
                 configs={"min.insync.replicas": "2"})
    kp = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                       transactional_id="tx-kafka-python")
    kp.init_transactions()
    kp.begin_transaction()
    kp.send(topic, value=b"kp-committed", partition=0)
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send(topic, value=b"kp-aborted", partition=1)
    kp.flush()  # kafka-python's abort drops batches not sent yet
    kp.abort_transaction()
    kp.close()

    async def aiokafka_run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                    transactional_id="tx-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"aio-committed", partition=1)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aio-aborted", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aiokafka_run())
    assert consume(cluster, "read_committed", 2, topic) == ["aio-committed", "kp-committed"]
    assert consume(cluster, "read_uncommitted", 4, topic) == [
        "aio-aborted", "aio-committed", "kp-aborted", "kp-committed"]


def test_send_offsets_to_transaction(cluster: LocalCluster) -> None:
    """Consume-transform-produce: the group's offsets commit with the transaction, and an
    aborted transaction's offsets are dropped."""
    source, group, out = "txn-source", "txn-group", "txn-ctp-out"
    for topic in (source, out):
        create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3,
                     configs={"min.insync.replicas": "2"})
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        plain.produce(source, value=b"in-%d" % i, partition=0)
    plain.flush(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.assign([CkTopicPartition(source, 0, 0)])
    p = producer(cluster, "tx-ctp")
    try:
        batch = []
        deadline = time.monotonic() + 60
        while len(batch) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                batch.append(message)
        assert len(batch) == 10
        p.begin_transaction()
        for message in batch[:6]:
            p.produce(out, value=b"out-" + message.value(), partition=0)
        p.send_offsets_to_transaction([CkTopicPartition(source, 0, 6)],
                                      consumer.consumer_group_metadata(), 30)
        p.commit_transaction(60)
        p.begin_transaction()
        p.send_offsets_to_transaction([CkTopicPartition(source, 0, 10)],
                                      consumer.consumer_group_metadata(), 30)
        p.abort_transaction(60)
        [committed] = consumer.committed([CkTopicPartition(source, 0)], timeout=30)
        assert committed.offset == 6
    finally:
        consumer.close()
    assert consume(cluster, "read_committed", 6, out) == [f"out-in-{i}" for i in range(6)]
