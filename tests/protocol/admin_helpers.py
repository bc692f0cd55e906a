"""Helpers for the admin and inter-broker message tests (the round trips and the kio
converter are in :mod:`tests.protocol.kio_helpers`):

- :func:`classes` reaches the nested struct classes of a message by Kafka's names;
- a few byte builders (:func:`i32`, :func:`string`, ...) to spell out expected frames by hand.
"""

from __future__ import annotations

import struct
import uuid
from types import SimpleNamespace
from typing import Any

from kafkaclone.protocol.schema import Field, Message

# --- building test messages ----------------------------------------------------------------


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
