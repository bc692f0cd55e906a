"""The data path end to end with clients nobody here wrote: kcat, confluent-kafka
(librdkafka), kafka-python and aiokafka producing with every codec and consuming back
(manual assignment), byte-identical and in order per partition, on a local cluster of
three broker processes; and bad input that must disturb nothing else.

One cluster serves the whole module. Counts are kept small for CI; the 200k-per-codec
acceptance run is ``benchmarks/acceptance_codecs.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.testing.cluster import LocalCluster

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE, OFFSET_OUT_OF_RANGE = 6, 2, 1
REPLICATION_FACTOR = 3
"""Every topic is replicated on the three brokers, so acks=all waits for the followers."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # A longer ZooKeeper session than usual: the ISR test freezes a broker, whose
    # registration must outlive replica.lag.time.max.ms.
    with LocalCluster(3, overrides={"num.partitions": str(PARTITIONS),
                                    "default.replication.factor": "1",
                                    "zookeeper.session.timeout.ms": "30000",
                                    "replica.lag.time.max.ms": "4000"}) as local:
        yield local


def create_topic(cluster: LocalCluster, name: str, *, partitions: int = PARTITIONS,
                 replication_factor: int = 1, configs: dict[str, str] | None = None) -> None:
    args = ["--bootstrap-server", cluster.bootstrap_servers, "--create", "--topic", name,
            "--partitions", str(partitions), "--replication-factor", str(replication_factor)]
    for key, value in (configs or {}).items():
        args += ["--config", f"{key}={value}"]
    done = subprocess.run([str(_scripts() / "kafka-topics.sh"), *args], capture_output=True,
                          text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_for_leaders(cluster, name, partitions)


def _scripts() -> Any:
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "scripts"


def metadata(cluster: LocalCluster, topic: str, broker_id: int = 1) -> Any:
    host, port = cluster.broker(broker_id).bootstrap_server.split(":")
    request = api.APIS[ApiKey.METADATA].request
    with BrokerConnection(host, int(port)) as conn:
        return ask(conn, ApiKey.METADATA, request(
            topics=[request.structs["MetadataRequestTopic"](name=topic)],
            allow_auto_topic_creation=False), 9)


def wait_for_leaders(cluster: LocalCluster, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> leader once every partition has one, as every broker's metadata says."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = metadata(cluster, topic)
        leaders = {p.partition_index: p.leader_id for t in response.topics for p in t.partitions
                   if t.error_code == 0 and p.error_code == 0 and p.leader_id >= 0}
        if len(leaders) == partitions:
            return leaders
        time.sleep(0.2)
    raise AssertionError(f"{topic} has no leaders for every partition")


def confluent_consume(cluster: LocalCluster, topic: str, expected: int,
                      partitions: int = PARTITIONS) -> dict[int, list[tuple[bytes, bytes]]]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    offsets: dict[int, list[int]] = {p: [] for p in range(partitions)}
    count = 0
    deadline = time.monotonic() + 60
    try:
        while count < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.partition()].append((message.key(), message.value()))
            offsets[message.partition()].append(message.offset())
            count += 1
    finally:
        consumer.close()
    assert count == expected, f"consumed {count} of {expected}"
    for p, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets not 0..n-1"
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trip(cluster: LocalCluster, codec: str) -> None:
    topic = f"kcat-{codec}"
    create_topic(cluster, topic, replication_factor=REPLICATION_FACTOR)
    count = 3000
    lines = [f"k{i % 97}:{codec}-{i}-" + "x" * (i % 50) for i in range(count)]
    produced = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-P", "-t", topic, "-K", ":",
         "-X", "acks=all", "-z", codec, "-X", "linger.ms=5"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=90)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-C", "-t", topic, "-e", "-o", "beginning",
         "-f", "%p %o %k:%s\n"], capture_output=True, text=True, timeout=90)
    assert consumed.returncode == 0, consumed.stderr
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for line in consumed.stdout.splitlines():
        partition, offset, payload = line.split(" ", 2)
        by_partition.setdefault(int(partition), []).append((int(offset), payload))
    assert sum(len(v) for v in by_partition.values()) == count
    # kcat's default partitioner (consistent_random) sends a key always to one partition:
    # each partition holds its keys' lines in the order they were produced.
    expected: dict[int, list[str]] = {}
    for partition, entries in by_partition.items():
        assert [o for o, _ in entries] == list(range(len(entries)))
        payloads = [p for _, p in entries]
        keys = {p.split(":", 1)[0] for p in payloads}
        expected[partition] = [line for line in lines if line.split(":", 1)[0] in keys]
        assert payloads == expected[partition]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip_byte_identical(cluster: LocalCluster, codec: str) -> None:
    topic = f"ck-{codec}"
    create_topic(cluster, topic, replication_factor=REPLICATION_FACTOR,
                 configs={"min.insync.replicas": str(min(2, REPLICATION_FACTOR))})
    rng = random.Random(codec)
    count = 3000
    sent: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "compression.type": codec, "linger.ms": 5,
                         "enable.idempotence": False})
    errors: list[Any] = []
    for i in range(count):
        key = b"key-%d" % i
        value = rng.randbytes(rng.randrange(0, 300))
        partition = i % PARTITIONS
        sent[partition].append((key, value))
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=lambda err, _msg: err is not None and errors.append(err))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert confluent_consume(cluster, topic, count) == sent


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(cluster: LocalCluster, codec: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    topic = f"kp-{codec}"
    create_topic(cluster, topic, partitions=2, replication_factor=REPLICATION_FACTOR)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                             compression_type=None if codec == "none" else codec,
                             linger_ms=5, enable_idempotence=False)
    sent = {p: [(b"k%d" % i, os.urandom(64)) for i in range(200)] for p in range(2)}
    futures = [producer.send(topic, key=k, value=v, partition=p)
               for p, items in sent.items() for k, v in items]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(timeout=10)
    assert sorted(offsets) == sorted(list(range(200)) * 2)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([KpTopicPartition(topic, p) for p in range(2)])
    consumer.seek_to_beginning()
    got: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: []}
    deadline = time.monotonic() + 60
    while sum(map(len, got.values())) < 400 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                got[record.partition].append((record.key, record.value))
    consumer.close()
    assert got == sent


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_round_trip(cluster: LocalCluster, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    topic = f"aio-{codec}"
    create_topic(cluster, topic, partitions=2, replication_factor=REPLICATION_FACTOR)
    sent = {p: [(b"k%d" % i, os.urandom(64)) for i in range(200)] for p in range(2)}

    async def scenario() -> dict[int, list[tuple[bytes, bytes]]]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5, enable_idempotence=False)
        await producer.start()
        try:
            batches = [await producer.send(topic, key=k, value=v, partition=p)
                       for p, items in sent.items() for k, v in items]
            await asyncio.gather(*batches)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                    group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        got: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: []}
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(2)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < 400 and time.monotonic() < deadline:
                fetched = await consumer.getmany(timeout_ms=1000)
                for records in fetched.values():
                    for record in records:
                        got[record.partition].append((record.key, record.value))
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(scenario(), 90)) == sent


def test_topic_compression_and_log_append_time_seen_by_a_consumer(cluster: LocalCluster) -> None:
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    create_topic(cluster, "recompressed", partitions=1, replication_factor=REPLICATION_FACTOR,
                 configs={"compression.type": "gzip"})
    create_topic(cluster, "append-time", partitions=1, replication_factor=REPLICATION_FACTOR,
                 configs={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "compression.type": "lz4", "linger.ms": 5,
                         "enable.idempotence": False})
    values = [os.urandom(100) for _ in range(500)]
    old = int(time.time() * 1000) - 3_600_000
    for value in values:
        producer.produce("recompressed", value, partition=0, timestamp=old)
        producer.produce("append-time", value, partition=0, timestamp=old)
    assert producer.flush(30) == 0
    before = int(time.time() * 1000) - 60_000
    for topic, expected_type in (("recompressed", TIMESTAMP_CREATE_TIME),
                                 ("append-time", TIMESTAMP_LOG_APPEND_TIME)):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": "ts-check", "enable.auto.commit": False})
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        got: list[tuple[bytes, tuple[int, int]]] = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < len(values) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append((message.value(), message.timestamp()))
        finally:
            consumer.close()
        assert [v for v, _ in got] == values
        assert {ts_type for _, (ts_type, _) in got} == {expected_type}
        if expected_type == TIMESTAMP_CREATE_TIME:
            assert {ts for _, (_, ts) in got} == {old}
        else:
            assert all(ts >= before for _, (_, ts) in got)
    # The stored batches of the recompressed topic are gzip (codec 1), whatever was sent.
    leader = wait_for_leaders(cluster, "recompressed", 1)[0]
    with _connection_to(cluster, leader) as conn:
        response = ask(conn, ApiKey.FETCH, _fetch_body("recompressed", 0, 0), 11)
    records = bytes(response.responses[0].partitions[0].records)
    assert records[21 + 1] & 0x07 == 1


# -- bad input -------------------------------------------------------------------------------


def ask(conn: BrokerConnection, key: ApiKey, body: Any, version: int) -> Any:
    return conn.request(key, body, version=version)[1]


def _connection_to(cluster: LocalCluster, broker_id: int) -> BrokerConnection:
    broker = cluster.broker(broker_id)
    host, port = broker.bootstrap_server.split(":")
    return BrokerConnection(host, int(port))


def _produce_body(topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    request = api.APIS[ApiKey.PRODUCE].request
    s = request.structs
    return request(transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[
        s["TopicProduceData"](name=topic, partition_data=[
            s["PartitionProduceData"](index=partition, records=records)])])


def _fetch_body(topic: str, partition: int, offset: int) -> Any:
    request = api.APIS[ApiKey.FETCH].request
    s = request.structs
    return request(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, topics=[
                       s["FetchTopic"](topic=topic, partitions=[s["FetchPartition"](
                           partition=partition, fetch_offset=offset,
                           partition_max_bytes=1 << 20)])],
                   forgotten_topics_data=[], rack_id="")


def _produce_error(response: Any) -> tuple[int, int]:
    p = response.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_bad_input(cluster: LocalCluster) -> None:
    topic = "bad-input"
    create_topic(cluster, topic, partitions=1, replication_factor=1)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    follower = next(b for b in (1, 2, 3) if b != leader)
    good = build_record_batch([(b"k", b"v")])
    with _connection_to(cluster, follower) as conn:
        response = ask(conn, ApiKey.PRODUCE, _produce_body(topic, 0, good), 8)
        assert _produce_error(response) == (NOT_LEADER_OR_FOLLOWER, -1)
    with _connection_to(cluster, leader) as conn:
        corrupt = bytearray(good)
        corrupt[-2] ^= 0x55
        response = ask(conn, ApiKey.PRODUCE, _produce_body(topic, 0, bytes(corrupt)),
                                version=8)
        assert _produce_error(response) == (CORRUPT_MESSAGE, -1)
        response = ask(conn, ApiKey.FETCH, _fetch_body(topic, 0, 0), 11)
        part = response.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, bytes(part.records or b"")) == (0, 0, b"")
        response = ask(conn, ApiKey.PRODUCE, _produce_body(topic, 0, good), 8)
        assert _produce_error(response) == (0, 0)
        response = ask(conn, ApiKey.FETCH, _fetch_body(topic, 0, 5), 11)
        assert response.responses[0].partitions[0].error_code == OFFSET_OUT_OF_RANGE

    # A client that sends half a produce request and disconnects, and one that disconnects
    # while its long poll waits: the broker keeps serving everyone else.
    host, port = cluster.broker(leader).bootstrap_server.split(":")
    frame = api.encode_request(ApiKey.PRODUCE, 8, 1, "quitter", _produce_body(topic, 0, good))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
    body = _fetch_body(topic, 0, 1)
    body.max_wait_ms = 5000
    frame = api.encode_request(ApiKey.FETCH, 11, 2, "quitter", body)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(struct.pack(">i", len(frame)) + frame)
    with _connection_to(cluster, leader) as conn:
        response = ask(conn, ApiKey.PRODUCE, _produce_body(topic, 0, good), 8)
        assert _produce_error(response) == (0, 1)
        response = ask(conn, ApiKey.FETCH, _fetch_body(topic, 0, 0), 11)
        assert response.responses[0].partitions[0].high_watermark == 2
    assert cluster.broker(leader).running


def test_leader_shrinks_the_isr_of_a_frozen_follower(cluster: LocalCluster) -> None:
    """The leader drops a follower that stopped fetching from the ISR after
    replica.lag.time.max.ms, in the partition state znode (a conditional write), announces
    it under /isr_change_notification, and the controller's UpdateMetadata spreads it."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=10)
    try:
        controller = json.loads(zk.get("/controller")[0])["brokerid"]
        frozen = next(b for b in (1, 2, 3) if b != controller)
        leader = next(b for b in (1, 2, 3) if b != frozen)
        other = next(b for b in (1, 2, 3) if b not in (frozen, leader))
        topic = "isr-shrink"
        done = subprocess.run(
            [str(_scripts() / "kafka-topics.sh"), "--bootstrap-server",
             cluster.bootstrap_servers, "--create", "--topic", topic, "--replica-assignment",
             f"{leader}:{frozen}:{other}"], capture_output=True, text=True, timeout=60, cwd="/")
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for_leaders(cluster, topic, 1)
        state_path = f"/brokers/topics/{topic}/partitions/0/state"
        initial = json.loads(zk.get(state_path)[0])
        assert initial["isr"] == [leader, frozen, other]
        cluster.broker(frozen).suspend()
        try:
            with _connection_to(cluster, leader) as conn:
                good = build_record_batch([(b"k", b"v")])
                response = ask(conn, ApiKey.PRODUCE, _produce_body(topic, 0, good), 8)
                assert _produce_error(response) == (0, 0)
            deadline = time.monotonic() + 40
            state = initial
            version = zk.get(state_path)[1].version
            while frozen in state["isr"] and time.monotonic() < deadline:
                time.sleep(0.2)
                data, stat = zk.get(state_path)
                state, version = json.loads(data), stat.version
            assert frozen not in state["isr"] and leader in state["isr"]
            assert state["leader"] == leader and state["leader_epoch"] == initial["leader_epoch"]
            assert version > 0
            # The controller saw the notification (and deleted it) and told the brokers.
            deadline = time.monotonic() + 30
            isr: list[int] = []
            while time.monotonic() < deadline:
                response = metadata(cluster, topic, leader)
                isr = list(response.topics[0].partitions[0].isr_nodes)
                if frozen not in isr and not zk.get_children("/isr_change_notification"):
                    break
                time.sleep(0.2)
            assert frozen not in isr and leader in isr
            assert zk.get_children("/isr_change_notification") == []
        finally:
            cluster.broker(frozen).resume()
    finally:
        zk.stop()
        zk.close()
