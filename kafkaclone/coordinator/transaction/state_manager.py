"""TransactionStateManager: the transaction coordinator's cache of transactional ids and its
``__transaction_state`` partitions (Kafka 2.8's kafka.coordinator.transaction
.TransactionStateManager).

A transactional id belongs to partition ``abs(javaStringHashCode(id)) %
transaction.state.log.num.partitions``; the broker leading it is the id's coordinator, with
the partition's leader epoch as coordinator epoch. When this broker becomes leader the
partition is loaded (read to its high watermark, the last record per id wins, a tombstone
removes the id); requests for its ids meanwhile answer COORDINATOR_LOAD_IN_PROGRESS, and
NOT_COORDINATOR once the broker lost the partition.

Every state change is written to the partition first (acks=-1 through the
:class:`TransactionStateLog` seam, implemented in kafkaclone.server) and applied to the
cache only once written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from kafkaclone.common.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.jvm import java_string_hash, kafka_abs
from kafkaclone.common.topic import TRANSACTION_STATE_TOPIC_NAME
from kafkaclone.coordinator.transaction.log import (
    TransactionLogFormatError,
    key_to_bytes,
    read_txn_record,
    value_to_bytes,
)
from kafkaclone.coordinator.transaction.metadata import (
    COMPLETED_STATES,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)

logger = logging.getLogger(__name__)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition whose leader coordinates ``transactional_id``."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


class TransactionStateLog(Protocol):
    """The two operations on ``__transaction_state`` the coordinator needs (implemented over
    the ReplicaManager in kafkaclone.server.transaction_state_log)."""

    async def append(self, partition: int, key: bytes, value: bytes | None,
                     timeout_ms: int) -> int:
        """Append one record with acks=-1 (origin COORDINATOR); its error code."""
        ...

    async def read(self, partition: int) -> Sequence[tuple[bytes | None, bytes | None]]:
        """(key, value) of every record of the local replica below its high watermark, in
        offset order. Raises a KafkaError when the partition is not hosted here."""
        ...


_APPEND_ERRORS: Final[dict[int, type[KafkaError]]] = {
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError,
    RequestTimedOutError.code: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError.code: NotCoordinatorError,
    KafkaStorageError.code: NotCoordinatorError,
}
"""An append's error as the coordinator reports it (Kafka's appendTransactionToLog)."""


@dataclass(frozen=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


class TransactionStateManager:
    """See the module docstring. Reactor thread only."""

    def __init__(self, num_partitions: int, log: TransactionStateLog, *,
                 request_timeout_ms: int) -> None:
        self.num_partitions = num_partitions
        self.log = log
        self.request_timeout_ms = request_timeout_ms
        self.is_active = False
        self.loading_partitions: dict[int, int] = {}
        """partition -> the coordinator epoch being loaded."""
        self.owned_partitions: dict[int, int] = {}
        """partition -> coordinator epoch, for loaded partitions."""
        self.transaction_metadata: dict[int, dict[str, TransactionMetadata]] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # -- lookups ------------------------------------------------------------------------------

    def get_transaction_state(self, transactional_id: str
                              ) -> CoordinatorEpochAndTxnMetadata | None:
        """The id's metadata (None: unknown here); raises COORDINATOR_NOT_AVAILABLE,
        COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR when this broker cannot answer."""
        partition = self.partition_for(transactional_id)
        if not self.is_active:
            raise CoordinatorNotAvailableError()
        if partition in self.loading_partitions:
            raise CoordinatorLoadInProgressError()
        epoch = self.owned_partitions.get(partition)
        if epoch is None:
            raise NotCoordinatorError()
        metadata = self.transaction_metadata[partition].get(transactional_id)
        return None if metadata is None else CoordinatorEpochAndTxnMetadata(epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata
                                            ) -> CoordinatorEpochAndTxnMetadata:
        existing = self.get_transaction_state(metadata.transactional_id)
        if existing is not None:
            return existing
        partition = self.partition_for(metadata.transactional_id)
        self.transaction_metadata[partition][metadata.transactional_id] = metadata
        return CoordinatorEpochAndTxnMetadata(self.owned_partitions[partition], metadata)

    def all_transactions(self) -> list[CoordinatorEpochAndTxnMetadata]:
        return [CoordinatorEpochAndTxnMetadata(self.owned_partitions[p], metadata)
                for p, by_id in self.transaction_metadata.items()
                if p in self.owned_partitions for metadata in by_id.values()]

    def timed_out_transactions(self, now_ms: int) -> list[CoordinatorEpochAndTxnMetadata]:
        """Ongoing transactions older than their timeout (Kafka's timedOutTransactions), and
        fenced ones whose abort could not be written."""
        return [entry for entry in self.all_transactions()
                if entry.metadata.pending_state is None and (
                    (entry.metadata.state is TransactionState.ONGOING
                     and entry.metadata.txn_start_timestamp + entry.metadata.txn_timeout_ms
                     < now_ms)
                    or entry.metadata.state is TransactionState.PREPARE_EPOCH_FENCE)]

    def expired_transactional_ids(self, now_ms: int, expiration_ms: int
                                  ) -> list[CoordinatorEpochAndTxnMetadata]:
        return [entry for entry in self.all_transactions()
                if entry.metadata.pending_state is None
                and entry.metadata.state in COMPLETED_STATES
                and entry.metadata.txn_last_update_timestamp <= now_ms - expiration_ms]

    def is_coordinator_for(self, transactional_id: str, coordinator_epoch: int) -> bool:
        return self.owned_partitions.get(self.partition_for(transactional_id)) == \
            coordinator_epoch

    # -- writing ------------------------------------------------------------------------------

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        metadata: TransactionMetadata,
                                        transit: TxnTransitMetadata) -> None:
        """Write ``transit`` (a tombstone for Dead), then apply it to ``metadata``. Raises
        the coordinator's error (the pending state is dropped and nothing changed) when the
        write failed or the partition moved meanwhile."""
        partition = self.partition_for(transactional_id)
        value = None if transit.txn_state is TransactionState.DEAD else value_to_bytes(transit)
        try:
            code = await self.log.append(partition, key_to_bytes(transactional_id), value,
                                         self.request_timeout_ms)
        except Exception:
            metadata.clear_pending()
            raise
        if code != NONE:
            metadata.clear_pending()
            error = _APPEND_ERRORS.get(code, UnknownServerError)
            logger.warning("Appending %s's new metadata %s failed with error code %d, "
                           "returning %s to the client", transactional_id, transit, code,
                           error.name)
            raise error()
        if self.owned_partitions.get(partition) != coordinator_epoch:
            metadata.clear_pending()
            raise NotCoordinatorError(
                f"The coordinator of {transactional_id} moved while its metadata was written")
        metadata.complete_transition_to(transit)
        if transit.txn_state is TransactionState.DEAD:
            by_id = self.transaction_metadata.get(partition, {})
            if by_id.get(transactional_id) is metadata:
                del by_id[transactional_id]

    # -- loading and unloading ----------------------------------------------------------------

    async def load_transactions_for_partition(self, partition: int, coordinator_epoch: int
                                              ) -> list[TransactionMetadata]:
        """Load the partition (Kafka's loadTransactionsForTxnTopicPartition); the transactions
        found in PrepareCommit / PrepareAbort, whose markers must be (re)sent. Empty when the
        partition was lost or reloaded meanwhile."""
        self.loading_partitions[partition] = coordinator_epoch
        self.transaction_metadata.pop(partition, None)
        self.owned_partitions.pop(partition, None)
        try:
            records = await self.log.read(partition)
        except Exception:
            if self.loading_partitions.get(partition) == coordinator_epoch:
                del self.loading_partitions[partition]
            raise
        if self.loading_partitions.get(partition) != coordinator_epoch:
            return []
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in records:
            try:
                record = read_txn_record(key, value)
            except (TransactionLogFormatError, UnicodeDecodeError) as exc:
                logger.error("Skipping a bad record of %s-%d: %s", TRANSACTION_STATE_TOPIC_NAME,
                             partition, exc)
                continue
            if record.value is None:
                loaded.pop(record.transactional_id, None)
            else:
                loaded[record.transactional_id] = TransactionMetadata.from_transit(
                    record.transactional_id, record.value)
        del self.loading_partitions[partition]
        self.transaction_metadata[partition] = loaded
        self.owned_partitions[partition] = coordinator_epoch
        logger.info("Finished loading %d transaction metadata from %s-%d (coordinator epoch %d)",
                    len(loaded), TRANSACTION_STATE_TOPIC_NAME, partition, coordinator_epoch)
        return [m for m in loaded.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def remove_transactions_for_partition(self, partition: int) -> None:
        """Forget the partition's ids (Kafka's removeTransactionsForTxnTopicPartition)."""
        self.loading_partitions.pop(partition, None)
        self.owned_partitions.pop(partition, None)
        removed = self.transaction_metadata.pop(partition, {})
        if removed:
            logger.info("Unloaded transaction metadata of %d ids from %s-%d", len(removed),
                        TRANSACTION_STATE_TOPIC_NAME, partition)

    def startup(self) -> None:
        self.is_active = True

    def shutdown(self) -> None:
        self.is_active = False
        self.loading_partitions.clear()
        self.owned_partitions.clear()
        self.transaction_metadata.clear()
