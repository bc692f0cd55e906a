"""The group and offset handlers through the dispatcher at every version they serve: requests
encoded as a client would, answers decoded, on a task.Clock with an in-memory store (no
sockets, no ZooKeeper). Version-specific fields and error layouts are checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet import task

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import (
    NONE,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    InvalidRequestError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.coordinator import GroupCoordinator
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.network.socket_server import CloseConnection, ConnectionInfo
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.handlers.registry import HANDLERS, load_handlers
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.zk.znodes import OffsetCommitMetadata
from tests.coordinator.helpers import MemoryGroupStore, make_coordinator, subscription

pytestmark = pytest.mark.timeout(60)

CONNECTION = ConnectionInfo("c-1", "10.1.2.3", 50000)
TOPIC = "t"


@dataclass
class PartitionState:
    leader: int


class FakeCache:
    def contains(self, topic: str) -> bool:
        return topic in (TOPIC, "__consumer_offsets")

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        if self.contains(topic) and 0 <= partition < 2:
            return PartitionState(leader=1)
        return None

    def leader_endpoint(self, topic: str, partition: int, listener: str) -> EndPoint | None:
        return EndPoint(listener, SecurityProtocol.PLAINTEXT, "broker-1.local", 9092)


class FakeZk:
    """The two ZooKeeper calls the v0 paths make."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, TopicPartition], tuple[int, OffsetCommitMetadata]] = {}

    async def commit_consumer_offsets(self, group: str, commits: Any) -> None:
        for tp, value in commits.items():
            self.offsets[(group, tp)] = value

    async def get_consumer_offsets_with_metadata(self, group: str, partitions: Any) -> Any:
        return {tp: self.offsets[(group, tp)] for tp in partitions
                if (group, tp) in self.offsets}


@dataclass
class FakeConfig:
    offsets_topic_num_partitions: int = 1
    transaction_state_log_num_partitions: int = 50
    offset_metadata_max_bytes: int = 4096


@dataclass
class FakeBroker:
    clock: task.Clock = field(default_factory=task.Clock)
    store: MemoryGroupStore = field(default_factory=MemoryGroupStore)
    metadata_cache: FakeCache = field(default_factory=FakeCache)
    config: FakeConfig = field(default_factory=FakeConfig)
    zk_client: FakeZk = field(default_factory=FakeZk)
    group_coordinator: GroupCoordinator = field(init=False)
    auto_created: list[str] = field(default_factory=list)
    authorizer: Any = None

    def __post_init__(self) -> None:
        self.group_coordinator = make_coordinator(self.clock, self.store)

    @property
    def reactor(self) -> task.Clock:
        return self.clock

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        self.auto_created += names
        return dict.fromkeys(names, 5)


def call(broker: FakeBroker, api_key: ApiKey, version: int, advance: float = 0.0,
         **fields: Any) -> Any:
    load_handlers()
    key = api_key
    frame = api.encode_request(key, version, 11, "client-x", api.APIS[key].request(**fields))
    d = RequestHandler(broker=broker, handlers=HANDLERS).dispatch(CONNECTION, frame)
    broker.clock.advance(advance)
    box: list[Any] = []
    d.addBoth(box.append)
    assert box, f"{key.name} v{version} did not answer"
    assert isinstance(box[0], bytes), box[0]
    correlation_id, response = api.decode_response(key, version, box[0])
    assert correlation_id == 11
    return response


def struct(api_key: ApiKey, struct_name: str, **fields: Any) -> Any:
    return api.APIS[api_key].request.structs[struct_name](**fields)


def versions(key: ApiKey) -> list[int]:
    load_handlers()
    registered = HANDLERS[key]
    return list(range(registered.min_version, registered.max_version + 1))


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator(version: int) -> None:
    broker = FakeBroker()
    answer = call(broker, ApiKey.FIND_COORDINATOR, version, key="g", key_type=0)
    assert (answer.error_code, answer.node_id, answer.host, answer.port) == (
        NONE, 1, "broker-1.local", 9092)
    if version >= 1:
        assert answer.error_message == "NONE"
        # The transaction coordinator's topic does not exist yet: created on first use.
        answer = call(broker, ApiKey.FIND_COORDINATOR, version, key="tx", key_type=1)
        assert answer.error_code == CoordinatorNotAvailableError.code
        assert broker.auto_created == ["__transaction_state"]
        answer = call(broker, ApiKey.FIND_COORDINATOR, version, key="x", key_type=7)
        assert answer.error_code == InvalidRequestError.code


def test_find_coordinator_creates_the_offsets_topic() -> None:
    broker = FakeBroker()
    broker.metadata_cache.contains = lambda topic: topic == TOPIC  # type: ignore[method-assign]
    answer = call(broker, ApiKey.FIND_COORDINATOR, 3, key="g", key_type=0)
    assert answer.error_code == CoordinatorNotAvailableError.code and answer.node_id == -1
    assert broker.auto_created == ["__consumer_offsets"]


def join(broker: FakeBroker, version: int, group: str, member_id: str = "") -> Any:
    fields: dict[str, Any] = {
        "group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000,
        "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [struct(ApiKey.JOIN_GROUP, "JoinGroupRequestProtocol", name="range",
                             metadata=subscription(TOPIC))]}
    return call(broker, ApiKey.JOIN_GROUP, version, advance=0.001, **fields)


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_group_lifecycle_at_every_version(version: int) -> None:
    """JoinGroup vN with SyncGroup, Heartbeat, LeaveGroup at the matching version."""
    broker = FakeBroker()
    answer = join(broker, version, "g")
    if version >= 4:
        assert answer.error_code == MemberIdRequiredError.code
        assert answer.member_id.startswith("client-x-")
        answer = join(broker, version, "g", answer.member_id)
    assert answer.error_code == NONE and answer.generation_id == 1
    assert answer.leader == answer.member_id and len(answer.members) == 1
    assert answer.protocol_name == "range"
    if version >= 7:
        assert answer.protocol_type == "consumer"
    member = answer.member_id
    sync_version = min(version, 5)
    sync = call(broker, ApiKey.SYNC_GROUP, sync_version, group_id="g", generation_id=1,
                member_id=member, group_instance_id=None, protocol_type="consumer",
                protocol_name="range", assignments=[struct(
                    ApiKey.SYNC_GROUP, "SyncGroupRequestAssignment", member_id=member,
                    assignment=b"abc")])
    assert sync.error_code == NONE and sync.assignment == b"abc"
    if sync_version >= 5:
        assert (sync.protocol_type, sync.protocol_name) == ("consumer", "range")
    heartbeat = call(broker, ApiKey.HEARTBEAT, min(version, 4), group_id="g", generation_id=1,
                     member_id=member, group_instance_id=None)
    assert heartbeat.error_code == NONE
    described = call(broker, ApiKey.DESCRIBE_GROUPS, min(version, 5), groups=["g", "nope"],
                     include_authorized_operations=True)
    group, unknown = described.groups
    assert (group.group_state, group.protocol_type, group.protocol_data) == (
        "Stable", "consumer", "range")
    assert group.members[0].client_host == "/10.1.2.3"
    assert group.members[0].client_id == "client-x"
    assert group.members[0].member_assignment == b"abc"
    assert (unknown.error_code, unknown.group_state) == (NONE, "Dead")
    leave_version = min(version, 4)
    if leave_version >= 3:
        left = call(broker, ApiKey.LEAVE_GROUP, leave_version, group_id="g", members=[
            struct(ApiKey.LEAVE_GROUP, "MemberIdentity", member_id=member,
                   group_instance_id=None)])
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, NONE)]
    else:
        left = call(broker, ApiKey.LEAVE_GROUP, leave_version, group_id="g", member_id=member)
    assert left.error_code == NONE
    assert broker.group_coordinator.groups["g"].state.value == "Empty"


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
def test_list_groups(version: int) -> None:
    broker = FakeBroker()
    broker.store.offsets["stored"] = {TopicPartition(TOPIC, 0): OffsetAndMetadata(1)}
    broker.group_coordinator = make_coordinator(broker.clock, broker.store)
    answer = call(broker, ApiKey.LIST_GROUPS, version, states_filter=[])
    assert [(g.group_id, g.protocol_type) for g in answer.groups] == [("stored", "")]
    if version >= 4:
        assert answer.groups[0].group_state == "Empty"
        answer = call(broker, ApiKey.LIST_GROUPS, version, states_filter=["Stable"])
        assert answer.groups == []


def commit_body(version: int, group: str, *partitions: tuple[str, int, int]) -> dict[str, Any]:
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(struct(
            ApiKey.OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=partition,
            committed_offset=offset, committed_leader_epoch=3, commit_timestamp=-1,
            committed_metadata=f"m{version}"))
    return {"group_id": group, "generation_id": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [struct(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic", name=t,
                              partitions=p) for t, p in by_topic.items()]}


def fetch_body(group: str, topics: list[tuple[str, list[int]]] | None) -> dict[str, Any]:
    return {"group_id": group, "require_stable": False, "topics": None if topics is None else [
        struct(ApiKey.OFFSET_FETCH, "OffsetFetchRequestTopic", name=t, partition_indexes=p)
        for t, p in topics]}


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_and_fetch(version: int) -> None:
    broker = FakeBroker()
    answer = call(broker, ApiKey.OFFSET_COMMIT, version, **commit_body(
        version, "g", (TOPIC, 0, 42), (TOPIC, 7, 1), ("missing", 0, 1)))
    codes = {(t.name, p.partition_index): p.error_code for t in answer.topics
             for p in t.partitions}
    assert codes == {(TOPIC, 0): NONE, (TOPIC, 7): UnknownTopicOrPartitionError.code,
                     ("missing", 0): UnknownTopicOrPartitionError.code}
    if version == 0:  # the legacy path: straight to ZooKeeper, not through the coordinator
        assert broker.zk_client.offsets[("g", TopicPartition(TOPIC, 0))][0] == 42
        assert broker.store.commits == []
    else:
        stored = broker.store.offsets["g"][TopicPartition(TOPIC, 0)]
        assert (stored.offset, stored.metadata) == (42, f"m{version}")
        assert stored.leader_epoch == (3 if version >= 6 else -1)
    fetch_version = min(version, 7)
    fetched = call(broker, ApiKey.OFFSET_FETCH, fetch_version,
                   **fetch_body("g", [(TOPIC, [0, 1])]))
    rows = {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in fetched.topics for p in t.partitions}
    if fetch_version == 0:
        # Kafka 2.8's v0: a partition without an offset is UNKNOWN_TOPIC_OR_PARTITION.
        assert rows == {(TOPIC, 0): (42, NONE),
                        (TOPIC, 1): (-1, UnknownTopicOrPartitionError.code)}
    else:
        assert rows == {(TOPIC, 0): (42, NONE), (TOPIC, 1): (-1, NONE)}
        epochs = [p.committed_leader_epoch for t in fetched.topics for p in t.partitions]
        if fetch_version >= 5:
            assert epochs[0] == (3 if version >= 6 else -1)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.OFFSET_FETCH) if v >= 1])
def test_offset_fetch_errors_and_all_topics(version: int) -> None:
    broker = FakeBroker()
    call(broker, ApiKey.OFFSET_COMMIT, 2, **commit_body(2, "g", (TOPIC, 1, 5)))
    broker.group_coordinator.on_resignation(0)
    answer = call(broker, ApiKey.OFFSET_FETCH, version, **fetch_body("g", [(TOPIC, [1])]))
    if version >= 2:
        assert answer.error_code == NotCoordinatorError.code and answer.topics == []
    else:
        assert answer.topics[0].partitions[0].error_code == NotCoordinatorError.code
    if version >= 2:
        broker.group_coordinator = make_coordinator(broker.clock, broker.store)
        answer = call(broker, ApiKey.OFFSET_FETCH, version, **fetch_body("g", None))
        assert [(t.name, p.partition_index, p.committed_offset) for t in answer.topics
                for p in t.partitions] == [(TOPIC, 1, 5)]


def test_offset_delete_and_delete_groups() -> None:
    broker = FakeBroker()
    call(broker, ApiKey.OFFSET_COMMIT, 8, **commit_body(8, "g", (TOPIC, 0, 5), (TOPIC, 1, 6)))
    answer = call(broker, ApiKey.OFFSET_DELETE, 0, group_id="g", topics=[
        struct(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestTopic", name=TOPIC, partitions=[
            struct(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=0),
            struct(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=9)])])
    assert answer.error_code == NONE
    assert [(p.partition_index, p.error_code) for p in answer.topics[0].partitions] == [
        (0, NONE), (9, UnknownTopicOrPartitionError.code)]
    assert list(broker.store.offsets["g"]) == [TopicPartition(TOPIC, 1)]
    answer = call(broker, ApiKey.OFFSET_DELETE, 0, group_id="nope", topics=[])
    assert answer.error_code == GroupIdNotFoundError.code
    for version in versions(ApiKey.DELETE_GROUPS):
        call(broker, ApiKey.OFFSET_COMMIT, 8, **commit_body(8, "g", (TOPIC, 0, 5)))
        answer = call(broker, ApiKey.DELETE_GROUPS, version, groups_names=["g", "nope"])
        assert [(r.group_id, r.error_code) for r in answer.results] == [
            ("g", NONE), ("nope", GroupIdNotFoundError.code)]
        assert "g" not in broker.store.offsets


GOLDEN = Path(__file__).resolve().parents[1] / "protocol" / "golden"
GROUP_APIS = ("find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
              "describe_groups", "list_groups", "offset_commit", "offset_fetch")


@pytest.mark.parametrize("frame_file", sorted(
    p.name for p in GOLDEN.glob("*.bin") if p.name.startswith(GROUP_APIS)))
def test_real_clients_frames_are_answered(frame_file: str) -> None:
    """Request bytes captured from librdkafka, kcat and kafka-python: each is answered with
    a response of its own version and correlation id (never a closed connection)."""
    broker = FakeBroker()
    frame = (GOLDEN / frame_file).read_bytes()
    key, version, correlation_id = api.peek_request_header(frame)
    load_handlers()
    d = RequestHandler(broker=broker, handlers=HANDLERS).dispatch(CONNECTION, frame)
    broker.clock.advance(0.001)
    box: list[Any] = []
    d.addBoth(box.append)
    assert box and isinstance(box[0], bytes), box
    answered_id, response = api.decode_response(key, version, box[0])
    assert answered_id == correlation_id
    codes = [getattr(response, "error_code", NONE)]
    for name in ("topics", "groups", "results", "members"):
        for item in getattr(response, name, None) or []:
            codes.append(getattr(item, "error_code", NONE))
            codes += [p.error_code for p in getattr(item, "partitions", [])]
    # Only the answers these requests deserve from a fresh coordinator.
    assert set(codes) <= {NONE, MemberIdRequiredError.code, UnknownMemberIdError.code,
                          IllegalGenerationError.code, RebalanceInProgressError.code,
                          UnknownTopicOrPartitionError.code}, codes


GROUP_FRAMES = sorted(p for p in GOLDEN.glob("*.bin") if p.name.startswith(GROUP_APIS))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(GROUP_FRAMES), st.lists(
    st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)),
    min_size=1, max_size=4))
def test_mutated_frames_never_break_the_coordinator(frame_file: Path,
                                                    mutations: list[tuple[int, int]]) -> None:
    """Bytes flipped anywhere after the header: the request is answered, or its connection
    closed (unreadable body); a handler never fails."""
    frame = bytearray(frame_file.read_bytes())
    header_end = 8 + 2 + int.from_bytes(frame[8:10], "big", signed=True)
    for position, value in mutations:
        if len(frame) > header_end:
            frame[header_end + position % (len(frame) - header_end)] = value
    broker = FakeBroker()
    load_handlers()
    try:
        d = RequestHandler(broker=broker, handlers=HANDLERS).dispatch(CONNECTION, bytes(frame))
    except CloseConnection:
        return
    broker.clock.advance(0.001)
    broker.clock.advance(400)  # any join or sync still waiting answers by then
    box: list[Any] = []
    d.addBoth(box.append)
    assert box and isinstance(box[0], bytes | type(None)), box
