"""Transactional offset commits waiting for their transaction's marker (Kafka 2.8's
GroupMetadata.pendingTransactionalOffsetCommits and its completion, onTxnOffsetCommitAppend /
completePendingTxnOffsetCommit).

TxnOffsetCommit appends a group's offsets to its ``__consumer_offsets`` partition (below)
and keeps them here, per (group, producer id), in the coordinator's memory. When the
transaction coordinator's COMMIT marker comes to that partition, the offsets the
producer's open transaction holds in the partition's log are written under ``/consumers``
(one ZooKeeper multi-op per group, through the group store) before the marker is
appended; an ABORT marker drops them. While a partition
has a pending offset, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT.
A coordinator that loads the partition rebuilds them from the transactions still open in
its log (GroupMetadataLog.open_txn_offsets; Kafka's loadGroupsAndOffsets).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.protocol.records import RecordBatch, build_record_batch, iter_batches


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


# -- the transactional offset commits in __consumer_offsets ----------------------------------
#
# A TxnOffsetCommit is also appended, as Kafka's GroupMetadataManager does, to the group's
# __consumer_offsets partition: one transactional batch of the producer (its id and epoch,
# no sequence) whose records are Kafka's offset commit records. The partition's leader
# reads them back from its log when the COMMIT marker comes, so a transaction's offsets
# survive the failover of the group coordinator (whoever leads the partition then has them).

OFFSET_COMMIT_KEY_VERSION: Final = 1
OFFSET_COMMIT_VALUE_VERSION: Final = 3
_INT16: Final = struct.Struct(">h")
_PARTITION: Final = struct.Struct(">i")
_VALUE_HEAD: Final = struct.Struct(">hqi")  # version, offset, leader epoch
_TIMESTAMP: Final = struct.Struct(">q")


def _string(value: str) -> bytes:
    data = value.encode()
    return _INT16.pack(len(data)) + data


def _read_string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = _INT16.unpack_from(data, position)
    start = position + _INT16.size
    return data[start:start + length].decode(), start + length


def encode_offset_commit_key(group_id: str, tp: TopicPartition) -> bytes:
    """Kafka's offset commit key (version 1): group, topic, partition."""
    return (_INT16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group_id) + _string(tp.topic)
            + _PARTITION.pack(tp.partition))


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """Kafka's offset commit value (version 3): offset, leader epoch, metadata, commit
    timestamp."""
    return (_VALUE_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
            + _string(value.metadata) + _TIMESTAMP.pack(value.commit_timestamp_ms))


def decode_offset_commit(key: bytes, value: bytes
                         ) -> tuple[str, TopicPartition, OffsetAndMetadata] | None:
    """(group, partition, offset) of an offset commit record; None for another record."""
    (key_version,) = _INT16.unpack_from(key)
    if key_version not in (0, OFFSET_COMMIT_KEY_VERSION):
        return None
    group_id, position = _read_string(key, _INT16.size)
    topic, position = _read_string(key, position)
    (partition,) = _PARTITION.unpack_from(key, position)
    version, offset, leader_epoch = _VALUE_HEAD.unpack_from(value)
    if version != OFFSET_COMMIT_VALUE_VERSION:
        return None
    metadata, position = _read_string(value, _VALUE_HEAD.size)
    (commit_timestamp,) = _TIMESTAMP.unpack_from(value, position)
    return group_id, TopicPartition(topic, partition), OffsetAndMetadata(
        offset, metadata, leader_epoch, commit_timestamp)


def txn_offset_commit_batch(group_id: str, producer_id: int, producer_epoch: int,
                            offsets: Mapping[TopicPartition, OffsetAndMetadata], now: int
                            ) -> bytes:
    """The transactional batch a TxnOffsetCommit appends to the group's partition."""
    return build_record_batch(
        [(encode_offset_commit_key(group_id, tp), encode_offset_commit_value(value), None, now)
         for tp, value in offsets.items()],
        producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)


def txn_offsets_in(records: memoryview, producer_id: int
                   ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
    """The offsets ``producer_id``'s transactional batches in ``records`` commit, per group
    (a later commit of a partition wins)."""
    found: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for batch in iter_batches(records, allow_partial_tail=True):
        if (not isinstance(batch, RecordBatch) or batch.producer_id != producer_id
                or not batch.is_transactional or batch.is_control):
            continue
        for record in batch.records():
            if record.key is None or record.value is None:
                continue
            decoded = decode_offset_commit(record.key, record.value)
            if decoded is not None:
                group_id, tp, value = decoded
                found.setdefault(group_id, {})[tp] = value
    return found
