"""Records inside a v2 record batch, and control records.

A record on the wire::

    length            varint   (bytes that follow)
    attributes        int8     (unused)
    timestampDelta    varlong
    offsetDelta       varint
    keyLength         varint   (-1: null key)
    key               bytes
    valueLength       varint   (-1: null value)
    value             bytes
    headersCount      varint
    [headerKeyLength varint, headerKey utf-8, headerValueLength varint, headerValue bytes]

Varints are zigzag-encoded (Kafka's ByteUtils): at most 5 bytes for a varint and 10 for a
varlong. Any framing error inside a batch whose CRC was valid is InvalidRecordError, as in
Kafka's DefaultRecord.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from kafkaclone.common.errors import DecodeError, InvalidRecordError
from kafkaclone.protocol import types
from kafkaclone.protocol.records.common import BytesLike

Header = tuple[str, bytes | None]

_INT16_PAIR: Final = struct.Struct(">hh")
_END_TXN_VALUE: Final = struct.Struct(">hi")


@dataclass(slots=True)
class Record:
    """One record of a v2 batch; offset and timestamp are relative to the batch's."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[Header] = field(default_factory=list)


# -- varints ----------------------------------------------------------------------------


append_varint = types.write_varint
"""Append a signed 32-bit int as a zigzag varint."""
append_varlong = types.write_varlong
"""Append a signed 64-bit int as a zigzag varlong."""


def read_varint(data: BytesLike, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: ``(value, next_pos)``; InvalidRecordError if malformed."""
    try:
        return types.read_varint(data, pos)
    except DecodeError as exc:
        raise InvalidRecordError(f"Found invalid record structure: {exc.message}") from None


def read_varlong(data: BytesLike, pos: int) -> tuple[int, int]:
    """A zigzag varlong at ``pos``: ``(value, next_pos)``; InvalidRecordError if malformed."""
    try:
        return types.read_varlong(data, pos)
    except DecodeError as exc:
        raise InvalidRecordError(f"Found invalid record structure: {exc.message}") from None


# -- encoding ---------------------------------------------------------------------------


def _append_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(0x01)  # zigzag(-1)
    else:
        append_varint(out, len(data))
        out += data


def append_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
    attributes: int = 0,
) -> None:
    """Append one encoded record (length prefix included) to ``out``."""
    body = bytearray()
    body.append(attributes & 0xFF)
    append_varlong(body, timestamp_delta)
    append_varint(body, offset_delta)
    _append_bytes(body, key)
    _append_bytes(body, value)
    append_varint(body, len(headers))
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8", "surrogateescape")
        append_varint(body, len(encoded_key))
        body += encoded_key
        _append_bytes(body, header_value)
    append_varint(out, len(body))
    out += body


def encode_record(record: Record) -> bytes:
    """One record, length prefix included."""
    out = bytearray()
    append_record(
        out,
        record.offset_delta,
        record.timestamp_delta,
        record.key,
        record.value,
        record.headers,
        record.attributes,
    )
    return bytes(out)


# -- decoding ---------------------------------------------------------------------------


def iter_records(data: bytes, count: int) -> Iterator[Record]:
    """Decode ``count`` records from ``data`` (a batch's records section, inflated).

    Raises InvalidRecordError for a negative count, a record that does not parse or whose
    length does not match its fields, fewer records than ``count``, or bytes left over
    after the last one.
    """
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
    pos = 0
    end = len(data)
    for _ in range(count):
        if pos >= end:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
        record, pos = _decode_record(data, pos, end)
        yield record
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")


def decode_record(data: BytesLike, pos: int = 0) -> tuple[Record, int]:
    """Decode the record at ``pos``: ``(record, next_pos)``."""
    buf = bytes(data)
    if pos >= len(buf):
        raise InvalidRecordError("Found invalid record structure: no record at this position")
    return _decode_record(buf, pos, len(buf))


def _decode_record(data: bytes, pos: int, end: int) -> tuple[Record, int]:
    """The hot path of record decoding.

    Varints of one and two bytes (lengths under 8 KiB, small deltas) are decoded inline;
    longer ones go through ``read_varint``. Indexing past the end of ``data`` raises
    IndexError, turned into InvalidRecordError; every length is checked against the end of
    the record before slicing, and the fields must end exactly where the record does.
    """
    try:
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            length, pos = read_varint(data, pos)
        if length < 6 or length > end - pos:  # attributes + five 1-byte varints at least
            raise InvalidRecordError(
                f"Invalid record size: expected {length} bytes in record payload, but the "
                f"buffer has {end - pos} remaining bytes and a record needs at least 6"
            )
        record_end = pos + length
        attributes = data[pos]
        pos += 1

        b = data[pos]
        if b < 0x80:
            timestamp_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            timestamp_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            timestamp_delta, pos = read_varlong(data, pos)

        b = data[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            offset_delta, pos = read_varint(data, pos)

        b = data[pos]
        if b < 0x80:
            key_length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            key_length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            key_length, pos = read_varint(data, pos)
        key: bytes | None = None
        if key_length >= 0:  # Kafka reads any negative length as null
            if key_length > record_end - pos:
                raise InvalidRecordError("Found invalid record structure: key runs past the record")
            key = data[pos : pos + key_length]
            pos += key_length

        b = data[pos]
        if b < 0x80:
            value_length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            value_length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            value_length, pos = read_varint(data, pos)
        value: bytes | None = None
        if value_length >= 0:
            if value_length > record_end - pos:
                raise InvalidRecordError(
                    "Found invalid record structure: value runs past the record"
                )
            value = data[pos : pos + value_length]
            pos += value_length

        headers: list[Header] = []
        b = data[pos]
        if b == 0:
            pos += 1
        else:
            header_count, pos = read_varint(data, pos)
            if header_count < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
            for _ in range(header_count):
                header, pos = _decode_header(data, pos, record_end)
                headers.append(header)
    except IndexError:
        raise InvalidRecordError(
            "Found invalid record structure: the record runs past the end of the batch"
        ) from None

    if pos != record_end:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {length} bytes in record payload, "
            f"but instead read {pos - (record_end - length)}"
        )
    return Record(attributes, timestamp_delta, offset_delta, key, value, headers), pos


def _decode_header(data: bytes, pos: int, record_end: int) -> tuple[Header, int]:
    key_length, pos = read_varint(data, pos)
    if key_length < 0:
        raise InvalidRecordError("Invalid negative header key size")
    if key_length > record_end - pos:
        raise InvalidRecordError("Found invalid record structure: header key past the record")
    header_key = data[pos : pos + key_length].decode("utf-8", "surrogateescape")
    pos += key_length
    value_length, pos = read_varint(data, pos)
    if value_length < 0:
        return (header_key, None), pos
    if value_length > record_end - pos:
        raise InvalidRecordError("Found invalid record structure: header value past the record")
    return (header_key, data[pos : pos + value_length]), pos + value_length


# -- control records --------------------------------------------------------------------


class ControlRecordType(IntEnum):
    """The type in a control record's key (Kafka's ControlRecordType)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2


CONTROL_RECORD_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0


def encode_control_record_key(
    control_type: int, version: int = CONTROL_RECORD_KEY_VERSION
) -> bytes:
    """The key of a control record: ``version int16, type int16``."""
    return _INT16_PAIR.pack(version, control_type)


def decode_control_record_key(key: bytes | None) -> ControlRecordType:
    """The type of a control record; UNKNOWN for a type this version does not know.

    A key shorter than 4 bytes or with a negative version is InvalidRecordError. A higher
    version is read as version 0, as Kafka does.
    """
    if key is None or len(key) < _INT16_PAIR.size:
        size = -1 if key is None else len(key)
        raise InvalidRecordError(
            "Invalid value size found for end control record key. Must have at least 4 "
            f"bytes, but found only {size}"
        )
    version, type_id = _INT16_PAIR.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The payload of a transaction marker (a COMMIT or ABORT control record)."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def encode_key(self) -> bytes:
        return encode_control_record_key(self.control_type)

    def encode_value(self) -> bytes:
        """``version int16, coordinatorEpoch int32``."""
        return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """Read a marker back from a control record's key and value (InvalidRecordError
        if it is not a COMMIT or ABORT record or its value is too short)."""
        control_type = decode_control_record_key(key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidRecordError(
                f"Invalid control record type for end transaction marker {control_type!r}"
            )
        if value is None or len(value) < _END_TXN_VALUE.size:
            size = -1 if value is None else len(value)
            raise InvalidRecordError(
                "Invalid value size found for end transaction marker. Must have at least 6 "
                f"bytes, but found only {size}"
            )
        _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        return cls(control_type, coordinator_epoch)

    @classmethod
    def from_record(cls, record: Record) -> EndTransactionMarker:
        return cls.decode(record.key, record.value)
