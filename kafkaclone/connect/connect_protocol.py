"""The Connect group's subprotocols, as bytes (Kafka's ``ConnectProtocol``,
``IncrementalCooperativeConnectProtocol`` and ``ConnectProtocolCompatibility``).

A worker joins with protocol type ``connect`` and offers, most preferred first:

==============================  ==========================================================
``connect.protocol``            protocols offered (name: metadata version)
==============================  ==========================================================
``sessioned`` (2.8's default)   ``sessioned``: 2, ``compatible``: 1, ``default``: 0
``compatible``                  ``compatible``: 1, ``default``: 0
``eager``                       ``default``: 0
==============================  ==========================================================

The coordinator picks one every member offers (each member votes for its first), so a
group with one eager worker falls back to ``default`` (eager rebalancing), and a group
mixing sessioned and compatible workers runs ``compatible`` (no session key).

Member metadata (Kafka's Struct encoding: big-endian, strings with an int16 length,
arrays with an int32 count, bytes with an int32 length, -1 for null)::

    v0:    Version int16, Url string, ConfigOffset int64
    v1/2:  the same, then Allocation bytes (nullable): the member's current assignment

Assignment::

    v0:    Version int16, Error int16, Leader string, LeaderUrl string, ConfigOffset int64,
           Assignment [Connector string, Tasks [int32]]
    v1/2:  the same, then Revoked [Connector string, Tasks [int32]], ScheduledDelay int32

In a connector's task list the id -1 (``CONNECTOR_TASK``) stands for the connector itself.
v1 and v2 differ only in the version number: v2 (``sessioned``) means every member can
verify requests signed with the leader's session key.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from kafkaclone.common.errors import DecodeError
from kafkaclone.protocol import types as t

_T = TypeVar("_T")

CONNECT_PROTOCOL_V0: Final = 0
CONNECT_PROTOCOL_V1: Final = 1
CONNECT_PROTOCOL_V2: Final = 2
CONNECTOR_TASK: Final = -1
NO_ERROR: Final = 0
CONFIG_MISMATCH: Final = 1

TaskId = tuple[str, int]
"""Kafka's ``ConnectorTaskId``: (connector, task number)."""


class ConnectProtocolCompatibility(enum.Enum):
    """``connect.protocol``: its value, the protocol name in JoinGroup, the version."""

    EAGER = ("eager", "default", CONNECT_PROTOCOL_V0)
    COMPATIBLE = ("compatible", "compatible", CONNECT_PROTOCOL_V1)
    SESSIONED = ("sessioned", "sessioned", CONNECT_PROTOCOL_V2)

    def __init__(self, config_value: str, protocol: str, version: int) -> None:
        self.config_value = config_value
        self.protocol = protocol
        self.version = version

    @classmethod
    def from_config(cls, value: str) -> ConnectProtocolCompatibility:
        return next(m for m in cls if m.config_value == value.lower())

    @classmethod
    def from_protocol(cls, name: str) -> ConnectProtocolCompatibility:
        return next(m for m in cls if m.protocol == name)

    def offered(self) -> list[ConnectProtocolCompatibility]:
        """This mode's protocols, most preferred first (``WorkerCoordinator.metadata``)."""
        order = [ConnectProtocolCompatibility.SESSIONED, ConnectProtocolCompatibility.COMPATIBLE,
                 ConnectProtocolCompatibility.EAGER]
        return order[order.index(self):]


@dataclass
class ConnectAssignment:
    """Kafka's ``ConnectProtocol.Assignment`` / ``ExtendedAssignment``."""

    version: int
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[TaskId] = field(default_factory=list)
    revoked_connectors: list[str] = field(default_factory=list)
    revoked_tasks: list[TaskId] = field(default_factory=list)
    delay: int = 0

    @property
    def failed(self) -> bool:
        return self.error != NO_ERROR


@dataclass
class WorkerState:
    """A member's metadata: its REST URL, the config topic offset it has read to and
    (v1/v2) what it runs now."""

    url: str
    config_offset: int
    assignment: ConnectAssignment | None = None


class _Writer:
    """Kafka's Struct encoding, on the protocol layer's primitives."""

    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, value: int) -> None:
        self.out += t.INT16.pack(value)

    def int32(self, value: int) -> None:
        self.out += t.INT32.pack(value)

    def int64(self, value: int) -> None:
        self.out += t.INT64.pack(value)

    def string(self, value: str) -> None:
        t.write_string(self.out, value)

    def nullable_bytes(self, value: bytes | None) -> None:
        t.write_nullable_bytes(self.out, value)

    def connector_assignments(self, connectors: Iterable[str], tasks: Iterable[TaskId]
                              ) -> None:
        """[Connector string, Tasks [int32]], the connector itself as task -1."""
        by_connector: dict[str, list[int]] = {}
        for name in connectors:
            by_connector.setdefault(name, []).append(CONNECTOR_TASK)
        for name, task in tasks:
            by_connector.setdefault(name, []).append(task)
        self.int32(len(by_connector))
        for name, ids in by_connector.items():
            self.string(name)
            self.int32(len(ids))
            for task_id in ids:
                self.int32(task_id)

    def bytes(self) -> bytes:
        return bytes(self.out)


class _Reader:
    """Reads what :class:`_Writer` writes; truncated data is a ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.position = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.position

    def _read(self, read: Callable[[t.Buffer, int], tuple[_T, int]]) -> _T:
        try:
            value, self.position = read(self.data, self.position)
        except (DecodeError, struct.error) as exc:
            raise ValueError(f"Connect protocol data is truncated: {exc}") from None
        return value

    def _fixed(self, layout: struct.Struct) -> int:
        if self.remaining < layout.size:
            raise ValueError("Connect protocol data is truncated")
        (value,) = layout.unpack_from(self.data, self.position)
        self.position += layout.size
        return int(value)

    def int16(self) -> int:
        return self._fixed(t.INT16)

    def int32(self) -> int:
        return self._fixed(t.INT32)

    def int64(self) -> int:
        return self._fixed(t.INT64)

    def string(self) -> str:
        return self._read(t.read_string)

    def nullable_bytes(self) -> bytes | None:
        return self._read(t.read_nullable_bytes)

    def connector_assignments(self) -> tuple[list[str], list[TaskId]]:
        connectors: list[str] = []
        tasks: list[TaskId] = []
        count = self.int32()
        for _ in range(max(count, 0)):
            name = self.string()
            for _ in range(max(self.int32(), 0)):
                task_id = self.int32()
                if task_id == CONNECTOR_TASK:
                    connectors.append(name)
                else:
                    tasks.append((name, task_id))
        return connectors, tasks


def _check_version(version: int) -> None:
    if version < CONNECT_PROTOCOL_V0:
        raise ValueError(f"Unsupported subscription version: {version}")


def encode_metadata(state: WorkerState, version: int) -> bytes:
    out = _Writer()
    out.int16(version)
    out.string(state.url)
    out.int64(state.config_offset)
    if version >= CONNECT_PROTOCOL_V1:
        out.nullable_bytes(None if state.assignment is None
                           else encode_assignment(state.assignment))
    return out.bytes()


def decode_metadata(data: bytes) -> WorkerState:
    reader = _Reader(data)
    version = reader.int16()
    _check_version(version)
    state = WorkerState(reader.string(), reader.int64())
    if version >= CONNECT_PROTOCOL_V1 and reader.remaining:
        allocation = reader.nullable_bytes()
        if allocation is not None:
            state.assignment = decode_assignment(allocation)
    return state


def encode_assignment(assignment: ConnectAssignment) -> bytes:
    out = _Writer()
    out.int16(assignment.version)
    out.int16(assignment.error)
    out.string(assignment.leader)
    out.string(assignment.leader_url)
    out.int64(assignment.config_offset)
    out.connector_assignments(assignment.connectors, assignment.tasks)
    if assignment.version >= CONNECT_PROTOCOL_V1:
        out.connector_assignments(assignment.revoked_connectors, assignment.revoked_tasks)
        out.int32(assignment.delay)
    return out.bytes()


def decode_assignment(data: bytes) -> ConnectAssignment:
    reader = _Reader(data)
    version = reader.int16()
    _check_version(version)
    assignment = ConnectAssignment(version, reader.int16(), reader.string(), reader.string(),
                                   reader.int64())
    assignment.connectors, assignment.tasks = reader.connector_assignments()
    if version >= CONNECT_PROTOCOL_V1:  # v1 tolerates missing fields, with defaults
        if reader.remaining:
            assignment.revoked_connectors, assignment.revoked_tasks = \
                reader.connector_assignments()
        if reader.remaining:
            assignment.delay = reader.int32()
    return assignment
