"""Replica selection for follower fetching (KIP-392; Kafka's
``org.apache.kafka.common.replica``: ReplicaSelector, RackAwareReplicaSelector,
ClientMetadata, ReplicaView, PartitionView).

A partition leader asked by a consumer (Fetch v11+, which carries the client's
``client.rack``) runs the broker's ``replica.selector.class`` over the partition's replicas
that have the fetch offset; if it picks a follower, the fetch answers no records and that
follower as ``preferred_read_replica``, and the consumer fetches from it. kafkaclone runs
no Java: the one selector it offers is Kafka's RackAwareReplicaSelector, under its Java
name; any other name refuses at startup (KafkaConfig's validator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, Protocol

from kafkaclone.common.topic_partition import TopicPartition

RACK_AWARE_REPLICA_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class ClientMetadata(NamedTuple):
    """Who fetches (Kafka's DefaultClientMetadata): the client's rack ("" if it set none),
    its client id and address, the listener it came in on."""

    rack_id: str
    client_id: str
    client_address: str
    listener_name: str


class ReplicaView(NamedTuple):
    """A replica as selection sees it: its broker and that broker's rack (None: the broker
    has no rack or no endpoint on the client's listener), how far its log goes, how long
    ago it was last caught up with the leader (0 for the leader)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


class PartitionView(NamedTuple):
    replicas: Sequence[ReplicaView]
    """The leader and the followers that have the fetch offset."""
    leader: ReplicaView


class ReplicaSelector(Protocol):
    def select(self, tp: TopicPartition, client_metadata: ClientMetadata,
               partition_view: PartitionView) -> ReplicaView | None:
        """The replica the client should read from (the leader included), or None."""


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: with a client rack, the leader if it is in that
    rack, else the most caught-up replica in that rack (the highest log end offset, then
    the most recently caught up; then the lowest broker id, where Kafka's choice depends on
    hash order); the leader when no replica is in the client's rack or the client has no
    rack."""

    def select(self, tp: TopicPartition, client_metadata: ClientMetadata,
               partition_view: PartitionView) -> ReplicaView | None:
        rack = client_metadata.rack_id
        if not rack:
            return partition_view.leader
        same_rack = [r for r in partition_view.replicas if r.rack == rack]
        if not same_rack or partition_view.leader in same_rack:
            return partition_view.leader
        return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms,
                                             -r.broker_id))


REPLICA_SELECTORS: Final[dict[str, Callable[[], ReplicaSelector]]] = {
    RACK_AWARE_REPLICA_SELECTOR: RackAwareReplicaSelector,
}
"""``replica.selector.class`` values this broker can run."""


def create_replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names (None: none, the leader serves)."""
    if class_name is None:
        return None
    factory = REPLICA_SELECTORS.get(class_name)
    if factory is None:
        raise ValueError(f"Class {class_name} cannot be found: the replica selectors are "
                         f"{', '.join(REPLICA_SELECTORS)}")
    return factory()


__all__ = ["RACK_AWARE_REPLICA_SELECTOR", "ClientMetadata", "PartitionView",
           "RackAwareReplicaSelector", "ReplicaSelector", "ReplicaView",
           "create_replica_selector"]
