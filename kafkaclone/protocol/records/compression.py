"""The compression codecs of Kafka record batches and legacy message sets.

``compress(codec, data)`` writes what the Java client writes; ``decompress(codec, data)``
reads what any client writes:

- gzip: a gzip stream (several concatenated members are read, as ``GZIPInputStream`` does).
- snappy: the Java client writes snappy-java's xerial framing (a 16-byte header, then blocks
  of at most 32 KiB input, each a 4-byte big-endian length and one raw snappy block);
  librdkafka writes one raw snappy block. Both are read; the framing is recognised by its
  magic ``b"\\x82SNAPPY\\x00"``.
- lz4: the LZ4 frame format with independent 64 KiB blocks (Kafka's reader refuses linked
  blocks). Kafka before 0.10 computed the frame descriptor checksum over the magic number
  too; that broken checksum is still written for magic 0 (as Kafka does) and accepted on
  reading, whatever the magic.
- zstd: one or more frames, with or without a content size; a frame cut short is an error.

Decompression never produces more than ``max_size`` bytes (MessageTooLargeError beyond it)
and turns every failure of the underlying library into CorruptMessageError.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from enum import IntEnum
from typing import Final

import cramjam
import lz4.frame
import zstandard

from kafkaclone.common.errors import (
    CorruptMessageError,
    KafkaError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from kafkaclone.protocol.records.common import BytesLike

DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 64 * 1024 * 1024
"""Default output cap of ``decompress``: a batch inflating past it is refused."""


class Codec(IntEnum):
    """A compression codec id, as stored in the low three bits of the attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_id(cls, codec_id: int) -> Codec:
        """The codec for an id read off the wire; UnsupportedCompressionTypeError if unknown."""
        if 0 <= codec_id < len(_CODECS):
            return _CODECS[codec_id]
        raise UnsupportedCompressionTypeError(f"unknown compression type id {codec_id}")


_CODECS: Final = tuple(Codec)


def compress(codec: int, data: BytesLike, *, magic: int = 2) -> bytes:
    """Compress ``data`` as the Java client does for a batch (``magic`` 2) or a legacy
    wrapper message (``magic`` 0 or 1: only LZ4 differs, see the module docstring)."""
    codec = Codec.from_id(codec)
    if codec is Codec.NONE:
        return bytes(data)
    if codec is Codec.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec is Codec.SNAPPY:
        return _xerial_compress(data)
    if codec is Codec.LZ4:
        return _lz4_compress(data, broken_header_checksum=magic == 0)
    return zstandard.ZstdCompressor(level=3).compress(data)


def decompress(
    codec: int, data: BytesLike, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Inflate ``data``, producing at most ``max_size`` bytes.

    Raises UnsupportedCompressionTypeError for an unknown codec id, CorruptMessageError for
    a payload that does not decompress (truncated, garbage, bad checksum) and
    MessageTooLargeError when the output would exceed ``max_size``.
    """
    codec = Codec.from_id(codec)
    view = memoryview(data)
    if codec is Codec.NONE:
        if len(view) > max_size:
            raise _too_large(max_size)
        return bytes(view)
    if codec is Codec.GZIP:
        return _gzip_decompress(view, max_size)
    if codec is Codec.SNAPPY:
        return _snappy_decompress(view, max_size)
    if codec is Codec.LZ4:
        return _lz4_decompress(view, max_size)
    return _zstd_decompress(view, max_size)


_MIN_STEP: Final = 64 * 1024
_MAX_STEP: Final = 4 * 1024 * 1024


def _output_steps(compressed_size: int) -> Iterator[int]:
    """Sizes of successive output requests to a streaming decompressor: the libraries
    allocate the whole request up front, so start near the likely size and grow."""
    step = min(max(_MIN_STEP, 4 * compressed_size), _MAX_STEP)
    while True:
        yield step
        step = min(step * 2, _MAX_STEP)


def _too_large(max_size: int) -> MessageTooLargeError:
    return MessageTooLargeError(f"decompressed records exceed the limit of {max_size} bytes")


# -- gzip -------------------------------------------------------------------------------

_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS


def _gzip_decompress(view: memoryview, max_size: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    pending: BytesLike = view
    try:
        while True:  # one gzip member per turn
            inflater = zlib.decompressobj(_GZIP_WBITS)
            while not inflater.eof:
                before = len(pending)
                # max_length = 0 would mean "unbounded": the + 1 keeps it positive.
                chunk = inflater.decompress(pending, max_size - total + 1)
                total += len(chunk)
                if total > max_size:
                    raise _too_large(max_size)
                chunks.append(chunk)
                pending = inflater.unconsumed_tail
                if not chunk and len(pending) == before and not inflater.eof:
                    raise CorruptMessageError("gzip payload is truncated")
            pending = inflater.unused_data
            if not pending:
                return b"".join(chunks)
    except zlib.error as e:
        raise CorruptMessageError(f"gzip payload does not decompress: {e}") from e


# -- snappy -----------------------------------------------------------------------------

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # snappy-java's default block size


def _xerial_compress(data: BytesLike) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        out += len(block).to_bytes(4, "big")
        out += block
    return bytes(out)


def _snappy_decompress(view: memoryview, max_size: int) -> bytes:
    if len(view) >= len(_XERIAL_HEADER) and view[: len(_XERIAL_MAGIC)].tobytes() == _XERIAL_MAGIC:
        return _xerial_decompress(view, max_size)
    return _snappy_raw_decompress(view, max_size)


def _xerial_decompress(view: memoryview, max_size: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptMessageError("xerial snappy payload is truncated inside a block length")
        length = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptMessageError(f"xerial snappy block length {length} is out of bounds")
        chunk = _snappy_raw_decompress(view[pos : pos + length], max_size - total)
        total += len(chunk)
        chunks.append(chunk)
        pos += length
    return b"".join(chunks)


def _snappy_raw_decompress(view: memoryview, max_size: int) -> bytes:
    try:
        # The block starts with its uncompressed length: check it before allocating.
        size = cramjam.snappy.decompress_raw_len(view)
        if size > max_size:
            raise _too_large(max_size)
        return bytes(cramjam.snappy.decompress_raw(view))
    except KafkaError:
        raise
    except Exception as e:  # cramjam raises its own DecompressionError, or ValueError
        raise CorruptMessageError(f"snappy payload does not decompress: {e}") from e


# -- lz4 --------------------------------------------------------------------------------

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_FLG_CONTENT_SIZE: Final = 0x08
_LZ4_FLG_DICT_ID: Final = 0x01


def _lz4_compress(data: BytesLike, *, broken_header_checksum: bool) -> bytes:
    frame: bytes = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if not broken_header_checksum:
        return frame
    # Kafka's KafkaLZ4BlockOutputStream for magic 0: the descriptor checksum also covers
    # the four magic bytes. The descriptor here is FLG and BD only (no content size).
    patched = bytearray(frame)
    patched[6] = (xxh32(patched[0:6]) >> 8) & 0xFF
    return bytes(patched)


def _lz4_descriptor_end(frame: memoryview) -> int:
    """The offset of the header checksum byte of the frame at the start of ``frame``."""
    if len(frame) < 7:
        raise CorruptMessageError("lz4 payload is truncated inside the frame header")
    flg = frame[4]
    end = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        end += 8
    if flg & _LZ4_FLG_DICT_ID:
        end += 4
    if len(frame) <= end:
        raise CorruptMessageError("lz4 payload is truncated inside the frame header")
    return end


def _with_standard_header_checksum(frame: memoryview) -> BytesLike:
    """The frame, with Kafka's broken header checksum (if it has one) replaced by the
    standard one so that liblz4 accepts it."""
    if frame[:4].tobytes() != _LZ4_MAGIC:
        return frame  # not an LZ4 frame (or a skippable one): liblz4 decides
    end = _lz4_descriptor_end(frame)
    stored = frame[end]
    standard = (xxh32(frame[4:end]) >> 8) & 0xFF
    if stored == standard:
        return frame
    if stored != (xxh32(frame[0:end]) >> 8) & 0xFF:
        raise CorruptMessageError("lz4 frame header checksum does not match")
    patched = bytearray(frame)
    patched[end] = standard
    return patched


def _lz4_decompress(view: memoryview, max_size: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    remaining: BytesLike = view
    if not remaining:
        raise CorruptMessageError("lz4 payload is empty")
    try:
        while remaining:  # one frame per turn
            pending = _with_standard_header_checksum(memoryview(remaining))
            decompressor = lz4.frame.LZ4FrameDecompressor()
            steps = _output_steps(len(pending))
            while True:
                step = min(next(steps), max_size - total + 1)
                chunk = decompressor.decompress(pending, max_length=step)
                total += len(chunk)
                if total > max_size:
                    raise _too_large(max_size)
                chunks.append(chunk)
                if decompressor.eof:
                    break
                if decompressor.needs_input or not chunk:
                    raise CorruptMessageError("lz4 payload is truncated")
                pending = b""
            remaining = decompressor.unused_data
    except KafkaError:
        raise
    except Exception as e:  # python-lz4 reports liblz4 errors as RuntimeError
        raise CorruptMessageError(f"lz4 payload does not decompress: {e}") from e
    return b"".join(chunks)


# xxHash32 (the frame header checksum of LZ4). Used on a handful of header bytes only.
_XXH_PRIME1: Final = 2654435761
_XXH_PRIME2: Final = 2246822519
_XXH_PRIME3: Final = 3266489917
_XXH_PRIME4: Final = 668265263
_XXH_PRIME5: Final = 374761393
_MASK32: Final = 0xFFFFFFFF


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def _xxh32_round(acc: int, lane: int) -> int:
    acc = (acc + lane * _XXH_PRIME2) & _MASK32
    return (_rotl32(acc, 13) * _XXH_PRIME1) & _MASK32


def xxh32(data: BytesLike, seed: int = 0) -> int:
    """xxHash32 of ``data`` (a plain implementation, meant for short inputs)."""
    view = memoryview(data)
    length = len(view)
    pos = 0
    if length >= 16:
        v1 = (seed + _XXH_PRIME1 + _XXH_PRIME2) & _MASK32
        v2 = (seed + _XXH_PRIME2) & _MASK32
        v3 = seed & _MASK32
        v4 = (seed - _XXH_PRIME1) & _MASK32
        while length - pos >= 16:
            v1 = _xxh32_round(v1, int.from_bytes(view[pos : pos + 4], "little"))
            v2 = _xxh32_round(v2, int.from_bytes(view[pos + 4 : pos + 8], "little"))
            v3 = _xxh32_round(v3, int.from_bytes(view[pos + 8 : pos + 12], "little"))
            v4 = _xxh32_round(v4, int.from_bytes(view[pos + 12 : pos + 16], "little"))
            pos += 16
        acc = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _MASK32
    else:
        acc = (seed + _XXH_PRIME5) & _MASK32
    acc = (acc + length) & _MASK32
    while length - pos >= 4:
        lane = int.from_bytes(view[pos : pos + 4], "little")
        acc = (acc + lane * _XXH_PRIME3) & _MASK32
        acc = (_rotl32(acc, 17) * _XXH_PRIME4) & _MASK32
        pos += 4
    while pos < length:
        acc = (acc + view[pos] * _XXH_PRIME5) & _MASK32
        acc = (_rotl32(acc, 11) * _XXH_PRIME1) & _MASK32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _XXH_PRIME2) & _MASK32
    acc ^= acc >> 13
    acc = (acc * _XXH_PRIME3) & _MASK32
    acc ^= acc >> 16
    return acc


# -- zstd -------------------------------------------------------------------------------

_ZSTD_MAGIC: Final = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC: Final = 0x184D2A50
_ZSTD_DICT_ID_SIZES: Final = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES: Final = (0, 2, 4, 8)
_ZSTD_MIN_WINDOW: Final = 1 << 23  # what levels up to 19 use
_ZSTD_MAX_WINDOW: Final = 1 << 27  # libzstd's own default limit


def _check_zstd_frames(view: memoryview) -> None:
    """Walk the frame and block headers (no decompression) and raise CorruptMessageError
    unless ``view`` is a sequence of complete frames: libzstd's streaming reader would
    otherwise stop quietly at a frame cut short."""
    end = len(view)
    if end == 0:
        raise CorruptMessageError("zstd payload is empty")
    pos = 0
    while pos < end:
        if end - pos < 5:
            raise CorruptMessageError("zstd payload is truncated inside a frame header")
        magic = int.from_bytes(view[pos : pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 8:
                raise CorruptMessageError("zstd payload is truncated inside a skippable frame")
            pos += 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
            if pos > end:
                raise CorruptMessageError("zstd payload is truncated inside a skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptMessageError("zstd payload does not start with a zstd frame")
        descriptor = view[pos + 4]
        single_segment = (descriptor >> 5) & 1
        content_size_flag = descriptor >> 6
        pos += 5 + (1 - single_segment) + _ZSTD_DICT_ID_SIZES[descriptor & 3]
        pos += _ZSTD_CONTENT_SIZE_SIZES[content_size_flag] or single_segment
        while True:  # blocks
            if end - pos < 3:
                raise CorruptMessageError("zstd payload is truncated inside a block header")
            block_header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            block_type = (block_header >> 1) & 3
            if block_type == 3:
                raise CorruptMessageError("zstd payload has a reserved block type")
            pos += 3 + (1 if block_type == 1 else block_header >> 3)
            if pos > end:
                raise CorruptMessageError("zstd payload is truncated inside a block")
            if block_header & 1:
                break
        if descriptor & 0x04:  # content checksum
            pos += 4
            if pos > end:
                raise CorruptMessageError("zstd payload is truncated inside a frame checksum")


def _zstd_decompress(view: memoryview, max_size: int) -> bytes:
    _check_zstd_frames(view)
    window = min(max(max_size, _ZSTD_MIN_WINDOW), _ZSTD_MAX_WINDOW)
    chunks: list[bytes] = []
    total = 0
    try:
        decompressor = zstandard.ZstdDecompressor(max_window_size=window)
        with decompressor.stream_reader(view, read_across_frames=True) as reader:
            steps = _output_steps(len(view))
            while True:
                chunk = reader.read(min(next(steps), max_size - total + 1))
                if not chunk:
                    break
                total += len(chunk)
                if total > max_size:
                    raise _too_large(max_size)
                chunks.append(chunk)
    except KafkaError:
        raise
    except Exception as e:  # zstandard.ZstdError, mostly
        raise CorruptMessageError(f"zstd payload does not decompress: {e}") from e
    return b"".join(chunks)
