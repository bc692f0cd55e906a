"""Hostile input: every failure is a typed KafkaError, raised quickly, with no big allocation."""

from __future__ import annotations

import struct
import time

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaclone.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    KafkaError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from kafkaclone.protocol.records import (
    Codec,
    RecordBatch,
    build_legacy_message_set,
    build_record_batch,
    compress,
    iter_batches,
    iter_legacy_entries,
    iter_legacy_records,
)
from kafkaclone.protocol.records.batch import RECORD_BATCH_OVERHEAD

ITEMS = [
    (b"key-%d" % i, b"value " * (i % 30), [("h", b"x")] if i % 2 else None, 1000 + i)
    for i in range(40)
]
BATCHES = {codec: build_record_batch(ITEMS, codec=codec, base_offset=100) for codec in Codec}


def with_crc(buf: bytes | bytearray) -> bytes:
    """The batch with its CRC made valid again, so that what lies behind it is reached."""
    out = bytearray(buf)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def with_records(records: bytes, *, count: int, codec: Codec = Codec.NONE) -> bytes:
    """A well-framed batch with a valid CRC around an arbitrary records section."""
    header = bytearray(BATCHES[Codec.NONE][:RECORD_BATCH_OVERHEAD])
    body = compress(codec, records) if codec is not Codec.NONE else records
    struct.pack_into(">i", header, 8, RECORD_BATCH_OVERHEAD - 12 + len(body))
    struct.pack_into(">h", header, 21, codec.value)
    struct.pack_into(">i", header, 23, max(count - 1, 0))
    struct.pack_into(">i", header, 57, count)
    return with_crc(header + body)


def consume_everything(buf: bytes | bytearray, *, allow_partial_tail: bool = False) -> None:
    """What a broker or a consumer may do with a buffer: iterate, validate, decode."""
    for batch in iter_batches(buf, allow_partial_tail=allow_partial_tail):
        batch.ensure_valid()
        if isinstance(batch, RecordBatch):
            batch.validate_offset_range()
            for record in batch.records(max_decompressed_size=1 << 20):
                assert record.offset_delta is not None
        else:
            for legacy in batch.records(max_decompressed_size=1 << 20):
                assert legacy.offset is not None


# -- truncation ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_truncated_at_every_cut_point(codec: Codec) -> None:
    buf = BATCHES[codec]
    for cut in range(1, len(buf)):
        with pytest.raises(CorruptMessageError):
            list(iter_batches(buf[:cut], allow_partial_tail=False))
        assert list(iter_batches(buf[:cut], allow_partial_tail=True)) == []
        with pytest.raises(CorruptMessageError):
            RecordBatch(buf[:cut])


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_torn_batch_declared_shorter(codec: Codec) -> None:
    """A batch whose length was cut to fit what arrived: the framing holds, the CRC fails."""
    buf = BATCHES[codec]
    for cut in range(RECORD_BATCH_OVERHEAD, len(buf), 7):
        torn = bytearray(buf[:cut])
        struct.pack_into(">i", torn, 8, cut - 12)
        (batch,) = iter_batches(torn, allow_partial_tail=False)
        with pytest.raises(CorruptMessageError):
            batch.ensure_valid()


@pytest.mark.parametrize("magic", [0, 1])
def test_truncated_legacy_sets(magic: int) -> None:
    for codec in (Codec.NONE, Codec.GZIP):
        buf = build_legacy_message_set([(b"k", b"v" * 50, 5)] * 3, magic=magic, codec=codec)
        boundaries = {
            e.size_in_bytes * n
            for e in iter_legacy_entries(buf, allow_partial_tail=False)
            for n in (1, 2)
        }
        for cut in range(1, len(buf)):
            if cut in boundaries:
                continue  # a shorter, whole message set
            with pytest.raises(CorruptMessageError):
                consume_everything(buf[:cut])
            consume_everything(buf[:cut], allow_partial_tail=True)


# -- flipped bytes ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_every_flipped_byte_inside_the_crc_is_caught(codec: Codec) -> None:
    buf = BATCHES[codec]
    for position in range(16, len(buf)):  # baseOffset, length and leader epoch lie outside
        flipped = bytearray(buf)
        flipped[position] ^= 0xFF
        with pytest.raises(CorruptMessageError):
            consume_everything(flipped)


# -- lengths, magic, codec ----------------------------------------------------------------


@pytest.mark.parametrize("length", [-(2**31), -1, 0, 13, 48])
def test_bad_batch_lengths(length: int) -> None:
    buf = bytearray(BATCHES[Codec.NONE])
    struct.pack_into(">i", buf, 8, length)
    with pytest.raises(CorruptMessageError):
        list(iter_batches(buf, allow_partial_tail=True))
    with pytest.raises(CorruptMessageError):
        RecordBatch(buf)


def test_huge_batch_length_is_a_partial_tail() -> None:
    buf = bytearray(BATCHES[Codec.NONE])
    struct.pack_into(">i", buf, 8, 2**31 - 1)
    with pytest.raises(CorruptMessageError):
        list(iter_batches(buf, allow_partial_tail=False))
    assert list(iter_batches(buf, allow_partial_tail=True)) == []


@pytest.mark.parametrize("magic", [3, 4, 127, 128, 255])
def test_unknown_magic(magic: int) -> None:
    buf = bytearray(BATCHES[Codec.NONE])
    buf[16] = magic
    with pytest.raises(CorruptMessageError):
        list(iter_batches(buf, allow_partial_tail=True))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_in_a_valid_batch(codec_id: int) -> None:
    buf = bytearray(BATCHES[Codec.NONE])
    struct.pack_into(">h", buf, 21, codec_id)
    (batch,) = iter_batches(with_crc(buf), allow_partial_tail=False)
    batch.ensure_valid()  # the CRC is fine...
    with pytest.raises(UnsupportedCompressionTypeError):
        list(batch.records())  # ...the codec is not
    with pytest.raises(UnsupportedCompressionTypeError):
        _ = batch.compression


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE], ids=lambda c: c.name)
def test_corrupt_compressed_payload_behind_a_valid_crc(codec: Codec) -> None:
    buf = bytearray(BATCHES[codec])
    for position in range(RECORD_BATCH_OVERHEAD, len(buf)):
        mutated = bytearray(buf)
        mutated[position] ^= 0x5A
        (batch,) = iter_batches(with_crc(mutated), allow_partial_tail=False)
        batch.ensure_valid()
        try:
            list(batch.records())
        except (CorruptMessageError, InvalidRecordError, MessageTooLargeError):
            pass  # a flip inside a literal may also decompress, to different content


def test_garbage_payload_for_each_codec() -> None:
    for codec in Codec:
        batch = RecordBatch(with_records(b"\x00garbage" * 10, count=3, codec=Codec.NONE))
        raw = bytearray(batch.to_bytes())
        struct.pack_into(">h", raw, 21, codec.value)
        with pytest.raises((CorruptMessageError, InvalidRecordError)):
            list(RecordBatch(with_crc(raw)).records())


# -- record framing behind a valid CRC ----------------------------------------------------


def records_section() -> bytes:
    return RecordBatch(BATCHES[Codec.NONE]).records_bytes().tobytes()


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD], ids=lambda c: c.name)
def test_records_count_mismatch(codec: Codec) -> None:
    section = records_section()
    for count in (39, 41, 1000, 2**31 - 1):
        with pytest.raises(InvalidRecordError):
            list(RecordBatch(with_records(section, count=count, codec=codec)).records())
    batch = RecordBatch(with_records(section, count=-1, codec=codec))
    with pytest.raises(InvalidRecordError):
        list(batch.records())
    with pytest.raises(InvalidRecordError):
        batch.validate_offset_range()


def test_huge_record_count_fails_fast() -> None:
    started = time.monotonic()
    with pytest.raises(InvalidRecordError):
        list(RecordBatch(with_records(b"\x0c\x00\x00\x00\x01\x01\x00", count=2**31 - 1)).records())
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    "record",
    [
        b"\xff\xff\xff\xff\xff\xff\xff",  # the length varint never ends
        b"\x01",  # negative length
        b"\xfe\xff\xff\xff\x07",  # length far past the end
        b"\x0c\x00" + b"\xff" * 10 + b"\x01\x00\x01\x01\x00",  # timestamp varlong never ends
        b"\x0c\x00\x00\xff\xff\xff\xff\xff\x01\x01\x00",  # offset delta varint never ends
        b"\x0c\x00\x00\x00\x40\x01\x00",  # key runs past the record
        b"\x0c\x00\x00\x00\x01\x40\x00",  # value runs past the record
        b"\x0c\x00\x00\x00\x01\x01\x01",  # negative header count
        b"\x0c\x00\x00\x00\x01\x01\x02\x01\x00",  # negative header key length
        b"\x0e\x00\x00\x00\x01\x01\x02\x08ab\x00",  # header key past the record
        b"\x0e\x00\x00\x00\x01\x01\x00\x00",  # declared longer than its fields
        b"\x0a\x00\x00\x00\x01\x01\x00",  # declared shorter than its fields
        b"\x04\x00\x00",  # too short to hold the fields
        b"",  # no record at all
    ],
)
def test_bad_record_framing(record: bytes) -> None:
    with pytest.raises(InvalidRecordError):
        list(RecordBatch(with_records(record, count=1)).records())


def test_bytes_after_the_last_record() -> None:
    with pytest.raises(InvalidRecordError, match="remaining"):
        list(RecordBatch(with_records(records_section() + b"\x00", count=40)).records())


# -- fuzzing ------------------------------------------------------------------------------

FUZZ_SEEDS = [
    *BATCHES.values(),
    BATCHES[Codec.NONE] + BATCHES[Codec.GZIP],
    build_legacy_message_set([(b"k", b"v", 1)] * 5, magic=1, codec=Codec.SNAPPY),
    build_legacy_message_set([(b"k", b"v")] * 5, magic=0, codec=Codec.LZ4),
    build_legacy_message_set([(b"k", b"v", 1), (None, None, 2)], magic=1),
]

mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(min_value=0), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.integers(1, 16)),
    st.tuples(st.just("truncate"), st.integers(min_value=0), st.just(0)),
)


def mutate(buf: bytes, mutations: list[tuple[str, int, object]]) -> bytearray:
    out = bytearray(buf)
    for kind, where, what in mutations:
        position = where % (len(out) + 1)
        if kind == "set" and out:
            assert isinstance(what, int)
            out[position % len(out)] = what
        elif kind == "insert":
            assert isinstance(what, bytes)
            out[position:position] = what
        elif kind == "delete":
            assert isinstance(what, int)
            del out[position : position + what]
        elif kind == "truncate":
            del out[position:]
    return out


def fix_v2_crcs(buf: bytearray) -> bytearray:
    """Recompute the CRC of every well-framed v2 batch, to fuzz what lies behind it."""
    pos = 0
    while pos + RECORD_BATCH_OVERHEAD <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + length
        if buf[pos + 16] != 2 or length < RECORD_BATCH_OVERHEAD - 12 or end > len(buf):
            break
        struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21 : end])))
        pos = end
    return buf


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    seed=st.sampled_from(FUZZ_SEEDS),
    mutations=st.lists(mutation, min_size=1, max_size=4),
    fix_crc=st.booleans(),
    allow_partial_tail=st.booleans(),
)
def test_fuzz_only_kafka_errors(
    seed: bytes,
    mutations: list[tuple[str, int, object]],
    fix_crc: bool,
    allow_partial_tail: bool,
) -> None:
    buf = mutate(seed, mutations)
    if fix_crc:
        buf = fix_v2_crcs(buf)
    started = time.monotonic()
    try:
        consume_everything(buf, allow_partial_tail=allow_partial_tail)
    except KafkaError:
        pass
    try:
        list(iter_legacy_records(buf, allow_partial_tail=allow_partial_tail))
    except KafkaError:
        pass
    assert time.monotonic() - started < 2
