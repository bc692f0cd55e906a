"""Consumer group and offset APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetCommit, OffsetFetch, OffsetDelete)
and the consumer protocol's embedded subscription and assignment payloads."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from kafkaclone.common.errors import DecodeError, UnsupportedVersionError
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.messages import consumer_protocol as cp
from tests.protocol.kio_helpers import (
    assert_every_field_set,
    assert_kio_agrees,
    from_kio,
    kio_class,
    kio_decode,
    round_trip,
)

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.filterwarnings("ignore", r".* is deprecated\. Use files\(\) instead",
                            DeprecationWarning)
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment as KpAssignment,
    )
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolSubscription as KpSubscription,
    )
    from kafka.protocol.old import commit as kp_commit
    from kafka.protocol.old.consumer_protocol import (
        ConsumerProtocolMemberAssignment_v0,
        ConsumerProtocolMemberMetadata_v0,
    )

M = api.MESSAGES

FindCoordinatorRequest = M["FindCoordinatorRequest"]
FindCoordinatorResponse = M["FindCoordinatorResponse"]
JoinGroupRequest = M["JoinGroupRequest"]
JoinGroupResponse = M["JoinGroupResponse"]
SyncGroupRequest = M["SyncGroupRequest"]
SyncGroupResponse = M["SyncGroupResponse"]
HeartbeatRequest = M["HeartbeatRequest"]
HeartbeatResponse = M["HeartbeatResponse"]
LeaveGroupRequest = M["LeaveGroupRequest"]
LeaveGroupResponse = M["LeaveGroupResponse"]
DescribeGroupsRequest = M["DescribeGroupsRequest"]
DescribeGroupsResponse = M["DescribeGroupsResponse"]
ListGroupsRequest = M["ListGroupsRequest"]
ListGroupsResponse = M["ListGroupsResponse"]
DeleteGroupsRequest = M["DeleteGroupsRequest"]
DeleteGroupsResponse = M["DeleteGroupsResponse"]
OffsetCommitRequest = M["OffsetCommitRequest"]
OffsetCommitResponse = M["OffsetCommitResponse"]
OffsetFetchRequest = M["OffsetFetchRequest"]
OffsetFetchResponse = M["OffsetFetchResponse"]
OffsetDeleteRequest = M["OffsetDeleteRequest"]
OffsetDeleteResponse = M["OffsetDeleteResponse"]
Subscription = M["ConsumerProtocolSubscription"]
Assignment = M["ConsumerProtocolAssignment"]

GROUP = "payments"
MEMBER = "consumer-1-4f0c2d7e-9a51-4c2b-8f3e-1d2a3b4c5d6e"
OTHER_MEMBER = "consumer-2-0b1c2d3e-4f50-4a6b-9c7d-8e9f0a1b2c3d"
INSTANCE = "payments-host-a"
INT32_MIN = -(2**31)

# Kafka 2.8's range and first flexible version (None: never flexible) of each API here.
KAFKA_2_8 = {
    ApiKey.FIND_COORDINATOR: (0, 3, 3),
    ApiKey.JOIN_GROUP: (0, 7, 6),
    ApiKey.SYNC_GROUP: (0, 5, 4),
    ApiKey.HEARTBEAT: (0, 4, 4),
    ApiKey.LEAVE_GROUP: (0, 4, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 5, 5),
    ApiKey.LIST_GROUPS: (0, 4, 3),
    ApiKey.DELETE_GROUPS: (0, 2, 2),
    ApiKey.OFFSET_COMMIT: (0, 8, 8),
    ApiKey.OFFSET_FETCH: (0, 7, 6),
    ApiKey.OFFSET_DELETE: (0, 0, None),
}


def subscription(v: int) -> Any:
    return Subscription(
        topics=["orders", "refunds"],
        user_data=b"\x00\x01sticky",
        owned_partitions=[
            Subscription.cls.TopicPartition(topic="orders", partitions=[0, 2]),
            Subscription.cls.TopicPartition(topic="refunds", partitions=[1]),
        ] if v >= 1 else [],
    )


def assignment(v: int) -> Any:
    return Assignment(
        assigned_partitions=[
            Assignment.cls.TopicPartition(topic="orders", partitions=[0, 1, 2]),
            Assignment.cls.TopicPartition(topic="refunds", partitions=[3]),
        ],
        user_data=b"\x00\x00\x00\x07",
    )


SUBSCRIPTION_BYTES = cp.encode_subscription(subscription(1), 1)
ASSIGNMENT_BYTES = cp.encode_assignment(assignment(1), 1)


# --- one hand-built message per declaration, with every field of version v set -------------


def find_coordinator_request(v: int) -> Any:
    return FindCoordinatorRequest(key="txn-payments-7", key_type=1 if v >= 1 else 0)


def find_coordinator_response(v: int) -> Any:
    return FindCoordinatorResponse(
        throttle_time_ms=20 if v >= 1 else 0,
        error_code=14,  # COORDINATOR_LOAD_IN_PROGRESS
        error_message="The coordinator is loading" if v >= 1 else "",
        node_id=2,
        host="broker-2.kafka.internal",
        port=9092,
    )


def join_group_request(v: int) -> Any:
    protocol = JoinGroupRequest.cls.JoinGroupRequestProtocol
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=300_000 if v >= 1 else -1,
        member_id=MEMBER,
        group_instance_id=INSTANCE if v >= 5 else None,
        protocol_type="consumer",
        protocols=[
            protocol(name="cooperative-sticky", metadata=SUBSCRIPTION_BYTES),
            protocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x01\x00\x06orders"),
        ],
    )


def join_group_response(v: int) -> Any:
    member = JoinGroupResponse.cls.JoinGroupResponseMember
    return JoinGroupResponse(
        throttle_time_ms=5 if v >= 2 else 0,
        error_code=79,  # MEMBER_ID_REQUIRED
        generation_id=12,
        protocol_type="consumer" if v >= 7 else None,
        protocol_name="cooperative-sticky",
        leader=MEMBER,
        member_id=MEMBER,
        members=[
            member(member_id=MEMBER, group_instance_id=INSTANCE if v >= 5 else None,
                   metadata=SUBSCRIPTION_BYTES),
            member(member_id=OTHER_MEMBER, metadata=b""),
        ],
    )


def sync_group_request(v: int) -> Any:
    item = SyncGroupRequest.cls.SyncGroupRequestAssignment
    return SyncGroupRequest(
        group_id=GROUP,
        generation_id=12,
        member_id=MEMBER,
        group_instance_id=INSTANCE if v >= 3 else None,
        protocol_type="consumer" if v >= 5 else None,
        protocol_name="cooperative-sticky" if v >= 5 else None,
        assignments=[
            item(member_id=MEMBER, assignment=ASSIGNMENT_BYTES),
            item(member_id=OTHER_MEMBER, assignment=b""),
        ],
    )


def sync_group_response(v: int) -> Any:
    return SyncGroupResponse(
        throttle_time_ms=3 if v >= 1 else 0,
        error_code=27,  # REBALANCE_IN_PROGRESS
        protocol_type="consumer" if v >= 5 else None,
        protocol_name="cooperative-sticky" if v >= 5 else None,
        assignment=ASSIGNMENT_BYTES,
    )


def heartbeat_request(v: int) -> Any:
    return HeartbeatRequest(
        group_id=GROUP, generation_id=12, member_id=MEMBER,
        group_instance_id=INSTANCE if v >= 3 else None,
    )


def heartbeat_response(v: int) -> Any:
    return HeartbeatResponse(throttle_time_ms=7 if v >= 1 else 0, error_code=27)


def leave_group_request(v: int) -> Any:
    identity = LeaveGroupRequest.cls.MemberIdentity
    return LeaveGroupRequest(
        group_id=GROUP,
        member_id=MEMBER if v <= 2 else "",
        members=[
            identity(member_id=MEMBER, group_instance_id=INSTANCE),
            identity(member_id=OTHER_MEMBER, group_instance_id=None),
        ] if v >= 3 else [],
    )


def leave_group_response(v: int) -> Any:
    member = LeaveGroupResponse.cls.MemberResponse
    return LeaveGroupResponse(
        throttle_time_ms=9 if v >= 1 else 0,
        error_code=25,  # UNKNOWN_MEMBER_ID
        members=[
            member(member_id=MEMBER, group_instance_id=INSTANCE, error_code=0),
            member(member_id=OTHER_MEMBER, group_instance_id=None, error_code=25),
        ] if v >= 3 else [],
    )


def describe_groups_request(v: int) -> Any:
    return DescribeGroupsRequest(
        groups=[GROUP, "billing"], include_authorized_operations=v >= 3,
    )


def describe_groups_response(v: int) -> Any:
    cls = DescribeGroupsResponse.cls
    member = cls.DescribedGroup.DescribedGroupMember
    return DescribeGroupsResponse(
        throttle_time_ms=11 if v >= 1 else 0,
        groups=[
            cls.DescribedGroup(
                error_code=0,
                group_id=GROUP,
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="cooperative-sticky",
                members=[member(
                    member_id=MEMBER,
                    group_instance_id=INSTANCE if v >= 4 else None,
                    client_id="consumer-1",
                    client_host="/10.0.0.7",
                    member_metadata=SUBSCRIPTION_BYTES,
                    member_assignment=ASSIGNMENT_BYTES,
                )],
                # READ, DESCRIBE, DELETE (bits 3, 8, 6)
                authorized_operations=0b1_0100_1000 if v >= 3 else INT32_MIN,
            ),
            cls.DescribedGroup(error_code=16, group_id="billing"),  # NOT_COORDINATOR
        ],
    )


def list_groups_request(v: int) -> Any:
    return ListGroupsRequest(states_filter=["Stable", "PreparingRebalance"] if v >= 4 else [])


def list_groups_response(v: int) -> Any:
    group = ListGroupsResponse.cls.ListedGroup
    return ListGroupsResponse(
        throttle_time_ms=13 if v >= 1 else 0,
        error_code=14,  # COORDINATOR_LOAD_IN_PROGRESS
        groups=[
            group(group_id=GROUP, protocol_type="consumer",
                  group_state="Stable" if v >= 4 else ""),
            group(group_id="connect-sink", protocol_type="connect",
                  group_state="Empty" if v >= 4 else ""),
        ],
    )


def delete_groups_request(v: int) -> Any:
    return DeleteGroupsRequest(groups_names=["old-app", GROUP])


def delete_groups_response(v: int) -> Any:
    result = DeleteGroupsResponse.cls.DeletableGroupResult
    return DeleteGroupsResponse(
        throttle_time_ms=17,
        results=[
            result(group_id="old-app", error_code=0),
            result(group_id=GROUP, error_code=68),  # NON_EMPTY_GROUP
        ],
    )


def offset_commit_request(v: int) -> Any:
    topic = OffsetCommitRequest.cls.OffsetCommitRequestTopic
    partition = topic.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id=12 if v >= 1 else -1,
        member_id=MEMBER if v >= 1 else "",
        group_instance_id=INSTANCE if v >= 7 else None,
        retention_time_ms=86_400_000 if 2 <= v <= 4 else -1,
        topics=[topic(name="orders", partitions=[
            partition(
                partition_index=0,
                committed_offset=123_456_789_012,
                committed_leader_epoch=4 if v >= 6 else -1,
                commit_timestamp=1_618_000_000_000 if v == 1 else -1,
                committed_metadata="host-a",
            ),
            partition(partition_index=3, committed_offset=42, committed_metadata=None),
        ])],
    )


def offset_commit_response(v: int) -> Any:
    topic = OffsetCommitResponse.cls.OffsetCommitResponseTopic
    partition = topic.OffsetCommitResponsePartition
    return OffsetCommitResponse(
        throttle_time_ms=19 if v >= 3 else 0,
        topics=[topic(name="orders", partitions=[
            partition(partition_index=0, error_code=0),
            partition(partition_index=3, error_code=22),  # ILLEGAL_GENERATION
        ])],
    )


def offset_fetch_request(v: int) -> Any:
    topic = OffsetFetchRequest.cls.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        group_id=GROUP,
        topics=[topic(name="orders", partition_indexes=[0, 1, 2]),
                topic(name="refunds", partition_indexes=[5])],
        require_stable=v >= 7,
    )


def offset_fetch_response(v: int) -> Any:
    topic = OffsetFetchResponse.cls.OffsetFetchResponseTopic
    partition = topic.OffsetFetchResponsePartition
    return OffsetFetchResponse(
        throttle_time_ms=23 if v >= 3 else 0,
        topics=[topic(name="orders", partitions=[
            partition(partition_index=0, committed_offset=123_456_789_012,
                      committed_leader_epoch=4 if v >= 5 else -1,
                      metadata="host-a", error_code=0),
            partition(partition_index=1, committed_offset=-1, metadata=None,
                      error_code=3),  # UNKNOWN_TOPIC_OR_PARTITION
        ])],
        error_code=15 if v >= 2 else 0,  # COORDINATOR_NOT_AVAILABLE
    )


def offset_delete_request(v: int) -> Any:
    topic = OffsetDeleteRequest.cls.OffsetDeleteRequestTopic
    partition = topic.OffsetDeleteRequestPartition
    return OffsetDeleteRequest(group_id=GROUP, topics=[
        topic(name="orders", partitions=[partition(partition_index=0),
                                         partition(partition_index=4)]),
    ])


def offset_delete_response(v: int) -> Any:
    topic = OffsetDeleteResponse.cls.OffsetDeleteResponseTopic
    partition = topic.OffsetDeleteResponsePartition
    return OffsetDeleteResponse(
        error_code=69,  # GROUP_ID_NOT_FOUND
        throttle_time_ms=29,
        topics=[topic(name="orders", partitions=[
            partition(partition_index=0, error_code=0),
            partition(partition_index=4, error_code=86),  # GROUP_SUBSCRIBED_TO_TOPIC
        ])],
    )


# (our message, kio's schema module, kio's module kind, builder)
CASES: list[tuple[str, str, str, Callable[[int], Any]]] = [
    ("FindCoordinatorRequest", "find_coordinator", "request", find_coordinator_request),
    ("FindCoordinatorResponse", "find_coordinator", "response", find_coordinator_response),
    ("JoinGroupRequest", "join_group", "request", join_group_request),
    ("JoinGroupResponse", "join_group", "response", join_group_response),
    ("SyncGroupRequest", "sync_group", "request", sync_group_request),
    ("SyncGroupResponse", "sync_group", "response", sync_group_response),
    ("HeartbeatRequest", "heartbeat", "request", heartbeat_request),
    ("HeartbeatResponse", "heartbeat", "response", heartbeat_response),
    ("LeaveGroupRequest", "leave_group", "request", leave_group_request),
    ("LeaveGroupResponse", "leave_group", "response", leave_group_response),
    ("DescribeGroupsRequest", "describe_groups", "request", describe_groups_request),
    ("DescribeGroupsResponse", "describe_groups", "response", describe_groups_response),
    ("ListGroupsRequest", "list_groups", "request", list_groups_request),
    ("ListGroupsResponse", "list_groups", "response", list_groups_response),
    ("DeleteGroupsRequest", "delete_groups", "request", delete_groups_request),
    ("DeleteGroupsResponse", "delete_groups", "response", delete_groups_response),
    ("OffsetCommitRequest", "offset_commit", "request", offset_commit_request),
    ("OffsetCommitResponse", "offset_commit", "response", offset_commit_response),
    ("OffsetFetchRequest", "offset_fetch", "request", offset_fetch_request),
    ("OffsetFetchResponse", "offset_fetch", "response", offset_fetch_response),
    ("OffsetDeleteRequest", "offset_delete", "request", offset_delete_request),
    ("OffsetDeleteResponse", "offset_delete", "response", offset_delete_response),
    ("ConsumerProtocolSubscription", "consumer_protocol_subscription", "data", subscription),
    ("ConsumerProtocolAssignment", "consumer_protocol_assignment", "data", assignment),
]

VERSIONED_CASES = [
    pytest.param(name, module, kind, build, version, id=f"{name}-v{version}")
    for name, module, kind, build in CASES
    for version in range(M[name].min_version, M[name].max_version + 1)
]

# Versions kio (generated from a newer Kafka, after KIP-896 removed old versions) lacks;
# kafka-python's hand-written classes cover them further down.
KIO_MISSING = {
    ("OffsetCommitRequest", 0), ("OffsetCommitRequest", 1),
    ("OffsetCommitResponse", 0), ("OffsetCommitResponse", 1),
    ("OffsetFetchRequest", 0), ("OffsetFetchResponse", 0),
}
KIO_CASES = [p for p in VERSIONED_CASES if (p.values[0], p.values[4]) not in KIO_MISSING]


def test_every_declaration_has_a_case() -> None:
    groups = {name for name, _, _, _ in CASES}
    for key in KAFKA_2_8:
        assert api.APIS[key].request.name in groups
        assert api.APIS[key].response.name in groups
    assert len(CASES) == 2 * len(KAFKA_2_8) + 2
    assert len(VERSIONED_CASES) == 2 * sum(high + 1 for _, high, _ in KAFKA_2_8.values()) + 4


@pytest.mark.parametrize(("key", "expected"), [
    pytest.param(key, expected, id=key.name) for key, expected in KAFKA_2_8.items()
])
def test_registered_with_kafka_2_8_ranges(key: ApiKey, expected: tuple[int, int, Any]) -> None:
    low, high, first_flexible = expected
    target = api.APIS[key]
    assert (target.min_version, target.max_version) == (low, high)
    for message in (target.request, target.response):
        flexible = [v for v in range(low, high + 1) if message.is_flexible(v)]
        assert flexible == ([] if first_flexible is None else
                            list(range(first_flexible, high + 1)))


@pytest.mark.parametrize(("name", "module", "kind", "build", "version"), VERSIONED_CASES)
def test_round_trip_with_every_field_set(name: str, module: str, kind: str,
                                         build: Callable[[int], Any], version: int) -> None:
    message = M[name]
    obj = build(version)
    assert_every_field_set(message, obj, version)
    round_trip(message, obj, version)


@pytest.mark.parametrize(("name", "module", "kind", "build", "version"), KIO_CASES)
def test_kio_agrees(name: str, module: str, kind: str, build: Callable[[int], Any],
                    version: int) -> None:
    kio_cls = kio_class(module, version, kind, name)
    assert kio_cls is not None, f"kio has no {name} v{version}"
    assert_kio_agrees(M[name], build(version), version, kio_cls)


def test_kio_lacks_only_the_versions_kafka_4_removed() -> None:
    modules = {name: (module, kind) for name, module, kind, _ in CASES}
    for name, version in KIO_MISSING:
        module, kind = modules[name]
        assert kio_class(module, version, kind, name) is None
    assert len(KIO_CASES) == len(VERSIONED_CASES) - len(KIO_MISSING)


# --- concrete values through kio -----------------------------------------------------------


def test_kio_reads_join_group_v5_request_fields() -> None:
    cls = kio_class("join_group", 5, "request", "JoinGroupRequest")
    assert cls is not None
    entity = assert_kio_agrees(JoinGroupRequest, join_group_request(5), 5, cls)
    assert entity.group_id == GROUP
    assert entity.session_timeout == datetime.timedelta(seconds=10)
    assert entity.rebalance_timeout == datetime.timedelta(minutes=5)
    assert entity.group_instance_id == INSTANCE
    assert [p.name for p in entity.protocols] == ["cooperative-sticky", "range"]
    assert entity.protocols[0].metadata == SUBSCRIPTION_BYTES


def test_kio_reads_offset_fetch_v7_response_fields() -> None:
    cls = kio_class("offset_fetch", 7, "response", "OffsetFetchResponse")
    assert cls is not None
    entity = assert_kio_agrees(OffsetFetchResponse, offset_fetch_response(7), 7, cls)
    assert entity.throttle_time == datetime.timedelta(milliseconds=23)
    assert entity.error_code.value == 15
    first, second = entity.topics[0].partitions
    assert (first.partition_index, first.committed_offset, first.committed_leader_epoch,
            first.metadata) == (0, 123_456_789_012, 4, "host-a")
    assert (second.metadata, second.error_code.value) == (None, 3)


def test_our_reading_of_kio_offset_commit_v2_request() -> None:
    """kio writes retention_time (v2-v4 only) as an int64 in milliseconds."""
    cls = kio_class("offset_commit", 2, "request", "OffsetCommitRequest")
    assert cls is not None
    assert_kio_agrees(OffsetCommitRequest, offset_commit_request(2), 2, cls)
    ours = OffsetCommitRequest.decode_exact(
        OffsetCommitRequest.encode(offset_commit_request(2), 2), 2)
    entity = kio_decode(cls, OffsetCommitRequest.encode(ours, 2))
    assert entity.retention_time == datetime.timedelta(days=1)
    assert from_kio(OffsetCommitRequest, entity, 2).retention_time_ms == 86_400_000


# --- hand-written bytes --------------------------------------------------------------------


def test_heartbeat_bytes_classic_and_flexible() -> None:
    v0 = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert HeartbeatRequest.encode(v0, 0) == b"\x00\x01g" b"\x00\x00\x00\x01" b"\x00\x01m"
    # v4: compact strings (length + 1), null instance id as 0, then an empty tag buffer.
    assert HeartbeatRequest.encode(v0, 4) == (
        b"\x02g" b"\x00\x00\x00\x01" b"\x02m" b"\x00" b"\x00"
    )
    v3 = HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id="i")
    assert HeartbeatRequest.encode(v3, 3) == (
        b"\x00\x01g" b"\x00\x00\x00\x01" b"\x00\x01m" b"\x00\x01i"
    )


def test_find_coordinator_v0_and_v1_bytes() -> None:
    request = FindCoordinatorRequest(key="g", key_type=1)
    assert FindCoordinatorRequest.encode(request, 0) == b"\x00\x01g"
    assert FindCoordinatorRequest.encode(request, 1) == b"\x00\x01g\x01"
    response = FindCoordinatorResponse.decode_exact(
        b"\x00\x00" b"\x00\x00\x00\x02" b"\x00\x01h" b"\x00\x00\x23\x84", 0)
    assert (response.error_code, response.node_id, response.host, response.port) == (
        0, 2, "h", 9092)


def test_offset_fetch_null_topics_means_all_topics_from_v2() -> None:
    request = OffsetFetchRequest(group_id="g", topics=None)
    assert OffsetFetchRequest.encode(request, 2) == b"\x00\x01g\xff\xff\xff\xff"
    assert OffsetFetchRequest.encode(request, 6) == b"\x02g\x00\x00"
    assert OffsetFetchRequest.decode_exact(b"\x02g\x00\x00", 6).topics is None
    with pytest.raises(ValueError, match="topics"):
        OffsetFetchRequest.encode(request, 1)
    with pytest.raises(DecodeError):
        OffsetFetchRequest.decode_exact(b"\x00\x01g\xff\xff\xff\xff", 1)


def test_join_group_protocol_name_is_nullable_from_v7_only() -> None:
    response = JoinGroupResponse(protocol_name=None, leader="", member_id=MEMBER)
    encoded = round_trip(JoinGroupResponse, response, 7)
    assert JoinGroupResponse.decode_exact(encoded, 7).protocol_name is None
    with pytest.raises(ValueError):
        JoinGroupResponse.encode(response, 6)


def test_leave_group_switches_from_member_id_to_members_at_v3() -> None:
    request = leave_group_request(3)
    v2_request = LeaveGroupRequest(group_id="g", member_id="m")
    assert LeaveGroupRequest.encode(v2_request, 2) == b"\x00\x01g\x00\x01m"
    decoded = LeaveGroupRequest.decode_exact(LeaveGroupRequest.encode(request, 3), 3)
    assert decoded.member_id == ""
    assert [(m.member_id, m.group_instance_id) for m in decoded.members] == [
        (MEMBER, INSTANCE), (OTHER_MEMBER, None)]


def test_offset_commit_v1_carries_a_commit_timestamp_and_v2_a_retention_time() -> None:
    topic = OffsetCommitRequest.cls.OffsetCommitRequestTopic
    partition = topic.OffsetCommitRequestPartition
    request = OffsetCommitRequest(
        group_id="g", generation_id=3, member_id="m", retention_time_ms=1000,
        topics=[topic(name="t", partitions=[partition(
            partition_index=1, committed_offset=5, commit_timestamp=99,
            committed_metadata=None)])],
    )
    head = b"\x00\x01g" b"\x00\x00\x00\x03" b"\x00\x01m"
    topics_head = b"\x00\x00\x00\x01" b"\x00\x01t" b"\x00\x00\x00\x01" b"\x00\x00\x00\x01"
    offset = b"\x00\x00\x00\x00\x00\x00\x00\x05"
    assert OffsetCommitRequest.encode(request, 1) == (
        head + topics_head + offset + b"\x00\x00\x00\x00\x00\x00\x00\x63" + b"\xff\xff")
    assert OffsetCommitRequest.encode(request, 2) == (
        head + b"\x00\x00\x00\x00\x00\x00\x03\xe8" + topics_head + offset + b"\xff\xff")


# --- kafka-python's hand-written classes, for the versions kio no longer has --------------


def test_offset_commit_v0_and_v1_agree_with_kafka_python() -> None:
    kp_v0 = kp_commit.OffsetCommitRequest_v0(GROUP, [("orders", [(0, 1234, "host-a")])])
    ours = OffsetCommitRequest.decode_exact(kp_v0.encode(), 0)
    assert ours.group_id == GROUP
    part = ours.topics[0].partitions[0]
    assert (ours.topics[0].name, part.partition_index, part.committed_offset,
            part.committed_metadata) == ("orders", 0, 1234, "host-a")
    assert OffsetCommitRequest.encode(ours, 0) == kp_v0.encode()

    built = offset_commit_request(1)
    decoded = kp_commit.OffsetCommitRequest_v1.decode(OffsetCommitRequest.encode(built, 1))
    assert (decoded.group_id, decoded.generation_id_or_member_epoch, decoded.member_id) == (
        GROUP, 12, MEMBER)
    assert decoded.topics == [("orders", [(0, 123_456_789_012, 1_618_000_000_000, "host-a"),
                                          (3, 42, -1, None)])]

    kp_response = kp_commit.OffsetCommitResponse_v0([("orders", [(0, 0), (3, 22)])])
    assert OffsetCommitResponse.decode_exact(kp_response.encode(), 0) == (
        offset_commit_response(0))


def test_offset_fetch_v0_agrees_with_kafka_python() -> None:
    request = kp_commit.OffsetFetchRequest_v0(GROUP, [("orders", [0, 1, 2]), ("refunds", [5])])
    assert OffsetFetchRequest.encode(offset_fetch_request(0), 0) == request.encode()
    response = kp_commit.OffsetFetchResponse_v0.decode(
        OffsetFetchResponse.encode(offset_fetch_response(0), 0))
    assert response.topics == [("orders", [(0, 123_456_789_012, "host-a", 0),
                                           (1, -1, None, 3)])]


# --- the consumer protocol payloads --------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_subscription_payload_round_trip(version: int) -> None:
    encoded = cp.encode_subscription(subscription(version), version)
    assert encoded[:2] == version.to_bytes(2, "big")
    assert encoded[2:] == Subscription.encode(subscription(version), version)
    decoded_version, decoded = cp.decode_subscription(encoded)
    assert (decoded_version, decoded) == (version, subscription(version))
    assert isinstance(decoded, Subscription.cls)


@pytest.mark.parametrize("version", [0, 1])
def test_assignment_payload_round_trip(version: int) -> None:
    encoded = cp.encode_assignment(assignment(version), version)
    assert encoded[:2] == version.to_bytes(2, "big")
    assert cp.decode_assignment(memoryview(encoded)) == (version, assignment(version))


def test_payloads_of_a_newer_version_decode_with_the_highest_known() -> None:
    body = Subscription.encode(subscription(1), 1)
    newer = b"\x00\x07" + body + b"\x00\x00\x00\x05\x00\x02r1"
    assert cp.decode_subscription(newer) == (1, subscription(1))
    assert cp.decode_assignment(b"\x00\x03" + Assignment.encode(assignment(1), 1) + b"junk") == (
        1, assignment(1))
    # Trailing bytes after a known version are ignored too, as Kafka does.
    assert cp.decode_subscription(cp.encode_subscription(subscription(0), 0) + b"\x00") == (
        0, subscription(0))


def test_bad_payloads_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        cp.decode_subscription(b"\x00")
    with pytest.raises(DecodeError, match="version -1"):
        cp.decode_assignment(b"\xff\xff" + Assignment.encode(assignment(0), 0))
    with pytest.raises(DecodeError):
        cp.decode_subscription(cp.encode_subscription(subscription(1), 1)[:-3])
    with pytest.raises(UnsupportedVersionError):
        cp.encode_subscription(subscription(1), 2)


@pytest.mark.parametrize("version", [0, 1])
def test_subscription_agrees_with_kafka_python(version: int) -> None:
    tp = KpSubscription.TopicPartition
    kp = KpSubscription(
        version=version, topics=["orders", "refunds"], user_data=b"\x00\x01sticky",
        owned_partitions=[tp(topic="orders", partitions=[0, 2]),
                          tp(topic="refunds", partitions=[1])] if version >= 1 else None,
    )
    assert cp.decode_subscription(kp.encode()) == (version, subscription(version))
    assert cp.encode_subscription(subscription(version), version) == kp.encode()
    back = KpSubscription.decode(cp.encode_subscription(subscription(version), version))
    assert (back.version, back.topics, back.user_data) == (
        version, ["orders", "refunds"], b"\x00\x01sticky")
    if version >= 1:
        assert [(p.topic, p.partitions) for p in back.owned_partitions] == [
            ("orders", [0, 2]), ("refunds", [1])]


def test_subscription_v3_from_kafka_python_decodes_as_v1() -> None:
    tp = KpSubscription.TopicPartition
    kp = KpSubscription(version=3, topics=["orders"], user_data=None,
                        owned_partitions=[tp(topic="orders", partitions=[4])],
                        generation_id=9, rack_id="rack-b")
    version, ours = cp.decode_subscription(kp.encode())
    assert version == 1
    assert (ours.topics, ours.user_data) == (["orders"], None)
    assert [(p.topic, p.partitions) for p in ours.owned_partitions] == [("orders", [4])]


@pytest.mark.parametrize("version", [0, 1])
def test_assignment_agrees_with_kafka_python(version: int) -> None:
    tp = KpAssignment.TopicPartition
    kp = KpAssignment(
        version=version, user_data=b"\x00\x00\x00\x07",
        assigned_partitions=[tp(topic="orders", partitions=[0, 1, 2]),
                             tp(topic="refunds", partitions=[3])],
    )
    assert cp.decode_assignment(kp.encode()) == (version, assignment(version))
    assert cp.encode_assignment(assignment(version), version) == kp.encode()
    back = KpAssignment.decode(cp.encode_assignment(assignment(version), version))
    assert back.version == version
    assert [(p.topic, p.partitions) for p in back.assigned_partitions] == [
        ("orders", [0, 1, 2]), ("refunds", [3])]
    assert back.user_data == b"\x00\x00\x00\x07"


def test_legacy_kafka_python_member_metadata_and_assignment() -> None:
    metadata = ConsumerProtocolMemberMetadata_v0(0, ["orders", "refunds"], b"\x00\x01sticky")
    assert cp.decode_subscription(metadata.encode()) == (0, subscription(0))
    legacy = ConsumerProtocolMemberMetadata_v0.decode(
        cp.encode_subscription(subscription(0), 0))
    assert (legacy.version, legacy.topics, legacy.user_data) == (
        0, ["orders", "refunds"], b"\x00\x01sticky")

    legacy_assignment = ConsumerProtocolMemberAssignment_v0(
        0, [("orders", [0, 1, 2]), ("refunds", [3])], b"\x00\x00\x00\x07")
    assert cp.decode_assignment(legacy_assignment.encode()) == (0, assignment(0))
    decoded = ConsumerProtocolMemberAssignment_v0.decode(cp.encode_assignment(assignment(1), 1))
    assert decoded.version == 1
    assert decoded.assigned_partitions == [("orders", [0, 1, 2]), ("refunds", [3])]


def test_defaults_are_kafkas() -> None:
    """The non-zero defaults of Kafka's JSON: what a field holds in versions without it."""
    join = JoinGroupRequest()
    assert (join.rebalance_timeout_ms, join.group_instance_id) == (-1, None)
    joined = JoinGroupResponse()
    assert (joined.generation_id, joined.protocol_type) == (-1, None)
    assert JoinGroupResponse.cls.JoinGroupResponseMember().group_instance_id is None
    sync = SyncGroupRequest()
    assert (sync.group_instance_id, sync.protocol_type, sync.protocol_name) == (None, None, None)
    synced = SyncGroupResponse()
    assert (synced.protocol_type, synced.protocol_name) == (None, None)
    assert HeartbeatRequest().group_instance_id is None
    assert LeaveGroupRequest.cls.MemberIdentity().group_instance_id is None
    described = DescribeGroupsResponse.cls.DescribedGroup()
    assert described.authorized_operations == INT32_MIN
    assert described.DescribedGroupMember().group_instance_id is None
    assert FindCoordinatorRequest().key_type == 0
    commit = OffsetCommitRequest()
    assert (commit.generation_id, commit.group_instance_id, commit.retention_time_ms) == (
        -1, None, -1)
    partition = OffsetCommitRequest.cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition()
    assert (partition.committed_leader_epoch, partition.commit_timestamp) == (-1, -1)
    fetched = OffsetFetchResponse.cls.OffsetFetchResponseTopic.OffsetFetchResponsePartition()
    assert fetched.committed_leader_epoch == -1
    assert OffsetFetchResponse().error_code == 0
    assert Subscription().user_data is None
    assert Assignment().user_data is None
