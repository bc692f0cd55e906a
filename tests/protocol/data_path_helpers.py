"""Helpers for the data-path and metadata message tests.

- compiling one declaration module without going through the registry (so these tests do not
  depend on every other module in kafkaclone.protocol.messages importing cleanly);
- round trips, "every field is set" checks and projection of a full instance onto a version;
- a generic converter between kafkaclone's messages and kio's entities, driven by our
  declaration, that also checks that both sides have the same fields at that version;
- a converter to the positional values of kafka-python's legacy protocol structs, for the old
  versions that kio (generated from Kafka 4.x) no longer has.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import io
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.primitive import Records, i32Timedelta, i64Timedelta

from kafkaclone.protocol.schema import Field, Message, compile_message

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@functools.cache
def compiled(module_name: str) -> tuple[Message, Message]:
    """The compiled request and response of ``kafkaclone.protocol.messages.<module_name>``."""
    module = importlib.import_module(f"kafkaclone.protocol.messages.{module_name}")
    return compile_message(module.REQUEST), compile_message(module.RESPONSE)


def versions(message: Message) -> list[int]:
    return list(range(message.min_version, message.max_version + 1))


# --- round trips ---------------------------------------------------------------------------


def round_trip(message: Message, obj: Any, version: int) -> bytes:
    """encode -> decode gives ``obj`` back, decode -> encode gives the same bytes."""
    encoded = message.encode(obj, version)
    decoded = message.decode_exact(encoded, version)
    assert decoded == obj, f"{message.name} v{version}: {decoded!r} != {obj!r}"
    assert message.encode(decoded, version) == encoded, f"{message.name} v{version}"
    return encoded


def project(message: Message, obj: Any, version: int) -> Any:
    """A copy of ``obj`` with every field that ``version`` lacks reset to its default: what
    decoding ``obj`` encoded at ``version`` must give."""
    return _project(message.spec.fields, message.cls, obj, version)


def _project(fields: tuple[Field, ...], cls: type[Any], obj: Any, version: int) -> Any:
    defaults = cls()
    values: dict[str, Any] = {}
    for f in fields:
        value = getattr(obj, f.name)
        if version not in f.versions:
            values[f.name] = getattr(defaults, f.name)
        elif f.is_struct and value is not None:
            assert f.fields is not None
            child = getattr(cls, f.element_type)
            if f.is_array:
                values[f.name] = [_project(f.fields, child, item, version) for item in value]
            else:
                values[f.name] = _project(f.fields, child, value, version)
        else:
            values[f.name] = value
    return cls(**values)


def assert_every_field_set(message: Message, obj: Any, version: int) -> None:
    """Every field present at ``version`` holds a value other than its default, and every
    array holds at least one element, so a round trip exercises the whole declaration."""
    _check_set(message.spec.fields, message.cls, obj, version, message.name)


def _check_set(fields: tuple[Field, ...], cls: type[Any], obj: Any, version: int,
               path: str) -> None:
    defaults = cls()
    for f in fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        where = f"{path}.{f.name} v{version}"
        assert value != getattr(defaults, f.name), f"{where} holds its default {value!r}"
        if f.is_array:
            assert value, f"{where} is empty"
        if f.is_struct:
            assert f.fields is not None
            child = getattr(cls, f.element_type)
            for item in value if f.is_array else [value]:
                _check_set(f.fields, child, item, version, f"{path}.{f.element_type}")


# --- kio -------------------------------------------------------------------------------------


def kio_types(api: str, version: int) -> tuple[type[Any], type[Any]] | None:
    """kio's request and response entity of ``api`` at ``version``, or None if kio lacks it."""
    try:
        request = importlib.import_module(f"kio.schema.{api}.v{version}.request")
        response = importlib.import_module(f"kio.schema.{api}.v{version}.response")
    except ModuleNotFoundError:
        return None
    return _entity(request), _entity(response)


def _entity(module: Any) -> type[Any]:
    """The top-level entity of a kio module: the one class no other class nests."""
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and dataclasses.is_dataclass(v)
               and v.__module__ == module.__name__]
    nested = {classify_field(f).type_ for c in classes for f in dataclasses.fields(c)
              if isinstance(classify_field(f), EntityField | EntityTupleField)}
    (top,) = [c for c in classes if c not in nested]
    return top


def kio_encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def kio_decode(kio_type: type[Any], data: bytes) -> Any:
    value, size = entity_reader(kio_type)(data, 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return value


def _kio_names(fields: tuple[Field, ...], kio_type: type[Any], version: int) -> dict[str, str]:
    """Our field name -> kio's, for the fields present at ``version``; the two sides must
    have exactly the same fields (kio drops the ``_ms`` of durations and timestamps)."""
    theirs = {f.name for f in dataclasses.fields(kio_type)}
    mapping: dict[str, str] = {}
    for f in fields:
        if version not in f.versions:
            continue
        if f.name in theirs:
            mapping[f.name] = f.name
        elif f.name.endswith("_ms") and f.name[:-3] in theirs:
            mapping[f.name] = f.name[:-3]
        else:
            raise AssertionError(f"{kio_type.__qualname__} v{version} has no field {f.name}")
    extra = theirs - set(mapping.values())
    assert not extra, f"{kio_type.__qualname__} v{version} has fields we lack: {extra}"
    return mapping


def to_kio(message: Message, obj: Any, version: int, kio_type: type[Any]) -> Any:
    """Our message as the kio entity ``kio_type`` (of the same version)."""
    return _to_kio(message.spec.fields, obj, version, kio_type)


def _to_kio(fields: tuple[Field, ...], obj: Any, version: int, kio_type: type[Any]) -> Any:
    names = _kio_names(fields, kio_type, version)
    kio_fields = {f.name: f for f in dataclasses.fields(kio_type)}
    values: dict[str, Any] = {}
    for f in fields:
        if f.name not in names:
            continue
        kio_field = kio_fields[names[f.name]]
        value = getattr(obj, f.name)
        if value is None:
            values[kio_field.name] = None
        elif f.is_struct:
            assert f.fields is not None
            child = classify_field(kio_field).type_
            if f.is_array:
                values[kio_field.name] = tuple(
                    _to_kio(f.fields, item, version, child) for item in value)
            else:
                values[kio_field.name] = _to_kio(f.fields, value, version, child)
        elif f.is_array:
            values[kio_field.name] = tuple(value)
        else:
            values[kio_field.name] = _primitive_to_kio(kio_field, value)
    return kio_type(**values)


def _primitive_to_kio(kio_field: dataclasses.Field[Any], value: Any) -> Any:
    kind = kio_field.metadata.get("kafka_type")
    if kind == "error_code":
        return ErrorCode(value)
    if kind == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kind == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kind == "datetime_i64":
        return None if value == -1 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kind == "records":
        return Records(bytes(value))
    if kind == "uuid" and value == uuid.UUID(int=0):
        return None
    if kind == "bytes":
        return bytes(value)
    return value


def from_kio(message: Message, entity: Any, version: int) -> Any:
    """A kio entity as our message (of the same version)."""
    return _from_kio(message.spec.fields, message.cls, entity, version)


def _from_kio(fields: tuple[Field, ...], cls: type[Any], entity: Any, version: int) -> Any:
    names = _kio_names(fields, type(entity), version)
    kio_fields = {f.name: f for f in dataclasses.fields(entity)}
    values: dict[str, Any] = {}
    for f in fields:
        if f.name not in names:
            continue
        kio_field = kio_fields[names[f.name]]
        value = getattr(entity, kio_field.name)
        if f.is_struct and value is not None:
            assert f.fields is not None
            child = getattr(cls, f.element_type)
            if f.is_array:
                values[f.name] = [_from_kio(f.fields, child, item, version) for item in value]
            else:
                values[f.name] = _from_kio(f.fields, child, value, version)
        elif f.is_array and value is not None:
            values[f.name] = [_primitive_from_kio(kio_field, item) for item in value]
        else:
            values[f.name] = _primitive_from_kio(kio_field, value)
    return cls(**values)


def _primitive_from_kio(kio_field: dataclasses.Field[Any], value: Any) -> Any:
    kind = kio_field.metadata.get("kafka_type")
    if kind == "uuid" and value is None:
        return uuid.UUID(int=0)
    if kind == "datetime_i64" and value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, ErrorCode):
        return int(value)
    if isinstance(value, bytes):
        return bytes(value)
    return value


# --- kafka-python's legacy structs -------------------------------------------------------------


def positional(message: Message, obj: Any, version: int) -> tuple[Any, ...]:
    """Our message as the nested positional values kafka-python's legacy structs use."""
    return _positional(message.spec.fields, obj, version)


def _positional(fields: tuple[Field, ...], obj: Any, version: int) -> tuple[Any, ...]:
    values: list[Any] = []
    for f in fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        if f.is_struct and f.is_array:
            assert f.fields is not None
            values.append([_positional(f.fields, item, version) for item in value])
        elif f.is_struct:
            assert f.fields is not None
            values.append(_positional(f.fields, value, version))
        elif f.is_array:
            values.append(list(value))
        elif f.type in ("records", "bytes") and value is not None:
            values.append(bytes(value))
        else:
            values.append(value)
    return tuple(values)


def normalise(value: Any) -> Any:
    """kafka-python decodes arrays as lists and structs as tuples: make both tuples."""
    if isinstance(value, list | tuple):
        return tuple(normalise(item) for item in value)
    return value
