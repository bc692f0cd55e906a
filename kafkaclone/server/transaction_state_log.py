"""The transaction coordinator's seams into this broker (kafkaclone.coordinator.transaction):

- :class:`ReplicaTransactionStateLog`, its ``TransactionStateLog``: a record appended to a
  ``__transaction_state`` partition through the ReplicaManager (acks=-1, origin
  COORDINATOR, as Kafka's TransactionStateManager.appendTransactionToLog), and a partition
  read back when this broker becomes its leader. The read goes to the log end offset, as
  Kafka's loadTransactionMetadata does: right after an election the new leader's high
  watermark may still lag records the old leader acknowledged.
- :class:`MetadataCacheMarkerDestinations`, the markers channel's view of partition leaders
  (on the inter-broker listener), from the metadata cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kafkaclone.common.errors import NotLeaderOrFollowerError
from kafkaclone.common.topic import TRANSACTION_STATE_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.marker_channel import MarkerDestination
from kafkaclone.log.common import AppendOrigin, records_bytes
from kafkaclone.protocol.records.batch import RecordBatch, build_record_batch, iter_batches
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.replica_manager import ReplicaManager

ACKS_ALL: Final = -1


class ReplicaTransactionStateLog:
    """``__transaction_state`` through the ReplicaManager (see the module docstring)."""

    def __init__(self, replica_manager: ReplicaManager, *, load_buffer_size: int) -> None:
        self._replica_manager = replica_manager
        self._load_buffer_size = load_buffer_size

    async def append(self, partition: int, key: bytes, value: bytes | None,
                     timeout_ms: int) -> int:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
        results = await self._replica_manager.append_records(
            timeout_ms, ACKS_ALL, {tp: build_record_batch([(key, value)])},
            origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
        return results[tp].error_code

    async def read(self, partition: int) -> Sequence[tuple[bytes | None, bytes | None]]:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
        replica = self._replica_manager.get_partition_or_error(tp)
        log = replica.log
        if log is None or not replica.is_leader:
            raise NotLeaderOrFollowerError(f"{tp} is not led by this broker")
        records: list[tuple[bytes | None, bytes | None]] = []
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = records_bytes(log.read(offset, self._load_buffer_size, end).records)
            start = offset
            if not data:
                break
            for batch in iter_batches(data, allow_partial_tail=True):
                if not isinstance(batch, RecordBatch):
                    continue
                offset = batch.next_offset
                if batch.is_control:
                    continue
                records.extend((record.key, record.value) for record in batch.records())
            if offset == start:
                break
        return records


class MetadataCacheMarkerDestinations:
    """Partition leaders on the inter-broker listener, from the metadata cache."""

    def __init__(self, metadata_cache: MetadataCache, listener_name: str) -> None:
        self._cache = metadata_cache
        self._listener_name = listener_name

    def leader_of(self, tp: TopicPartition) -> MarkerDestination | None:
        state = self._cache.partition_state(tp.topic, tp.partition)
        endpoint = self._cache.leader_endpoint(tp.topic, tp.partition, self._listener_name)
        if state is None or endpoint is None or state.leader < 0:
            return None
        return MarkerDestination(state.leader, endpoint.host or "localhost", endpoint.port)

    def partition_exists(self, tp: TopicPartition) -> bool:
        return self._cache.partition_state(tp.topic, tp.partition) is not None
