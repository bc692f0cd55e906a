"""Legacy message sets (magic 0 and 1): building, deep iteration, Kafka's wrapper rules."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaclone.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkaclone.protocol.records import (
    LOG_APPEND_TIME,
    Codec,
    LegacyRecord,
    LegacyRecordBatch,
    build_legacy_message_set,
    compress,
    decompress,
    iter_legacy_entries,
    iter_legacy_records,
)

LEGACY_CODECS = [c for c in Codec if c is not Codec.ZSTD]


def message(
    offset: int,
    *,
    magic: int,
    attributes: int = 0,
    timestamp: int = 0,
    key: bytes | None = None,
    value: bytes | None = None,
) -> bytes:
    """One log entry, encoded independently of the code under test."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def entries(buf: bytes | bytearray) -> list[LegacyRecordBatch]:
    return list(iter_legacy_entries(buf, allow_partial_tail=False))


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=200),
            st.integers(0, 2**42),
        ),
        min_size=1,
        max_size=30,
    ),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    base_offset=st.integers(0, 2**40),
)
def test_round_trip(
    items: list[tuple[bytes | None, bytes | None, int]], magic: int, codec: Codec, base_offset: int
) -> None:
    buf = build_legacy_message_set(items, magic=magic, codec=codec, base_offset=base_offset)
    decoded = list(iter_legacy_records(buf))
    expected = [
        LegacyRecord(
            base_offset + i,
            timestamp if magic else -1,
            key,
            value,
            0 if magic else -1,
            magic,
        )
        for i, (key, value, timestamp) in enumerate(items)
    ]
    assert decoded == expected
    shallow = entries(buf)
    assert len(shallow) == (len(items) if codec is Codec.NONE else 1)
    for entry in shallow:
        entry.ensure_valid()
        assert entry.magic == magic


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4], ids=lambda c: c.name)
def test_magic_1_wrapper_layout(codec: Codec) -> None:
    buf = build_legacy_message_set(
        [(b"a", b"1", 50), (b"b", b"2", 70), (None, b"3", 60)],
        magic=1,
        codec=codec,
        base_offset=1000,
    )
    (wrapper,) = entries(buf)
    assert wrapper.offset == wrapper.last_offset == 1002
    assert wrapper.next_offset == 1003
    assert wrapper.timestamp == 70  # the largest inner timestamp
    assert wrapper.key is None
    assert wrapper.compression is codec and wrapper.is_compressed
    assert wrapper.value is not None
    inner = entries(decompress(codec, wrapper.value))
    assert [e.offset for e in inner] == [0, 1, 2]  # relative
    assert [e.timestamp for e in inner] == [50, 70, 60]
    assert [r.offset for r in wrapper.records()] == [1000, 1001, 1002]


def test_magic_0_wrapper_has_absolute_inner_offsets() -> None:
    buf = build_legacy_message_set(
        [(b"a", b"1"), (b"b", b"2")], magic=0, codec=Codec.GZIP, base_offset=500
    )
    (wrapper,) = entries(buf)
    assert wrapper.offset == 501 and wrapper.timestamp == -1 and wrapper.timestamp_type == -1
    assert wrapper.value is not None
    assert [e.offset for e in entries(decompress(Codec.GZIP, wrapper.value))] == [500, 501]
    assert [r.offset for r in wrapper.records()] == [500, 501]


@pytest.mark.parametrize("magic", [0, 1])
def test_explicit_offsets_with_gaps(magic: int) -> None:
    """Down-conversion of a compacted log keeps the surviving offsets."""
    records = [
        LegacyRecord(10, 100, b"a", b"1"),
        LegacyRecord(13, 130, b"b", b"2"),
        LegacyRecord(20, 200, b"c", None),
    ]
    for codec in LEGACY_CODECS:
        buf = build_legacy_message_set(records, magic=magic, codec=codec)
        decoded = list(iter_legacy_records(buf))
        assert [(r.offset, r.key, r.value) for r in decoded] == [
            (10, b"a", b"1"),
            (13, b"b", b"2"),
            (20, b"c", None),
        ]


def test_zstd_needs_magic_2() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        build_legacy_message_set([(b"k", b"v")], magic=1, codec=Codec.ZSTD)
    inner = message(0, magic=1, value=b"v")
    wrapper = message(0, magic=1, attributes=Codec.ZSTD, value=compress(Codec.ZSTD, inner))
    (entry,) = entries(wrapper)
    with pytest.raises(InvalidRecordError):
        list(entry.records())


def test_empty_input_builds_nothing() -> None:
    assert build_legacy_message_set([], magic=1) == b""


# -- Kafka's rules for wrappers -----------------------------------------------------------


def wrapper_of(
    inner: bytes, *, offset: int, magic: int = 1, attributes: int = 0, timestamp: int = 0
) -> LegacyRecordBatch:
    value = compress(Codec.GZIP, inner, magic=magic)
    (entry,) = entries(
        message(
            offset,
            magic=magic,
            attributes=Codec.GZIP | attributes,
            timestamp=timestamp,
            value=value,
        )
    )
    return entry


def test_wrapper_offset_zero_means_base_zero() -> None:
    """Some librdkafka versions send magic 1 wrappers with offset 0."""
    inner = message(0, magic=1, value=b"a") + message(1, magic=1, value=b"b")
    assert [r.offset for r in wrapper_of(inner, offset=0).records()] == [0, 1]


def test_wrapper_offset_below_last_inner_offset() -> None:
    inner = message(0, magic=1, value=b"a") + message(5, magic=1, value=b"b")
    with pytest.raises(InvalidRecordError):
        list(wrapper_of(inner, offset=3).records())


def test_log_append_time_wrapper_stamps_inner_messages() -> None:
    inner = message(0, magic=1, timestamp=1, value=b"a") + message(
        1, magic=1, timestamp=2, value=b"b"
    )
    wrapper = wrapper_of(inner, offset=101, attributes=0x08, timestamp=999)
    assert wrapper.timestamp_type == LOG_APPEND_TIME
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in wrapper.records()] == [
        (100, 999, LOG_APPEND_TIME),
        (101, 999, LOG_APPEND_TIME),
    ]
    create_time = wrapper_of(inner, offset=101, timestamp=2)
    assert [r.timestamp for r in create_time.records()] == [1, 2]


@pytest.mark.parametrize(
    ("inner", "error"),
    [
        (message(0, magic=0, value=b"a"), InvalidRecordError),  # magic differs from wrapper
        (
            message(
                0,
                magic=1,
                attributes=Codec.GZIP,
                value=compress(Codec.GZIP, message(0, magic=1, value=b"x")),
            ),
            InvalidRecordError,
        ),
        (b"", InvalidRecordError),  # no inner messages
        (message(0, magic=1, value=b"a")[:-1], CorruptMessageError),  # inner cut short
        (message(0, magic=1, value=b"abc")[:-1] + b"X", CorruptMessageError),  # inner CRC
        (message(0, magic=1, value=b"a") + b"\x00" * 5, CorruptMessageError),  # partial tail
    ],
    ids=["magic-mismatch", "nested-compression", "empty", "truncated", "bad-crc", "partial"],
)
def test_bad_inner_message_sets(inner: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        list(wrapper_of(inner, offset=5).records())


def test_wrapper_with_null_value() -> None:
    (entry,) = entries(message(0, magic=1, attributes=Codec.GZIP, value=None))
    with pytest.raises(InvalidRecordError):
        list(entry.records())


# -- the entry view -----------------------------------------------------------------------


def test_entry_fields() -> None:
    buf = message(77, magic=1, attributes=0x08, timestamp=1234, key=b"key", value=None)
    (entry,) = entries(buf)
    assert (entry.offset, entry.magic, entry.timestamp, entry.timestamp_type) == (77, 1, 1234, 1)
    assert (entry.key, entry.value) == (b"key", None)
    assert entry.size_in_bytes == len(buf) and entry.message_size == len(buf) - 12
    assert entry.crc == zlib.crc32(buf[16:]) == entry.compute_crc()
    assert entry.is_valid() and not entry.is_compressed and entry.compression is Codec.NONE
    assert entry.to_bytes() == buf
    assert "offset=77" in repr(entry)
    v0 = entries(message(1, magic=0, key=None, value=b""))[0]
    assert (v0.timestamp, v0.timestamp_type, v0.key, v0.value) == (-1, -1, None, b"")


def test_rewrites() -> None:
    buf = bytearray(message(5, magic=1, timestamp=10, value=b"v") + message(6, magic=0, value=b"w"))
    v1, v0 = entries(buf)
    v1.set_last_offset(1_000_000)
    v1.ensure_valid()
    v1.set_max_timestamp(LOG_APPEND_TIME, 555)
    v1.ensure_valid()
    reread = entries(buf)[0]
    assert (reread.offset, reread.timestamp, reread.timestamp_type) == (1_000_000, 555, 1)
    reread.ensure_valid()
    with pytest.raises(UnsupportedForMessageFormatError):
        v0.set_max_timestamp(LOG_APPEND_TIME, 1)
    with pytest.raises(TypeError):
        entries(bytes(buf))[0].set_last_offset(3)


def test_flipped_byte_fails_the_crc() -> None:
    buf = bytearray(message(0, magic=1, key=b"k", value=b"value"))
    for position in range(16, len(buf)):
        flipped = bytearray(buf)
        flipped[position] ^= 0x01
        try:
            (entry,) = entries(flipped)
        except CorruptMessageError:
            continue  # a length field broke the framing
        assert not entry.is_valid()
        with pytest.raises(CorruptMessageError):
            entry.ensure_valid()


def test_bad_entry_framing() -> None:
    good = message(0, magic=1, key=b"k", value=b"v")
    with pytest.raises(CorruptMessageError):
        LegacyRecordBatch(good[:-1])
    with pytest.raises(CorruptMessageError):  # below the magic 1 minimum
        LegacyRecordBatch(struct.pack(">qi", 0, 14) + b"\x00" * 4 + b"\x01" + b"\x00" * 9)
    with pytest.raises(CorruptMessageError):  # key longer than the message
        LegacyRecordBatch(
            message(0, magic=0, key=b"k", value=b"v")[:18]
            + struct.pack(">i", 100)
            + b"k"
            + struct.pack(">i", 1)
            + b"v"
        )
    with pytest.raises(CorruptMessageError):  # value shorter than the message
        LegacyRecordBatch(message(0, magic=0, value=b"vv")[:-3] + struct.pack(">i", 1) + b"vv")
    with pytest.raises(CorruptMessageError):  # magic 2 is not a legacy message
        LegacyRecordBatch(good[:16] + b"\x02" + good[17:])
