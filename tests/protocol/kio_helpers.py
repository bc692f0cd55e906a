"""Helpers shared by the protocol message tests (admin, groups, data path).

- :func:`round_trip` checks encode -> decode -> encode;
- :func:`at_version` cuts a message built with every field of every version down to what
  one version carries, and :func:`assert_every_field_set` checks a test message really
  exercises every field of a version;
- the kio part converts between our messages and kio's entities (kio is generated from
  Kafka 4.x's JSON), driven by our declaration at one version, so that bytes written by one
  implementation are read by the other.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import types
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.primitive import Records, i32Timedelta, i64Timedelta

from kafkaclone.protocol.schema import Field, Message
from kafkaclone.protocol.types import ZERO_UUID

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# Our name -> kio's, where kio's newer Kafka renamed a field (besides dropping "_ms").
KIO_RENAMES = {"generation_id": "generation_id_or_member_epoch"}


# --- building and checking test messages ---------------------------------------------------


def round_trip(message: Message, obj: Any, version: int) -> bytes:
    """encode -> decode gives ``obj`` back and decode -> encode gives the same bytes."""
    encoded = message.encode(obj, version)
    decoded = message.decode_exact(encoded, version)
    assert decoded == obj, f"{message.name} v{version}:\n{decoded!r}\n!=\n{obj!r}"
    assert message.encode(decoded, version) == encoded, f"{message.name} v{version}"
    return encoded


def at_version(message: Message, obj: Any, version: int) -> Any:
    """A copy of ``obj`` with every field that ``version`` lacks reset to its default: what
    decoding ``obj`` encoded at ``version`` must give."""
    return _at_version(message.spec.fields, message.cls, obj, version)


def _at_version(fields: tuple[Field, ...], cls: type[Any], obj: Any, version: int) -> Any:
    defaults = cls()
    values: dict[str, Any] = {}
    for f in fields:
        value = getattr(obj, f.name)
        if version not in f.versions:
            value = getattr(defaults, f.name)
        elif f.is_struct and value is not None:
            assert f.fields is not None
            child = getattr(cls, f.element_type)
            if f.is_array:
                value = [_at_version(f.fields, child, item, version) for item in value]
            else:
                value = _at_version(f.fields, child, value, version)
        elif isinstance(value, list):
            value = list(value)
        values[f.name] = value
    return cls(**values)


def assert_every_field_set(message: Message, obj: Any, version: int, *,
                           in_every_element: bool = False) -> None:
    """Every field present at ``version`` holds a value other than its default and every
    array holds elements, so a round trip exercises the whole declaration. Inside arrays of
    structs that must hold in at least one element, or with ``in_every_element`` in each."""
    holds = all if in_every_element else any
    _check_set(message.spec.fields, message.cls, [obj], version, message.name, holds)


def _check_set(fields: tuple[Field, ...], cls: type[Any], items: list[Any], version: int,
               path: str, holds: Callable[[Iterable[object]], bool]) -> None:
    defaults = cls()
    for f in fields:
        if version not in f.versions:
            continue
        where = f"{path}.{f.name} v{version}"
        values = [getattr(item, f.name) for item in items]
        default = getattr(defaults, f.name)
        assert holds(value != default for value in values), f"{where} holds {default!r}"
        if f.is_array:
            assert holds(value for value in values), f"{where} is empty"
        if f.is_struct:
            assert f.fields is not None
            assert holds(value is not None for value in values), f"{where} is null"
            children: list[Any] = []
            for value in values:
                if value is not None:
                    children.extend(value if f.is_array else [value])
            assert children, f"{where} has no element"
            _check_set(f.fields, getattr(cls, f.element_type), children, version,
                       f"{path}.{f.element_type}", holds)


# --- kio -----------------------------------------------------------------------------------


def _kio_module(api: str, version: int, kind: str) -> types.ModuleType | None:
    """``kio.schema.<api>.v<version>.<kind>``, or None if kio lacks that version."""
    try:
        return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    except ModuleNotFoundError:
        return None


def kio_class(api: str, version: int, kind: str, name: str) -> type[Any] | None:
    """``kio.schema.<api>.v<version>.<kind>.<name>``, or None if kio lacks that version."""
    module = _kio_module(api, version, kind)
    if module is None:
        return None
    cls: type[Any] = getattr(module, name)
    return cls


def kio_types(api: str, version: int) -> tuple[type[Any], type[Any]] | None:
    """kio's request and response entity of ``api`` at ``version``, or None if kio lacks it."""
    request = _kio_module(api, version, "request")
    response = _kio_module(api, version, "response")
    if request is None or response is None:
        return None
    return _top_entity(request), _top_entity(response)


def _top_entity(module: types.ModuleType) -> type[Any]:
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


def kio_decode(kio_cls: type[Any], data: bytes) -> Any:
    entity, end = entity_reader(kio_cls)(data, 0)
    assert end == len(data), f"kio read {end} of the {len(data)} bytes of {kio_cls.__name__}"
    return entity


def _kio_names(fields: tuple[Field, ...], kio_cls: type[Any], version: int) -> dict[str, str]:
    """Our field name -> kio's, for the fields present at ``version``; the two sides must
    have exactly the same fields (kio drops the ``_ms`` of durations and timestamps)."""
    theirs = {f.name for f in dataclasses.fields(kio_cls)}
    mapping: dict[str, str] = {}
    for f in fields:
        if version not in f.versions:
            continue
        candidates = [f.name, KIO_RENAMES.get(f.name), f.name.removesuffix("_ms")]
        found = [name for name in candidates if name in theirs]
        if not found:
            raise AssertionError(f"{kio_cls.__qualname__} v{version} has no field {f.name}")
        mapping[f.name] = found[0]
    extra = theirs - set(mapping.values())
    assert not extra, f"{kio_cls.__qualname__} v{version} has fields we lack: {extra}"
    return mapping


def to_kio(message: Message, obj: Any, version: int, kio_cls: type[Any]) -> Any:
    """Our message as the kio entity ``kio_cls`` (of the same version)."""
    return _to_kio(message.spec.fields, obj, version, kio_cls)


def _to_kio(fields: tuple[Field, ...], obj: Any, version: int, kio_cls: type[Any]) -> Any:
    names = _kio_names(fields, kio_cls, version)
    kio_fields = {f.name: f for f in dataclasses.fields(kio_cls)}
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
    return kio_cls(**values)


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
    if kind == "uuid" and value == ZERO_UUID:
        return None  # kio's name for the all-zero uuid
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
    """kio's value as ours: milliseconds for durations and timestamps, the zero uuid and -1
    for kio's None, plain ints, strs and bytes for kio's subclasses (ErrorCode, TopicName)."""
    kind = kio_field.metadata.get("kafka_type")
    if kind == "uuid" and value is None:
        return ZERO_UUID
    if kind == "datetime_i64" and value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    for plain in (bool, int, str, bytes):
        if isinstance(value, plain):
            return plain(value)  # type: ignore[arg-type]
    return value


def assert_kio_agrees(message: Message, obj: Any, version: int, kio_cls: type[Any]) -> Any:
    """Ours and kio write the same bytes for ``obj``, and each reads the other's bytes back
    to the same values. Returns kio's decoding of our bytes, for concrete assertions."""
    ours = message.encode(obj, version)
    expected = to_kio(message, obj, version, kio_cls)
    theirs = kio_encode(expected)
    assert theirs == ours, f"{message.name} v{version}: kio writes other bytes"
    decoded_by_kio = kio_decode(kio_cls, ours)
    assert decoded_by_kio == expected, f"kio reads {message.name} v{version}"
    assert from_kio(message, decoded_by_kio, version) == obj, f"kio reads {message.name} v{version}"
    assert from_kio(message, decoded_by_kio, version) == message.decode_exact(ours, version)
    assert message.decode_exact(theirs, version) == obj, f"ours reads kio's v{version}"
    return decoded_by_kio
