"""The project's Producer and Consumer against a real three-broker LocalCluster, with
confluent-kafka (librdkafka) and kafka-python as the oracles both ways."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka
import numpy as np
import pytest

from kafkaclone.clients import (
    OFFSET_BEGINNING,
    OFFSET_END,
    ConfigException,
    Consumer,
    Producer,
    RecordMetadata,
    TopicPartition,
)
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.common.errors import (
    KafkaError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from kafkaclone.testing.cluster import LocalCluster

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"auto.create.topics.enable": "false",
                                    "default.replication.factor": "1",
                                    "num.partitions": str(PARTITIONS)}) as local:
        yield local


def new_topic(cluster: LocalCluster, partitions: int = PARTITIONS,
              configs: dict[str, str] | None = None, replication: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with AdminClient(cluster.bootstrap_servers) as admin:
        errors = admin.create_topics([NewTopic(name, partitions, replication,
                                               configs=configs or {})])
        assert errors == {name: None}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = consumer.list_topics(name, timeout=10).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions \
                    and all(p.leader >= 0 for p in meta.partitions.values()):
                return name
            time.sleep(0.1)
    finally:
        consumer.close()
    raise AssertionError(f"{name} has no leaders")


def consume_all(cluster: LocalCluster, topic: str, expected: int, partitions: int = PARTITIONS,
                **conf: Any) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, **conf})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            records += consumer.poll(0.5)
        return records
    finally:
        consumer.close()


def ck_consume(cluster: LocalCluster, topic: str, expected: int,
               partitions: int = PARTITIONS) -> list[Any]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0)
                         for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                out.append(message)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_our_producer_to_confluent_kafka_and_keys_land_where_librdkafka_puts_them(
        cluster: LocalCluster, codec: str) -> None:
    topic = new_topic(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "compression.type": codec, "linger.ms": 5})
    delivered: list[tuple[Any, Any]] = []
    sent = {}
    futures = []
    for i in range(600):
        key = f"key-{i % 97}".encode()
        value = f"{codec}-value-{i}".encode() * (1 + i % 5)
        sent[value] = key
        futures.append(producer.send(topic, value, key=key, headers=[("h", b"%d" % i)],
                                     on_delivery=lambda err, md: delivered.append((err, md))))
    assert producer.flush(30) == 0
    producer.close()
    assert len(delivered) == 600 and all(err is None for err, _ in delivered)
    ours = {md.value: (md.partition, md.offset) for _, md in delivered}
    assert futures[0].result(1).offset >= 0

    # librdkafka with murmur2_random puts each key on the same partition.
    reference = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                          "partitioner": "murmur2_random"})
    ck_partitions: dict[bytes, int] = {}
    for key in set(sent.values()):
        reference.produce(topic, b"ref", key=key, on_delivery=lambda err, msg:
                          ck_partitions.__setitem__(msg.key(), msg.partition()))
    assert reference.flush(30) == 0

    messages = ck_consume(cluster, topic, 600 + len(ck_partitions))
    assert len(messages) == 600 + len(ck_partitions)
    for message in messages:
        if message.value() == b"ref":
            continue
        assert (message.partition(), message.offset()) == ours[message.value()]
        assert message.key() == sent[message.value()]
        assert ck_partitions[message.key()] == message.partition()
        assert message.headers()[0][0] == "h"
    per_partition: dict[int, list[int]] = {}
    for message in messages:
        per_partition.setdefault(message.partition(), []).append(message.offset())
    assert all(offsets == sorted(offsets) for offsets in per_partition.values())


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_producer_to_our_consumer(cluster: LocalCluster, codec: str) -> None:
    topic = new_topic(cluster)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "compression.type": codec, "linger.ms": 5})
    expected = {}
    for i in range(800):
        value = f"v{i}".encode() * (i % 7)
        key = None if i % 3 == 0 else f"k{i}".encode()
        producer.produce(topic, value, key=key, headers={"n": str(i).encode()})
        expected[i] = (key, value)
    assert producer.flush(30) == 0

    records = consume_all(cluster, topic, 800)
    assert len(records) == 800
    seen = {}
    for record in records:
        (name, number), = record.headers
        assert name == "n"
        seen[int(number)] = (record.key, record.value)
        assert record.timestamp_type == 0 and record.timestamp > 0
    assert seen == expected


def test_kafka_python_both_ways(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, partitions=2)
    theirs = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                 compression_type="gzip", enable_idempotence=False)
    for i in range(200):
        theirs.send(topic, f"kp-{i}".encode(), key=b"k%d" % (i % 5))
    theirs.flush(30)
    theirs.close()
    ours = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(200):
        ours.send(topic, f"ours-{i}".encode(), key=b"k%d" % (i % 5))
    assert ours.flush(30) == 0
    ours.close()

    records = consume_all(cluster, topic, 400, partitions=2)
    values = sorted(r.value for r in records)
    assert values == sorted([f"kp-{i}".encode() for i in range(200)] +
                            [f"ours-{i}".encode() for i in range(200)])
    # kafka-python's default partitioner is murmur2 as well: same key, same partition.
    by_key: dict[bytes, set[int]] = {}
    for r in records:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())

    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                   consumer_timeout_ms=5000)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(2)])
    consumer.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 400 and time.monotonic() < deadline:
        for batch in consumer.poll(500).values():
            got += [m.value for m in batch]
    consumer.close()
    assert sorted(got) == values


def test_default_producer_is_idempotent_and_writes_each_value_once_in_order(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster, replication=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 2})
    assert producer.enable_idempotence is True
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(4000):
        value = b"idem-%d" % i
        producer.send(topic, value, partition=i % PARTITIONS)
        sent[i % PARTITIONS].append(value)
    assert producer.flush(60) == 0
    producer.close()
    records = consume_all(cluster, topic, 4000)
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for record in records:
        got[record.partition].append(record.value)
    assert got == sent


def test_send_batch_interleaved_with_send_is_idempotent_exact_and_in_order(
        cluster: LocalCluster) -> None:
    """Columns through send_batch (several record batches each, keys, nulls, timestamps)
    between single sends, idempotent: every record once, in order, with its key,
    value and timestamp, on the partition asked for."""
    topic = new_topic(cluster, partitions=2, replication=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 2,
                         "batch.size": 4096})
    expected: list[tuple[bytes | None, bytes | None, int]] = []
    futures = []
    for round_ in range(3):
        producer.send(topic, b"single-%d" % round_, key=b"s", partition=1, timestamp=1000)
        expected.append((b"s", b"single-%d" % round_, 1000))
        values = [None if i % 7 == 3 else b"v%d-%d" % (round_, i) * (i % 5) for i in range(500)]
        keys = [None if i % 3 == 0 else b"k%d" % i for i in range(500)]
        stamps = np.arange(500, dtype=np.int64) + 2000 * (round_ + 1)
        futures += producer.send_batch(topic, 1, BinaryColumn.of(values),
                                       BinaryColumn.of(keys), stamps)
        expected += [(k, v, int(t)) for k, v, t in zip(keys, values, stamps, strict=True)]
    assert producer.flush(60) == 0
    assert len(futures) > 3  # batch.size cut each call into several record batches
    assert all(f.exception(0) is None for f in futures)
    last = futures[-1].result(0)
    assert (last.partition, last.offset, last.value) == (1, len(expected) - 1, values[-1])
    producer.close()
    records = consume_all(cluster, topic, len(expected), partitions=2)
    assert [(r.key, r.value, r.timestamp) for r in records] == expected
    assert [r.offset for r in records] == list(range(len(expected)))
    assert all(r.partition == 1 for r in records)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(cluster: LocalCluster, acks: str) -> None:
    topic = new_topic(cluster, partitions=1)
    if acks == "0":
        # Nothing retries an acks=0 send that meets a leader still opening its log (the
        # metadata can name it first): wait until the leader answers ListOffsets.
        leading = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                            "group.id": "unused"})
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    leading.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                  timeout=5)
                    break
                except confluent_kafka.KafkaException:
                    assert time.monotonic() < deadline, f"{topic}'s leader does not answer"
                    time.sleep(0.1)
        finally:
            leading.close()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks,
                         "max.in.flight.requests.per.connection": 1, "batch.size": 200})
    futures = [producer.send(topic, b"%d" % i) for i in range(100)]
    assert producer.flush(30) == 0
    producer.close()
    results = [f.result(0) for f in futures]
    if acks == "0":
        assert all(r.offset == -1 for r in results)
    else:
        assert [r.offset for r in results] == list(range(100))
    assert [r.value for r in consume_all(cluster, topic, 100, partitions=1)] == \
        [b"%d" % i for i in range(100)]


def test_partitioner_choices_interceptors_and_timestamps(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    events: list[str] = []

    class Interceptor:
        def on_send(self, topic: str, value: Any, key: Any, partition: Any, headers: Any,
                    timestamp: Any) -> tuple[Any, ...]:
            events.append("send")
            return topic, value.upper(), key, partition, headers, timestamp

        def on_acknowledgement(self, metadata: RecordMetadata, error: Any) -> None:
            events.append("ack" if error is None else "error")

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "partitioner": lambda key, count, available: int(key) % count,
                         "interceptor.classes": [Interceptor()]})
    futures = [producer.send(topic, b"v", key=b"%d" % i, timestamp=1_600_000_000_000 + i)
               for i in range(8)]
    producer.flush(30)
    producer.close()
    assert [f.result(0).partition for f in futures] == [i % PARTITIONS for i in range(8)]
    assert events.count("send") == 8 and events.count("ack") == 8
    records = consume_all(cluster, topic, 8)
    assert {r.value for r in records} == {b"V"}
    assert sorted(r.timestamp for r in records) == [1_600_000_000_000 + i for i in range(8)]

    rr = Producer({"bootstrap.servers": cluster.bootstrap_servers, "partitioner": "round_robin"})
    assert [rr.send(topic, b"x", key=b"same").result(10).partition for _ in range(8)] == \
        [i % PARTITIONS for i in range(8)]
    rr.close()


def test_keyless_records_stick_to_a_partition_per_batch(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "linger.ms": 200, "batch.size": 100000})
    futures = [producer.send(topic, b"x" * 10) for _ in range(50)]
    producer.flush(30)
    assert len({f.result(0).partition for f in futures}) == 1
    # Batches of about 5 records: each full batch moves the keyless records on.
    small = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                      "linger.ms": 100, "batch.size": 200})
    futures = [small.send(topic, b"y" * 10) for _ in range(100)]
    small.flush(30)
    assert len({f.result(0).partition for f in futures}) > 1
    producer.close()
    small.close()


def test_manual_assignment_semantics(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    base = 1_700_000_000_000
    for i in range(100):
        producer.send(topic, b"%d" % i, partition=0, timestamp=base + i * 1000)
    for i in range(10):
        producer.send(topic, b"p1-%d" % i, partition=1)
    assert producer.flush(30) == 0
    producer.close()

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "max.poll.records": 7, "auto.offset.reset": "earliest"})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert consumer.get_watermark_offsets(tp0, timeout=10) == (0, 100)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 41_500),
                                        TopicPartition(topic, 1, base * 2)], timeout=10)
    assert [tp.offset for tp in found] == [42, -1]

    consumer.assign([TopicPartition(topic, 0, 42)])
    records = consumer.poll(10)
    assert len(records) == 7 and [r.offset for r in records] == list(range(42, 49))
    assert consumer.position(tp0) == 49
    consumer.seek(TopicPartition(topic, 0, 95))
    tail: list[Any] = []
    deadline = time.monotonic() + 10
    while len(tail) < 5 and time.monotonic() < deadline:
        tail += consumer.poll(1)
    assert [r.value for r in tail] == [b"%d" % i for i in range(95, 100)]
    assert consumer.poll(0.3) == []

    consumer.seek_to_beginning([tp0])
    assert consumer.position(tp0) == 0
    consumer.seek_to_end([tp0])
    assert consumer.position(tp0) == 100

    # A new assignment without offsets follows auto.offset.reset (earliest here).
    consumer.assign([tp0, tp1])
    consumer.pause([tp0])
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while len(got) < 10 and time.monotonic() < deadline:
        got += consumer.poll(1)
    assert {r.partition for r in got} == {1} and len(got) == 10
    consumer.resume([tp0])
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 100 and time.monotonic() < deadline:
        got += consumer.poll(1)
    assert [r.offset for r in got] == list(range(100))
    assert consumer.position([tp0, tp1]) == [TopicPartition(topic, 0, 100),
                                             TopicPartition(topic, 1, 10)]
    consumer.close()

    latest = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    latest.assign([TopicPartition(topic, 1)])
    assert latest.position(tp1) == 10
    latest.assign([TopicPartition(topic, 1, OFFSET_BEGINNING)])
    assert latest.position(tp1) == 0
    latest.assign([TopicPartition(topic, 1, OFFSET_END)])
    assert latest.position(tp1) == 10
    latest.close()


def test_out_of_range_positions(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        producer.send(topic, b"%d" % i)
    producer.flush(30)
    producer.close()
    strict = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                       "auto.offset.reset": "none"})
    strict.assign([TopicPartition(topic, 0, 500)])
    with pytest.raises(OffsetOutOfRangeError):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            strict.poll(0.5)
    strict.close()
    resetting = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                          "auto.offset.reset": "earliest"})
    resetting.assign([TopicPartition(topic, 0, 500)])
    got: list[Any] = []
    deadline = time.monotonic() + 10
    while len(got) < 10 and time.monotonic() < deadline:
        got += resetting.poll(0.5)
    assert [r.offset for r in got] == list(range(10))
    resetting.close()


def test_raw_and_columnar_polls(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "batch.size": 1000,
                         "linger.ms": 20, "compression.type": "gzip"})
    for i in range(300):
        producer.send(topic, b"r%d" % i, key=b"k")
    producer.flush(30)
    producer.close()
    from kafkaclone.protocol.records.columnar import decode_columns

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "max.partition.fetch.bytes": 2000})
    consumer.assign([TopicPartition(topic, 0, 10)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < 290 and time.monotonic() < deadline:
        for fetched in consumer.poll_raw(1):
            assert (fetched.topic, fetched.partition) == (topic, 0)
            assert fetched.high_watermark == 300 and fetched.log_start_offset == 0
            columns = decode_columns(fetched.records, 10)
            values += [columns.value(i) or b"" for i in range(columns.count)]
            if fetched.next_offset is not None:
                assert consumer.position(TopicPartition(topic, 0)) == fetched.next_offset
    assert values == [b"r%d" % i for i in range(10, 300)]

    consumer.seek(TopicPartition(topic, 0, 295))
    polled = consumer.poll_columns(5)
    (tp, columns), = polled
    assert [columns.value(i) for i in range(columns.count)] == [b"r%d" % i
                                                               for i in range(295, 300)]
    assert tp.offset == 300
    consumer.seek(TopicPartition(topic, 0, 5000))
    with pytest.raises(OffsetOutOfRangeError):
        consumer.poll_raw(5)
    consumer.close()


def test_bad_input_fails_fast_and_clearly(cluster: LocalCluster) -> None:
    servers = cluster.bootstrap_servers
    producer = Producer({"bootstrap.servers": servers, "max.block.ms": 1500})
    started = time.monotonic()
    with pytest.raises(KafkaError) as info:
        producer.send("no-such-topic", b"x")
    assert isinstance(info.value, UnknownTopicOrPartitionError | RequestTimedOutError)
    assert time.monotonic() - started < 10

    topic = new_topic(cluster, partitions=1)
    with pytest.raises(MessageTooLargeError):
        producer.send(topic, b"x" * 2_000_000)
    with pytest.raises(RequestTimedOutError, match="Partition 7 of topic"):
        producer.send(topic, b"x", partition=7)
    with pytest.raises(TypeError):
        producer.send(topic, 12345)
    # A record the broker refuses (over the topic's max.message.bytes) fails its future.
    small = new_topic(cluster, partitions=1, configs={"max.message.bytes": "2000"})
    future = producer.send(small, b"y" * 5000)
    assert producer.flush(30) == 0
    with pytest.raises(KafkaError) as refused:
        future.result(0)
    assert refused.value.code in (MessageTooLargeError.code, 18)
    producer.close()

    consumer = Consumer({"bootstrap.servers": servers})
    meta = consumer.list_topics("no-such-topic", timeout=10)
    assert isinstance(meta.topics["no-such-topic"].error, UnknownTopicOrPartitionError)
    started = time.monotonic()
    with pytest.raises(KafkaError):
        consumer.get_watermark_offsets(TopicPartition("no-such-topic", 0), timeout=1.5)
    assert time.monotonic() - started < 10
    with pytest.raises(ValueError):
        consumer.seek(TopicPartition(topic, 0, 1))  # not assigned
    consumer.close()

    nowhere = Consumer({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 1000,
                        "default.api.timeout.ms": 1500})
    started = time.monotonic()
    with pytest.raises(KafkaError):
        nowhere.list_topics(timeout=1.5)
    assert time.monotonic() - started < 10
    nowhere.close()
    with pytest.raises(ConfigException):
        Producer({"bootstrap.servers": servers, "acks": "most"})


def test_buffer_memory_back_pressure(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "buffer.memory": 4000, "linger.ms": 60000, "batch.size": 100000,
                         "max.block.ms": 500, "delivery.timeout.ms": 120000})
    for _ in range(30):
        producer.send(topic, b"z" * 100)
    started = time.monotonic()
    with pytest.raises(RequestTimedOutError, match=r"buffer.memory"):
        for _ in range(100):
            producer.send(topic, b"z" * 100)
    assert 0.4 < time.monotonic() - started < 5
    # flush sends the lingering batch and frees the memory again.
    assert producer.flush(30) == 0
    after = producer.send(topic, b"after")
    assert producer.flush(30) == 0
    assert after.result(0).offset >= 30
    producer.close()


def test_a_thread_safe_producer(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 2})

    def work(n: int) -> None:
        for i in range(500):
            producer.send(topic, b"%d-%d" % (n, i), key=b"%d" % i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert producer.flush(30) == 0
    producer.close()
    records = consume_all(cluster, topic, 2000)
    assert len(records) == 2000 and len({r.value for r in records}) == 2000


@pytest.mark.parametrize("codec", CODECS)
def test_our_producer_to_kafka_python_every_codec(cluster: LocalCluster, codec: str) -> None:
    topic = new_topic(cluster, partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "compression.type": codec, "linger.ms": 5})
    expected = {(b"k%d" % i, b"%s-%d" % (codec.encode(), i)) for i in range(300)}
    for key, value in expected:
        producer.send(topic, value, key=key, headers=[("codec", codec.encode())])
    assert producer.flush(30) == 0
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                   consumer_timeout_ms=5000)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(2)])
    consumer.seek_to_beginning()
    got = set()
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        for batch in consumer.poll(500).values():
            for message in batch:
                assert message.headers == [("codec", codec.encode())]
                got.add((message.key, message.value))
    consumer.close()
    assert got == expected


def test_batches_above_max_partition_fetch_bytes_on_one_broker(cluster: LocalCluster) -> None:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with AdminClient(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(name, replica_assignment={0: [1], 1: [1],
                                                                       2: [1]})]) == {name: None}
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    big = [bytes([65 + p]) * 300_000 for p in range(3)]
    for p in range(3):
        producer.send(name, big[p], partition=p).result(30)
        producer.send(name, b"small-%d" % p, partition=p).result(30)
    producer.close()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "max.partition.fetch.bytes": 100_000})
    consumer.assign([TopicPartition(name, p, 0) for p in range(3)])
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 20
    while sum(map(len, got.values())) < 6 and time.monotonic() < deadline:
        for record in consumer.poll(0.5):
            got[record.partition].append(record.value)
    consumer.close()
    assert got == {p: [big[p], b"small-%d" % p] for p in range(3)}
