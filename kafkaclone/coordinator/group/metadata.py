"""A consumer group's state on its coordinator: Kafka 2.8's ``GroupMetadata`` and
``MemberMetadata``.

The group state machine lists its legal transitions as data (:data:`VALID_PREVIOUS_STATES`,
Kafka's ``validPreviousStates``); :meth:`GroupMetadata.transition_to` refuses anything else
with :class:`IllegalGroupStateTransition`::

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable
      ^            |  ^                   |                 |
      +------------+  +-------------------+-----------------+   (a member joins or leaves)
    every state -> Dead (the group is deleted or its coordinator moved)

Nothing here does I/O or looks at a clock; :mod:`kafkaclone.coordinator.group.coordinator`
drives it on the reactor.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from twisted.internet.defer import Deferred

from kafkaclone.common.errors import KafkaError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.messages.consumer_protocol import (
    decode_assignment,
    decode_subscription,
)

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
NO_GENERATION: Final = -1
NO_MEMBER_ID: Final = ""


class GroupState(enum.Enum):
    """The group states, with the names DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset({GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                                GroupState.COMPLETING_REBALANCE, GroupState.EMPTY,
                                GroupState.DEAD}),
}
"""For each state, the states a group may enter it from (Kafka's GroupState.validPreviousStates)."""


class IllegalGroupStateTransition(RuntimeError):
    """A transition the state machine does not allow: a coordinator bug, never a client's."""


@dataclass(frozen=True)
class JoinGroupResult:
    """What a JoinGroup answers (Kafka's JoinGroupResult)."""

    member_id: str
    error_code: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_MEMBER_ID
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    """(member id, group instance id, metadata): filled in for the leader only."""


@dataclass(frozen=True)
class SyncGroupResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class MemberMetadata:
    """One member of a group (Kafka's MemberMetadata)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]] = field(repr=False)
    """(protocol name, metadata), in the member's order of preference."""
    assignment: bytes = field(default=b"", repr=False)
    awaiting_join: Deferred[JoinGroupResult] | None = field(default=None, repr=False)
    awaiting_sync: Deferred[SyncGroupResult] | None = field(default=None, repr=False)
    is_new: bool = False
    heartbeat_satisfied: bool = False
    heartbeat_timer: Any = field(default=None, repr=False)
    """The reactor's IDelayedCall that expires this member's session."""

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocols(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a rejoin brings exactly the same protocols and metadata (no rebalance)."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name in self.protocols():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's MemberMetadata.hasSatisfiedHeartbeat: a member waiting in a rebalance
        needs no heartbeat, except a new one (which must complete its first join)."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied


@dataclass
class GroupMetadata:
    """A group on its coordinator (Kafka's GroupMetadata): members, generation, chosen
    protocol, leader, pending (KIP-394) and static (KIP-345) members."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = 0
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict, repr=False)
    pending_members: set[str] = field(default_factory=set)
    pending_member_timers: dict[str, Any] = field(default_factory=dict, repr=False)
    static_members: dict[str, str] = field(default_factory=dict)
    """group instance id -> member id"""
    new_member_added: bool = False
    join_timer: Any = field(default=None, repr=False)
    """The reactor call that completes the current join phase (DelayedJoin)."""
    join_is_initial: bool = False
    """Whether ``join_timer`` is the initial rebalance delay (which never completes early)."""
    initial_delay_remaining_ms: int = 0

    # -- state machine ---------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalGroupStateTransition(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} before moving to "
                f"{target.value}, but it is {self.state.value}")
        self.state = target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members ---------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            # Kafka: the next member awaiting join, else any member, becomes the leader.
            waiting = [m.member_id for m in self.members.values() if m.is_awaiting_join]
            candidates = waiting or list(self.members)
            self.leader_id = candidates[0] if candidates else None
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to a newer member id."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> MemberMetadata:
        """A static member rejoining with a new member id takes over the old member's
        place (KIP-345); callbacks waiting on the old id answer FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def all_members_awaiting_sync(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.is_awaiting_sync]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocols())
        for member in members[1:]:
            candidates &= set(member.protocols())
        return candidates

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        names = set(protocols)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol all members support; the most
        votes win, ties going to the earliest member's preference."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateTransition(
                f"Cannot select protocol for group {self.group_id}: no common protocol")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # dicts keep the first on ties

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            return []
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to (consumer protocol), None when unknown
        (another protocol type, or no protocol chosen yet)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                _version, subscription = decode_subscription(member.metadata(self.protocol_name))
            except (KafkaError, KeyError, ValueError):
                return None
            topics.update(str(topic) for topic in subscription.topics)
        return topics

    def member_subscription(self, member: MemberMetadata) -> list[str]:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return []
        try:
            _version, subscription = decode_subscription(member.metadata(self.protocol_name))
        except (KafkaError, KeyError, ValueError):
            return []
        return [str(topic) for topic in subscription.topics]


def assigned_partitions(assignment: bytes) -> list[TopicPartition]:
    """The partitions in a consumer-protocol assignment ([] if it is not one)."""
    if not assignment:
        return []
    try:
        _version, decoded = decode_assignment(assignment)
    except (KafkaError, ValueError):
        return []
    return [TopicPartition(str(tp.topic), int(p))
            for tp in decoded.assigned_partitions for p in tp.partitions]
