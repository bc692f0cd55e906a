"""Helpers for the data-path and metadata message tests.

- compiling one declaration module without going through the registry (so these tests do not
  depend on every other module in kafkaclone.protocol.messages importing cleanly);
- a converter to the positional values of kafka-python's legacy protocol structs, for the old
  versions that kio (generated from Kafka 4.x) no longer has.

The round trips, the "every field is set" check and the kio converter are in
:mod:`tests.protocol.kio_helpers`.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from kafkaclone.protocol.schema import Field, Message, compile_message


@functools.cache
def compiled(module_name: str) -> tuple[Message, Message]:
    """The compiled request and response of ``kafkaclone.protocol.messages.<module_name>``."""
    module = importlib.import_module(f"kafkaclone.protocol.messages.{module_name}")
    return compile_message(module.REQUEST), compile_message(module.RESPONSE)


def versions(message: Message) -> list[int]:
    return list(range(message.min_version, message.max_version + 1))


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
