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


@pytest.mark.parametrize(("modes", "chosen"), [
    (["sessioned", "sessioned"], "sessioned"),
    (["sessioned", "compatible", "sessioned"], "compatible"),
    (["sessioned", "eager"], "default"),
    (["compatible", "eager", "sessioned"], "default"),
    (["eager"], "default"),
])
def test_the_broker_picks_the_common_protocol(modes: list[str], chosen: str) -> None:
    """The group coordinator's vote over what each worker's mode offers."""
    from kafkaclone.coordinator.group.metadata import GroupMetadata, MemberMetadata

    group = GroupMetadata("connect-cluster")
    for i, mode in enumerate(modes):
        offered = ConnectProtocolCompatibility.from_config(mode).offered()
        group.add(MemberMetadata(
            f"m{i}", None, "c", "h", 60000, 10000, "connect",
            [(p.protocol, encode_metadata(WorkerState(f"http://w{i}/", 0), p.version))
             for p in offered]))
    assert group.select_protocol() == chosen


def test_session_key_signatures() -> None:
    from kafkaclone.connect.signature import (
        SessionKey,
        SignatureError,
        generate_key,
        sign,
        verify,
    )

    key = generate_key("HmacSHA256", None, 1000)
    assert len(key.key) == 32 and key.creation_timestamp == 1000
    assert len(generate_key("HmacSHA512", 1024, 0).key) == 128
    assert SessionKey.from_json(key.to_json()) == key
    assert set(key.to_json()) == {"key", "algorithm", "creation-timestamp"}
    body = b'[{"task.class":"x"}]'
    headers = {k.lower(): v for k, v in sign(key, "HmacSHA256", body).items()}
    assert set(headers) == {"x-connect-authorization", "x-connect-request-signature-algorithm"}
    verify(key, ("HmacSHA256",), body, headers)
    cases = [
        (key, ("HmacSHA256",), body + b" ", headers, 403),
        (generate_key("HmacSHA256", None, 0), ("HmacSHA256",), body, headers, 403),
        (key, ("HmacSHA512",), body, headers, 400),
        (key, ("HmacSHA256",), body, {}, 400),
        (None, ("HmacSHA256",), body, headers, 403),
    ]
    for session_key, allowed, signed, given, status in cases:
        with pytest.raises(SignatureError) as refused:
            verify(session_key, allowed, signed, given)
        assert refused.value.status == status
