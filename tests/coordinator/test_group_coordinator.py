"""GroupCoordinator on a task.Clock with an in-memory store: the join/sync/heartbeat state
machine, sessions, the initial rebalance delay, static membership, offsets, placement."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.coordinator import (
    GroupCoordinator,
    LeaveMember,
    java_string_hash,
    partition_for,
)
from kafkaclone.coordinator.group.metadata import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    IllegalGroupStateTransition,
    JoinGroupResult,
)
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from tests.coordinator.helpers import (
    MemoryGroupMetadataLog,
    MemoryGroupStore,
    assignment,
    make_coordinator,
    result_of,
    subscription,
)

pytestmark = pytest.mark.timeout(30)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def join(coordinator: GroupCoordinator, member_id: str = "", *, group: str = "g",
         instance_id: str | None = None, require_known: bool = False,
         protocols: list[tuple[str, bytes]] | None = None, session_ms: int = SESSION_MS,
         rebalance_ms: int = REBALANCE_MS, protocol_type: str = "consumer",
         client_id: str = "client") -> Deferred[JoinGroupResult]:
    return Deferred.fromCoroutine(coordinator.handle_join_group(
        group, member_id, instance_id, require_known, client_id, "/127.0.0.1", rebalance_ms,
        session_ms, protocol_type,
        protocols if protocols is not None else [("range", subscription("t"))]))


def sync(coordinator: GroupCoordinator, member_id: str, generation: int,
         assignments: dict[str, bytes] | None = None, *, group: str = "g",
         instance_id: str | None = None) -> Deferred[Any]:
    return Deferred.fromCoroutine(coordinator.handle_sync_group(
        group, generation, member_id, None, None, instance_id, assignments or {}))


def stable_group_of_two(clock: task.Clock, coordinator: GroupCoordinator
                        ) -> tuple[JoinGroupResult, JoinGroupResult]:
    """Two members, generation 2, Stable, each with one partition of t."""
    first = join(coordinator)
    clock.advance(0)
    a = result_of(first)
    assert a.error_code == NONE and a.generation_id == 1
    second = join(coordinator)  # a rebalance: waits for a to rejoin
    rejoin = join(coordinator, a.member_id)
    b2 = result_of(second)
    a2 = result_of(rejoin)
    assert a2.generation_id == b2.generation_id == 2
    leader, follower = (a2, b2) if a2.members else (b2, a2)
    assert leader.leader_id == leader.member_id == follower.leader_id
    assert {m[0] for m in leader.members} == {a.member_id, b2.member_id}
    assert follower.members == ()
    follower_sync = sync(coordinator, follower.member_id, 2)
    assert not follower_sync.called  # waits for the leader's assignment
    leader_sync = sync(coordinator, leader.member_id, 2, {
        leader.member_id: assignment({"t": [0]}), follower.member_id: assignment({"t": [1]})})
    assert result_of(leader_sync).assignment == assignment({"t": [0]})
    assert result_of(follower_sync).assignment == assignment({"t": [1]})
    assert coordinator.groups["g"].state is GroupState.STABLE
    return leader, follower


def test_state_machine_refuses_illegal_transitions() -> None:
    group = GroupMetadata("g")
    for target, previous in VALID_PREVIOUS_STATES.items():
        for state in GroupState:
            group.state = state
            if state in previous:
                group.transition_to(target, 0)
                assert group.state is target
            else:
                with pytest.raises(IllegalGroupStateTransition):
                    group.transition_to(target, 0)


def test_java_string_hash_and_partition_for() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) = 0
    assert java_string_hash("Hello World") == -862545276
    assert partition_for("Hello World", 50) == 26


def test_join_sync_heartbeat_round() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    for member in (leader, follower):
        assert coordinator.handle_heartbeat("g", member.member_id, None, 2) == NONE
    assert coordinator.handle_heartbeat("g", leader.member_id, None, 1) == (
        IllegalGenerationError.code)
    assert coordinator.handle_heartbeat("g", "nobody", None, 2) == UnknownMemberIdError.code
    assert coordinator.handle_heartbeat("other", "x", None, 0) == UnknownMemberIdError.code
    assert result_of(sync(coordinator, follower.member_id, 1)).error_code == (
        IllegalGenerationError.code)
    # The mirror for monitoring tools: members and owners.
    mirror = coordinator.store.mirrors["g"]  # type: ignore[attr-defined]
    assert dict(mirror.members) == {leader.member_id: ("t",), follower.member_id: ("t",)}
    assert dict(mirror.owners) == {TopicPartition("t", 0): leader.member_id,
                                   TopicPartition("t", 1): follower.member_id}


def test_member_id_required_from_v4() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    first = result_of(join(coordinator, require_known=True))
    assert first.error_code == MemberIdRequiredError.code
    assert first.member_id.startswith("client-")
    assert coordinator.groups["g"].is_pending_member(first.member_id)
    second = join(coordinator, first.member_id, require_known=True)
    clock.advance(0)
    joined = result_of(second)
    assert joined.error_code == NONE and joined.member_id == first.member_id
    assert joined.leader_id == first.member_id and joined.generation_id == 1


def test_pending_member_expires_after_session_timeout() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    first = result_of(join(coordinator, require_known=True))
    clock.advance(SESSION_MS / 1000 + 0.1)
    assert not coordinator.groups["g"].is_pending_member(first.member_id)


def test_invalid_session_timeout_and_group_id() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    assert result_of(join(coordinator, session_ms=5999)).error_code == (
        InvalidSessionTimeoutError.code)
    assert result_of(join(coordinator, session_ms=1_800_001)).error_code == (
        InvalidSessionTimeoutError.code)
    assert result_of(join(coordinator, group="")).error_code == InvalidGroupIdError.code


def test_unknown_member_and_inconsistent_protocol() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    assert result_of(join(coordinator, "ghost")).error_code == UnknownMemberIdError.code
    first = join(coordinator)
    clock.advance(0)
    assert result_of(first).error_code == NONE
    other = result_of(join(coordinator, protocol_type="connect"))
    assert other.error_code == InconsistentGroupProtocolError.code
    other = result_of(join(coordinator, protocols=[("cooperative-sticky", b"")]))
    assert other.error_code == InconsistentGroupProtocolError.code


def test_protocol_selection_by_votes() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    a = join(coordinator, protocols=[("range", b"1"), ("roundrobin", b"2")])
    clock.advance(0)
    first = result_of(a)
    assert first.protocol_name == "range"
    b = join(coordinator, protocols=[("roundrobin", b"3")])
    again = join(coordinator, first.member_id, protocols=[("range", b"1"), ("roundrobin", b"2")])
    assert result_of(b).protocol_name == "roundrobin"  # the only common one
    assert {m[2] for m in result_of(again).members} == {b"2", b"3"}


def test_session_expiry_removes_member_and_rebalances() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    # Only the leader heartbeats.
    for _ in range(3):
        clock.advance(3)
        assert coordinator.handle_heartbeat("g", leader.member_id, None, 2) == NONE
    clock.advance(1.5)
    # The follower's session (10 s) has expired: it is gone and the group rebalances.
    group = coordinator.groups["g"]
    assert not group.has(follower.member_id)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert coordinator.handle_heartbeat("g", leader.member_id, None, 2) == (
        RebalanceInProgressError.code)
    rejoin = join(coordinator, leader.member_id)
    result = result_of(rejoin)
    assert result.generation_id == 3 and [m[0] for m in result.members] == [leader.member_id]
    assert coordinator.handle_heartbeat("g", follower.member_id, None, 3) == (
        UnknownMemberIdError.code)


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    newcomer = join(coordinator)
    rejoin = join(coordinator, leader.member_id)
    assert not rejoin.called
    # The follower keeps heartbeating (told to rejoin) but never rejoins.
    for _ in range(12):
        clock.advance(REBALANCE_MS / 1000 / 12)
        coordinator.handle_heartbeat("g", follower.member_id, None, 2)
    assert result_of(rejoin).generation_id == 3
    assert {m[0] for m in result_of(rejoin).members} == {leader.member_id,
                                                         result_of(newcomer).member_id}
    assert not coordinator.groups["g"].has(follower.member_id)


def test_leave_group_rebalances_remaining_members() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    error, results = coordinator.handle_leave_group("g", [LeaveMember(follower.member_id, None),
                                                          LeaveMember("ghost", None)])
    assert error == NONE
    assert [code for _, code in results] == [NONE, UnknownMemberIdError.code]
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert result_of(join(coordinator, leader.member_id)).generation_id == 3
    # The last member leaves: the join phase has nobody to wait for, the group is Empty.
    error, results = coordinator.handle_leave_group("g", [LeaveMember(leader.member_id, None)])
    assert coordinator.groups["g"].state is GroupState.EMPTY
    assert "g" not in coordinator.store.mirrors  # type: ignore[attr-defined]


def test_initial_rebalance_delay_collects_members() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock, group_initial_rebalance_delay_ms=3000)
    first = join(coordinator)
    clock.advance(2)
    second = join(coordinator)
    # At 3 s a new member has come meanwhile: Kafka's InitialDelayedJoin waits another 3 s.
    clock.advance(1)
    clock.advance(2.9)
    assert not first.called and not second.called
    clock.advance(0.2)
    a, b = result_of(first), result_of(second)
    assert a.generation_id == b.generation_id == 1
    assert len(a.members or b.members) == 2


def test_rejoining_leader_triggers_rebalance_follower_with_same_metadata_does_not() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    same = result_of(join(coordinator, follower.member_id))
    assert same.generation_id == 2 and coordinator.groups["g"].state is GroupState.STABLE
    pending = join(coordinator, leader.member_id)
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert not pending.called


def test_sync_during_rebalance_and_before_leader() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    _leader, follower = stable_group_of_two(clock, coordinator)
    join(coordinator)  # a newcomer: PreparingRebalance
    assert result_of(sync(coordinator, follower.member_id, 2)).error_code == (
        RebalanceInProgressError.code)


def test_group_max_size() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock, group_max_size=1)
    first = join(coordinator)
    clock.advance(0)
    assert result_of(first).error_code == NONE
    assert result_of(join(coordinator)).error_code == GroupMaxSizeReachedError.code


def test_static_member_rejoin_takes_its_place_and_fences_the_old_id() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    first = join(coordinator, instance_id="i-1")
    clock.advance(0)
    old = result_of(first)
    assert old.member_id.startswith("i-1-")
    assert result_of(sync(coordinator, old.member_id, 1, {old.member_id: assignment(
        {"t": [0, 1]})}, instance_id="i-1")).error_code == NONE
    # The same instance restarts: new member id, same place, no rebalance.
    new = result_of(join(coordinator, instance_id="i-1"))
    assert new.error_code == NONE and new.member_id != old.member_id
    assert new.generation_id == 1 and new.leader_id == old.member_id
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.handle_heartbeat("g", old.member_id, "i-1", 1) == (
        FencedInstanceIdError.code)
    assert coordinator.handle_heartbeat("g", new.member_id, "i-1", 1) == NONE
    assert result_of(sync(coordinator, new.member_id, 1, instance_id="i-1")).assignment == (
        assignment({"t": [0, 1]}))
    _error, results = coordinator.handle_leave_group("g", [LeaveMember(old.member_id, "i-1")])
    assert results[0][1] == FencedInstanceIdError.code


def commit(coordinator: GroupCoordinator, offsets: dict[TopicPartition, int], *,
           member_id: str = "", generation: int = -1, group: str = "g",
           metadata: str = "") -> dict[TopicPartition, int]:
    d = Deferred.fromCoroutine(coordinator.handle_commit_offsets(
        group, member_id, None, generation,
        {tp: OffsetAndMetadata(o, metadata, commit_timestamp_ms=0) for tp, o in offsets.items()}))
    result: dict[TopicPartition, int] = result_of(d)
    return result


def test_offset_commit_checks_generation_and_member() -> None:
    clock = task.Clock()
    store = MemoryGroupStore()
    coordinator = make_coordinator(clock, store)
    tp = TopicPartition("t", 0)
    # A group that only stores offsets.
    assert commit(coordinator, {tp: 5}, group="simple") == {tp: NONE}
    assert store.offsets["simple"][tp].offset == 5
    assert commit(coordinator, {tp: 5}, group="unknown", generation=3) == {
        tp: IllegalGenerationError.code}
    leader, follower = stable_group_of_two(clock, coordinator)
    assert commit(coordinator, {tp: 7}, member_id=leader.member_id, generation=2) == {tp: NONE}
    assert commit(coordinator, {tp: 8}, member_id=leader.member_id, generation=1) == {
        tp: IllegalGenerationError.code}
    assert commit(coordinator, {tp: 8}, member_id="ghost", generation=2) == {
        tp: UnknownMemberIdError.code}
    assert commit(coordinator, {tp: 8}) == {tp: UnknownMemberIdError.code}
    assert commit(coordinator, {tp: 8}, member_id=leader.member_id, generation=2,
                  metadata="x" * 4097) == {tp: OffsetMetadataTooLargeError.code}
    assert store.offsets["g"][tp].offset == 7
    store.fail_commits = True
    assert commit(coordinator, {tp: 9}, member_id=leader.member_id, generation=2) == {
        tp: CoordinatorNotAvailableError.code}
    # During CompletingRebalance commits wait for the new generation.
    store.fail_commits = False
    newcomer = join(coordinator)
    again = [join(coordinator, m.member_id) for m in (leader, follower)]
    assert all(d.called for d in again) and newcomer.called
    assert commit(coordinator, {tp: 9}, member_id=leader.member_id, generation=3) == {
        tp: RebalanceInProgressError.code}


def test_txn_offset_commit_during_a_rebalance() -> None:
    """Kafka 2.8's doTxnCommitOffsets checks the member and the generation only (no
    REBALANCE_IN_PROGRESS, unlike OffsetCommit); a refused commit persists nothing and
    leaves nothing pending."""
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    tp = TopicPartition("t", 0)
    persisted: list[dict[TopicPartition, OffsetAndMetadata]] = []

    async def persist(offsets: Any) -> int:
        persisted.append(dict(offsets))
        return NONE

    def txn_commit(member_id: str, generation: int, pid: int) -> dict[TopicPartition, int]:
        d = Deferred.fromCoroutine(coordinator.handle_txn_commit_offsets(
            "g", pid, member_id, None, generation, {tp: OffsetAndMetadata(5)}, persist))
        result: dict[TopicPartition, int] = result_of(d)
        return result

    leader, follower = stable_group_of_two(clock, coordinator)
    newcomer = join(coordinator)
    group = coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 2
    assert txn_commit(leader.member_id, 1, 100) == {tp: IllegalGenerationError.code}
    assert txn_commit("ghost", 2, 101) == {tp: UnknownMemberIdError.code}
    assert persisted == [] and not coordinator.has_pending_txn_offsets("g", tp)
    assert txn_commit(leader.member_id, 2, 102) == {tp: NONE}  # still its generation
    assert len(persisted) == 1 and coordinator.has_pending_txn_offsets("g", tp)
    coordinator.complete_txn_offsets(102, [coordinator.partition_for("g")])
    again = [join(coordinator, m.member_id) for m in (leader, follower)]
    assert all(d.called for d in again) and newcomer.called
    assert group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == 3
    assert txn_commit(leader.member_id, 2, 103) == {tp: IllegalGenerationError.code}
    assert len(persisted) == 1 and not coordinator.has_pending_txn_offsets("g", tp)
    assert txn_commit(leader.member_id, 3, 104) == {tp: NONE}


def test_fetch_offsets() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    commit(coordinator, {tp0: 3}, metadata="meta")
    error, found = result_of(Deferred.fromCoroutine(
        coordinator.handle_fetch_offsets("g", [tp0, tp1])))
    assert error == NONE
    assert found[tp0] is not None and found[tp0].offset == 3 and found[tp0].metadata == "meta"
    assert found[tp1] is None
    error, found = result_of(Deferred.fromCoroutine(coordinator.handle_fetch_offsets("g", None)))
    assert list(found) == [tp0]


def test_placement_not_coordinator_and_loading() -> None:
    clock = task.Clock()
    store = MemoryGroupStore()
    store.offsets["old-group"] = {TopicPartition("t", 0): OffsetAndMetadata(1)}
    coordinator = make_coordinator(clock, store, offsets_topic_num_partitions=4)
    coordinator.on_resignation(partition_for("g", 4))
    assert result_of(join(coordinator)).error_code == NotCoordinatorError.code
    assert coordinator.handle_heartbeat("g", "m", None, 1) == NotCoordinatorError.code
    coordinator.loading_partitions.add(partition_for("g", 4))
    assert result_of(join(coordinator)).error_code == CoordinatorLoadInProgressError.code
    assert coordinator.handle_heartbeat("g", "m", None, 1) == NONE  # blindly, as Kafka
    # Groups with committed offsets are loaded as Empty groups.
    assert coordinator.groups["old-group"].state is GroupState.EMPTY
    coordinator.on_resignation(partition_for("old-group", 4))
    assert "old-group" not in coordinator.groups
    coordinator.shutdown()
    assert result_of(join(coordinator, group="old-group")).error_code == (
        CoordinatorNotAvailableError.code)


def test_unloading_answers_waiting_members_not_coordinator() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, _follower = stable_group_of_two(clock, coordinator)
    waiting = join(coordinator, leader.member_id)
    coordinator.on_resignation(0)
    assert result_of(waiting).error_code == NotCoordinatorError.code


def test_describe_list_delete_groups() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, follower = stable_group_of_two(clock, coordinator)
    commit(coordinator, {TopicPartition("t", 0): 1}, group="empty-one")
    error, summary = coordinator.handle_describe_group("g")
    assert error == NONE and summary.state == "Stable" and summary.protocol == "range"
    assert summary.protocol_type == "consumer"
    assert {m.member_id for m in summary.members} == {leader.member_id, follower.member_id}
    assert all(m.client_host == "/127.0.0.1" and m.metadata for m in summary.members)
    assert coordinator.handle_describe_group("nope")[1].state == "Dead"
    error, listed = coordinator.handle_list_groups()
    assert sorted(listed) == [("empty-one", "", "Empty"), ("g", "consumer", "Stable")]
    assert coordinator.handle_list_groups(["stable"])[1] == [("g", "consumer", "Stable")]
    errors = result_of(Deferred.fromCoroutine(coordinator.handle_delete_groups(
        ["g", "empty-one", "nope"])))
    assert errors == {"g": NonEmptyGroupError.code, "empty-one": NONE,
                      "nope": GroupIdNotFoundError.code}
    assert "empty-one" not in coordinator.store.offsets  # type: ignore[attr-defined]


def test_delete_offsets_of_subscribed_topics_is_refused() -> None:
    clock = task.Clock()
    coordinator = make_coordinator(clock)
    leader, _ = stable_group_of_two(clock, coordinator)
    t0, other = TopicPartition("t", 0), TopicPartition("other", 0)
    commit(coordinator, {t0: 1, other: 2}, member_id=leader.member_id, generation=2)
    error, errors = result_of(Deferred.fromCoroutine(
        coordinator.handle_delete_offsets("g", [t0, other])))
    assert error == NONE
    assert errors == {t0: GroupSubscribedToTopicError.code, other: NONE}
    assert list(coordinator.store.offsets["g"]) == [t0]  # type: ignore[attr-defined]
    assert result_of(Deferred.fromCoroutine(coordinator.handle_delete_offsets("x", [t0])))[0] == (
        GroupIdNotFoundError.code)


def test_expired_offsets_of_empty_groups_are_removed() -> None:
    clock = task.Clock()
    store = MemoryGroupStore()
    coordinator = make_coordinator(clock, store, offsets_retention_ms=60_000,
                                   offsets_retention_check_interval_ms=10_000)
    tp = TopicPartition("t", 0)
    commit(coordinator, {tp: 1}, group="simple")  # committed at time 0
    clock.advance(30)
    assert store.offsets["simple"]
    clock.advance(40)
    assert "simple" not in store.offsets and "simple" not in coordinator.groups


def test_offsets_of_deleted_partitions_are_removed() -> None:
    # Kafka's handleDeletedPartitions: the deleted topic's offsets leave every group; a
    # group left Empty without offsets goes, one with other offsets stays.
    clock = task.Clock()
    store = MemoryGroupStore()
    coordinator = make_coordinator(clock, store)
    gone0, gone1, kept = TopicPartition("gone", 0), TopicPartition("gone", 1), TopicPartition(
        "kept", 0)
    commit(coordinator, {gone0: 5, gone1: 6}, group="only-gone")
    commit(coordinator, {gone0: 7, kept: 8}, group="both")
    removed = result_of(Deferred.fromCoroutine(
        coordinator.handle_deleted_partitions([gone0, gone1])))
    assert removed == 3
    assert "only-gone" not in store.offsets and "only-gone" not in coordinator.groups
    assert list(store.offsets["both"]) == [kept]


def test_commit_that_the_store_does_not_finish_times_out() -> None:
    clock = task.Clock()
    store = MemoryGroupStore()
    coordinator = make_coordinator(clock, store, offsets_commit_timeout_ms=5000)
    never: Deferred[None] = Deferred()

    async def stuck(group_id: str, offsets: Any) -> None:
        await never

    store.commit_offsets = stuck  # type: ignore[method-assign]
    tp = TopicPartition("t", 0)
    d = Deferred.fromCoroutine(coordinator.handle_commit_offsets(
        "g", "", None, -1, {tp: OffsetAndMetadata(1)}))
    clock.advance(4.9)
    assert not d.called
    clock.advance(0.2)
    assert result_of(d) == {tp: RequestTimedOutError.code}


class _Partition:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic_partition = TopicPartition(topic, partition)


def test_leadership_listener_loads_and_unloads_offsets_partitions() -> None:
    from tests.coordinator.helpers import make_group_config

    clock = task.Clock()
    store = MemoryGroupStore()
    store.offsets["x"] = {TopicPartition("t", 0): OffsetAndMetadata(1)}
    coordinator = GroupCoordinator(1, make_group_config(offsets_topic_num_partitions=3), store,
                                   MemoryGroupMetadataLog(), clock)
    coordinator.startup()
    home = partition_for("x", 3)
    coordinator.on_leadership_change(
        [_Partition("__consumer_offsets", home), _Partition("other-topic", 0)], [])
    assert coordinator.owned_partitions == {home}
    assert coordinator.groups["x"].state is GroupState.EMPTY
    assert coordinator.validate_group_status("x") is None
    coordinator.on_leadership_change([], [_Partition("__consumer_offsets", home)])
    assert coordinator.owned_partitions == set() and "x" not in coordinator.groups
    assert isinstance(coordinator.validate_group_status("x"), NotCoordinatorError)
