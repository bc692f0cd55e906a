"""Leader election rules (Kafka's PartitionLeaderElectionAlgorithms), as pure functions.

Each takes the partition's assignment (in order), its ISR and the live replicas, and returns
the new leader or None when no replica is eligible.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence


class ElectionStrategy(enum.Enum):
    """Why a partition needs a leader (Kafka's PartitionLeaderElectionStrategy)."""

    OFFLINE = "OfflinePartitionLeaderElectionStrategy"
    OFFLINE_UNCLEAN = "OfflinePartitionLeaderElectionStrategy(allowUnclean=true)"
    """An admin's unclean election (ElectLeaders with ElectionType.UNCLEAN)."""
    CONTROLLED_SHUTDOWN = "ControlledShutdownPartitionLeaderElectionStrategy"
    PREFERRED = "PreferredReplicaPartitionLeaderElectionStrategy"
    REASSIGN = "ReassignPartitionLeaderElectionStrategy"


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> int | None:
    """The first live replica in assignment order that is in the ISR; failing that, with
    unclean election enabled, the first live replica (which may have lost data)."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def is_unclean(leader: int, isr: Collection[int]) -> bool:
    return leader not in isr


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    """The first live replica in assignment order that is in the ISR and not shutting down."""
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down_brokers:
            return replica
    return None


def preferred_replica_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
) -> int | None:
    """The preferred (first assigned) replica, if it is live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live_replicas and preferred in isr:
        return preferred
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
) -> int | None:
    """The first of the reassignment's target replicas that is live and in the ISR."""
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None
