"""Idempotent producers end to end on a local cluster of three broker processes: kafka-python
3.x (idempotence on by default), aiokafka and confluent-kafka with idempotence on, each
producing to an RF 3 topic and reading everything back; and raw requests checking the
broker's answers: a replayed batch gets its first offset and is not appended again, a gap
is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH, and a broker
restarted cleanly or after kill -9 still knows the batch, as does a new leader."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, RecordBatch, build_record_batch, iter_batches
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import (
    _connection_to,
    _fetch_body,
    _produce_body,
    _produce_error,
    ask,
    confluent_consume,
    create_topic,
    metadata,
    wait_for_leaders,
)

pytestmark = pytest.mark.timeout(300)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
MESSAGES = 300
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID = 45, 47, 59
NOT_LEADER_OR_FOLLOWER, INVALID_RECORD = 6, 87
RF3 = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"num.partitions": str(PARTITIONS),
                                    "default.replication.factor": "1",
                                    "zookeeper.session.timeout.ms": "6000"}) as local:
        yield local


def sent_values(tag: str) -> dict[int, list[tuple[bytes, bytes]]]:
    return {p: [(b"%s-%d" % (tag.encode(), i), os.urandom(48)) for i in range(MESSAGES)]
            for p in range(PARTITIONS)}


def producer_ids_in(cluster: LocalCluster, topic: str) -> set[int]:
    """The producer ids of partition 0's batches, read from its leader."""
    leader = wait_for_leaders(cluster, topic, PARTITIONS)[0]
    with _connection_to(cluster, leader) as conn:
        response = ask(conn, ApiKey.FETCH, _fetch_body(topic, 0, 0), 11)
    records = response.responses[0].partitions[0].records
    return {b.producer_id for b in iter_batches(records, allow_partial_tail=True)
            if isinstance(b, RecordBatch)}


def assert_idempotent(cluster: LocalCluster, topic: str) -> None:
    ids = producer_ids_in(cluster, topic)
    assert len(ids) == 1 and min(ids) >= 0, ids


# -- real clients ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_default_settings(cluster: LocalCluster, codec: str) -> None:
    from kafka import KafkaProducer

    topic = f"idem-kp-{codec}"
    create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3, configs=RF3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             compression_type=None if codec == "none" else codec)
    assert producer.config["enable_idempotence"]  # kafka-python 3.x's default
    sent = sent_values(topic)
    futures = [producer.send(topic, key=k, value=v, partition=p)
               for p, items in sent.items() for k, v in items]
    producer.flush(60)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(timeout=10)
    assert sorted(offsets) == sorted(list(range(MESSAGES)) * PARTITIONS)
    assert confluent_consume(cluster, topic, MESSAGES * PARTITIONS, PARTITIONS) == sent
    assert_idempotent(cluster, topic)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_idempotent(cluster: LocalCluster, codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    topic = f"idem-aio-{codec}"
    create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3, configs=RF3)
    sent = sent_values(topic)

    async def produce() -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                    enable_idempotence=True,
                                    compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v, partition=p)
                       for p, items in sent.items() for k, v in items]
            return [(await f).offset for f in futures]
        finally:
            await producer.stop()

    offsets = asyncio.run(produce())
    assert sorted(offsets) == sorted(list(range(MESSAGES)) * PARTITIONS)
    assert confluent_consume(cluster, topic, MESSAGES * PARTITIONS, PARTITIONS) == sent
    assert_idempotent(cluster, topic)


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_idempotent(cluster: LocalCluster, codec: str) -> None:
    topic = f"idem-ck-{codec}"
    create_topic(cluster, topic, partitions=PARTITIONS, replication_factor=3, configs=RF3)
    sent = sent_values(topic)
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "enable.idempotence": True, "acks": "all",
                         "compression.type": codec, "linger.ms": 5})
    for p, items in sent.items():
        for k, v in items:
            producer.produce(topic, key=k, value=v, partition=p,
                             on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(60) == 0
    assert errors == []
    assert confluent_consume(cluster, topic, MESSAGES * PARTITIONS, PARTITIONS) == sent
    assert_idempotent(cluster, topic)


# -- raw requests ------------------------------------------------------------------------


def init_producer_id(conn: BrokerConnection, producer_id: int = -1, epoch: int = -1
                     ) -> tuple[int, int]:
    request = api.APIS[ApiKey.INIT_PRODUCER_ID].request
    response = ask(conn, ApiKey.INIT_PRODUCER_ID, request(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=producer_id,
        producer_epoch=epoch), 4)
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


def idempotent_batch(producer_id: int, epoch: int, seq: int, records: int = 2) -> bytes:
    now = int(time.time() * 1000)
    return build_record_batch(
        [(b"k", b"seq-%d" % (seq + i), None, now) for i in range(records)], codec=Codec.LZ4,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=seq)


def produce(cluster: LocalCluster, broker_id: int, topic: str, records: bytes
            ) -> tuple[int, int]:
    """(error code, base offset); retried while the broker is not the leader yet."""
    deadline = time.monotonic() + 20
    while True:
        with _connection_to(cluster, broker_id) as conn:
            answer = _produce_error(ask(conn, ApiKey.PRODUCE,
                                        _produce_body(topic, 0, records, acks=-1), 8))
        if answer[0] != NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def high_watermark(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    request = api.APIS[ApiKey.LIST_OFFSETS].request
    s = request.structs
    with _connection_to(cluster, broker_id) as conn:
        response = ask(conn, ApiKey.LIST_OFFSETS, request(
            replica_id=-1, isolation_level=0, topics=[s["ListOffsetsTopic"](
                name=topic, partitions=[s["ListOffsetsPartition"](
                    partition_index=0, timestamp=-1)])]), 5)
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0
    return int(partition.offset)


def test_replays_gaps_and_old_epochs(cluster: LocalCluster) -> None:
    topic = "idem-raw"
    create_topic(cluster, topic, partitions=1, replication_factor=3, configs=RF3)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    with _connection_to(cluster, leader) as conn:
        pid, epoch = init_producer_id(conn)
    assert epoch == 0
    batches = [idempotent_batch(pid, 0, seq) for seq in range(0, 10, 2)]
    offsets = [produce(cluster, leader, topic, b) for b in batches]
    assert offsets == [(0, offset) for offset in range(0, 10, 2)]
    # Every one of the last five batches, re-sent byte for byte: its first offset, no append.
    for batch, (_, offset) in zip(batches, offsets, strict=True):
        assert produce(cluster, leader, topic, batch) == (0, offset)
    assert high_watermark(cluster, leader, topic) == 10
    assert produce(cluster, leader, topic, idempotent_batch(pid, 0, 12))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert produce(cluster, leader, topic, idempotent_batch(pid + 10_000, 0, 3))[0] == (
        UNKNOWN_PRODUCER_ID)
    # Two producers' batches in one partition's data: Produce v3+ takes exactly one batch.
    mixed = idempotent_batch(pid, 0, 10) + idempotent_batch(pid + 1, 0, 0)
    assert produce(cluster, leader, topic, mixed)[0] == INVALID_RECORD
    with _connection_to(cluster, leader) as conn:
        assert init_producer_id(conn, pid, 0) == (pid, 1)
    assert produce(cluster, leader, topic, idempotent_batch(pid, 1, 0)) == (0, 10)
    assert produce(cluster, leader, topic, idempotent_batch(pid, 0, 10))[0] == (
        INVALID_PRODUCER_EPOCH)
    assert high_watermark(cluster, leader, topic) == 12

    # A follower knows the producer too: stop the leader, replay to the new one.
    last = idempotent_batch(pid, 1, 0)
    cluster.broker(leader).stop()
    try:
        other = next(b for b in (1, 2, 3) if b != leader)
        deadline = time.monotonic() + 30
        new_leader = leader
        while new_leader in (leader, -1) and time.monotonic() < deadline:
            time.sleep(0.2)
            new_leader = metadata(cluster, topic, other).topics[0].partitions[0].leader_id
        assert new_leader not in (leader, -1)
        assert produce(cluster, new_leader, topic, last) == (0, 10)
        assert high_watermark(cluster, new_leader, topic) == 12
    finally:
        cluster.restart_broker(leader)


def wait_until_leader(cluster: LocalCluster, topic: str, broker_id: int) -> None:
    deadline = time.monotonic() + 60
    while wait_for_leaders(cluster, topic, 1)[0] != broker_id:
        assert time.monotonic() < deadline, f"broker {broker_id} did not lead {topic} again"
        time.sleep(0.2)


def test_state_survives_clean_restart_and_kill_9(cluster: LocalCluster) -> None:
    topic = "idem-restart"
    create_topic(cluster, topic, partitions=1, replication_factor=1,
                 configs={"segment.bytes": "1024"})
    leader = wait_for_leaders(cluster, topic, 1)[0]
    with _connection_to(cluster, leader) as conn:
        pid, _ = init_producer_id(conn)
    batches = [idempotent_batch(pid, 0, seq) for seq in range(0, 40, 2)]
    for offset, batch in zip(range(0, 40, 2), batches, strict=True):
        assert produce(cluster, leader, topic, batch) == (0, offset)

    # Clean restart: the snapshot written at shutdown has the producer's last batch.
    cluster.broker(leader).stop()
    cluster.restart_broker(leader)
    wait_until_leader(cluster, topic, leader)
    assert produce(cluster, leader, topic, batches[-1]) == (0, 38)
    assert high_watermark(cluster, leader, topic) == 40

    # kill -9 after more appends: the state is rebuilt from the log past the last snapshot.
    more = [idempotent_batch(pid, 0, seq) for seq in range(40, 50, 2)]
    for offset, batch in zip(range(40, 50, 2), more, strict=True):
        assert produce(cluster, leader, topic, batch) == (0, offset)
    cluster.broker(leader).kill()
    cluster.restart_broker(leader)
    wait_until_leader(cluster, topic, leader)
    for offset, batch in zip(range(40, 50, 2), more, strict=True):
        assert produce(cluster, leader, topic, batch) == (0, offset)
    assert high_watermark(cluster, leader, topic) == 50
    assert produce(cluster, leader, topic, idempotent_batch(pid, 0, 52))[0] == (
        OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert produce(cluster, leader, topic, idempotent_batch(pid, 0, 50)) == (0, 50)
