"""v2 record batches: building, the header view, records, control batches, rewrites."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkaclone.common.errors import CorruptMessageError, InvalidRecordError
from kafkaclone.protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    Codec,
    ControlRecordType,
    EndTransactionMarker,
    LegacyRecordBatch,
    Record,
    RecordBatch,
    build_end_transaction_marker_batch,
    build_legacy_message_set,
    build_record_batch,
    decode_control_record_key,
    encode_control_record_key,
    encode_record,
    iter_batches,
    unpack_header,
    validate_batches,
)
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER,
    LAST_OFFSET_DELTA_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
)
from kafkaclone.protocol.records.common import MAGIC_OFFSET, OFFSET_OFFSET, SIZE_OFFSET
from kafkaclone.protocol.records.record import (
    append_varint,
    append_varlong,
    decode_record,
    read_varint,
    read_varlong,
)

headers_strategy = st.lists(
    st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=4
)
record_tuples = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=50),
        st.none() | st.binary(max_size=300),
        headers_strategy,
        st.integers(min_value=0, max_value=2**41),
    ),
    min_size=1,
    max_size=40,
)


def only_batch(buf: bytes | bytearray | memoryview) -> RecordBatch:
    (batch,) = iter_batches(buf, allow_partial_tail=False)
    assert isinstance(batch, RecordBatch)
    return batch


@settings(max_examples=80, deadline=None)
@given(items=record_tuples, codec=st.sampled_from(list(Codec)), base_offset=st.integers(0, 2**40))
def test_round_trip(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Codec,
    base_offset: int,
) -> None:
    buf = build_record_batch(items, base_offset=base_offset, codec=codec)
    batch = only_batch(buf)
    batch.ensure_valid()
    batch.validate_offset_range()
    assert batch.compression is codec
    assert batch.base_offset == base_offset
    assert batch.records_count == len(items)
    assert batch.last_offset == base_offset + len(items) - 1
    assert batch.base_timestamp == items[0][3]
    assert batch.max_timestamp == max(item[3] for item in items)
    decoded = [
        (r.key, r.value, r.headers, batch.timestamp_of(r), batch.offset_of(r))
        for r in batch.records()
    ]
    expected = [
        (key, value, headers, timestamp, base_offset + i)
        for i, (key, value, headers, timestamp) in enumerate(items)
    ]
    assert decoded == expected


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_many_records_and_nulls(codec: Codec) -> None:
    items = [
        (
            None if i % 3 == 0 else b"key%d" % i,
            None if i % 5 == 0 else b"v" * (i % 300),
            [(f"h{j}", None if j == 1 else b"x" * j) for j in range(i % 4)],
            1000 + i,
        )
        for i in range(10_000)
    ]
    batch = only_batch(build_record_batch(items, codec=codec))
    batch.ensure_valid()
    records = list(batch.records())
    assert len(records) == 10_000
    assert [(r.key, r.value, r.headers) for r in records] == [item[:3] for item in items]
    assert [r.offset_delta for r in records] == list(range(10_000))


def test_header_fields_and_flags() -> None:
    buf = build_record_batch(
        [(b"k", b"v", None, 2000), (b"k", b"v", None, 1500)],
        base_offset=42,
        codec=Codec.GZIP,
        producer_id=7,
        producer_epoch=3,
        base_sequence=100,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    batch = only_batch(buf)
    assert (batch.magic, batch.batch_length, batch.size_in_bytes) == (2, len(buf) - 12, len(buf))
    assert (batch.base_offset, batch.last_offset_delta, batch.last_offset) == (42, 1, 43)
    assert batch.next_offset == 44
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 100)
    assert batch.last_sequence == 101
    assert batch.has_producer_id
    assert batch.partition_leader_epoch == 9
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == 0
    assert (batch.base_timestamp, batch.max_timestamp) == (2000, 2000)
    assert batch.attributes == 0x10 | Codec.GZIP
    assert batch.crc == crc32c.crc32c(buf[21:]) == batch.compute_crc()
    assert batch.header_bytes().tobytes() == buf[:RECORD_BATCH_OVERHEAD]
    assert batch.to_bytes() == buf
    header = unpack_header(buf)
    assert header == batch.header
    assert (header.magic, header.records_count, header.last_offset) == (2, 2, 43)
    assert "base_offset=42" in repr(batch)


def test_layout_offsets_match_the_header_format() -> None:
    """Each named offset is where HEADER puts its field; the header is the whole overhead."""
    offsets = [
        OFFSET_OFFSET,
        SIZE_OFFSET,
        PARTITION_LEADER_EPOCH_OFFSET,
        MAGIC_OFFSET,
        CRC_OFFSET,
        ATTRIBUTES_OFFSET,
        LAST_OFFSET_DELTA_OFFSET,
        BASE_TIMESTAMP_OFFSET,
        MAX_TIMESTAMP_OFFSET,
        PRODUCER_ID_OFFSET,
        PRODUCER_EPOCH_OFFSET,
        BASE_SEQUENCE_OFFSET,
        RECORDS_COUNT_OFFSET,
    ]
    codes = HEADER.format.lstrip(">")
    assert len(codes) == len(offsets) == len(BatchHeader._fields)
    assert offsets == [struct.calcsize(">" + codes[:i]) for i in range(len(codes))]
    assert HEADER.size == RECORD_BATCH_OVERHEAD


def test_batch_header_derived_fields() -> None:
    header = unpack_header(
        build_record_batch(
            [(b"k", b"v")] * 3,
            base_offset=10,
            codec=Codec.LZ4,
            timestamp_type=LOG_APPEND_TIME,
            base_timestamp=5,
            producer_id=4,
            base_sequence=0x7FFFFFFF,
        )
    )
    assert (header.last_offset, header.next_offset) == (12, 13)
    assert header.compression_codec == Codec.LZ4
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.has_producer_id and not header.is_transactional and not header.is_control
    assert header.last_sequence == 1  # wraps past int32 max
    marker = unpack_header(
        build_end_transaction_marker_batch(
            ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0
        )
    )
    assert marker.is_control and marker.is_transactional


def test_header_is_read_again_after_a_rewrite() -> None:
    buf = bytearray(build_record_batch([(b"k", b"v")]))
    batch = only_batch(buf)
    assert batch.header.base_offset == 0
    batch.set_base_offset(77)
    assert batch.header.base_offset == 77 and batch.last_offset == 77


def test_identical_bytes_to_kafka_python_builder() -> None:
    """An uncompressed batch is fully determined by its content: ours and kafka-python's
    must agree byte for byte."""
    theirs = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (b"key", b"value", [("a", b"b")], 1_700_000_000_000 + i) for i in range(5)
    ]
    items.append((None, None, [], 1_700_000_000_000 - 1))
    for i, (key, value, headers, timestamp) in enumerate(items):
        theirs.append(i, timestamp, key, value, headers)
    # kafka-python (like librdkafka) writes partitionLeaderEpoch 0; the Java client -1
    assert build_record_batch(items, partition_leader_epoch=0) == bytes(theirs.build())


def test_last_sequence_wraps() -> None:
    batch = only_batch(
        build_record_batch(
            [(None, b"x")] * 3,
            producer_id=1,
            producer_epoch=0,
            base_sequence=2**31 - 2,
            base_timestamp=0,
        )
    )
    assert batch.last_sequence == 0
    no_seq = only_batch(build_record_batch([(None, b"x")], base_timestamp=0))
    assert no_seq.last_sequence == -1


def test_record_objects_keep_their_deltas() -> None:
    records = [
        Record(timestamp_delta=-5, offset_delta=0, key=b"a", value=b"1"),
        Record(timestamp_delta=20, offset_delta=3, key=b"b", value=None, headers=[("h", b"")]),
    ]
    batch = only_batch(build_record_batch(records, base_offset=10, base_timestamp=1000))
    assert batch.last_offset_delta == 3
    assert batch.max_timestamp == 1020
    assert list(batch.records()) == records
    assert [batch.offset_of(r) for r in records] == [10, 13]
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        batch.validate_offset_range()  # 2 records, offsets 10..13: not what a producer sends


def test_log_append_time() -> None:
    batch = only_batch(
        build_record_batch(
            [(b"k", b"v", None, 5)], timestamp_type=LOG_APPEND_TIME, base_timestamp=5
        )
    )
    assert batch.timestamp_type == LOG_APPEND_TIME
    (record,) = batch.records()
    assert batch.timestamp_of(record) == batch.max_timestamp == 5


def test_empty_batch_left_by_compaction() -> None:
    batch = only_batch(build_record_batch([], codec=Codec.NONE, base_timestamp=0))
    assert batch.records_count == 0 and list(batch.records()) == []
    compressed = bytearray(build_record_batch([], codec=Codec.LZ4, base_timestamp=0))
    del compressed[RECORD_BATCH_OVERHEAD:]  # Kafka writes no payload at all for those
    struct.pack_into(">i", compressed, 8, RECORD_BATCH_OVERHEAD - 12)
    struct.pack_into(">I", compressed, 17, crc32c.crc32c(bytes(compressed[21:])))
    empty = only_batch(compressed)
    empty.ensure_valid()
    assert list(empty.records()) == []


# -- control batches --------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_end_transaction_marker_batch(control_type: ControlRecordType) -> None:
    buf = build_end_transaction_marker_batch(
        control_type,
        producer_id=1234,
        producer_epoch=5,
        coordinator_epoch=77,
        base_offset=900,
        partition_leader_epoch=3,
        timestamp=123,
    )
    batch = only_batch(buf)
    batch.ensure_valid()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1234, 5, -1)
    assert (batch.base_offset, batch.records_count, batch.max_timestamp) == (900, 1, 123)
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 77)
    marker = EndTransactionMarker.from_record(record)
    assert marker == EndTransactionMarker(control_type, 77)


def test_control_record_keys() -> None:
    assert encode_control_record_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert decode_control_record_key(b"\x00\x00\x00\x00") is ControlRecordType.ABORT
    assert decode_control_record_key(b"\x00\x01\x00\x01extra") is ControlRecordType.COMMIT
    assert decode_control_record_key(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN
    for bad in (None, b"", b"\x00\x00\x00"):
        with pytest.raises(InvalidRecordError):
            decode_control_record_key(bad)
    with pytest.raises(InvalidRecordError):
        decode_control_record_key(b"\xff\xff\x00\x01")  # negative version
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.decode(b"\x00\x00\x00\x01", b"\x00\x00\x00")
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.decode(b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x00")
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.decode(b"\x00\x00\x00\x01", None)


# -- in-place rewrites ------------------------------------------------------------------


def test_set_base_offset_and_leader_epoch_keep_the_crc() -> None:
    buf = bytearray(build_record_batch([(b"k", b"v", None, 10)] * 3, codec=Codec.SNAPPY))
    crc_before = bytes(buf[17:21])
    batch = only_batch(buf)
    batch.set_base_offset(123_456_789_012)
    batch.set_partition_leader_epoch(17)
    assert (batch.base_offset, batch.partition_leader_epoch) == (123_456_789_012, 17)
    assert bytes(buf[17:21]) == crc_before
    batch.ensure_valid()
    again = only_batch(buf)  # the writes went to the original buffer
    assert (again.base_offset, again.partition_leader_epoch, again.last_offset) == (
        123_456_789_012,
        17,
        123_456_789_014,
    )
    again.ensure_valid()


def test_set_max_timestamp_recomputes_the_crc() -> None:
    buf = bytearray(build_record_batch([(b"k", b"v", None, 10), (b"k", b"v", None, 30)]))
    batch = only_batch(memoryview(buf))
    crc_before = batch.crc
    batch.set_max_timestamp(LOG_APPEND_TIME, 99_999)
    assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == 99_999
    assert batch.crc != crc_before
    batch.ensure_valid()
    reread = only_batch(buf)
    reread.ensure_valid()
    assert reread.attributes & 0x08
    assert [reread.timestamp_of(r) for r in reread.records()] == [99_999, 99_999]
    reread.set_max_timestamp(0, 30)  # back to CreateTime
    assert not only_batch(buf).attributes & 0x08
    only_batch(buf).ensure_valid()


def test_set_max_timestamp_unchanged_writes_nothing() -> None:
    original = build_record_batch([(b"k", b"v", None, 10)])
    buf = bytearray(original)
    only_batch(buf).set_max_timestamp(0, 10)
    assert bytes(buf) == original
    only_batch(original).set_max_timestamp(0, 10)  # even on a read-only buffer


def test_rewrites_need_a_writable_buffer() -> None:
    batch = only_batch(build_record_batch([(b"k", b"v")]))
    with pytest.raises(TypeError):
        batch.set_base_offset(1)
    with pytest.raises(TypeError):
        batch.set_max_timestamp(1, 5)


# -- iteration --------------------------------------------------------------------------


def test_iteration_is_zero_copy_and_mixed_formats() -> None:
    v2 = build_record_batch([(b"a", b"1")], base_offset=0)
    legacy = build_legacy_message_set([(b"b", b"2", 7)], magic=1, base_offset=1)
    v0 = build_legacy_message_set([(b"c", b"3")], magic=0, base_offset=2)
    buf = bytearray(v2 + legacy + v0 + v2)
    entries = list(iter_batches(buf, allow_partial_tail=False))
    assert [type(e) for e in entries] == [
        RecordBatch,
        LegacyRecordBatch,
        LegacyRecordBatch,
        RecordBatch,
    ]
    assert [e.magic for e in entries] == [2, 1, 0, 2]
    for entry in entries:
        assert entry.view.obj is buf  # a view of the caller's buffer, not a copy
        entry.ensure_valid()
    assert validate_batches(buf) == 4
    assert list(iter_batches(b"", allow_partial_tail=False)) == []


def test_partial_tail() -> None:
    one = build_record_batch([(b"k", b"v" * 100)])
    buf = one + one
    for cut in range(len(one) + 1, len(buf)):
        batches = list(iter_batches(buf[:cut], allow_partial_tail=True))
        assert len(batches) == 1
        with pytest.raises(CorruptMessageError):
            list(iter_batches(buf[:cut], allow_partial_tail=False))


def test_constructor_checks_bounds() -> None:
    buf = build_record_batch([(b"k", b"v")])
    assert RecordBatch(buf + b"trailing").size_in_bytes == len(buf)
    with pytest.raises(CorruptMessageError):
        RecordBatch(buf[:-1])
    with pytest.raises(CorruptMessageError):
        RecordBatch(buf[:60])
    legacy = build_legacy_message_set([(b"k", b"v")], magic=1)
    with pytest.raises(CorruptMessageError):
        RecordBatch(legacy + bytes(64))


# -- records and varints ----------------------------------------------------------------


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    append_varint(out, value)
    assert len(out) <= 5
    assert read_varint(bytes(out), 0) == (value, len(out))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    out = bytearray()
    append_varlong(out, value)
    assert len(out) <= 10
    assert read_varlong(bytes(out), 0) == (value, len(out))


def test_known_varint_encodings() -> None:
    for value, encoded in [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (64, b"\x80\x01"),
    ]:
        out = bytearray()
        append_varint(out, value)
        assert bytes(out) == encoded


def test_varints_that_never_end() -> None:
    with pytest.raises(InvalidRecordError):
        read_varint(b"\xff" * 5 + b"\x00", 0)
    with pytest.raises(InvalidRecordError):
        read_varlong(b"\xff" * 10 + b"\x00", 0)
    with pytest.raises(InvalidRecordError):
        read_varint(b"\xff\xff", 0)
    assert read_varint(b"\xff\xff\xff\xff\x0f", 0) == (-(2**31), 5)


@given(
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=200),
    headers=headers_strategy,
    timestamp_delta=st.integers(-(2**40), 2**40),
    offset_delta=st.integers(0, 2**31 - 1),
)
def test_record_round_trip(
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    timestamp_delta: int,
    offset_delta: int,
) -> None:
    record = Record(0, timestamp_delta, offset_delta, key, value, headers)
    encoded = encode_record(record)
    assert decode_record(encoded) == (record, len(encoded))


def test_header_keys_round_trip_even_when_not_utf8() -> None:
    record = Record(key=b"k", headers=[("caf\u00e9", b"1"), ("\udcff", b"2")])
    assert decode_record(encode_record(record))[0] == record
