"""GroupCoordinator: Kafka 2.8's classic group membership protocol and committed offsets.

Placement: group ``g`` belongs to partition ``abs(javaStringHashCode(g)) %
offsets.topic.num.partitions`` of ``__consumer_offsets`` (:func:`partition_for`); the broker
leading that partition is the group's coordinator. The ReplicaManager tells the coordinator
when this broker gains or loses leadership of such partitions (:meth:`on_leadership_change`):
gained partitions are loaded, lost ones are unloaded (their groups go Dead and waiting
members are told NOT_COORDINATOR). Any other group answers NOT_COORDINATOR. Loading reads the
partition (:class:`~kafkaclone.coordinator.group.metadata_log.GroupMetadataLog`) and resumes
each group from its last group metadata record: its generation, protocol, leader and members,
Stable (or Empty without members), each member's session timer started afresh; the groups
that only have committed offsets under ``/consumers`` appear as Empty groups. Requests
meanwhile answer COORDINATOR_LOAD_IN_PROGRESS.

The group is written to that partition as Kafka's storeGroup does it: when the leader's
SyncGroup brings the assignment (the members get it, and the group is Stable, only once the
record is acknowledged), when a rebalance leaves the group Empty, and when a static member
rejoins a Stable group under a new member id; a removed group gets a tombstone. So a
coordinator failover leaves the group in its generation, with its members.

Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) follows Kafka's GroupCoordinator:

- a join moves the group to PreparingRebalance; the join phase completes when every known
  member has rejoined (and no KIP-394 pending member is outstanding) or after the largest
  rebalance timeout; an Empty group's first rebalance waits
  ``group.initial.rebalance.delay.ms``, again as long as new members keep arriving, up to
  the rebalance timeout (Kafka's InitialDelayedJoin); dynamic members that did not rejoin
  are removed;
- completing the join starts a new generation, chooses the protocol every member supports
  with the most first-preference votes, answers every waiting member (the leader gets the
  members' metadata) and moves to CompletingRebalance; the leader's SyncGroup carries the
  assignment, which every member receives, and the group is Stable;
- each member's session expires ``session.timeout.ms`` after its last heartbeat (5 minutes
  for a new member until its first join completes), which removes it and rebalances;
- static members (``group.instance.id``, KIP-345) keep their place across restarts: a
  rejoin with a new member id replaces the old one (which is then FENCED_INSTANCE_ID).

Timers run on the reactor clock (``IReactorTime``; tests pass a ``task.Clock``). Offsets are
kept by a :class:`~kafkaclone.coordinator.group.store.GroupStore` (ZooKeeper), never in the log.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from twisted.internet.defer import Deferred
from twisted.internet.defer import TimeoutError as DeferredTimeoutError

from kafkaclone.common.clock import Scheduler, now_ms
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
    InvalidFetchSizeError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    KafkaStorageError,
    MemberIdRequiredError,
    MessageTooLargeError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.jvm import java_string_hash, kafka_abs
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.metadata import (
    CONSUMER_PROTOCOL_TYPE,
    NO_GENERATION,
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
    assigned_partitions,
)
from kafkaclone.coordinator.group.metadata_log import (
    GroupMetadataLog,
    group_metadata_key,
    group_metadata_value,
    read_group_metadata,
    read_message_key,
)
from kafkaclone.coordinator.group.pending_offsets import PendingTxnOffsets
from kafkaclone.coordinator.group.store import GroupStore, MembershipMirror, OffsetAndMetadata
from kafkaclone.protocol.records.batch import build_record_batch

logger = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS: Final = 5 * 60 * 1000
"""Kafka's GroupCoordinator.NewMemberJoinTimeoutMs."""
INT_MAX: Final = 2**31 - 1


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


@dataclass(frozen=True)
class GroupConfig:
    """The broker settings the coordinator uses. The values (and their defaults) come from
    the broker's config table: the broker builds this (kafkaclone.server.broker)."""

    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_max_size: int
    offsets_topic_num_partitions: int
    offset_metadata_max_bytes: int
    offsets_retention_ms: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    offsets_topic_compression_codec: int
    """The codec of the group metadata batches the coordinator writes."""


@dataclass(frozen=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """What DescribeGroups reports (Kafka's GroupSummary)."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


DEAD_SUMMARY: Final = GroupSummary(GroupState.DEAD.value, "", "", ())


@dataclass(frozen=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None


class GroupCoordinator:
    """The group coordinator of one broker (see the module docstring)."""

    def __init__(self, broker_id: int, config: GroupConfig, store: GroupStore,
                 metadata_log: GroupMetadataLog, clock: Scheduler) -> None:
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.metadata_log = metadata_log
        self.clock = clock
        self.groups: dict[str, GroupMetadata] = {}
        self.committed_offsets: dict[str, dict[TopicPartition, int]] = {}
        """Offsets committed through this coordinator since it loaded their group (the
        input of the consumer-group lag metric; the store under /consumers is the truth)."""
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self.is_active = False
        self._expiration_timer: Any = None
        self.pending_txn_offsets = PendingTxnOffsets()

    # -- lifecycle and placement -------------------------------------------------------------

    def startup(self) -> None:
        self.is_active = True
        self._schedule_offset_expiration()

    def shutdown(self) -> None:
        """Unload every group (waiting members answer NOT_COORDINATOR)."""
        self.is_active = False
        if self._expiration_timer is not None and self._expiration_timer.active():
            self._expiration_timer.cancel()
        self._expiration_timer = None
        for partition in sorted(self.owned_partitions | self.loading_partitions):
            self._unload(partition)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def on_leadership_change(self, new_leaders: Sequence[Any],
                             new_followers: Sequence[Any]) -> None:
        """The ReplicaManager's leadership listener: load the groups of the
        ``__consumer_offsets`` partitions this broker now leads, unload the others."""
        gained = [p.topic_partition.partition for p in new_leaders
                  if p.topic_partition.topic == GROUP_METADATA_TOPIC_NAME]
        lost = [p.topic_partition.partition for p in new_followers
                if p.topic_partition.topic == GROUP_METADATA_TOPIC_NAME]
        for partition in lost:
            self.on_resignation(partition)
        if gained:
            Deferred.fromCoroutine(self.on_election(gained)).addErrback(
                lambda failure: logger.error("Loading groups failed: %s",
                                             failure.getErrorMessage()))

    async def on_election(self, partitions: Iterable[int]) -> None:
        """Load the groups of newly led partitions (Kafka's onElection /
        loadGroupsAndOffsets): each group's last group metadata record in the partition, then
        the groups with committed offsets in ZooKeeper and no record, as Empty groups."""
        wanted = set(partitions) - self.owned_partitions
        if not wanted:
            return
        self.loading_partitions |= wanted
        try:
            group_ids = await self.store.groups_with_offsets()
        except Exception as exc:
            logger.error("Could not list the groups of partitions %s of %s: %s",
                         sorted(wanted), GROUP_METADATA_TOPIC_NAME, exc)
            group_ids = []
        for partition in sorted(wanted):
            if partition not in self.loading_partitions:
                continue  # resigned meanwhile
            values = await self._read_group_metadata(partition)
            if partition not in self.loading_partitions:
                continue
            for group_id, value in values.items():
                if group_id in self.groups or self.partition_for(group_id) != partition:
                    continue
                try:
                    group = read_group_metadata(group_id, value)
                except (KafkaError, ValueError) as exc:
                    logger.error("Could not read the metadata of group %s from %s-%d: %s",
                                 group_id, GROUP_METADATA_TOPIC_NAME, partition, exc)
                    continue
                self.groups[group_id] = group
                self._on_group_loaded(group)
            now = self._now()
            self._load_open_txn_offsets(partition, now)
            for group_id in group_ids:
                if self.partition_for(group_id) == partition and group_id not in self.groups:
                    self.groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=now)
            self.loading_partitions.discard(partition)
            self.owned_partitions.add(partition)
            logger.info("Finished loading offsets and group metadata from %s-%d",
                        GROUP_METADATA_TOPIC_NAME, partition)

    def _load_open_txn_offsets(self, partition: int, now: int) -> None:
        """The transactional offsets of the partition whose transaction has no marker in
        it yet are pending again, per producer, until the marker comes (Kafka's
        loadGroupsAndOffsets: pendingOffsets per producer id, handed to the groups; a group
        with only those is loaded Empty). Without this a new coordinator forgets them, and
        OffsetFetch with require_stable answers the old offset while they are in doubt."""
        try:
            open_offsets = self.metadata_log.open_txn_offsets(partition)
        except Exception as exc:
            logger.error("Error loading the pending transactional offsets of %s-%d: %s",
                         GROUP_METADATA_TOPIC_NAME, partition, exc)
            return
        for producer_id, by_group in open_offsets.items():
            for group_id, offsets in by_group.items():
                if self.partition_for(group_id) != partition:
                    continue
                if group_id not in self.groups:
                    self.groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=now)
                self.pending_txn_offsets.add(group_id, producer_id, offsets)

    async def _read_group_metadata(self, partition: int) -> dict[str, bytes]:
        """The last group metadata value of each group in the partition (a tombstone
        removes the group); offset commit records are not this log's business here."""
        try:
            records = await self.metadata_log.read(partition)
        except Exception as exc:
            logger.error("Error loading offsets from %s-%d: %s", GROUP_METADATA_TOPIC_NAME,
                         partition, exc)
            return {}
        latest: dict[str, bytes] = {}
        for key, value in records:
            if key is None:
                logger.warning("Skipping a record without key in %s-%d",
                               GROUP_METADATA_TOPIC_NAME, partition)
                continue
            try:
                group_id = read_message_key(key).group_id
            except KafkaError as exc:
                logger.warning("Skipping a record with an unreadable key in %s-%d: %s",
                               GROUP_METADATA_TOPIC_NAME, partition, exc)
                continue
            if group_id is None:
                continue
            if value is None:
                latest.pop(group_id, None)
            else:
                latest[group_id] = value
        return latest

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        """Kafka's onGroupLoaded: a group over ``group.max.size`` rebalances; every member's
        session starts now."""
        logger.info("Loading group metadata for %s with generation %d", group.group_id,
                    group.generation_id)
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(
                group, f"Freshly-loaded group is over capacity ({self.config.group_max_size})."
                       " Rebalancing in order to give a chance for consumers to commit offsets")
        for member in group.members.values():
            self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.STABLE):
            self._mirror(group)

    def on_resignation(self, partition: int) -> None:
        self._unload(partition)

    def _unload(self, partition: int) -> None:
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            self.pending_txn_offsets.drop_groups([group_id])
            self.committed_offsets.pop(group_id, None)
            self._on_group_unloaded(group)
            self.store.update_mirror(group_id, None)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        self._cancel_join_timer(group)
        group.state = GroupState.DEAD
        for member in list(group.members.values()):
            self._cancel_heartbeat(member)
            if previous in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
                self._invoke_join(member, JoinGroupResult(member.member_id,
                                                          NotCoordinatorError.code))
                self._invoke_sync(member, SyncGroupResult(NotCoordinatorError.code))
        for timer in group.pending_member_timers.values():
            if timer.active():
                timer.cancel()
        group.pending_member_timers.clear()

    def validate_group_status(self, group_id: str | None, *,
                              allow_empty_id: bool = False) -> KafkaError | None:
        """Kafka's validateGroupStatus: None when this coordinator serves the group now."""
        if group_id is None or (group_id == "" and not allow_empty_id):
            return InvalidGroupIdError()
        if not self.is_active:
            return CoordinatorNotAvailableError()
        partition = self.partition_for(group_id)
        if partition in self.loading_partitions:
            return CoordinatorLoadInProgressError()
        if partition not in self.owned_partitions:
            return NotCoordinatorError()
        return None

    def _now(self) -> int:
        return now_ms(self.clock)

    # -- JoinGroup ---------------------------------------------------------------------------

    async def handle_join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinGroupResult:
        error = self.validate_group_status(group_id)
        if error is not None:
            return JoinGroupResult(member_id, error.code)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinGroupResult(member_id, InvalidSessionTimeoutError.code)
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinGroupResult(member_id, UnknownMemberIdError.code)
            group = GroupMetadata(group_id, state_timestamp_ms=self._now())
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id))
            return JoinGroupResult(member_id, GroupMaxSizeReachedError.code)
        result: Deferred[JoinGroupResult] = Deferred()
        if is_unknown:
            self._unknown_join(group, group_instance_id, require_known_member_id, client_id,
                               client_host, rebalance_timeout_ms, session_timeout_ms,
                               protocol_type, protocols, result)
        else:
            self._current_member_join(group, member_id, group_instance_id, client_id,
                                      client_host, rebalance_timeout_ms, session_timeout_ms,
                                      protocol_type, protocols, result)
        return await result

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.has(member_id) or group.is_pending_member(member_id):
            return True
        return group.size < self.config.group_max_size

    def _unknown_join(self, group: GroupMetadata, group_instance_id: str | None,
                      require_known_member_id: bool, client_id: str, client_host: str,
                      rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                      protocols: list[tuple[str, bytes]],
                      result: Deferred[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            result.callback(JoinGroupResult("", CoordinatorNotAvailableError.code))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            result.callback(JoinGroupResult("", InconsistentGroupProtocolError.code))
            return
        prefix = group_instance_id if group_instance_id is not None else client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        old_member_id = group.static_member_id(group_instance_id)
        if group_instance_id is not None and old_member_id is not None:
            self._update_static_member_and_rebalance(group, old_member_id, new_member_id,
                                                     group_instance_id, protocols, result)
        elif require_known_member_id and group_instance_id is None:
            group.add_pending_member(new_member_id)
            self._schedule_pending_member_expiration(group, new_member_id, session_timeout_ms)
            result.callback(JoinGroupResult(new_member_id, MemberIdRequiredError.code))
        else:
            self._add_member_and_rebalance(group, new_member_id, group_instance_id, client_id,
                                           client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, result)

    def _current_member_join(self, group: GroupMetadata, member_id: str,
                             group_instance_id: str | None, client_id: str, client_host: str,
                             rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             result: Deferred[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            result.callback(JoinGroupResult(member_id, CoordinatorNotAvailableError.code))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            result.callback(JoinGroupResult(member_id, InconsistentGroupProtocolError.code))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                result.callback(JoinGroupResult(member_id, UnknownServerError.code))
                return
            self._cancel_pending_member_expiration(group, member_id)
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, result)
            return
        if group.is_static_member_fenced(member_id, group_instance_id):
            result.callback(JoinGroupResult(member_id, FencedInstanceIdError.code))
            return
        if not group.has(member_id):
            result.callback(JoinGroupResult(member_id, UnknownMemberIdError.code))
            return
        member = group.get(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, result)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member missed the join response: send the same one again.
                result.callback(self._join_result_for(group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols, result)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance (its subscription may have changed).
                self._update_member_and_rebalance(group, member, protocols, result)
            else:
                # A follower with unchanged metadata gets the current generation.
                result.callback(JoinGroupResult(
                    member_id, NONE, group.generation_id, group.protocol_type,
                    group.protocol_name, group.leader_id or "", ()))
        else:  # Empty (or Dead): the member is gone
            result.callback(JoinGroupResult(member_id, UnknownMemberIdError.code))

    def _join_result_for(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        members = (tuple(group.current_member_metadata()) if group.is_leader(member.member_id)
                   else ())
        return JoinGroupResult(member.member_id, NONE, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_id or "", members)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str,
                                  group_instance_id: str | None, client_id: str,
                                  client_host: str, rebalance_timeout_ms: int,
                                  session_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]],
                                  result: Deferred[JoinGroupResult]) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host,
                                rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                list(protocols))
        member.is_new = True
        # An initial rebalance waits while new members keep arriving (InitialDelayedJoin).
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        member.awaiting_join = result
        group.add(member)
        self._schedule_heartbeat_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id}")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]],
                                     result: Deferred[JoinGroupResult]) -> None:
        member.supported_protocols = list(protocols)
        self._replace_join_waiter(member, result)
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id}")

    def _replace_join_waiter(self, member: MemberMetadata,
                             result: Deferred[JoinGroupResult]) -> None:
        previous = member.awaiting_join
        member.awaiting_join = result
        if previous is not None and not previous.called:
            # A join sent again while one waits: the old one is superseded (Kafka answers it
            # once the group completes; its connection is usually gone).
            previous.callback(JoinGroupResult(member.member_id, RebalanceInProgressError.code))

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str,
        group_instance_id: str, protocols: list[tuple[str, bytes]],
        result: Deferred[JoinGroupResult],
    ) -> None:
        current_leader = group.leader_id or ""
        old_member = group.get(old_member_id)
        self._invoke_join(old_member, JoinGroupResult(old_member_id,
                                                      FencedInstanceIdError.code))
        self._invoke_sync(old_member, SyncGroupResult(FencedInstanceIdError.code))
        self._cancel_heartbeat(old_member)
        old_protocols = old_member.supported_protocols
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
        member.supported_protocols = list(protocols)
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                # Same protocol: the member takes its old place without a rebalance, once the
                # group with its new member id is stored.
                Deferred.fromCoroutine(self._store_static_member(
                    group, member, old_member_id, group_instance_id, old_protocols,
                    current_leader, result))
            else:
                member.awaiting_join = result
                self._maybe_prepare_rebalance(
                    group, f"static member {new_member_id} changed the group's protocol")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            member.awaiting_join = result
            self._prepare_rebalance(group, f"Updating metadata for static member "
                                           f"{new_member_id}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            member.awaiting_join = result
            self._try_complete_join(group)
        else:
            result.callback(JoinGroupResult(new_member_id, UnknownServerError.code))

    async def _store_static_member(self, group: GroupMetadata, member: MemberMetadata,
                                   old_member_id: str, group_instance_id: str,
                                   old_protocols: list[tuple[str, bytes]], current_leader: str,
                                   result: Deferred[JoinGroupResult]) -> None:
        """Kafka's updateStaticMemberAndRebalance in Stable: store the group; on failure
        the old member id comes back. The old leader id is returned so that no member
        computes a new assignment."""
        new_member_id = member.member_id
        assignment = {m.member_id: m.assignment for m in group.members.values()}
        error = await self._store_group(group, assignment)
        if error != NONE:
            logger.warning("Failed to persist metadata for group %s: error code %d",
                           group.group_id, error)
            if group.static_member_id(group_instance_id) == new_member_id:
                member.supported_protocols = old_protocols
                old_member = group.replace_static_member(group_instance_id, new_member_id,
                                                         old_member_id)
                self._schedule_heartbeat_expiration(group, old_member,
                                                    old_member.session_timeout_ms)
            if not result.called:
                result.callback(JoinGroupResult("", error, group.generation_id,
                                                group.protocol_type, group.protocol_name,
                                                current_leader, ()))
            return
        if not result.called:
            result.callback(JoinGroupResult(new_member_id, NONE, group.generation_id,
                                            group.protocol_type, group.protocol_name,
                                            current_leader, ()))
        self._mirror(group)

    # -- rebalancing ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin.
            for member in group.members.values():
                member.assignment = b""
                self._invoke_sync(member, SyncGroupResult(RebalanceInProgressError.code))
        was_empty = group.is_in(GroupState.EMPTY)
        logger.info("Preparing to rebalance group %s in state %s with old generation %d "
                    "(reason: %s)", group.group_id, group.state.value, group.generation_id,
                    reason)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        self._cancel_join_timer(group)
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_is_initial = True
            group.join_timer = self.clock.callLater(delay / 1000.0, self._on_initial_delay,
                                                    group)
        else:
            group.join_is_initial = False
            group.join_timer = self.clock.callLater(group.max_rebalance_timeout_ms() / 1000.0,
                                                    self._complete_join, group)
            self._try_complete_join(group)

    def _on_initial_delay(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms,
                        group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - delay, 0)
            group.join_timer = self.clock.callLater(delay / 1000.0, self._on_initial_delay,
                                                    group)
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the join phase early once everyone rejoined (not during the initial delay)."""
        timer = group.join_timer
        if timer is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.join_is_initial:
            return
        if group.has_all_members_joined():
            self._complete_join(group)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        group.join_is_initial = False
        timer, group.join_timer = group.join_timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin."""
        self._cancel_join_timer(group)
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                logger.info("Member %s in group %s did not rejoin: removing it",
                            member.member_id, group.group_id)
                self._cancel_heartbeat(member)
                group.remove(member.member_id)
        if group.members and not self._elect_joined_leader(group):
            logger.error("Group %s could not complete rebalance because no members rejoined",
                         group.group_id)
            group.join_is_initial = False
            group.join_timer = self.clock.callLater(group.max_rebalance_timeout_ms() / 1000.0,
                                                    self._complete_join, group)
            return
        group.init_next_generation(self._now())
        if group.is_in(GroupState.EMPTY):
            logger.info("Group %s with generation %d is now empty (%s-%d)", group.group_id,
                        group.generation_id, GROUP_METADATA_TOPIC_NAME,
                        self.partition_for(group.group_id))
            self.store.update_mirror(group.group_id, None)
            Deferred.fromCoroutine(self._store_empty_group(group))
            return
        logger.info("Stabilized group %s generation %d with %d members", group.group_id,
                    group.generation_id, group.size)
        for member in list(group.members.values()):
            self._invoke_join(member, self._join_result_for(group, member))
            self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
            member.is_new = False

    @staticmethod
    def _elect_joined_leader(group: GroupMetadata) -> bool:
        """Kafka's maybeElectNewJoinedLeader: the leader must be a member that rejoined."""
        if group.leader_id is not None and group.has(group.leader_id) and group.get(
                group.leader_id).is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    # -- heartbeats and sessions ---------------------------------------------------------------

    def _schedule_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                       timeout_ms: int) -> None:
        """Kafka's completeAndScheduleNextExpiration."""
        self._cancel_heartbeat(member)
        member.heartbeat_satisfied = False
        member.heartbeat_timer = self.clock.callLater(
            timeout_ms / 1000.0, self._on_heartbeat_expired, group, member.member_id, member)

    @staticmethod
    def _cancel_heartbeat(member: MemberMetadata) -> None:
        timer, member.heartbeat_timer = member.heartbeat_timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str,
                              member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_in(GroupState.DEAD) or group.members.get(member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            logger.info("Member %s in group %s has failed, removing it from the group",
                        member_id, group.group_id)
            self._remove_member_and_update_group(group, member)

    def _schedule_pending_member_expiration(self, group: GroupMetadata, member_id: str,
                                            timeout_ms: int) -> None:
        def expire() -> None:
            group.pending_member_timers.pop(member_id, None)
            if group.is_pending_member(member_id):
                logger.info("Pending member %s in group %s has been removed after session "
                            "timeout expiration", member_id, group.group_id)
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)

        group.pending_member_timers[member_id] = self.clock.callLater(timeout_ms / 1000.0,
                                                                      expire)

    @staticmethod
    def _cancel_pending_member_expiration(group: GroupMetadata, member_id: str) -> None:
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None and timer.active():
            timer.cancel()

    def _remove_member_and_update_group(self, group: GroupMetadata,
                                        member: MemberMetadata) -> None:
        self._invoke_join(member, JoinGroupResult(member.member_id, UnknownMemberIdError.code))
        self._invoke_sync(member, SyncGroupResult(UnknownMemberIdError.code))
        self._cancel_heartbeat(member)
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    @staticmethod
    def _invoke_join(member: MemberMetadata, result: JoinGroupResult) -> None:
        waiter, member.awaiting_join = member.awaiting_join, None
        if waiter is not None and not waiter.called:
            waiter.callback(result)

    @staticmethod
    def _invoke_sync(member: MemberMetadata, result: SyncGroupResult) -> None:
        waiter, member.awaiting_sync = member.awaiting_sync, None
        if waiter is not None and not waiter.called:
            waiter.callback(result)

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                         generation_id: int) -> int:
        error = self.validate_group_status(group_id)
        if isinstance(error, CoordinatorLoadInProgressError):
            return NONE  # the group is still loading: respond blindly, as Kafka
        if error is not None:
            return error.code
        group = self.groups.get(group_id)
        if group is None:
            return UnknownMemberIdError.code
        if group.is_in(GroupState.DEAD):
            return CoordinatorNotAvailableError.code
        if group.is_static_member_fenced(member_id, group_instance_id):
            return FencedInstanceIdError.code
        if not group.has(member_id):
            return UnknownMemberIdError.code
        if generation_id != group.generation_id:
            return IllegalGenerationError.code
        member = group.get(member_id)
        if group.is_in(GroupState.EMPTY):
            return UnknownMemberIdError.code
        self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return RebalanceInProgressError.code
        return NONE

    # -- SyncGroup -------------------------------------------------------------------------------

    async def handle_sync_group(self, group_id: str, generation_id: int, member_id: str,
                                protocol_type: str | None, protocol_name: str | None,
                                group_instance_id: str | None,
                                assignments: Mapping[str, bytes]) -> SyncGroupResult:
        error = self.validate_group_status(group_id)
        if isinstance(error, CoordinatorLoadInProgressError):
            # Kafka: the member must rejoin once the group is loaded.
            return SyncGroupResult(RebalanceInProgressError.code)
        if error is not None:
            return SyncGroupResult(error.code)
        group = self.groups.get(group_id)
        if group is None:
            return SyncGroupResult(UnknownMemberIdError.code)
        if group.is_in(GroupState.DEAD):
            return SyncGroupResult(CoordinatorNotAvailableError.code)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncGroupResult(FencedInstanceIdError.code)
        if not group.has(member_id):
            return SyncGroupResult(UnknownMemberIdError.code)
        if generation_id != group.generation_id:
            return SyncGroupResult(IllegalGenerationError.code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(InconsistentGroupProtocolError.code)
        member = group.get(member_id)
        if group.is_in(GroupState.EMPTY):
            return SyncGroupResult(UnknownMemberIdError.code)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(RebalanceInProgressError.code)
        if group.is_in(GroupState.STABLE):
            self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
            return SyncGroupResult(NONE, member.assignment, group.protocol_type,
                                   group.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        result: Deferred[SyncGroupResult] = Deferred()
        previous, member.awaiting_sync = member.awaiting_sync, result
        if previous is not None and not previous.called:
            previous.callback(SyncGroupResult(RebalanceInProgressError.code))
        if group.is_leader(member_id):
            # Kafka's doSyncGroup: the group is stored with the leader's assignment (members
            # it left out get an empty one); once that is acknowledged, and if the group has
            # not moved on meanwhile, every member gets its assignment and the group is Stable.
            assignment = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            stored = await self._store_group(group, assignment)
            if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation:
                if stored != NONE:
                    self._reset_and_propagate_assignment_error(group, stored)
                    self._maybe_prepare_rebalance(
                        group, f"error when storing group assignment during SyncGroup "
                               f"(member: {member_id})")
                else:
                    self._set_and_propagate_assignment(group, assignment)
        return await result

    def _set_and_propagate_assignment(self, group: GroupMetadata,
                                      assignment: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        group.transition_to(GroupState.STABLE, self._now())
        for member in list(group.members.values()):
            if member.awaiting_sync is not None:
                self._invoke_sync(member, SyncGroupResult(
                    NONE, member.assignment, group.protocol_type, group.protocol_name))
                self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
        self._mirror(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        for member in list(group.members.values()):
            if member.awaiting_sync is not None:
                self._invoke_sync(member, SyncGroupResult(error))
                self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)

    # -- group metadata in __consumer_offsets ---------------------------------------------------

    async def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> int:
        """Kafka's storeGroup: append the group's record (its state now, with
        ``assignment``) to its partition; the error code for the caller (NONE once
        acknowledged)."""
        partition = self.partition_for(group.group_id)
        if partition not in self.owned_partitions:
            return NotCoordinatorError.code
        now = self._now()
        records = build_record_batch(
            [(group_metadata_key(group.group_id), group_metadata_value(group, assignment))],
            codec=self.config.offsets_topic_compression_codec, base_timestamp=now)
        try:
            await self.metadata_log.append(partition, records)
        except KafkaError as exc:
            code = store_group_error(exc)
            log = logger.error if code == UnknownServerError.code else logger.debug
            log("Appending metadata message for group %s generation %d failed due to %s, "
                "returning error code %d", group.group_id, group.generation_id, exc, code)
            return code
        except Exception as exc:
            logger.error("Appending metadata message for group %s generation %d failed",
                         group.group_id, group.generation_id, exc_info=exc)
            return UnknownServerError.code
        return NONE

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self._store_group(group, {})
        if error != NONE:
            # Should the coordinator fail before the next rebalance, the previous generation
            # comes back with the log and its members time out: safe, as nobody is in it.
            logger.warning("Failed to write empty metadata for group %s: error code %d",
                           group.group_id, error)

    async def _remove_group_metadata(self, group_id: str, generation: int) -> None:
        """The tombstone of a removed group (Kafka writes one for a group that had a
        generation). A lost tombstone is harmless: the group then loads as it was last
        stored and its members time out."""
        partition = self.partition_for(group_id)
        if generation <= 0 or partition not in self.owned_partitions:
            return
        records = build_record_batch([(group_metadata_key(group_id), None)],
                                     codec=self.config.offsets_topic_compression_codec,
                                     base_timestamp=self._now())
        try:
            await self.metadata_log.append(partition, records)
        except Exception as exc:
            logger.warning("Writing the tombstone of group %s to %s-%d failed: %s", group_id,
                           GROUP_METADATA_TOPIC_NAME, partition, exc)

    def _mirror(self, group: GroupMetadata) -> None:
        members = {m.member_id: tuple(group.member_subscription(m))
                   for m in group.members.values()}
        owners: dict[TopicPartition, str] = {}
        for member in group.members.values():
            for tp in assigned_partitions(member.assignment):
                owners[tp] = member.member_id
        self.store.update_mirror(group.group_id, MembershipMirror(members, owners))

    # -- LeaveGroup ------------------------------------------------------------------------------

    def handle_leave_group(self, group_id: str, leaving: Sequence[LeaveMember]
                           ) -> tuple[int, list[tuple[LeaveMember, int]]]:
        """(top-level error, per member error)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error.code, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [(m, UnknownMemberIdError.code) for m in leaving]
        if group.is_in(GroupState.DEAD):
            return CoordinatorNotAvailableError.code, []
        results = []
        for leave in leaving:
            member_id = leave.member_id
            if leave.group_instance_id is not None:
                current = group.static_member_id(leave.group_instance_id)
                if current is None:
                    results.append((leave, UnknownMemberIdError.code))
                    continue
                if member_id and member_id != current:
                    results.append((leave, FencedInstanceIdError.code))
                    continue
                member_id = current
            if group.is_pending_member(member_id):
                self._cancel_pending_member_expiration(group, member_id)
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                results.append((leave, NONE))
            elif not group.has(member_id):
                results.append((leave, UnknownMemberIdError.code))
            else:
                logger.info("Member %s has left group %s through explicit LeaveGroup",
                            member_id, group_id)
                self._remove_member_and_update_group(group, group.get(member_id))
                results.append((leave, NONE))
        return NONE, results

    # -- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------------

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error.code, DEAD_SUMMARY
        group = self.groups.get(group_id)
        if group is None:
            return NONE, DEAD_SUMMARY
        stable = group.is_in(GroupState.STABLE)
        members = tuple(
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.metadata(group.protocol_name) if stable and group.protocol_name
                          else b"",
                          m.assignment if stable else b"")
            for m in group.members.values())
        return NONE, GroupSummary(group.state.value, group.protocol_type or "",
                                  (group.protocol_name or "") if stable else "", members)

    def handle_list_groups(self, states: Iterable[str] = ()) -> tuple[int, list[tuple[str, str,
                                                                                       str]]]:
        """(error, [(group id, protocol type, state)])."""
        if not self.is_active:
            return CoordinatorNotAvailableError.code, []
        wanted = {s.lower() for s in states}
        listed = [(g.group_id, g.protocol_type or "", g.state.value)
                  for g in self.groups.values()
                  if self.partition_for(g.group_id) in self.owned_partitions
                  and (not wanted or g.state.value.lower() in wanted)]
        error = CoordinatorLoadInProgressError.code if self.loading_partitions else NONE
        return error, listed

    async def handle_delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        errors: dict[str, int] = {}
        for group_id in group_ids:
            error = self.validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                errors[group_id] = error.code
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                errors[group_id] = GroupIdNotFoundError.code
            elif not group.is_in(GroupState.EMPTY):
                errors[group_id] = NonEmptyGroupError.code
            else:
                group.transition_to(GroupState.DEAD, self._now())
                del self.groups[group_id]
                self.committed_offsets.pop(group_id, None)
                try:
                    await self.store.delete_group(group_id)
                    await self._remove_group_metadata(group_id, group.generation_id)
                    errors[group_id] = NONE
                except Exception as exc:
                    logger.error("Deleting group %s failed: %s", group_id, exc)
                    errors[group_id] = UnknownServerError.code
        return errors

    # -- offsets -------------------------------------------------------------------------------

    async def handle_commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """Kafka's handleCommitOffsets: a per partition error code."""
        def all_(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, code)

        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return all_(error.code)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A group member of a generation this coordinator never saw.
                return all_(IllegalGenerationError.code)
            # A group using Kafka only to store offsets.
            group = GroupMetadata(group_id, state_timestamp_ms=self._now())
            self.groups[group_id] = group
        if group.is_in(GroupState.DEAD):
            return all_(CoordinatorNotAvailableError.code)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(FencedInstanceIdError.code)
        if not (generation_id < 0 and group.is_in(GroupState.EMPTY)):
            if not group.has(member_id):
                return all_(UnknownMemberIdError.code)
            if generation_id != group.generation_id:
                return all_(IllegalGenerationError.code)
            if group.is_in(GroupState.COMPLETING_REBALANCE):
                return all_(RebalanceInProgressError.code)
            member = group.get(member_id)
            self._schedule_heartbeat_expiration(group, member, member.session_timeout_ms)
        return await self.store_offsets(group_id, offsets)

    async def store_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, OffsetAndMetadata]
                            ) -> dict[TopicPartition, int]:
        """Write the offsets whose metadata fits ``offset.metadata.max.bytes`` in one go;
        REQUEST_TIMED_OUT if the store takes longer than ``offsets.commit.timeout.ms``."""
        errors: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata) > self.config.offset_metadata_max_bytes:
                errors[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = value
        if valid:
            write: Deferred[None] = Deferred.fromCoroutine(
                self.store.commit_offsets(group_id, valid))
            clock: Any = self.clock  # an IReactorTime (the reactor or a task.Clock)
            write.addTimeout(self.config.offsets_commit_timeout_ms / 1000.0, clock)
            try:
                await write
                code = NONE
            except DeferredTimeoutError:
                logger.warning("Committing offsets of group %s took more than "
                               "offsets.commit.timeout.ms", group_id)
                code = RequestTimedOutError.code
            except Exception as exc:
                logger.error("Committing offsets of group %s failed: %s", group_id, exc)
                # Kafka maps a failed write to the offsets topic to COORDINATOR_NOT_AVAILABLE
                # (retriable: the client finds the coordinator again and retries).
                code = CoordinatorNotAvailableError.code
            errors.update(dict.fromkeys(valid, code))
            if code == NONE:
                self.committed_offsets.setdefault(group_id, {}).update(
                    (tp, value.offset) for tp, value in valid.items())
        return errors

    async def handle_fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None,
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, offsets): every requested partition, None where nothing is committed;
        every committed partition when ``partitions`` is None."""
        error = self.validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error.code, {}
        try:
            found = await self.store.fetch_offsets(group_id, partitions)
        except Exception as exc:
            logger.error("Fetching offsets of group %s failed: %s", group_id, exc)
            return CoordinatorNotAvailableError.code, {}
        if partitions is None:
            return NONE, dict(found)
        return NONE, {tp: found.get(tp) for tp in partitions}

    # -- transactional offsets (issue 15; the pending store is coordinator/group/pending_offsets)

    async def handle_txn_commit_offsets(
        self, group_id: str, producer_id: int, member_id: str, group_instance_id: str | None,
        generation_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
        persist: Callable[[Mapping[TopicPartition, OffsetAndMetadata]], Awaitable[int]],
    ) -> dict[TopicPartition, int]:
        """Kafka's handleTxnCommitOffsets: ``persist`` the offsets in the producer's
        transaction (the group's __consumer_offsets partition; an error code) and keep
        them pending; a per partition error code. The member id and generation are
        checked only when set (TxnOffsetCommit v3)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error.code)
        group = self.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, state_timestamp_ms=self._now())
            self.groups[group_id] = group
        code = NONE
        if group.is_in(GroupState.DEAD):
            code = CoordinatorNotAvailableError.code
        elif group.is_static_member_fenced(member_id, group_instance_id):
            code = FencedInstanceIdError.code
        elif member_id != "" and not group.has(member_id):
            code = UnknownMemberIdError.code
        elif generation_id >= 0 and generation_id != group.generation_id:
            code = IllegalGenerationError.code
        if code != NONE:
            return dict.fromkeys(offsets, code)
        errors: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata) > self.config.offset_metadata_max_bytes:
                errors[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = value
        if valid:
            code = await persist(valid)
            if code == NONE:
                self.pending_txn_offsets.add(group_id, producer_id, valid)
            errors.update(dict.fromkeys(valid, code))
        return errors

    async def commit_txn_offsets(
        self, offsets_by_group: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]],
    ) -> None:
        """A COMMIT marker is about to be written: the transaction's offsets (read back from
        the partition's log) go under /consumers, one multi-op per group. Raises if the
        store fails (the marker is then not written, and the coordinator retries it)."""
        for group_id, offsets in offsets_by_group.items():
            if offsets:
                await self.store.commit_offsets(group_id, offsets)

    def complete_txn_offsets(self, producer_id: int, offsets_partitions: Iterable[int]) -> None:
        """A marker was written to these ``__consumer_offsets`` partitions (Kafka's
        scheduleHandleTxnCompletion): the producer's offsets of their groups stop being
        pending."""
        partitions = set(offsets_partitions)
        pending = self.pending_txn_offsets
        for group_id in pending.groups_of_producer(producer_id):
            if self.partition_for(group_id) in partitions:
                pending.remove(group_id, producer_id)

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        return self.pending_txn_offsets.has_pending(group_id, tp)

    async def handle_delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                                    ) -> tuple[int, dict[TopicPartition, int]]:
        error = self.validate_group_status(group_id)
        if error is not None:
            return error.code, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return GroupIdNotFoundError.code, {}
        errors: dict[TopicPartition, int] = {}
        deletable = list(partitions)
        if not group.is_in(GroupState.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return NonEmptyGroupError.code, {}
            subscribed = group.subscribed_topics() or set()
            deletable = []
            for tp in partitions:
                if tp.topic in subscribed:
                    errors[tp] = GroupSubscribedToTopicError.code
                else:
                    deletable.append(tp)
        try:
            await self.store.delete_offsets(group_id, deletable)
            errors.update(dict.fromkeys(deletable, NONE))
            for tp in deletable:
                self.committed_offsets.get(group_id, {}).pop(tp, None)
        except Exception as exc:
            logger.error("Deleting offsets of group %s failed: %s", group_id, exc)
            errors.update(dict.fromkeys(deletable, UnknownServerError.code))
        return NONE, errors

    # -- offset expiration (offsets.retention.minutes) ------------------------------------------

    def _schedule_offset_expiration(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000.0
        self._expiration_timer = self.clock.callLater(interval, self._run_offset_expiration)

    def _run_offset_expiration(self) -> None:
        def again(_: object) -> None:
            if self.is_active:
                self._schedule_offset_expiration()

        Deferred.fromCoroutine(self.cleanup_group_metadata()).addErrback(
            lambda failure: logger.error("Offset expiration failed: %s",
                                         failure.getErrorMessage())).addBoth(again)

    async def cleanup_group_metadata(self) -> int:
        """Kafka's cleanupGroupMetadata: delete expired offsets of the groups this broker
        coordinates; an Empty group left without offsets is removed. The number of offsets
        deleted."""
        return await self._cleanup_group_metadata(self._expired_offsets)

    async def handle_deleted_partitions(self, partitions: Iterable[TopicPartition]) -> int:
        """Kafka's handleDeletedPartitions (on an UpdateMetadata that deleted partitions):
        their committed offsets leave every group this broker coordinates, so a topic
        created again under the name starts without them; an Empty group left without
        offsets is removed. The number of offsets deleted."""
        deleted = set(partitions)

        async def of_deleted_partitions(group: GroupMetadata) -> list[TopicPartition]:
            offsets = await self.store.fetch_offsets(group.group_id, None)
            return sorted(tp for tp in offsets if tp in deleted)

        return await self._cleanup_group_metadata(of_deleted_partitions)

    async def _cleanup_group_metadata(
            self, selector: Callable[[GroupMetadata], Awaitable[list[TopicPartition]]]) -> int:
        removed = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) not in self.owned_partitions:
                continue
            selected = await selector(group)
            if selected:
                await self.store.delete_offsets(group_id, selected)
                removed += len(selected)
                logger.info("Removed %d offsets of group %s", len(selected), group_id)
            if group.is_in(GroupState.EMPTY) and self.groups.get(group_id) is group:
                remaining = await self.store.fetch_offsets(group_id, None)
                if not remaining and group.is_in(GroupState.EMPTY):
                    group.transition_to(GroupState.DEAD, self._now())
                    del self.groups[group_id]
                    await self.store.delete_group(group_id)
                    await self._remove_group_metadata(group_id, group.generation_id)
                    logger.info("Group %s transitioned to Dead in generation %d (no offsets "
                                "left)", group_id, group.generation_id)
        return removed

    async def _expired_offsets(self, group: GroupMetadata) -> list[TopicPartition]:
        now = self._now()
        retention = self.config.offsets_retention_ms
        subscribed: set[str] = set()
        if group.protocol_type is not None and group.is_in(GroupState.EMPTY):
            def base(value: OffsetAndMetadata) -> int:
                state_time = group.state_timestamp_ms
                return state_time if state_time > value.commit_timestamp_ms else (
                    value.commit_timestamp_ms)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = group.subscribed_topics()
            if topics is None:
                return []
            subscribed = topics

            def base(value: OffsetAndMetadata) -> int:
                return value.commit_timestamp_ms
        elif group.protocol_type is None:
            def base(value: OffsetAndMetadata) -> int:
                return value.commit_timestamp_ms
        else:
            return []
        offsets = await self.store.fetch_offsets(group.group_id, None)
        expired = []
        for tp, value in offsets.items():
            if tp.topic in subscribed:
                continue
            if value.expire_timestamp_ms is not None:
                if now >= value.expire_timestamp_ms:
                    expired.append(tp)
            elif now - base(value) >= retention:
                expired.append(tp)
        return expired


def store_group_error(exc: KafkaError) -> int:
    """The error a failed group metadata append gives the group's members (Kafka's
    storeGroup): a log problem becomes a coordinator error the clients know to handle."""
    if isinstance(exc, (UnknownTopicOrPartitionError, NotEnoughReplicasError,
                        NotEnoughReplicasAfterAppendError)):
        return CoordinatorNotAvailableError.code
    if isinstance(exc, (NotLeaderOrFollowerError, KafkaStorageError)):
        return NotCoordinatorError.code
    if isinstance(exc, RequestTimedOutError):
        return RebalanceInProgressError.code
    if isinstance(exc, (MessageTooLargeError, RecordListTooLargeError, InvalidFetchSizeError)):
        return UnknownServerError.code
    return exc.code


def offsets_for_commit(partitions: Iterable[tuple[TopicPartition, int, int, str | None, int]],
                       now: int, retention_time_ms: int) -> dict[TopicPartition,
                                                                  OffsetAndMetadata]:
    """OffsetCommit partitions (tp, offset, leader epoch, metadata, commit timestamp) as
    Kafka stores them: no metadata is "", no timestamp is now, a retention time (v2-v4)
    sets an expiry."""
    return {
        tp: OffsetAndMetadata(
            offset=offset,
            metadata=metadata if metadata is not None else "",
            leader_epoch=leader_epoch,
            commit_timestamp_ms=timestamp if timestamp != -1 else now,
            expire_timestamp_ms=None if retention_time_ms == -1 else now + retention_time_ms,
        )
        for tp, offset, leader_epoch, metadata, timestamp in partitions
    }


__all__ = [
    "NO_GENERATION",
    "GroupConfig",
    "GroupCoordinator",
    "GroupSummary",
    "LeaveMember",
    "MemberSummary",
    "offsets_for_commit",
    "partition_for",
    "store_group_error",
]
