"""Batches written by real clients decode with our code, and ours are read by them.

librdkafka (confluent-kafka) and kafka-python produce to a loopback ``FakeBroker`` that
captures their Produce requests; librdkafka also consumes what we build, through Fetch.
Every format each client can write is covered: magic 2 with every codec, magic 1 and 0
(librdkafka falls back to them when the broker advertises old Produce versions;
kafka-python when told an old ``api_version``).
"""

from __future__ import annotations

import queue
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka
import cramjam
import kafka
import kafka.codec
import pytest

from kafkaclone.protocol.records import (
    Codec,
    LegacyRecordBatch,
    RecordBatch,
    build_legacy_message_set,
    build_record_batch,
    iter_batches,
)
from tests.protocol.records.fake_broker import FakeBroker, ProducedPartition

CODEC_NAMES = {
    Codec.NONE: "none",
    Codec.GZIP: "gzip",
    Codec.SNAPPY: "snappy",
    Codec.LZ4: "lz4",
    Codec.ZSTD: "zstd",
}
PRODUCE_VERSIONS_FOR_MAGIC = {2: (3, 7), 1: (2, 2), 0: (0, 1)}
MESSAGE_COUNT = 300
BASE_TIMESTAMP = 1_600_000_000_000


@dataclass
class Message:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def expected_messages(magic: int, *, null_header_values: bool = True) -> list[Message]:
    messages = []
    for i in range(MESSAGE_COUNT):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else bytes([i % 251]) * (i * 13 % 700)
        if key is None and value is None:
            value = b"x"
        headers: list[tuple[str, bytes | None]] = []
        if magic == 2 and i % 3 == 0:
            headers = [("trace", b"t%d" % i), ("empty", b"")]
            if null_header_values:
                headers.append(("null", None))
        timestamp = BASE_TIMESTAMP + i * 3 - (40 if i % 5 == 0 else 0)
        messages.append(Message(i, timestamp if magic > 0 else -1, key, value, headers))
    return messages


def decode_all(buf: bytes) -> list[Message]:
    """Every message of a produce payload, through our iteration and record decoding."""
    decoded = []
    for batch in iter_batches(buf, allow_partial_tail=False):
        batch.ensure_valid()
        if isinstance(batch, RecordBatch):
            batch.validate_offset_range()
            assert batch.producer_id == -1
            assert not batch.is_control and not batch.is_transactional
            for record in batch.records():
                decoded.append(
                    Message(
                        batch.offset_of(record),
                        batch.timestamp_of(record),
                        record.key,
                        record.value,
                        record.headers,
                    )
                )
            timestamps = [m.timestamp for m in decoded[-batch.records_count :]]
            assert batch.max_timestamp == max(timestamps)
        else:
            assert isinstance(batch, LegacyRecordBatch)
            for legacy in batch.records():
                decoded.append(
                    Message(legacy.offset, legacy.timestamp, legacy.key, legacy.value, [])
                )
    return decoded


def collect(broker: FakeBroker, count: int, timeout: float = 20.0) -> list[ProducedPartition]:
    """Produce payloads until ``count`` messages have arrived."""
    deadline = time.monotonic() + timeout
    payloads = []
    seen = 0
    while seen < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"only {seen} of {count} messages arrived")
        try:
            produced = broker.produced.get(timeout=remaining)
        except queue.Empty:
            continue
        payloads.append(produced)
        seen += len(decode_all(produced.records))
    return payloads


def renumber(payloads: list[ProducedPartition]) -> list[Message]:
    """Decoded messages of several produce requests: each request's offsets start at 0, as
    a broker has not assigned them yet; renumber them consecutively."""
    messages: list[Message] = []
    for produced in payloads:
        for message in decode_all(produced.records):
            message.offset = len(messages)
            messages.append(message)
    return messages


def assert_same(decoded: list[Message], expected: list[Message], *, magic: int) -> None:
    assert len(decoded) == len(expected)
    for got, want in zip(decoded, expected, strict=True):
        assert (got.offset, got.key, got.value) == (want.offset, want.key, want.value)
        assert got.timestamp == want.timestamp
        if magic == 2:
            assert got.headers == want.headers


librdkafka_cases = [
    pytest.param(magic, codec, id=f"magic{magic}-{CODEC_NAMES[codec]}")
    for magic in (2, 1, 0)
    for codec in Codec
    if not (magic < 2 and codec is Codec.ZSTD)
]


@pytest.mark.parametrize(("magic", "codec"), librdkafka_cases)
def test_librdkafka_produce_decodes(magic: int, codec: Codec) -> None:
    expected = expected_messages(magic)
    with FakeBroker(produce_versions=PRODUCE_VERSIONS_FOR_MAGIC[magic]) as broker:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{broker.port}",
                "acks": 0,
                "compression.type": CODEC_NAMES[codec],
                "linger.ms": 20,
                "batch.num.messages": 120,  # several batches per request
                "message.timeout.ms": 15000,
                "log_level": 0,
            }
        )
        try:
            for m in expected:
                producer.produce(
                    "test",
                    key=m.key,
                    value=m.value,
                    headers=list(m.headers) or None,
                    timestamp=m.timestamp if magic > 0 else 0,
                )
            assert producer.flush(15) == 0
            payloads = collect(broker, len(expected))
        finally:
            del producer
        assert not broker.errors
    for produced in payloads:
        for batch in iter_batches(produced.records, allow_partial_tail=False):
            assert batch.magic == magic
            if magic == 2 and isinstance(batch, RecordBatch) and batch.records_count > 10:
                assert batch.compression is codec
            if isinstance(batch, LegacyRecordBatch) and codec is not Codec.NONE:
                assert batch.compression is codec
    assert_same(renumber(payloads), expected, magic=magic)


def test_librdkafka_writes_raw_snappy() -> None:
    """librdkafka writes one raw snappy block, not the xerial framing: the case the
    reader must tell apart."""
    with FakeBroker() as broker:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{broker.port}",
                "acks": 0,
                "compression.type": "snappy",
                "log_level": 0,
            }
        )
        try:
            for i in range(50):
                producer.produce("test", value=b"snappy %d" % i * 20)
            assert producer.flush(15) == 0
            (produced,) = collect(broker, 50)
        finally:
            del producer
    (batch,) = iter_batches(produced.records, allow_partial_tail=False)
    assert isinstance(batch, RecordBatch)
    assert batch.compression is Codec.SNAPPY
    assert not batch.records_bytes().tobytes().startswith(b"\x82SNAPPY\x00")
    assert [r.value for r in batch.records()] == [b"snappy %d" % i * 20 for i in range(50)]


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python needs python-snappy for raw snappy blocks; stand in with cramjam (the
    xerial framing around the blocks is still kafka-python's own)."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


KAFKA_PYTHON_API_FOR_MAGIC: dict[int, tuple[int, ...] | None] = {
    2: None,
    1: (0, 10, 1),
    0: (0, 9),
}
kafka_python_cases = [
    pytest.param(magic, codec, id=f"magic{magic}-{CODEC_NAMES[codec]}")
    for magic in (2, 1, 0)
    for codec in Codec
    if not (magic < 2 and codec is Codec.ZSTD)
    # kafka-python writes magic 0 lz4 only with the xxhash package, not installed
    and not (magic == 0 and codec is Codec.LZ4)
]


@pytest.mark.usefixtures("kafka_python_snappy")
@pytest.mark.parametrize(("magic", "codec"), kafka_python_cases)
def test_kafka_python_produce_decodes(magic: int, codec: Codec) -> None:
    # kafka-python cannot send a null header value
    expected = expected_messages(magic, null_header_values=False)
    with FakeBroker() as broker:
        producer = kafka.KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{broker.port}",
            acks=0,
            compression_type=None if codec is Codec.NONE else CODEC_NAMES[codec],
            linger_ms=20,
            enable_idempotence=False,
            api_version=KAFKA_PYTHON_API_FOR_MAGIC[magic],
            request_timeout_ms=15000,
        )
        try:
            for m in expected:
                producer.send(
                    "test",
                    key=m.key,
                    value=m.value,
                    headers=m.headers or None,
                    timestamp_ms=m.timestamp if magic > 0 else None,
                )
            producer.flush(15)
            payloads = collect(broker, len(expected))
        finally:
            producer.close(timeout=5)
        assert not broker.errors
    for produced in payloads:
        for batch in iter_batches(produced.records, allow_partial_tail=False):
            assert batch.magic == magic
    assert_same(renumber(payloads), expected, magic=magic)


def build_for_fetch(magic: int, codec: Codec, messages: list[Message]) -> bytes:
    """Our encoding of ``messages``, split in three batches / wrappers."""
    parts = [messages[:100], messages[100:101], messages[101:]]
    out = bytearray()
    for part in parts:
        base = part[0].offset
        if magic == 2:
            out += build_record_batch(
                [(m.key, m.value, m.headers, m.timestamp) for m in part],
                base_offset=base,
                codec=codec,
            )
        else:
            out += build_legacy_message_set(
                [(m.key, m.value, m.timestamp) for m in part],
                magic=magic,
                base_offset=base,
                codec=codec,
            )
    return bytes(out)


def consume(port: int, count: int, timeout: float = 20.0) -> Iterator[confluent_kafka.Message]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "records-test",
            "enable.auto.commit": False,
            "check.crcs": True,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition("test", 0, 0)])
        deadline = time.monotonic() + timeout
        received = 0
        while received < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"consumed only {received} of {count} messages")
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            received += 1
            yield message
    finally:
        consumer.close()


@pytest.mark.parametrize(("magic", "codec"), librdkafka_cases)
def test_librdkafka_consumes_our_batches(magic: int, codec: Codec) -> None:
    expected = expected_messages(magic)
    data = build_for_fetch(magic, codec, expected)
    with FakeBroker(fetch_records=data, high_watermark=len(expected)) as broker:
        consumed = list(consume(broker.port, len(expected)))
        assert not broker.errors
    assert len(consumed) == len(expected)
    for message, want in zip(consumed, expected, strict=True):
        assert message.offset() == want.offset
        assert message.key() == want.key
        assert message.value() == want.value
        timestamp_type, timestamp = message.timestamp()
        if magic == 0:
            assert timestamp_type == confluent_kafka.TIMESTAMP_NOT_AVAILABLE
        else:
            assert (timestamp_type, timestamp) == (
                confluent_kafka.TIMESTAMP_CREATE_TIME,
                want.timestamp,
            )
        if magic == 2:
            assert (message.headers() or []) == want.headers
