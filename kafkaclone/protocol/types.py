"""Kafka's primitive wire types: fixed-width integers, varints, strings, bytes, uuids.

Readers take a buffer (bytes or memoryview) and a position and return ``(value, new_pos)``;
writers append to a ``bytearray``. Every reader checks its lengths against the bytes that
remain and raises :class:`DecodeError` on a short or malformed buffer, so a hostile frame
can never cause an IndexError, a hang or a huge allocation.

The generated message codecs (``kafkaclone.protocol.schema``) inline the fixed-width types
as precompiled ``struct`` calls and call these helpers for the variable-length ones.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

from kafkaclone.common.errors import DecodeError
from kafkaclone.common.file_region import FileRegion

Buffer = bytes | bytearray | memoryview
Records = Buffer | FileRegion
"""A ``file_records`` field's value: bytes, or a range of a segment file (zero-copy fetch)."""

INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
UINT16: Final = struct.Struct(">H")
INT32: Final = struct.Struct(">i")
UINT32: Final = struct.Struct(">I")
INT64: Final = struct.Struct(">q")
FLOAT64: Final = struct.Struct(">d")

ZERO_UUID: Final = uuid.UUID(int=0)

_MAX_VARINT_BYTES: Final = 5
_MAX_VARLONG_BYTES: Final = 10


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (a 32-bit value)."""
    size = len(buf)
    if pos < size:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    result = 0
    shift = 0
    for _ in range(_MAX_VARINT_BYTES):
        if pos >= size:
            raise DecodeError("buffer ends inside a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError("varint is longer than 5 bytes")


def read_uvarlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 10 bytes (a 64-bit value)."""
    size = len(buf)
    result = 0
    shift = 0
    for _ in range(_MAX_VARLONG_BYTES):
        if pos >= size:
            raise DecodeError("buffer ends inside a varlong")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError("varlong is longer than 10 bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 32-bit varint (bits past 32 dropped, as Java's int does)."""
    raw, pos = read_uvarint(buf, pos)
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 64-bit varint."""
    raw, pos = read_uvarlong(buf, pos)
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# --- length-prefixed payloads --------------------------------------------------------------


def _take(buf: Buffer, pos: int, length: int, what: str) -> int:
    end = pos + length
    if length < 0 or end > len(buf):
        raise DecodeError(f"{what} of length {length} runs past the end of the buffer")
    return end


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    (length,) = _unpack_int16(buf, pos)
    pos += 2
    if length < 0:
        raise DecodeError(f"non-nullable string has length {length}")
    end = _take(buf, pos, length, "string")
    return _utf8(buf[pos:end]), end


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    (length,) = _unpack_int16(buf, pos)
    pos += 2
    if length == -1:
        return None, pos
    end = _take(buf, pos, length, "string")
    return _utf8(buf[pos:end]), end


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        raise DecodeError("non-nullable compact string is null")
    end = _take(buf, pos, length - 1, "compact string")
    return _utf8(buf[pos:end]), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = _take(buf, pos, length - 1, "compact string")
    return _utf8(buf[pos:end]), end


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    (length,) = _unpack_int32(buf, pos)
    pos += 4
    if length < 0:
        raise DecodeError(f"non-nullable bytes have length {length}")
    end = _take(buf, pos, length, "bytes")
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    (length,) = _unpack_int32(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    end = _take(buf, pos, length, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        raise DecodeError("non-nullable compact bytes are null")
    end = _take(buf, pos, length - 1, "compact bytes")
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = _take(buf, pos, length - 1, "compact bytes")
    return bytes(buf[pos:end]), end


def read_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    """A RECORDS field: nullable bytes, returned as a zero-copy view of the frame."""
    (length,) = _unpack_int32(buf, pos)
    pos += 4
    if length == -1:
        return None, pos
    end = _take(buf, pos, length, "records")
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: Buffer, pos: int) -> tuple[memoryview | None, int]:
    length, pos = read_uvarint(buf, pos)
    if length == 0:
        return None, pos
    end = _take(buf, pos, length - 1, "compact records")
    return memoryview(buf)[pos:end], end


def read_uuid(buf: Buffer, pos: int) -> tuple[uuid.UUID, int]:
    end = _take(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise DecodeError("buffer ends inside a boolean")
    return buf[pos] != 0, pos + 1


def write_string(out: bytearray, value: str) -> None:
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


def write_bytes(out: bytearray, value: Buffer) -> None:
    out += INT32.pack(len(value))
    out += value


def write_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: Buffer) -> None:
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


class _Parts(bytearray):
    """An encode buffer that can keep some values out of its bytes: :meth:`add_part` ends
    the bytes so far as one part and adds the value as the next, by reference."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[Any] = []

    def add_part(self, value: Any) -> None:
        if self:
            self.parts.append(bytes(self))
            self.clear()
        self.parts.append(value)

    def finish(self) -> list[Any]:
        """Every part in order, the bytes after the last kept value included."""
        if self:
            self.parts.append(bytes(self))
            self.clear()
        return self.parts


class FrameParts(_Parts):
    """Keeps file regions out of the bytes: a ``file_records`` field holding a
    :class:`FileRegion` is added as a part (its length prefix is in the bytes before it).
    Into a plain ``bytearray`` the region's bytes are read instead."""

    __slots__ = ()


class BufferParts(_Parts):
    """Keeps ``records`` values out of the bytes: each is added as a part, not copied (a
    Produce request's record batches, sent with ``sendmsg`` as they are). Into a plain
    ``bytearray`` the value is copied."""

    __slots__ = ()


def write_records(out: bytearray, value: Buffer | None) -> None:
    """``write_nullable_bytes``, with the value kept as a part of a :class:`BufferParts`."""
    if value is None or type(out) is not BufferParts:
        write_nullable_bytes(out, value)
        return
    out += INT32.pack(len(value))
    out.add_part(value)


def write_compact_records(out: bytearray, value: Buffer | None) -> None:
    """``write_compact_nullable_bytes``, with the value kept as a part of a
    :class:`BufferParts`."""
    if value is None or type(out) is not BufferParts:
        write_compact_nullable_bytes(out, value)
        return
    write_uvarint(out, len(value) + 1)
    out.add_part(value)


def _write_records_value(out: bytearray, value: Records) -> None:
    if not isinstance(value, FileRegion):
        out += value
    elif isinstance(out, FrameParts):
        out.add_part(value)
    else:
        out += value.read()


def write_file_records(out: bytearray, value: Records | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += INT32.pack(len(value))
        _write_records_value(out, value)


def write_compact_file_records(out: bytearray, value: Records | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_uvarint(out, len(value) + 1)
        _write_records_value(out, value)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def write_bool(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def read_array_length(buf: Buffer, pos: int, min_item_size: int) -> tuple[int, int]:
    """An INT32 array length; -1 is null. Refuses lengths the buffer cannot hold."""
    (length,) = _unpack_int32(buf, pos)
    pos += 4
    if length < -1:
        raise DecodeError(f"array has negative length {length}")
    _check_array_fits(buf, pos, length, min_item_size)
    return length, pos


def read_compact_array_length(buf: Buffer, pos: int, min_item_size: int) -> tuple[int, int]:
    """A compact array length (uvarint N+1, 0 is null); returns -1 for null."""
    raw, pos = read_uvarint(buf, pos)
    length = raw - 1
    _check_array_fits(buf, pos, length, min_item_size)
    return length, pos


def _check_array_fits(buf: Buffer, pos: int, length: int, min_item_size: int) -> None:
    if length <= 0:
        return
    remaining = len(buf) - pos
    if length * max(min_item_size, 1) > remaining and (min_item_size > 0 or length > 1 << 16):
        raise DecodeError(f"array of {length} items cannot fit in the {remaining} bytes left")


def _unpack_int16(buf: Buffer, pos: int) -> tuple[int]:
    try:
        return INT16.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("buffer ends inside a length field") from None


def _unpack_int32(buf: Buffer, pos: int) -> tuple[int]:
    try:
        return INT32.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("buffer ends inside a length field") from None


def _utf8(data: Buffer) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not valid UTF-8: {exc.reason}") from None
