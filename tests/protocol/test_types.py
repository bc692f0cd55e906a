import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkaclone.common.errors import DecodeError
from kafkaclone.protocol import types as t


def encoded(writer, value) -> bytes:
    out = bytearray()
    writer(out, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
     (2**31 - 1, "ffffffff07"), (2**32 - 1, "ffffffff0f")],
)
def test_unsigned_varint_known_encodings(value, wire):
    assert encoded(t.write_uvarint, value).hex() == wire
    assert t.read_uvarint(bytes.fromhex(wire), 0) == (value, len(wire) // 2)


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
     (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")],
)
def test_zigzag_varint_known_encodings(value, wire):
    assert encoded(t.write_varint, value).hex() == wire
    assert t.read_varint(bytes.fromhex(wire), 0) == (value, len(wire) // 2)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_varlong_round_trip(value):
    wire = encoded(t.write_varlong, value)
    assert len(wire) <= 10
    assert t.read_varlong(wire + b"tail", 0) == (value, len(wire))


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_zigzag_varint_round_trip(value):
    wire = encoded(t.write_varint, value)
    assert len(wire) <= 5
    assert t.read_varint(memoryview(wire), 0) == (value, len(wire))


def test_varint_that_never_ends_is_refused():
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        t.read_uvarint(b"\xff" * 64, 0)
    with pytest.raises(DecodeError, match="longer than 10 bytes"):
        t.read_uvarlong(b"\xff" * 64, 0)


@pytest.mark.parametrize("reader", [t.read_uvarint, t.read_uvarlong, t.read_varint])
def test_truncated_varint_is_refused(reader):
    with pytest.raises(DecodeError, match="ends inside"):
        reader(b"\x80\x80", 0)
    with pytest.raises(DecodeError):
        reader(b"", 0)


def test_strings_plain_and_compact():
    assert encoded(t.write_string, "héllo").hex() == "0006" + "héllo".encode().hex()
    assert encoded(t.write_compact_string, "ab").hex() == "036162"
    assert encoded(t.write_nullable_string, None).hex() == "ffff"
    assert encoded(t.write_compact_nullable_string, None).hex() == "00"
    assert t.read_string(bytes.fromhex("00026162ff"), 0) == ("ab", 4)
    assert t.read_nullable_string(bytes.fromhex("ffff"), 0) == (None, 2)
    assert t.read_compact_nullable_string(bytes.fromhex("00"), 0) == (None, 1)
    assert t.read_compact_string(bytes.fromhex("0100"), 0) == ("", 1)


@pytest.mark.parametrize(
    ("reader", "wire", "message"),
    [
        (t.read_string, "0005616263", "runs past the end"),
        (t.read_string, "ffff", "non-nullable string"),
        (t.read_string, "00", "ends inside a length"),
        (t.read_nullable_string, "fffe", "runs past the end"),
        (t.read_compact_string, "00", "is null"),
        (t.read_compact_string, "0a41", "runs past the end"),
        (t.read_string, "0002c328", "not valid UTF-8"),
        (t.read_bytes, "7fffffff00", "runs past the end"),
        (t.read_bytes, "ffffffff", "non-nullable bytes"),
        (t.read_compact_bytes, "00", "are null"),
        (t.read_records, "0000001000", "runs past the end"),
        (t.read_uuid, "0011", "runs past the end"),
        (t.read_bool, "", "ends inside a boolean"),
    ],
)
def test_malformed_payloads_raise_decode_error(reader, wire, message):
    with pytest.raises(DecodeError, match=message):
        reader(bytes.fromhex(wire), 0)


def test_bytes_and_records():
    assert encoded(t.write_bytes, b"\x01\x02").hex() == "000000020102"
    assert encoded(t.write_compact_nullable_bytes, None).hex() == "00"
    assert t.read_nullable_bytes(bytes.fromhex("ffffffff"), 0) == (None, 4)
    frame = bytes.fromhex("00000003aabbcc99")
    view, end = t.read_records(frame, 0)
    assert end == 7
    assert isinstance(view, memoryview)
    assert view.obj is frame  # zero-copy: a view of the frame, not a copy
    assert bytes(view) == b"\xaa\xbb\xcc"
    compact, end = t.read_compact_records(bytes.fromhex("03aabb"), 0)
    assert bytes(compact) == b"\xaa\xbb"
    assert end == 3


def test_uuid_and_bool():
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    wire = encoded(t.write_uuid, value)
    assert wire == value.bytes
    assert t.read_uuid(wire, 0) == (value, 16)
    assert t.read_bool(b"\x00\x02", 1) == (True, 2)


def test_array_lengths_the_buffer_cannot_hold_are_refused_before_allocating():
    with pytest.raises(DecodeError, match="cannot fit"):
        t.read_array_length(bytes.fromhex("7fffffff") + b"\x00" * 10, 0, 4)
    with pytest.raises(DecodeError, match="negative length"):
        t.read_array_length(bytes.fromhex("fffffffe"), 0, 4)
    with pytest.raises(DecodeError, match="cannot fit"):
        t.read_compact_array_length(bytes.fromhex("ffffffff0f"), 0, 1)
    assert t.read_array_length(bytes.fromhex("ffffffff"), 0, 4) == (-1, 4)
    assert t.read_compact_array_length(bytes.fromhex("00"), 0, 1) == (-1, 1)
    assert t.read_array_length(bytes.fromhex("00000002") + b"\x00" * 8, 0, 4) == (2, 4)
