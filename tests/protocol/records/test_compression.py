"""The codecs: round trips, the framings other clients write, output caps, bad payloads."""

from __future__ import annotations

import gzip
import os
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkaclone.common.errors import (
    CorruptMessageError,
    KafkaError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from kafkaclone.protocol.records import Codec, compress, decompress
from kafkaclone.protocol.records.compression import xxh32

SAMPLE = b"".join(b"record %d of a batch, " % i for i in range(5000))  # ~110 KB
SAMPLES = [b"", b"x", os.urandom(1000), SAMPLE]


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
@pytest.mark.parametrize("data", SAMPLES, ids=["empty", "one", "random", "text"])
def test_round_trip(codec: Codec, magic: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data, magic=magic)) == data


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=5000), codec=st.sampled_from(list(Codec)))
def test_round_trip_any_bytes(data: bytes, codec: Codec) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(bytearray(packed))) == data


def test_unknown_codec_ids() -> None:
    for codec_id in (5, 6, 7, -1, 99):
        with pytest.raises(UnsupportedCompressionTypeError):
            Codec.from_id(codec_id)
        with pytest.raises(UnsupportedCompressionTypeError):
            compress(codec_id, b"x")
        with pytest.raises(UnsupportedCompressionTypeError):
            decompress(codec_id, b"x")
    assert Codec.from_id(3) is Codec.LZ4


# -- gzip -------------------------------------------------------------------------------


def test_gzip_writes_gzip_and_reads_concatenated_members() -> None:
    packed = compress(Codec.GZIP, SAMPLE)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == SAMPLE
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, two) == b"first second"


def test_gzip_truncated_or_garbage_is_corrupt() -> None:
    packed = compress(Codec.GZIP, SAMPLE)
    for cut in (1, 10, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptMessageError):
            decompress(Codec.GZIP, packed[:cut])
    with pytest.raises(CorruptMessageError):
        decompress(Codec.GZIP, b"not gzip at all")
    with pytest.raises(CorruptMessageError):
        decompress(Codec.GZIP, packed + b"trailing garbage")
    with pytest.raises(CorruptMessageError):
        decompress(Codec.GZIP, b"")


# -- snappy -----------------------------------------------------------------------------


def test_snappy_writes_xerial_framing_like_the_java_client() -> None:
    packed = compress(Codec.SNAPPY, SAMPLE)
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert packed[8:16] == b"\x00\x00\x00\x01\x00\x00\x00\x01"  # version 1, compatible 1
    # blocks of at most 32 KiB of input, each a big-endian length then raw snappy
    pos, inflated = 16, b""
    while pos < len(packed):
        length = int.from_bytes(packed[pos : pos + 4], "big")
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))
        assert len(block) <= 32 * 1024
        inflated += block
        pos += 4 + length
    assert inflated == SAMPLE


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them() -> None:
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    assert decompress(Codec.SNAPPY, raw) == SAMPLE


def test_snappy_bad_payloads() -> None:
    packed = compress(Codec.SNAPPY, SAMPLE)
    with pytest.raises(CorruptMessageError):
        decompress(Codec.SNAPPY, packed[:-5])  # block cut short
    with pytest.raises(CorruptMessageError):
        decompress(Codec.SNAPPY, packed[:18])  # inside a block length
    negative = packed[:16] + b"\xff\xff\xff\xf0" + packed[20:]
    with pytest.raises(CorruptMessageError):
        decompress(Codec.SNAPPY, negative)
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    with pytest.raises(CorruptMessageError):
        decompress(Codec.SNAPPY, raw[: len(raw) // 2])
    with pytest.raises(KafkaError):
        decompress(Codec.SNAPPY, b"\xff\xff\xff\xff\xff\xff")
    with pytest.raises(CorruptMessageError):
        decompress(Codec.SNAPPY, b"")


# -- lz4 --------------------------------------------------------------------------------


def _hc(frame: bytes, *, broken: bool) -> int:
    return (xxh32(frame[0 if broken else 4 : 6]) >> 8) & 0xFF


def test_xxh32_known_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert xxh32(b"abc", seed=1) != xxh32(b"abc")


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_frame_like_kafka_for_magic_1_and_2(magic: int) -> None:
    frame = compress(Codec.LZ4, SAMPLE, magic=magic)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60  # version 1, independent blocks, no checksums, no content size
    assert frame[5] == 0x40  # 64 KiB blocks
    assert frame[6] == _hc(frame, broken=False)
    assert lz4.frame.decompress(frame) == SAMPLE


def test_lz4_magic_0_writes_kafkas_broken_header_checksum() -> None:
    frame = compress(Codec.LZ4, SAMPLE, magic=0)
    assert frame[6] == _hc(frame, broken=True) != _hc(frame, broken=False)
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)  # a standard reader refuses it...
    assert decompress(Codec.LZ4, frame) == SAMPLE  # ...ours accepts both


def test_lz4_broken_checksum_with_content_size_field() -> None:
    frame = bytearray(lz4.frame.compress(SAMPLE, store_size=True, block_linked=False))
    assert frame[4] & 0x08
    frame[14] = (xxh32(frame[0:14]) >> 8) & 0xFF
    assert decompress(Codec.LZ4, bytes(frame)) == SAMPLE


def test_lz4_linked_blocks_checksums_and_concatenated_frames() -> None:
    linked = lz4.frame.compress(SAMPLE, block_linked=True, content_checksum=True)
    assert decompress(Codec.LZ4, linked) == SAMPLE
    two = lz4.frame.compress(b"one ") + lz4.frame.compress(b"two")
    assert decompress(Codec.LZ4, two) == b"one two"


def test_lz4_bad_payloads() -> None:
    frame = compress(Codec.LZ4, SAMPLE)
    for cut in (0, 3, 6, 7, 20, len(frame) // 2, len(frame) - 1):
        with pytest.raises(CorruptMessageError):
            decompress(Codec.LZ4, frame[:cut])
    bad_hc = bytearray(frame)
    bad_hc[6] ^= 0x55
    with pytest.raises(CorruptMessageError):
        decompress(Codec.LZ4, bytes(bad_hc))
    with pytest.raises(CorruptMessageError):
        decompress(Codec.LZ4, b"definitely not lz4")
    with pytest.raises(CorruptMessageError):
        decompress(Codec.LZ4, frame + b"junk after the frame")
    damaged = bytearray(frame)
    damaged[40] ^= 0xFF
    with pytest.raises(KafkaError):
        decompress(Codec.LZ4, bytes(damaged))


# -- zstd -------------------------------------------------------------------------------


def test_zstd_concatenated_frames_and_no_content_size() -> None:
    compressor = zstandard.ZstdCompressor()
    streamed = compressor.compressobj()
    no_size = streamed.compress(SAMPLE) + streamed.flush()
    assert zstandard.frame_content_size(no_size) == -1
    assert decompress(Codec.ZSTD, no_size) == SAMPLE
    frames = compressor.compress(b"a" * 1000) + no_size + compressor.compress(b"")
    assert decompress(Codec.ZSTD, frames) == b"a" * 1000 + SAMPLE
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    assert decompress(Codec.ZSTD, skippable + no_size) == SAMPLE
    checked = zstandard.ZstdCompressor(write_checksum=True).compress(SAMPLE)
    assert decompress(Codec.ZSTD, checked) == SAMPLE


def test_zstd_bad_payloads() -> None:
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(SAMPLE)
    for cut in (0, 2, 5, 8, len(frame) // 2, len(frame) - 1):
        with pytest.raises(CorruptMessageError):
            decompress(Codec.ZSTD, frame[:cut])
    with pytest.raises(CorruptMessageError):
        decompress(Codec.ZSTD, frame + b"\x00\x01\x02")
    with pytest.raises(CorruptMessageError):
        decompress(Codec.ZSTD, b"\x28\xb5\x2f\xfd" + os.urandom(40))
    damaged = bytearray(frame)
    damaged[-2] ^= 0xFF  # the checksum
    with pytest.raises(CorruptMessageError):
        decompress(Codec.ZSTD, bytes(damaged))


def test_zstd_refuses_a_huge_window() -> None:
    params = zstandard.ZstdCompressionParameters(window_log=27, enable_ldm=True)
    streamed = zstandard.ZstdCompressor(compression_params=params).compressobj()
    frame = streamed.compress(b"z" * 1000) + streamed.flush()
    with pytest.raises(KafkaError):
        decompress(Codec.ZSTD, frame, max_size=64 * 1024)


# -- output caps ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name)
def test_output_cap(codec: Codec) -> None:
    packed = compress(codec, SAMPLE)
    assert decompress(codec, packed, max_size=len(SAMPLE)) == SAMPLE
    with pytest.raises(MessageTooLargeError):
        decompress(codec, packed, max_size=len(SAMPLE) - 1)


@pytest.mark.parametrize("codec", [c for c in Codec if c is not Codec.NONE], ids=lambda c: c.name)
def test_decompression_bomb_stops_at_the_cap(codec: Codec) -> None:
    bomb = compress(codec, bytes(32 * 1024 * 1024))
    assert len(bomb) < 2 * 1024 * 1024
    with pytest.raises(MessageTooLargeError):
        decompress(codec, bomb, max_size=1024 * 1024)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(list(Codec)), data=st.binary(max_size=300))
def test_garbage_raises_only_kafka_errors(codec: Codec, data: bytes) -> None:
    try:
        decompress(codec, data, max_size=1 << 20)
    except KafkaError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from([c for c in Codec if c is not Codec.NONE]),
    position=st.integers(min_value=0),
    value=st.integers(min_value=0, max_value=255),
)
def test_mutated_payloads_raise_only_kafka_errors(codec: Codec, position: int, value: int) -> None:
    packed = bytearray(compress(codec, SAMPLE[:3000]))
    packed[position % len(packed)] = value
    try:
        decompress(codec, bytes(packed), max_size=1 << 20)
    except KafkaError:
        pass


def test_zlib_error_is_not_leaked() -> None:
    with pytest.raises(CorruptMessageError) as info:
        decompress(Codec.GZIP, b"\x1f\x8b\x08\x00" + b"\x00" * 20)
    assert isinstance(info.value.__cause__, zlib.error | type(None))
