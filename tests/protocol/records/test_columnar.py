"""Column-wise decoding (kafkaclone.protocol.records.columnar) against the record-at-a-time
decoder, on batches written by confluent-kafka (librdkafka), kafka-python and our own
builder, every codec, both the numpy and the plain-Python paths, and the pyarrow
conversion."""

from __future__ import annotations

import struct
import types

import confluent_kafka
import cramjam
import hypothesis.strategies as st
import kafka.codec
import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkaclone.common.errors import CorruptMessageError, InvalidRecordError
from kafkaclone.protocol.records import (
    Codec,
    ControlRecordType,
    RecordBatch,
    build_end_transaction_marker_batch,
    build_legacy_message_set,
    build_record_batch,
    iter_batches,
)
from kafkaclone.protocol.records.columnar import (
    RecordColumns,
    concat_columns,
    decode_columns,
    header_arrow_type,
)
from tests.protocol.records.fake_broker import FakeBroker
from tests.protocol.records.test_real_clients import CODEC_NAMES, collect

Row = tuple[int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]
PATHS = [pytest.param(True, id="numpy"), pytest.param(False, id="python")]


def reference_rows(buf: bytes, start: int = 0, end: int = 1 << 62) -> list[Row]:
    """What RecordBatch.records() says, for the v2 data batches of ``buf``."""
    rows: list[Row] = []
    for batch in iter_batches(buf, allow_partial_tail=True):
        assert isinstance(batch, RecordBatch)
        if batch.is_control:
            continue
        for record in batch.records():
            offset = batch.offset_of(record)
            if start <= offset < end:
                rows.append(
                    (
                        offset,
                        batch.timestamp_of(record),
                        batch.timestamp_type,
                        record.key,
                        record.value,
                        record.headers,
                    )
                )
    return rows


def assert_decodes(buf: bytes, start: int = 0, end: int = 1 << 62) -> RecordColumns:
    expected = reference_rows(buf, start, end)
    decoded = {}
    for use_numpy in (True, False):
        columns = decode_columns(buf, start, end, use_numpy=use_numpy)
        assert list(columns.rows()) == expected
        assert columns.count == len(expected)
        decoded[use_numpy] = columns
    assert_arrow(decoded[True], expected)
    return decoded[True]


def assert_arrow(columns: RecordColumns, expected: list[Row]) -> None:
    arrays = columns.to_arrow()
    assert arrays["offset"].to_pylist() == [row[0] for row in expected]
    assert arrays["timestamp"].type == pa.timestamp("us", tz="UTC")
    assert arrays["timestamp"].cast(pa.int64()).to_pylist() == [row[1] * 1000 for row in expected]
    assert arrays["timestampType"].type == pa.int32()
    assert arrays["timestampType"].to_pylist() == [row[2] for row in expected]
    assert arrays["key"].type == pa.binary()
    assert arrays["key"].to_pylist() == [row[3] for row in expected]
    assert arrays["value"].to_pylist() == [row[4] for row in expected]
    assert arrays["headers"].type == header_arrow_type()
    assert arrays["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in row[5]] for row in expected
    ]
    for array in arrays.values():
        array.validate(full=True)


def sample_records(count: int, *, base_timestamp: int = 1_700_000_000_000) -> list[tuple]:
    out = []
    for i in range(count):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else bytes([i % 251]) * (i * 13 % 300)
        headers = [("trace", b"t%d" % i), ("null", None)] if i % 3 == 0 else None
        out.append((key, value, headers, base_timestamp + i * 3 - (40 if i % 5 == 0 else 0)))
    return out


@pytest.mark.parametrize("codec", list(Codec), ids=[c.name.lower() for c in Codec])
def test_own_batches_every_codec(codec: Codec) -> None:
    records = sample_records(200)
    buf = b"".join(
        build_record_batch(records[i : i + 50], base_offset=1000 + i, codec=codec)
        for i in range(0, 200, 50)
    )
    columns = assert_decodes(buf)
    assert columns.count == 200
    assert columns.next_offset == 1200
    assert columns.bytes_consumed == len(buf)
    assert_decodes(buf, 1017, 1133)  # a range cutting batches on both sides


@pytest.mark.parametrize("codec", list(Codec), ids=[c.name.lower() for c in Codec])
def test_uniform_records_take_the_run_path(codec: Codec) -> None:
    """Same-size values: the record starts are found in runs; offset deltas past 63 and
    timestamp deltas past 63 ms change the record size mid-batch."""
    records = [(None, b"v%07d" % i + bytes(92), None, 1000 + i // 3) for i in range(3000)]
    buf = build_record_batch(records, base_offset=7, codec=codec)
    columns = assert_decodes(buf)
    assert columns.count == 3000


def test_varying_sizes_take_the_single_step_path() -> None:
    records = [(b"k", b"x" * (i % 5 + (300 if i % 97 == 0 else 0)), None, 1) for i in range(5000)]
    assert_decodes(build_record_batch(records))


def test_partial_tail_and_next_offset() -> None:
    first = build_record_batch(sample_records(10), base_offset=0)
    second = build_record_batch(sample_records(10), base_offset=10)
    for cut in (1, 12, 61, len(second) - 1):
        buf = first + second[:cut]
        for use_numpy in (True, False):
            columns = decode_columns(buf, use_numpy=use_numpy)
            assert [row[0] for row in columns.rows()] == list(range(10))
            assert columns.next_offset == 10
            assert columns.bytes_consumed == len(first)
    nothing = decode_columns(second[:40])
    assert (nothing.count, nothing.next_offset, nothing.bytes_consumed) == (0, None, 0)


def test_control_batches_are_skipped_but_advance_next_offset() -> None:
    data = build_record_batch(
        sample_records(5), base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0,
        is_transactional=True,
    )
    marker = build_end_transaction_marker_batch(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=0, coordinator_epoch=1,
        base_offset=5,
    )
    columns = assert_decodes(data + marker)
    assert columns.count == 5
    assert columns.next_offset == 6


def test_log_append_time() -> None:
    buf = build_record_batch(
        [(None, b"a"), (None, b"b")], timestamp_type=1, base_timestamp=123_456
    )
    columns = assert_decodes(buf)
    assert list(columns.timestamps) == [123_456, 123_456]
    assert list(columns.timestamp_types) == [1, 1]


def test_legacy_message_sets_decode_through_the_python_path() -> None:
    buf = build_legacy_message_set(
        [(b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(5)], magic=1, codec=Codec.GZIP
    )
    for use_numpy in (True, False):
        columns = decode_columns(buf, 1, 4, use_numpy=use_numpy)
        assert [(r[0], r[1], r[3], r[4]) for r in columns.rows()] == [
            (i, 1000 + i, b"k%d" % i, b"v%d" % i) for i in (1, 2, 3)
        ]


def test_bad_crc_and_bad_records() -> None:
    buf = bytearray(build_record_batch(sample_records(20)))
    buf[-3] ^= 0xFF
    for use_numpy in (True, False):
        with pytest.raises(CorruptMessageError):
            decode_columns(bytes(buf), use_numpy=use_numpy)
        decode_columns(bytes(buf), use_numpy=use_numpy, check_crcs=False)  # no framing damage


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x02\x00\x00\x00\x00", id="record-too-short"),
        pytest.param(b"\x14\x00\x00\x00\x01\x0cabc\x00", id="length-past-batch"),
        pytest.param(b"\x0c\x00\x00\x00\x7e\x00\x00", id="key-past-record"),
        pytest.param(b"\x0e\x00\x00\x00\x01\x02ab\x00", id="bytes-left-in-record"),
    ],
)
def test_malformed_records_are_invalid_record(payload: bytes) -> None:
    good = build_record_batch([(None, b"x")])
    header = bytearray(good[:61])
    batch = header + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    for use_numpy in (True, False):
        with pytest.raises(InvalidRecordError):
            decode_columns(bytes(batch), use_numpy=use_numpy)


def test_concat_columns() -> None:
    a = decode_columns(build_record_batch(sample_records(30), base_offset=0))
    b = decode_columns(build_record_batch(sample_records(30), base_offset=30, codec=Codec.ZSTD))
    both = concat_columns([a, b])
    assert list(both.rows()) == list(a.rows()) + list(b.rows())
    assert both.next_offset == 60


@pytest.mark.parametrize("codec", list(Codec), ids=[c.name.lower() for c in Codec])
def test_kafka_python_builder_every_codec(codec: Codec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        kafka.codec,
        "snappy",
        types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        ),
    )
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    expected = []
    for i, (key, value, headers, timestamp) in enumerate(sample_records(300)):
        hdrs = [(k, v) for k, v in headers or [] if v is not None]
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=hdrs)
        expected.append((i, timestamp, 0, key, value, hdrs))
    buf = bytes(builder.build())
    assert_decodes(buf)
    assert list(decode_columns(buf).rows()) == expected


@pytest.mark.parametrize("codec", list(Codec), ids=[c.name.lower() for c in Codec])
def test_librdkafka_batches_every_codec(codec: Codec) -> None:
    records = sample_records(400)
    with FakeBroker() as broker:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{broker.port}",
                "acks": 0,
                "compression.type": CODEC_NAMES[codec],
                "linger.ms": 20,
                "batch.num.messages": 150,
                "message.timeout.ms": 15000,
                "log_level": 0,
            }
        )
        try:
            for key, value, headers, timestamp in records:
                producer.produce(
                    "test", key=key, value=value, headers=headers, timestamp=timestamp
                )
            assert producer.flush(15) == 0
            payloads = collect(broker, len(records))
        finally:
            del producer
    decoded: list[Row] = []
    for produced in payloads:
        columns = assert_decodes(produced.records)
        decoded.extend(columns.rows())
    assert [row[3:5] for row in decoded] == [(key, value) for key, value, _h, _t in records]
    assert [row[1] for row in decoded] == [t for _k, _v, _h, t in records]
    assert [row[5] for row in decoded] == [h or [] for _k, _v, h, _t in records]


blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=300))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3
)
record_lists = st.lists(
    st.tuples(blobs, blobs, header_lists, st.integers(0, 1 << 41)), min_size=1, max_size=60
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(record_lists, min_size=1, max_size=4),
    codec=st.sampled_from(list(Codec)),
    bounds=st.tuples(st.integers(0, 250), st.integers(0, 250)),
)
def test_round_trip(batches: list[list[tuple]], codec: Codec, bounds: tuple[int, int]) -> None:
    buf = b""
    offset = 0
    for records in batches:
        buf += build_record_batch(records, base_offset=offset, codec=codec)
        offset += len(records)
    start, end = min(bounds), max(bounds)
    assert_decodes(buf, start, end)
    assert_decodes(buf)
