"""Legacy message sets (magic 0 and 1), for old clients and down-conversion.

A log entry (Kafka's LegacyRecord behind an offset and a size)::

    offset        int64
    message_size  int32    (bytes that follow)
    crc           uint32   (CRC-32 of magic..end)
    magic         int8     (0 or 1)
    attributes    int8     (bits 0-2 codec; bit 3 timestamp type, magic 1 only)
    timestamp     int64    (magic 1 only)
    key           bytes    (int32 length, -1 for null)
    value         bytes    (int32 length, -1 for null)

A compressed entry is a wrapper: its value is a whole message set, compressed, and its
offset is the absolute offset of the last inner message. With magic 1 the inner offsets
are relative (0..n-1) and the wrapper's timestamp is the largest inner timestamp, or the
log append time that then stands for every inner message. With magic 0 the inner offsets
are absolute.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BytesLike,
    as_view,
)
from kafkaclone.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    compress,
    decompress,
)

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1
LEGACY_RECORD_OVERHEAD_V0: Final = 14  # crc, magic, attributes, key length, value length
LEGACY_RECORD_OVERHEAD_V1: Final = 22  # ... and a timestamp

_CRC_OFFSET: Final = LOG_OVERHEAD
_ATTRIBUTES_OFFSET: Final = MAGIC_OFFSET + 1
_TIMESTAMP_OFFSET: Final = MAGIC_OFFSET + 2

_ENTRY_V0: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_ENTRY_V1: Final = struct.Struct(">qiIbbq")  # ... timestamp
_OFFSET_SIZE: Final = struct.Struct(">qi")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")
_MESSAGE_V0: Final = struct.Struct(">bb")  # magic, attributes: the start of the CRC'd part
_MESSAGE_V1: Final = struct.Struct(">bbq")


@dataclass(slots=True)
class LegacyRecord:
    """One message of a legacy message set, with its absolute offset.

    ``timestamp`` and ``timestamp_type`` are -1 for magic 0.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    timestamp_type: int = CREATE_TIME
    magic: int = MAGIC_V1


class LegacyRecordBatch:
    """A view over one legacy log entry (a plain message or a compressed wrapper).

    Named after Kafka's LegacyRecordBatch: for old formats every log entry is a "batch".
    """

    __slots__ = (
        "_attributes",
        "_crc",
        "_key_length",
        "_key_start",
        "_magic",
        "_offset",
        "_timestamp",
        "_value_length",
        "_value_start",
        "_view",
    )

    _view: memoryview
    _offset: int
    _magic: int
    _crc: int
    _attributes: int
    _timestamp: int
    _key_start: int
    _key_length: int
    _value_start: int
    _value_length: int

    def __init__(self, buf: BytesLike) -> None:
        """View the entry at the start of ``buf`` (bytes after it are ignored).

        CorruptMessageError if it is cut short, its sizes are inconsistent or its magic is
        not 0 or 1.
        """
        view = as_view(buf)
        if len(view) < LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptMessageError(f"legacy message of {len(view)} bytes is too short")
        offset, size = _OFFSET_SIZE.unpack_from(view)
        magic = view[MAGIC_OFFSET]
        if magic == MAGIC_V0:
            minimum = LEGACY_RECORD_OVERHEAD_V0
        elif magic == MAGIC_V1:
            minimum = LEGACY_RECORD_OVERHEAD_V1
        else:
            raise CorruptMessageError(f"Unknown magic {magic} for a legacy message")
        if size < minimum:
            raise CorruptMessageError(
                f"Record size {size} is less than the minimum record overhead ({minimum})"
            )
        if size > len(view) - LOG_OVERHEAD:
            raise CorruptMessageError(
                f"legacy message size {size} exceeds the {len(view) - LOG_OVERHEAD} bytes left"
            )
        end = LOG_OVERHEAD + size
        self._view = view[:end]
        self._offset = offset
        self._magic = magic
        if magic == MAGIC_V0:
            _, _, self._crc, _, self._attributes = _ENTRY_V0.unpack_from(view)
            self._timestamp = NO_TIMESTAMP
            pos = _ENTRY_V0.size
        else:
            _, _, self._crc, _, self._attributes, self._timestamp = _ENTRY_V1.unpack_from(view)
            pos = _ENTRY_V1.size
        # key and value: both lengths must fit, and the value must end the message.
        (key_length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if key_length > end - pos - 4:
            raise CorruptMessageError(f"legacy message key size {key_length} is out of bounds")
        self._key_start = pos
        self._key_length = key_length
        pos += max(key_length, 0)
        (value_length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if max(value_length, 0) != end - pos:
            raise CorruptMessageError(
                f"legacy message value size {value_length} does not match the "
                f"{end - pos} bytes left in the message"
            )
        self._value_start = pos
        self._value_length = value_length

    def __repr__(self) -> str:
        return (
            f"LegacyRecordBatch(offset={self._offset}, magic={self._magic}, "
            f"attributes={self._attributes:#x}, size_in_bytes={self.size_in_bytes})"
        )

    # -- fields --

    @property
    def offset(self) -> int:
        """The entry's offset: for a compressed wrapper, that of its last inner message."""
        return self._offset

    @property
    def last_offset(self) -> int:
        return self._offset

    @property
    def next_offset(self) -> int:
        return self._offset + 1

    @property
    def size_in_bytes(self) -> int:
        return len(self._view)

    @property
    def message_size(self) -> int:
        return len(self._view) - LOG_OVERHEAD

    @property
    def crc(self) -> int:
        return self._crc

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def attributes(self) -> int:
        return self._attributes

    @property
    def compression(self) -> Codec:
        """UnsupportedCompressionTypeError for codec ids 5-7."""
        return Codec.from_id(self._attributes & COMPRESSION_CODEC_MASK)

    @property
    def is_compressed(self) -> bool:
        return self._attributes & COMPRESSION_CODEC_MASK != 0

    @property
    def timestamp_type(self) -> int:
        """-1 for magic 0; 0 CreateTime or 1 LogAppendTime for magic 1."""
        if self._magic == MAGIC_V0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self._attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def timestamp(self) -> int:
        """-1 for magic 0."""
        return self._timestamp

    @property
    def key(self) -> bytes | None:
        if self._key_length < 0:
            return None
        return bytes(self._view[self._key_start : self._key_start + self._key_length])

    @property
    def value(self) -> bytes | None:
        if self._value_length < 0:
            return None
        return bytes(self._view[self._value_start : self._value_start + self._value_length])

    @property
    def view(self) -> memoryview:
        return self._view

    def to_bytes(self) -> bytes:
        return bytes(self._view)

    # -- validation --

    def compute_crc(self) -> int:
        """CRC-32 (zlib's) of magic..end."""
        return zlib.crc32(self._view[MAGIC_OFFSET:])

    def is_valid(self) -> bool:
        return self.compute_crc() == self._crc

    def ensure_valid(self) -> None:
        computed = self.compute_crc()
        if computed != self._crc:
            raise CorruptMessageError(
                f"Record is corrupt (stored crc = {self._crc}, computed crc = {computed})"
            )

    # -- in-place rewrites --

    def _writable(self) -> memoryview:
        if self._view.readonly:
            raise TypeError("the message lies in a read-only buffer")
        return self._view

    def set_last_offset(self, offset: int) -> None:
        """Rewrite the entry's offset (outside the CRC)."""
        _INT64.pack_into(self._writable(), 0, offset)
        self._offset = offset

    def set_max_timestamp(self, timestamp_type: int, timestamp: int) -> None:
        """Set the timestamp type bit and the timestamp of a magic 1 entry, recomputing the
        CRC; nothing is written if both are unchanged."""
        if self._magic == MAGIC_V0:
            raise UnsupportedForMessageFormatError(
                "Cannot set timestamp for a record with magic = 0"
            )
        if timestamp_type == self.timestamp_type and timestamp == self._timestamp:
            return
        view = self._writable()
        attributes = self._attributes & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        view[_ATTRIBUTES_OFFSET] = attributes & 0xFF
        _INT64.pack_into(view, _TIMESTAMP_OFFSET, timestamp)
        self._crc = zlib.crc32(view[MAGIC_OFFSET:])
        _UINT32.pack_into(view, _CRC_OFFSET, self._crc)
        self._attributes = attributes
        self._timestamp = timestamp

    # -- records --

    def records(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> Iterator[LegacyRecord]:
        """The messages of this entry with absolute offsets: the entry itself if it is not
        compressed, else its inner messages (deep iteration, as Kafka's
        AbstractLegacyRecordBatch does, inner CRCs checked)."""
        if not self.is_compressed:
            return iter(
                [
                    LegacyRecord(
                        self._offset,
                        self._timestamp,
                        self.key,
                        self.value,
                        self.timestamp_type,
                        self._magic,
                    )
                ]
            )
        return iter(self._inner_records(max_decompressed_size))

    def _inner_records(self, max_size: int) -> list[LegacyRecord]:
        codec = self.compression
        if codec is Codec.ZSTD:
            raise InvalidRecordError(
                "Invalid wrapper compressionType found in legacy deep record iterator "
                f"{self._magic}"
            )
        if self._value_length < 0:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self._magic})"
            )
        value = self._view[self._value_start : self._value_start + self._value_length]
        inner = [
            entry
            for entry in iter_legacy_entries(
                decompress(codec, value, max_size=max_size), allow_partial_tail=False
            )
        ]
        if not inner:
            raise InvalidRecordError("Found invalid compressed record set with no inner records")
        for entry in inner:
            if entry.magic != self._magic:
                raise InvalidRecordError(
                    f"Compressed message magic {entry.magic} does not match wrapper magic "
                    f"{self._magic}"
                )
            if entry.is_compressed:
                raise InvalidRecordError("Inner messages must not be compressed")
            entry.ensure_valid()

        if self._magic == MAGIC_V0:
            return [
                LegacyRecord(e.offset, NO_TIMESTAMP, e.key, e.value, NO_TIMESTAMP_TYPE, MAGIC_V0)
                for e in inner
            ]
        # magic 1: relative inner offsets; the wrapper holds the absolute last one.
        if self._offset == 0:
            base_offset = 0  # produce data from some librdkafka versions
        else:
            last_inner = inner[-1].offset
            if self._offset < last_inner:
                raise InvalidRecordError(
                    "Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{self._offset}' is less than the last inner message offset "
                    f"'{last_inner}' and it is not zero."
                )
            base_offset = self._offset - last_inner
        timestamp_type = self.timestamp_type
        log_append_time = timestamp_type == LOG_APPEND_TIME
        return [
            LegacyRecord(
                base_offset + e.offset,
                self._timestamp if log_append_time else e.timestamp,
                e.key,
                e.value,
                timestamp_type,
                MAGIC_V1,
            )
            for e in inner
        ]


def iter_legacy_entries(buf: BytesLike, *, allow_partial_tail: bool) -> Iterator[LegacyRecordBatch]:
    """The legacy entries of a message set (shallow). CorruptMessageError for a magic-2
    batch, an unknown magic, bad sizes, or a partial tail unless it is allowed."""
    view = as_view(buf)
    end = len(view)
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            _partial_tail(allow_partial_tail, remaining)
            return
        (size,) = _INT32.unpack_from(view, pos + SIZE_OFFSET)
        if size < LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptMessageError(
                f"Record size {size} is less than the minimum record overhead "
                f"({LEGACY_RECORD_OVERHEAD_V0})"
            )
        if remaining < LOG_OVERHEAD + size:
            _partial_tail(allow_partial_tail, remaining)
            return
        entry = LegacyRecordBatch(view[pos : pos + LOG_OVERHEAD + size])
        yield entry
        pos += entry.size_in_bytes


def _partial_tail(allowed: bool, remaining: int) -> None:
    if not allowed:
        raise CorruptMessageError(
            f"the message set ends with a partial message of {remaining} bytes"
        )


def iter_legacy_records(
    buf: BytesLike,
    *,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[LegacyRecord]:
    """Every message of a legacy message set, wrappers opened (deep iteration), CRCs
    of the entries checked."""
    for entry in iter_legacy_entries(buf, allow_partial_tail=allow_partial_tail):
        entry.ensure_valid()
        yield from entry.records(max_decompressed_size=max_decompressed_size)


# -- building ---------------------------------------------------------------------------

LegacyRecordInput = (
    LegacyRecord | tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int | None]
)
"""A message to build: a ``LegacyRecord`` (absolute offset and timestamp are used, its
timestamp type and magic are not) or ``(key, value[, timestamp])`` placed at
``base_offset`` + its position."""


def _append_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> None:
    start = len(out)
    out += bytes(LOG_OVERHEAD + 4)  # offset, size and crc, written below
    if magic == MAGIC_V0:
        out += _MESSAGE_V0.pack(magic, attributes)
    else:
        out += _MESSAGE_V1.pack(magic, attributes, timestamp)
    for data in (key, value):
        if data is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _INT32.pack(len(data))
            out += data
    _OFFSET_SIZE.pack_into(out, start, offset, len(out) - start - LOG_OVERHEAD)
    crc = zlib.crc32(memoryview(out)[start + MAGIC_OFFSET :])
    _UINT32.pack_into(out, start + _CRC_OFFSET, crc)


def build_legacy_message_set(
    records: Iterable[LegacyRecordInput],
    *,
    magic: int,
    codec: int = Codec.NONE,
    base_offset: int = 0,
    timestamp_type: int = CREATE_TIME,
    default_timestamp: int = NO_TIMESTAMP,
) -> bytes:
    """Encode a magic 0 or 1 message set, as Kafka's MemoryRecordsBuilder does.

    Uncompressed: one entry per message. Compressed: one wrapper whose offset is the last
    message's, whose timestamp (magic 1) is the largest timestamp, and whose inner offsets
    are relative to the first message (magic 1) or absolute (magic 0). A timestamp of
    None takes ``default_timestamp``; magic 0 has no timestamps. ZSTD is
    UnsupportedCompressionTypeError, as it needs magic 2.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy message sets have magic 0 or 1, not {magic}")
    codec = Codec.from_id(codec)
    if codec is Codec.ZSTD:
        raise UnsupportedCompressionTypeError("ZSTD compression needs message format v2")
    messages: list[tuple[int, int, bytes | None, bytes | None]] = []
    for index, item in enumerate(records):
        if isinstance(item, LegacyRecord):
            messages.append((item.offset, item.timestamp, item.key, item.value))
        else:
            timestamp: int | None = item[2] if len(item) > 2 else None
            messages.append(
                (
                    base_offset + index,
                    default_timestamp if timestamp is None else timestamp,
                    item[0],
                    item[1],
                )
            )
    if not messages:
        return b""
    if magic == MAGIC_V0:
        messages = [(offset, NO_TIMESTAMP, key, value) for offset, _, key, value in messages]
    timestamp_bit = TIMESTAMP_TYPE_MASK if magic == MAGIC_V1 and timestamp_type else 0

    out = bytearray()
    if codec is Codec.NONE:
        for offset, timestamp, key, value in messages:
            _append_message(out, offset, magic, timestamp_bit, timestamp, key, value)
        return bytes(out)

    first_offset = messages[0][0]
    inner = bytearray()
    for offset, timestamp, key, value in messages:
        inner_offset = offset - first_offset if magic == MAGIC_V1 else offset
        _append_message(inner, inner_offset, magic, timestamp_bit, timestamp, key, value)
    wrapper_timestamp = max(timestamp for _, timestamp, _, _ in messages)
    _append_message(
        out,
        messages[-1][0],
        magic,
        codec.value | timestamp_bit,
        wrapper_timestamp,
        None,
        compress(codec, inner, magic=magic),
    )
    return bytes(out)
