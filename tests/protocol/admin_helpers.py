"""Helpers for the admin and inter-broker message tests.

- :func:`at_version` cuts a message built with every field of every version down to what
  one version carries (absent fields back to their defaults, as a decoder returns them);
- :func:`assert_every_field_set` checks a test message really exercises every field;
- :func:`round_trip` checks encode -> decode -> encode;
- the kio part converts between our decoded messages and kio's entities, so that bytes
  written by one implementation are read by the other;
- a few byte builders (:func:`i32`, :func:`string`, ...) to spell out expected frames by hand.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import struct
import typing
import uuid
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta

from kafkaclone.protocol.schema import Field, Message
from kafkaclone.protocol.types import ZERO_UUID

# --- building and checking test messages ---------------------------------------------------


class _Classes(SimpleNamespace):
    def __call__(self, **values: Any) -> Any:
        return self._message_cls(**values)


def classes(message: Message) -> Any:
    """A builder for ``message``: called, it makes the message; its attributes are all the
    struct classes by Kafka's names (nested structs are otherwise only reachable through
    their parent's class)."""
    found: dict[str, type[Any]] = {}

    def walk(cls: type[Any], fields: tuple[Field, ...]) -> None:
        for f in fields:
            if f.is_struct:
                assert f.fields is not None
                child = getattr(cls, f.element_type)
                found[f.element_type] = child
                walk(child, f.fields)

    walk(message.cls, message.spec.fields)
    return _Classes(_message_cls=message.cls, **found)


def at_version(message: Message, obj: Any, version: int) -> Any:
    """A copy of ``obj`` holding only what ``version`` of ``message`` carries."""
    return _project(message.spec.fields, obj, version)


def _project(fields: tuple[Field, ...], obj: Any, version: int) -> Any:
    cls = type(obj)
    defaults = cls()
    values: dict[str, Any] = {}
    for f in fields:
        value = getattr(obj, f.name)
        if version not in f.versions:
            value = getattr(defaults, f.name)
        elif f.is_struct and value is not None:
            assert f.fields is not None
            if f.is_array:
                value = [_project(f.fields, item, version) for item in value]
            else:
                value = _project(f.fields, value, version)
        elif isinstance(value, list):
            value = list(value)
        values[f.name] = value
    return cls(**values)


def assert_every_field_set(message: Message, obj: Any, version: int) -> None:
    """Every field that exists at ``version`` holds a non-default value in at least one
    element (arrays of structs are never empty), so a round trip exercises every field."""
    _check(message.spec.fields, [obj], version, message.name)


def _check(fields: tuple[Field, ...], items: list[Any], version: int, path: str) -> None:
    defaults = type(items[0])()
    for f in fields:
        if version not in f.versions:
            continue
        where = f"{path}.{f.name} v{version}"
        values = [getattr(item, f.name) for item in items]
        default = getattr(defaults, f.name)
        assert any(value != default for value in values), f"{where} only holds {default!r}"
        if f.is_array:
            assert any(value for value in values), f"{where} is always empty"
        if f.is_struct:
            assert f.fields is not None
            children: list[Any] = []
            for value in values:
                if value is not None:
                    children.extend(value if f.is_array else [value])
            _check(f.fields, children, version, f"{path}.{f.element_type}")


def round_trip(message: Message, obj: Any, version: int) -> bytes:
    """encode -> decode gives ``obj`` back and decode -> encode gives the same bytes."""
    encoded = message.encode(obj, version)
    decoded = message.decode_exact(encoded, version)
    assert decoded == obj, f"{message.name} v{version}:\n{decoded!r}\n!=\n{obj!r}"
    assert message.encode(decoded, version) == encoded
    return encoded


# --- kio -----------------------------------------------------------------------------------


def kio_class(module: str, version: int, kind: str, name: str) -> type[Any] | None:
    """``kio.schema.<module>.v<version>.<kind>.<name>``, or None if kio lacks that version."""
    try:
        mod = importlib.import_module(f"kio.schema.{module}.v{version}.{kind}")
    except ModuleNotFoundError:
        return None
    cls: type[Any] = getattr(mod, name)
    return cls


def kio_encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def kio_decode(cls: type[Any], data: bytes) -> Any:
    entity, end = entity_reader(cls)(data, 0)
    assert end == len(data), f"kio read {end} of the {len(data)} bytes of {cls.__name__}"
    return entity


def _ours(kio_name: str, cls: type[Any]) -> str:
    """Our name for a kio field: the same, or with the ``_ms`` kio drops."""
    names = {f.name for f in dataclasses.fields(cls)}
    for candidate in (kio_name, kio_name + "_ms"):
        if candidate in names:
            return candidate
    raise KeyError(f"{cls.__qualname__} has no field for kio's {kio_name!r}")


def _kio_entity(hint: Any) -> type[Any] | None:
    """The kio entity class inside a type hint such as ``tuple[X, ...] | None``."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        found = _kio_entity(arg)
        if found is not None:
            return found
    return None


def to_kio(obj: Any, kio_cls: type[Any]) -> Any:
    """kio's entity with the values of our message ``obj``."""
    hints = typing.get_type_hints(kio_cls)
    values: dict[str, Any] = {}
    for kf in dataclasses.fields(kio_cls):
        value = getattr(obj, _ours(kf.name, type(obj)))
        child = _kio_entity(hints[kf.name])
        kafka_type = kf.metadata.get("kafka_type")
        if value is None:
            pass
        elif kafka_type == "uuid" and value == ZERO_UUID:
            value = None
        elif child is not None:
            value = (tuple(to_kio(item, child) for item in value) if isinstance(value, list)
                     else to_kio(value, child))
        elif kafka_type == "timedelta_i32":
            value = i32Timedelta.parse(datetime.timedelta(milliseconds=value))
        elif kafka_type == "error_code":
            value = ErrorCode(value)
        elif isinstance(value, list):
            value = tuple(value)
        values[kf.name] = value
    return kio_cls(**values)


def from_kio(entity: Any, message: Message) -> Any:
    """Our message with the values of kio's ``entity``."""
    return _from_kio(entity, message.cls, message.spec.fields)


def _from_kio(entity: Any, cls: type[Any], fields: tuple[Field, ...]) -> Any:
    by_name = {f.name: f for f in fields}
    values: dict[str, Any] = {}
    for kf in dataclasses.fields(entity):
        name = _ours(kf.name, cls)
        f = by_name[name]
        value = getattr(entity, kf.name)
        if value is None and f.type == "uuid":
            value = ZERO_UUID  # kio's name for the all-zero uuid
        elif value is None:
            pass
        elif f.is_struct:
            assert f.fields is not None
            child = getattr(cls, f.element_type)
            value = ([_from_kio(item, child, f.fields) for item in value] if f.is_array
                     else _from_kio(value, child, f.fields))
        elif isinstance(value, tuple):
            value = [_plain(item) for item in value]
        else:
            value = _plain(value)
        values[name] = value
    return cls(**values)


def _plain(value: Any) -> Any:
    """kio's values as ours: plain ints and strs, milliseconds for timedeltas."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return value


def assert_kio_agrees(message: Message, obj: Any, version: int, kio_cls: type[Any]) -> Any:
    """Ours and kio write the same bytes for ``obj``, and each reads the other's bytes back
    to the same values. Returns kio's decoding of our bytes."""
    ours = message.encode(obj, version)
    decoded_by_kio = kio_decode(kio_cls, ours)
    assert from_kio(decoded_by_kio, message) == obj, f"kio reads {message.name} v{version}"
    assert decoded_by_kio == to_kio(obj, kio_cls)
    theirs = kio_encode(to_kio(obj, kio_cls))
    assert message.decode_exact(theirs, version) == obj, f"ours reads kio's v{version}"
    assert theirs == ours, f"{message.name} v{version}: kio writes other bytes"
    return decoded_by_kio


# --- byte builders for hand-written frames -------------------------------------------------


def i8(value: int) -> bytes:
    return struct.pack(">b", value)


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def boolean(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def string(value: str | None) -> bytes:
    """A classic (INT16-length) string; None is null."""
    if value is None:
        return i16(-1)
    data = value.encode()
    return i16(len(data)) + data


def compact_string(value: str | None) -> bytes:
    """A compact (uvarint length + 1) string of under 127 bytes; None is null."""
    if value is None:
        return b"\x00"
    data = value.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def array(*items: bytes) -> bytes:
    """A classic array (INT32 count) of already encoded items."""
    return i32(len(items)) + b"".join(items)


def compact_array(*items: bytes) -> bytes:
    """A compact array (uvarint count + 1) of fewer than 127 already encoded items."""
    assert len(items) < 127
    return bytes([len(items) + 1]) + b"".join(items)


def int32s(*values: int) -> bytes:
    return array(*(i32(v) for v in values))


def compact_int32s(*values: int) -> bytes:
    return compact_array(*(i32(v) for v in values))


def uuid_bytes(value: uuid.UUID) -> bytes:
    return value.bytes


NO_TAGS = b"\x00"
"""An empty tagged-field section."""
