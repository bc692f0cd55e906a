"""Group metadata in __consumer_offsets: Kafka's key/value byte layout (golden bytes written by
hand from GroupMetadataKey.json / GroupMetadataValue.json), what the coordinator stores and
when, and a new coordinator resuming groups from the records."""

from __future__ import annotations

import struct

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    NONE,
    DecodeError,
    IllegalGenerationError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
)
from kafkaclone.coordinator.group.coordinator import LeaveMember, store_group_error
from kafkaclone.coordinator.group.metadata import GroupMetadata, GroupState, MemberMetadata
from kafkaclone.coordinator.group.metadata_log import (
    decode_group_metadata_value,
    group_metadata_key,
    group_metadata_value,
    read_group_metadata,
    read_message_key,
)
from kafkaclone.protocol.records.batch import build_record_batch
from tests.coordinator.helpers import (
    MemoryGroupMetadataLog,
    MemoryGroupStore,
    assignment,
    make_coordinator,
    result_of,
    subscription,
)
from tests.coordinator.test_group_coordinator import (
    SESSION_MS,
    join,
    stable_group_of_two,
    sync,
)

pytestmark = pytest.mark.timeout(30)


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


GOLDEN_KEY = bytes.fromhex("0002" "0002") + b"g1"
"""GroupMetadataKey: version 2, then group "g1" (int16 length + UTF-8)."""

GOLDEN_VALUE_V3 = (
    bytes.fromhex("0003")                    # version 3
    + bytes.fromhex("0008") + b"consumer"    # protocol_type
    + bytes.fromhex("00000003")              # generation 3
    + bytes.fromhex("0005") + b"range"       # protocol (nullable string)
    + bytes.fromhex("0002") + b"m1"          # leader (nullable string)
    + bytes.fromhex("0000000000000005")      # current_state_timestamp (int64, v2+)
    + bytes.fromhex("00000001")              # members: 1
    + bytes.fromhex("0002") + b"m1"          #   member_id
    + bytes.fromhex("0002") + b"i1"          #   group_instance_id (nullable, v3+)
    + bytes.fromhex("0001") + b"c"           #   client_id
    + bytes.fromhex("0002") + b"/h"          #   client_host
    + bytes.fromhex("0000000a")              #   rebalance_timeout 10 (v1+)
    + bytes.fromhex("00000014")              #   session_timeout 20
    + bytes.fromhex("00000001") + b"S"       #   subscription (bytes)
    + bytes.fromhex("00000001") + b"A"       #   assignment (bytes)
)


def _one_member_group() -> GroupMetadata:
    group = GroupMetadata("g1", state=GroupState.STABLE, state_timestamp_ms=5,
                          generation_id=3, protocol_type="consumer", protocol_name="range")
    group.add(MemberMetadata("m1", "i1", "c", "/h", 10, 20, "consumer", [("range", b"S")]))
    return group


def test_key_is_kafkas_group_metadata_key_v2() -> None:
    assert group_metadata_key("g1") == GOLDEN_KEY
    parsed = read_message_key(GOLDEN_KEY)
    assert (parsed.version, parsed.group_id) == (2, "g1")
    # An offset commit key (version 1: group, topic, partition) is recognised, not decoded.
    offset_key = bytes.fromhex("0001") + _string("g1") + _string("t") + bytes(4)
    assert read_message_key(offset_key).group_id is None
    with pytest.raises(DecodeError):
        read_message_key(b"\x00")


def test_value_v3_is_kafkas_byte_layout() -> None:
    assert group_metadata_value(_one_member_group(), {"m1": b"A"}) == GOLDEN_VALUE_V3
    group = read_group_metadata("g1", GOLDEN_VALUE_V3)
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id, group.state_timestamp_ms) == (
        GroupState.STABLE, 3, "consumer", "range", "m1", 5)
    member = group.get("m1")
    assert (member.group_instance_id, member.client_id, member.client_host,
            member.rebalance_timeout_ms, member.session_timeout_ms, member.assignment,
            member.supported_protocols) == ("i1", "c", "/h", 10, 20, b"A", [("range", b"S")])
    assert group.static_members == {"i1": "m1"}


def test_older_value_versions_load_as_kafka_reads_them() -> None:
    # v0: no rebalance timeout (the session timeout stands in), no state timestamp, no
    # group instance id.
    v0 = (bytes.fromhex("0000") + _string("consumer") + struct.pack(">i", 7) + _string("range")
          + _string("m1") + struct.pack(">i", 1) + _string("m1") + _string("c") + _string("/h")
          + struct.pack(">i", 6000) + _bytes(b"S") + _bytes(b"A"))
    group = read_group_metadata("g", v0)
    member = group.get("m1")
    assert (group.generation_id, group.state_timestamp_ms) == (7, -1)
    assert (member.rebalance_timeout_ms, member.session_timeout_ms,
            member.group_instance_id) == (6000, 6000, None)
    # An empty group: protocol and leader null, Empty.
    empty = (bytes.fromhex("0002") + _string("consumer") + struct.pack(">i", 4)
             + bytes.fromhex("ffff") + bytes.fromhex("ffff") + struct.pack(">q", 9)
             + struct.pack(">i", 0))
    group = read_group_metadata("g", empty)
    assert (group.state, group.generation_id, group.protocol_name, group.leader_id) == (
        GroupState.EMPTY, 4, None, None)
    assert group_metadata_value(group, {}) == (
        bytes.fromhex("0003") + empty[2:])
    with pytest.raises(DecodeError, match="Unknown group metadata message version: 4"):
        decode_group_metadata_value(bytes.fromhex("0004") + empty[2:])


def test_store_group_error_mapping() -> None:
    assert store_group_error(NotLeaderOrFollowerError()) == NotCoordinatorError.code
    assert store_group_error(RequestTimedOutError()) == RebalanceInProgressError.code


def test_sync_stores_the_group_and_a_new_coordinator_resumes_it() -> None:
    clock = task.Clock()
    log = MemoryGroupMetadataLog()
    coordinator = make_coordinator(clock, metadata_log=log)
    leader, follower = stable_group_of_two(clock, coordinator)
    # One record per stored state: the leader's SyncGroup of generation 2.
    records = log.records()
    assert [key for key, _ in records] == [group_metadata_key("g")]
    value = records[-1][1]
    assert value is not None
    _, decoded = decode_group_metadata_value(value)
    assert decoded.generation == 2 and decoded.leader == leader.member_id
    assert {m.member_id: m.assignment for m in decoded.members} == {
        leader.member_id: assignment({"t": [0]}), follower.member_id: assignment({"t": [1]})}

    # The coordinator moves: another broker loads the partition.
    coordinator.on_resignation(0)
    other_clock = task.Clock()
    successor = make_coordinator(other_clock, MemoryGroupStore(), metadata_log=log)
    group = successor.groups["g"]
    assert (group.state, group.generation_id, group.protocol_name, group.leader_id) == (
        GroupState.STABLE, 2, "range", leader.member_id)
    assert set(group.members) == {leader.member_id, follower.member_id}
    assert group.get(follower.member_id).assignment == assignment({"t": [1]})
    # The members carry on in their generation: heartbeats, SyncGroup and a follower's
    # unchanged rejoin are answered as before the move.
    for member in (leader, follower):
        assert successor.handle_heartbeat("g", member.member_id, None, 2) == NONE
    assert successor.handle_heartbeat("g", leader.member_id, None, 1) == (
        IllegalGenerationError.code)
    again = result_of(sync(successor, follower.member_id, 2))
    assert again.error_code == NONE and again.assignment == assignment({"t": [1]})
    rejoined = result_of(join(successor, follower.member_id))
    assert (rejoined.error_code, rejoined.generation_id) == (NONE, 2)
    # Loaded members' sessions run from the load: one that stops heartbeating is removed
    # and the group rebalances into generation 3 with the other.
    for _ in range(3):
        other_clock.advance(SESSION_MS / 1000 / 2)
        assert successor.handle_heartbeat("g", leader.member_id, None, 2) in (
            NONE, RebalanceInProgressError.code)
    assert not group.has(follower.member_id)
    rejoin = join(successor, leader.member_id)
    other_clock.advance(0)
    assert result_of(rejoin).generation_id == 3


def test_empty_group_and_tombstone() -> None:
    clock = task.Clock()
    log = MemoryGroupMetadataLog()
    store = MemoryGroupStore()
    coordinator = make_coordinator(clock, store, metadata_log=log)
    first = join(coordinator)
    clock.advance(0)
    member = result_of(first)
    assert result_of(sync(coordinator, member.member_id, 1, {
        member.member_id: assignment({"t": [0]})})).error_code == NONE
    # The member leaves: the rebalance leaves the group Empty in generation 2, stored.
    coordinator.handle_leave_group("g", [LeaveMember(member.member_id, None)])
    clock.advance(0)
    assert coordinator.groups["g"].state is GroupState.EMPTY
    key, value = log.records()[-1]
    assert key == group_metadata_key("g") and value is not None
    _, decoded = decode_group_metadata_value(value)
    assert (decoded.generation, decoded.protocol, decoded.members) == (2, None, [])
    reloaded = make_coordinator(task.Clock(), MemoryGroupStore(), metadata_log=log)
    assert reloaded.groups["g"].state is GroupState.EMPTY
    assert reloaded.groups["g"].generation_id == 2
    # DeleteGroups writes a tombstone: the group is not loaded again.
    errors = result_of(Deferred.fromCoroutine(coordinator.handle_delete_groups(["g"])))
    assert errors == {"g": NONE}
    assert log.records()[-1] == (group_metadata_key("g"), None)
    assert "g" not in make_coordinator(task.Clock(), MemoryGroupStore(),
                                       metadata_log=log).groups


def test_failed_store_answers_every_member_and_rebalances() -> None:
    clock = task.Clock()
    log = MemoryGroupMetadataLog()
    coordinator = make_coordinator(clock, metadata_log=log)
    first = join(coordinator)
    clock.advance(0)
    member = result_of(first)
    log.fail_with = NotLeaderOrFollowerError("moved")
    answer = result_of(sync(coordinator, member.member_id, 1, {
        member.member_id: assignment({"t": [0]})}))
    assert answer.error_code == NotCoordinatorError.code and answer.assignment == b""
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert log.records() == []


def test_unknown_records_are_skipped_on_load() -> None:
    log = MemoryGroupMetadataLog()
    offset_key = bytes.fromhex("0001") + _string("g") + _string("t") + bytes(4)
    log.partitions[0] = [build_record_batch([
        (offset_key, b"\x00\x03whatever"),
        (None, b"keyless"),
        (group_metadata_key("g"), GOLDEN_VALUE_V3),
        (group_metadata_key("bad"), b"\x00\x09"),
    ])]
    coordinator = make_coordinator(task.Clock(), MemoryGroupStore(), metadata_log=log)
    assert set(coordinator.groups) == {"g"}
    assert coordinator.handle_heartbeat("g", "m1", None, 3) == NONE
    assert coordinator.handle_heartbeat("g", "nobody", None, 3) == UnknownMemberIdError.code


def test_subscription_survives_for_offset_expiry() -> None:
    log = MemoryGroupMetadataLog()
    group = GroupMetadata("g", state=GroupState.STABLE, generation_id=1,
                          protocol_type="consumer", protocol_name="range")
    group.add(MemberMetadata("m", None, "c", "/h", 10, 6000, "consumer",
                             [("range", subscription("t", "u"))]))
    log.partitions[0] = [build_record_batch([
        (group_metadata_key("g"), group_metadata_value(group, {"m": b""}))])]
    coordinator = make_coordinator(task.Clock(), MemoryGroupStore(), metadata_log=log)
    assert coordinator.groups["g"].subscribed_topics() == {"t", "u"}


def test_static_member_rejoin_is_stored_and_reverted_when_the_store_fails() -> None:
    clock = task.Clock()
    log = MemoryGroupMetadataLog()
    coordinator = make_coordinator(clock, metadata_log=log)
    first = join(coordinator, instance_id="i-1")
    clock.advance(0)
    old = result_of(first)
    assert result_of(sync(coordinator, old.member_id, 1, {old.member_id: assignment(
        {"t": [0]})}, instance_id="i-1")).error_code == NONE
    # The instance restarts: the group is stored under its new member id, same generation,
    # and a successor loads it so.
    new = result_of(join(coordinator, instance_id="i-1"))
    assert new.error_code == NONE and new.generation_id == 1
    value = log.records()[-1][1]
    assert value is not None
    _, decoded = decode_group_metadata_value(value)
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in decoded.members] == [
        (new.member_id, "i-1", assignment({"t": [0]}))]
    successor = make_coordinator(task.Clock(), MemoryGroupStore(), metadata_log=log)
    assert successor.groups["g"].static_members == {"i-1": new.member_id}
    # Restarting again while the log refuses: the previous member id is back in place.
    log.fail_with = NotLeaderOrFollowerError("moved")
    failed = result_of(join(coordinator, instance_id="i-1"))
    assert (failed.error_code, failed.member_id) == (NotCoordinatorError.code, "")
    assert coordinator.groups["g"].static_members == {"i-1": new.member_id}
    assert coordinator.handle_heartbeat("g", new.member_id, "i-1", 1) == NONE
