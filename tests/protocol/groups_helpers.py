"""Helpers for the group/offset message tests: round trips, coverage of every field, and a
generic converter between kafkaclone's decoded messages and kio's entities."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import typing
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta, i64Timedelta

from kafkaclone.protocol.schema import Field, Message

# kio names that are not ours once "_ms" is accounted for: kio is generated from a newer
# Kafka, which renamed a few fields.
KIO_ALIASES = {"generation_id_or_member_epoch": "generation_id"}


def round_trip(message: Message, obj: Any, version: int) -> bytes:
    """Assert encode -> decode gives ``obj`` back and decode -> encode the same bytes."""
    encoded = message.encode(obj, version)
    decoded = message.decode_exact(encoded, version)
    assert decoded == obj, f"{message.name} v{version}: {decoded!r} != {obj!r}"
    assert message.encode(decoded, version) == encoded
    return encoded


def present(f: Field, version: int) -> bool:
    return version in f.versions


def assert_every_field_set(message: Message, obj: Any, version: int) -> None:
    """Every field that exists at ``version`` holds a value other than its default (in at
    least one element, inside arrays of structs), so a round trip exercises every field."""
    _check_structs(message.spec.fields, message.cls, [obj], version, message.name)


def _check_structs(fields: tuple[Field, ...], cls: type[Any], items: list[Any], version: int,
                   path: str) -> None:
    defaults = cls()
    for f in fields:
        if not present(f, version):
            continue
        values = [getattr(item, f.name) for item in items]
        where = f"{path}.{f.name} v{version}"
        default = getattr(defaults, f.name)
        assert any(value != default for value in values), f"{where} only holds {default!r}"
        if f.is_struct:
            assert f.fields is not None
            children: list[Any] = []
            for value in values:
                children.extend(value if f.is_array else [value])
            assert children, f"{where} has no element"
            _check_structs(f.fields, getattr(cls, f.element_type), children, version,
                           f"{path}.{f.element_type}")


# --- kio -----------------------------------------------------------------------------------


def kio_class(module: str, version: int, kind: str, name: str) -> type[Any] | None:
    """kio's entity class for ``kio.schema.<module>.v<version>.<kind>``, None if kio lacks
    that version."""
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
    assert end == len(data), f"kio left {len(data) - end} bytes of {cls.__name__}"
    return entity


def _our_name(kio_name: str, obj_or_cls: Any) -> str:
    name = KIO_ALIASES.get(kio_name, kio_name)
    slots = {f.name for f in dataclasses.fields(obj_or_cls)}
    for candidate in (name, name + "_ms"):
        if candidate in slots:
            return candidate
    raise KeyError(f"{type(obj_or_cls).__name__} has no field for kio's {kio_name!r}")


def _entity_type(hint: Any) -> type[Any] | None:
    """The kio dataclass inside a hint like ``tuple[X, ...] | None``, if any."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        found = _entity_type(arg)
        if found is not None:
            return found
    return None


def to_kio(obj: Any, kio_cls: type[Any]) -> Any:
    """kio's entity holding the values of our decoded message ``obj``."""
    hints = typing.get_type_hints(kio_cls)
    values: dict[str, Any] = {}
    for kf in dataclasses.fields(kio_cls):
        value = getattr(obj, _our_name(kf.name, obj))
        values[kf.name] = _value_to_kio(value, kf, hints[kf.name])
    return kio_cls(**values)


def _value_to_kio(value: Any, kf: dataclasses.Field[Any], hint: Any) -> Any:
    if value is None:
        return None
    child = _entity_type(hint)
    if child is not None:
        if isinstance(value, list):
            return tuple(to_kio(item, child) for item in value)
        return to_kio(value, child)
    kafka_type = kf.metadata["kafka_type"]
    if kafka_type == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "error_code":
        return ErrorCode(value)
    if isinstance(value, list):
        return tuple(value)
    return value


def from_kio(entity: Any, message: Message) -> Any:
    """Our message class holding the values of kio's ``entity``."""
    return _struct_from_kio(entity, message.cls, message.spec.fields)


def _struct_from_kio(entity: Any, cls: type[Any], fields: tuple[Field, ...]) -> Any:
    by_name = {f.name: f for f in fields}
    values: dict[str, Any] = {}
    for kf in dataclasses.fields(entity):
        ours = _our_name(kf.name, cls)
        values[ours] = _value_from_kio(getattr(entity, kf.name), by_name[ours], cls)
    return cls(**values)


def _value_from_kio(value: Any, f: Field, parent: type[Any]) -> Any:
    if value is None:
        return None
    if f.is_struct:
        assert f.fields is not None
        child = getattr(parent, f.element_type)
        if f.is_array:
            return [_struct_from_kio(item, child, f.fields) for item in value]
        return _struct_from_kio(value, child, f.fields)
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return _plain(value)


def _plain(value: Any) -> Any:
    """kio hands out str/int subclasses (TopicName, i32); ours are plain."""
    for base in (bool, int, str, bytes):
        if isinstance(value, base):
            return base(value)  # type: ignore[arg-type]
    return value


def assert_kio_agrees(message: Message, obj: Any, version: int, kio_cls: type[Any]) -> Any:
    """Ours and kio write the same bytes for ``obj`` and each decodes the other's bytes to
    the same values. Returns kio's decoding of our bytes, for concrete assertions."""
    ours = message.encode(obj, version)
    theirs = kio_encode(to_kio(obj, kio_cls))
    assert ours == theirs, f"{message.name} v{version}: ours and kio's bytes differ"
    decoded_by_kio = kio_decode(kio_cls, ours)
    assert from_kio(decoded_by_kio, message) == message.decode_exact(ours, version)
    assert message.decode_exact(theirs, version) == obj
    return decoded_by_kio


__all__ = [
    "assert_every_field_set",
    "assert_kio_agrees",
    "from_kio",
    "kio_class",
    "kio_decode",
    "kio_encode",
    "round_trip",
    "to_kio",
]
