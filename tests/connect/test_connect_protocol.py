"""The Connect subprotocols' bytes: round trips of every version, Kafka's layout checked
field by field for v0, and the protocol lists each ``connect.protocol`` offers."""

from __future__ import annotations

import struct

import pytest

from kafkaclone.connect.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    ConnectProtocolCompatibility,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

pytestmark = pytest.mark.timeout(10)


def test_v0_metadata_layout() -> None:
    data = encode_metadata(WorkerState("http://w1:8083/", 42), 0)
    assert data == struct.pack(">hh", 0, 15) + b"http://w1:8083/" + struct.pack(">q", 42)
    assert decode_metadata(data) == WorkerState("http://w1:8083/", 42)


def test_v0_assignment_layout_marks_the_connector_as_task_minus_one() -> None:
    assignment = ConnectAssignment(0, 0, "m1", "u", 7, ["a"], [("a", 0), ("b", 1)])
    data = encode_assignment(assignment)
    expected = (struct.pack(">hhh", 0, 0, 2) + b"m1" + struct.pack(">h", 1) + b"u" +
                struct.pack(">qi", 7, 2) +
                struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, -1, 0) +
                struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1))
    assert data == expected
    assert decode_assignment(data) == assignment


@pytest.mark.parametrize("version", [1, 2])
def test_v1_v2_round_trip_with_revocations_delay_and_allocation(version: int) -> None:
    current = ConnectAssignment(version, 0, "leader", "http://l/", 99, ["c1"],
                                [("c1", 0), ("c2", 3)], ["c3"], [("c3", 1)], 2000)
    assert decode_assignment(encode_assignment(current)) == current
    state = WorkerState("http://me/", 100, current)
    data = encode_metadata(state, version)
    assert struct.unpack(">h", data[:2]) == (version,)
    assert decode_metadata(data) == state
    empty = WorkerState("http://me/", -1)
    encoded = encode_metadata(empty, version)
    assert encoded.endswith(struct.pack(">i", -1))  # a null allocation
    assert decode_metadata(encoded) == empty


def test_v1_tolerates_missing_trailing_fields() -> None:
    """Kafka's ASSIGNMENT_V1 reads a v1 assignment with no revoked list and delay."""
    v0_body = encode_assignment(ConnectAssignment(0, CONFIG_MISMATCH, "l", "u", 5, ["x"]))
    decoded = decode_assignment(struct.pack(">h", 1) + v0_body[2:])
    assert decoded == ConnectAssignment(1, CONFIG_MISMATCH, "l", "u", 5, ["x"])
    assert decoded.failed


def test_truncated_data_is_refused() -> None:
    data = encode_metadata(WorkerState("http://me/", 1), 0)
    with pytest.raises(ValueError, match="truncated"):
        decode_metadata(data[:-1])


def test_protocols_offered_in_kafkas_order() -> None:
    def names(mode: str) -> list[str]:
        return [p.protocol for p in ConnectProtocolCompatibility.from_config(mode).offered()]

    assert names("sessioned") == ["sessioned", "compatible", "default"]
    assert names("compatible") == ["compatible", "default"]
    assert names("eager") == ["default"]
    assert [p.version for p in ConnectProtocolCompatibility.SESSIONED.offered()] == [2, 1, 0]
