"""Interop with kafka-python's record module: its builders' output decodes with our code,
and its ``MemoryRecords`` reader reads what we build, with identical content."""

from __future__ import annotations

import types

import cramjam
import kafka.codec
import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkaclone.protocol.records import (
    Codec,
    LegacyRecordBatch,
    RecordBatch,
    build_legacy_message_set,
    build_record_batch,
    iter_batches,
)

Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


@pytest.fixture(autouse=True)
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's raw snappy blocks need python-snappy, absent here: cramjam stands in."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


def rows(count: int, *, headers: bool) -> list[Row]:
    out: list[Row] = []
    for i in range(count):
        key = None if i % 4 == 1 else b"k%d" % i
        value = None if i % 9 == 2 else b"value-%d-" % i * (i % 40)
        hdrs: list[tuple[str, bytes | None]] = (
            [("a", b"1"), ("\u00e9t\u00e9", b"\x00\xff")] if headers and i % 2 else []
        )
        out.append((i, 1_700_000_000_000 + i * 7, key, value, hdrs))
    return out


def read_ours(buf: bytes) -> list[Row]:
    out: list[Row] = []
    for batch in iter_batches(buf, allow_partial_tail=False):
        batch.ensure_valid()
        if isinstance(batch, RecordBatch):
            for r in batch.records():
                out.append((batch.offset_of(r), batch.timestamp_of(r), r.key, r.value, r.headers))
        else:
            assert isinstance(batch, LegacyRecordBatch)
            for legacy in batch.records():
                out.append((legacy.offset, legacy.timestamp, legacy.key, legacy.value, []))
    return out


def read_kafka_python(buf: bytes) -> list[Row]:
    records = MemoryRecords(buf)
    out: list[Row] = []
    while records.has_next():
        batch = records.next_batch()
        assert batch is not None
        assert batch.validate_crc()
        for r in batch:
            headers = [(k, v) for k, v in (r.headers or [])]
            timestamp = -1 if r.timestamp is None else r.timestamp  # None for magic 0
            out.append((r.offset, timestamp, r.key, r.value, headers))
    return out


V2_CODECS = list(Codec)
LEGACY_CODECS = [c for c in Codec if c is not Codec.ZSTD]


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: c.name)
def test_kafka_python_v2_builder_decodes(codec: Codec) -> None:
    expected = rows(200, headers=True)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec.value,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for offset, timestamp, key, value, headers in expected:
        builder.append(offset, timestamp, key, value, headers)
    buf = bytes(builder.build())
    (batch,) = iter_batches(buf, allow_partial_tail=False)
    assert isinstance(batch, RecordBatch)
    assert batch.compression is codec
    assert batch.max_timestamp == max(row[1] for row in expected)
    assert read_ours(buf) == expected


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda c: c.name)
def test_our_v2_batches_read_by_kafka_python(codec: Codec) -> None:
    expected = rows(200, headers=True)
    buf = build_record_batch(
        [(key, value, headers, timestamp) for _, timestamp, key, value, headers in expected],
        codec=codec,
    ) + build_record_batch([(b"last", b"one", None, 5)], base_offset=200, codec=codec)
    expected.append((200, 5, b"last", b"one", []))
    assert read_kafka_python(buf) == expected


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_legacy_builder_decodes(magic: int, codec: Codec) -> None:
    expected = rows(120, headers=False)
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=codec.value, batch_size=1 << 24
    )
    for offset, timestamp, key, value, _ in expected:
        builder.append(offset, timestamp, key, value)
    buf = bytes(builder.build())
    if magic == 0:
        expected = [(o, -1, k, v, h) for o, _, k, v, h in expected]
    assert read_ours(buf) == expected


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("magic", [0, 1])
def test_our_legacy_sets_read_by_kafka_python(magic: int, codec: Codec) -> None:
    expected = rows(120, headers=False)
    buf = build_legacy_message_set(
        [(key, value, timestamp) for _, timestamp, key, value, _ in expected],
        magic=magic,
        codec=codec,
    )
    if magic == 0:
        expected = [(o, -1, k, v, h) for o, _, k, v, h in expected]
    assert read_kafka_python(buf) == expected
