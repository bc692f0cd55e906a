"""Transactional offset commits waiting for their transaction's marker (Kafka 2.8's
GroupMetadata.pendingTransactionalOffsetCommits and its completion, onTxnOffsetCommitAppend /
completePendingTxnOffsetCommit).

TxnOffsetCommit keeps a group's offsets here, per (group, producer id), in the coordinator's
memory. When the transaction coordinator's COMMIT marker is written to the group's
``__consumer_offsets`` partition, they are written under ``/consumers`` (one ZooKeeper
multi-op per group, through the group store); an ABORT marker drops them. While a partition
has a pending offset, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.store import OffsetAndMetadata


class PendingTxnOffsets:
    """The pending transactional offsets of the groups one coordinator serves."""

    def __init__(self) -> None:
        self._pending: dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]] = {}

    def add(self, group_id: str, producer_id: int,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """A TxnOffsetCommit of ``producer_id``: a later commit of a partition replaces an
        earlier one of the same transaction."""
        by_producer = self._pending.setdefault(group_id, {})
        by_producer.setdefault(producer_id, {}).update(offsets)

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction holds an offset of ``tp`` for the group (Kafka's
        hasPendingOffsetCommitsForTopicPartition)."""
        return any(tp in offsets for offsets in self._pending.get(group_id, {}).values())

    def groups_of_producer(self, producer_id: int) -> list[str]:
        """The groups with offsets pending in ``producer_id``'s transaction (Kafka's
        openGroupsForProducer)."""
        return [group_id for group_id, by_producer in self._pending.items()
                if producer_id in by_producer]

    def peek(self, group_id: str, producer_id: int) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._pending.get(group_id, {}).get(producer_id, {}))

    def remove(self, group_id: str, producer_id: int) -> None:
        """The transaction completed for the group (committed or aborted)."""
        by_producer = self._pending.get(group_id)
        if by_producer is None:
            return
        by_producer.pop(producer_id, None)
        if not by_producer:
            del self._pending[group_id]

    def drop_groups(self, group_ids: Iterable[str]) -> None:
        """The groups were unloaded: another coordinator serves them now."""
        for group_id in group_ids:
            self._pending.pop(group_id, None)
