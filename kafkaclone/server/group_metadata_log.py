"""The group coordinator's ``__consumer_offsets`` partitions, on the ReplicaManager.

:class:`ReplicaGroupMetadataLog` is the broker's
:class:`~kafkaclone.coordinator.group.metadata_log.GroupMetadataLog`: an append goes through
the ReplicaManager's append path as the coordinator (Kafka's storeGroup calls
``replicaManager.appendRecords`` with ``AppendOrigin.Coordinator``, internal topics allowed,
``offsets.commit.required.acks`` and ``offsets.commit.timeout.ms``); a read goes over the
partition's local log from its start to its log end offset in chunks of
``offsets.load.buffer.size`` (Kafka's loadGroupsAndOffsets: the new leader keeps every record
it has, so what it holds beyond the high watermark it has heard of is the group's latest
state too).
"""

from __future__ import annotations

from kafkaclone.common.errors import raise_for_code
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.pending_offsets import txn_offsets_in
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.log.common import AppendOrigin, records_bytes
from kafkaclone.log.log import Log
from kafkaclone.protocol.records.batch import RecordBatch, iter_batches, unpack_header
from kafkaclone.protocol.records.common import LOG_OVERHEAD
from kafkaclone.server.replica_manager import ReplicaManager


def open_txn_offsets(log: Log, producer_id: int, producer_epoch: int
                     ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
    """The offsets ``producer_id``'s open transaction commits in a __consumer_offsets log,
    per group (none if it has no open transaction there or the marker's epoch is stale)."""
    entry = log.producer_state_manager.last_entry(producer_id)
    if (entry is None or entry.current_txn_first_offset is None
            or entry.producer_epoch > producer_epoch):
        return {}
    found: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    offset = max(entry.current_txn_first_offset, log.log_start_offset)
    end = log.log_end_offset
    while offset < end:
        records = records_bytes(log.read(offset, 1 << 20).records)
        if not records:
            break
        for group_id, offsets in txn_offsets_in(records, producer_id).items():
            found.setdefault(group_id, {}).update(offsets)
        offset = _next_offset(records)
    return found


def _next_offset(records: memoryview) -> int:
    position, next_offset = 0, -1
    while position + LOG_OVERHEAD <= len(records):
        header = unpack_header(records, position)
        next_offset = header.last_offset + 1
        position += header.size_in_bytes
    return next_offset


class ReplicaGroupMetadataLog:
    """GroupMetadataLog over this broker's replicas of ``__consumer_offsets``."""

    def __init__(self, replica_manager: ReplicaManager, *, required_acks: int,
                 timeout_ms: int, load_buffer_size: int) -> None:
        self.replica_manager = replica_manager
        self.required_acks = required_acks
        self.timeout_ms = timeout_ms
        self.load_buffer_size = load_buffer_size

    async def append(self, partition: int, records: bytes) -> int:
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        results = await self.replica_manager.append_records(
            self.timeout_ms, self.required_acks, {tp: records},
            origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
        result = results[tp]
        raise_for_code(result.error_code, result.error_message)
        return result.base_offset

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        hosted = self.replica_manager.get_partition(
            TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        log = hosted.log if hosted is not None else None
        if log is None:
            return []
        records: list[tuple[bytes | None, bytes | None]] = []
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            fetched = log.read(offset, self.load_buffer_size)
            batches = [b for b in iter_batches(records_bytes(fetched.records),
                                               allow_partial_tail=False)
                       if isinstance(b, RecordBatch)]
            if not batches:
                break
            for batch in batches:
                if batch.is_control:
                    continue
                records.extend((record.key, record.value) for record in batch.records())
            offset = batches[-1].next_offset
        return records

    def open_txn_offsets(self, partition: int
                         ) -> dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]:
        hosted = self.replica_manager.get_partition(
            TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        log = hosted.log if hosted is not None else None
        if log is None:
            return {}
        found: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        for producer_id, entry in list(log.producer_state_manager.producers.items()):
            if entry.current_txn_first_offset is None:
                continue
            offsets = open_txn_offsets(log, producer_id, entry.producer_epoch)
            if offsets:
                found[producer_id] = offsets
        return found
