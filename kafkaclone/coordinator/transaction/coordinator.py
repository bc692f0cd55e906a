"""TransactionCoordinator: Kafka 2.8's kafka.coordinator.transaction.TransactionCoordinator.

The APIs a transactional producer calls, on the broker leading its id's
``__transaction_state`` partition (the cache and the log are the
:class:`~kafkaclone.coordinator.transaction.state_manager.TransactionStateManager`'s):

- InitProducerId (:meth:`handle_init_producer_id`): a new id gets a producer id with epoch
  0; a known one an epoch bump (a new producer id once the epoch is exhausted). An ongoing
  transaction of the old epoch is aborted first (PrepareEpochFence, the abort's markers
  carry the bumped epoch, so the old producer is fenced) and the caller is answered
  CONCURRENT_TRANSACTIONS, which it retries; so is any call while markers are outstanding.
- AddPartitionsToTxn / AddOffsetsToTxn (:meth:`handle_add_partitions_to_transaction`):
  Empty / Complete* -> Ongoing with the partitions added.
- EndTxn (:meth:`handle_end_transaction`): Ongoing -> PrepareCommit / PrepareAbort, written,
  then answered; the markers go to every partition's leader through the
  :class:`TxnMarkerSender` (retried until written), then CompleteCommit / CompleteAbort is
  written.
- Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` transactions older
  than their timeout are aborted with a bumped epoch; every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` ids idle for
  ``transactional.id.expiration.ms`` are removed (a tombstone).
- A broker that becomes leader of a ``__transaction_state`` partition loads it and finishes
  every transaction it finds in PrepareCommit / PrepareAbort (:meth:`on_election`).

Timers run on the reactor clock (tests pass a ``task.Clock``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from twisted.internet.defer import Deferred

from kafkaclone.common.clock import DelayedCall, Scheduler, now_ms
from kafkaclone.common.errors import (
    NONE,
    ConcurrentTransactionsError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kafkaclone.coordinator.transaction.state_manager import TransactionStateManager

logger = logging.getLogger(__name__)

_S = TransactionState
COMPLETE_RETRY_BACKOFF_S: Final = 0.1


@dataclass(frozen=True)
class TransactionConfig:
    """The broker settings the coordinator uses (built from the broker's config table by
    kafkaclone.server.broker)."""

    transactional_id_expiration_ms: int
    transaction_max_timeout_ms: int
    transaction_state_log_num_partitions: int
    abort_timed_out_transactions_interval_ms: int
    remove_expired_transactional_ids_interval_ms: int
    request_timeout_ms: int


@dataclass(frozen=True)
class InitProducerIdResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TxnMarkerEntry:
    """The markers of one transaction: what a WriteTxnMarkers marker carries, plus the
    ``__transaction_state`` partition it belongs to."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


class TxnMarkerSender(Protocol):
    """The markers channel (kafkaclone.coordinator.transaction.marker_channel)."""

    async def send_markers(self, entry: TxnMarkerEntry) -> None:
        """Return once every partition's leader wrote the marker (or the partition is
        gone); raise NotCoordinatorError when the entry was dropped by
        :meth:`remove_markers_for_txn_partition`."""
        ...

    def remove_markers_for_txn_partition(self, txn_partition: int) -> None:
        ...


class ProducerIdGenerator(Protocol):
    async def generate_producer_id(self) -> int: ...


class TransactionCoordinator:
    """See the module docstring. Reactor thread only."""

    def __init__(self, broker_id: int, config: TransactionConfig,
                 state_manager: TransactionStateManager, producer_ids: ProducerIdGenerator,
                 markers: TxnMarkerSender, clock: Scheduler) -> None:
        self.broker_id = broker_id
        self.config = config
        self.state_manager = state_manager
        self.producer_ids = producer_ids
        self.markers = markers
        self.clock = clock
        self._timers: list[DelayedCall] = []
        self._in_flight: set[Deferred[None]] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        self.state_manager.startup()
        self._schedule(self.config.abort_timed_out_transactions_interval_ms,
                       self.abort_timed_out_transactions)
        self._schedule(self.config.remove_expired_transactional_ids_interval_ms,
                       self.remove_expired_transactional_ids)

    def shutdown(self) -> None:
        for timer in self._timers:
            if timer.active():
                timer.cancel()
        self._timers.clear()
        for partition in list(self.state_manager.owned_partitions):
            self.markers.remove_markers_for_txn_partition(partition)
        self.state_manager.shutdown()

    def _schedule(self, interval_ms: int, task: Callable[[], None]) -> None:
        def run() -> None:
            self._timers = [t for t in self._timers if t.active()]
            try:
                task()
            finally:
                if self.state_manager.is_active:
                    self._timers.append(self.clock.callLater(interval_ms / 1000.0, run))
        self._timers.append(self.clock.callLater(interval_ms / 1000.0, run))

    def _now(self) -> int:
        return now_ms(self.clock)

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        deferred: Deferred[None] = Deferred.fromCoroutine(coro)
        self._in_flight.add(deferred)

        def done(result: object) -> None:
            self._in_flight.discard(deferred)

        deferred.addErrback(lambda failure: logger.error("%s failed: %s", what,
                                                         failure.getErrorMessage()))
        deferred.addBoth(done)

    # -- partition emigration / immigration ------------------------------------------------------

    def on_election(self, txn_partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``txn_partition`` now: load it, then finish its prepared
        transactions (Kafka's onElection)."""
        logger.info("Elected as the txn coordinator for partition %d at epoch %d",
                    txn_partition, coordinator_epoch)
        self.markers.remove_markers_for_txn_partition(txn_partition)
        self._spawn(self._load(txn_partition, coordinator_epoch),
                    f"Loading transaction partition {txn_partition}")

    async def _load(self, txn_partition: int, coordinator_epoch: int) -> None:
        pending = await self.state_manager.load_transactions_for_partition(txn_partition,
                                                                           coordinator_epoch)
        for metadata in pending:
            self._spawn(self._send_markers_and_complete(metadata, coordinator_epoch),
                        f"Completing the transaction of {metadata.transactional_id}")

    def on_resignation(self, txn_partition: int) -> None:
        """This broker no longer leads ``txn_partition`` (Kafka's onResignation)."""
        manager = self.state_manager
        if txn_partition in manager.owned_partitions or txn_partition in \
                manager.loading_partitions:
            logger.info("Resigned as the txn coordinator for partition %d", txn_partition)
        self.markers.remove_markers_for_txn_partition(txn_partition)
        self.state_manager.remove_transactions_for_partition(txn_partition)

    # -- InitProducerId --------------------------------------------------------------------------

    def _valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    async def handle_init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                                      expected: tuple[int, int] | None
                                      ) -> InitProducerIdResult:
        """``expected``: the (producer id, epoch) a v3+ producer gave (KIP-360)."""
        if transactional_id == "":
            return InitProducerIdResult(InvalidRequestError.code)
        if not self._valid_timeout(transaction_timeout_ms):
            return InitProducerIdResult(InvalidTransactionTimeoutError.code)
        try:
            entry = self.state_manager.get_transaction_state(transactional_id)
            if entry is None:
                producer_id = await self.producer_ids.generate_producer_id()
                fresh = TransactionMetadata(
                    transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                    NO_PRODUCER_EPOCH, transaction_timeout_ms, _S.EMPTY,
                    txn_last_update_timestamp=self._now())
                entry = self.state_manager.put_transaction_state_if_not_exists(fresh)
            coordinator_epoch, metadata = entry.coordinator_epoch, entry.metadata
            transit = await self._prepare_init_producer_id_transit(
                metadata, transaction_timeout_ms, expected)
            if transit is None:
                # An ongoing transaction of the old epoch: abort it with the bumped epoch
                # and let the producer retry once the abort completed.
                await self._end_transaction(metadata, coordinator_epoch, commit=False,
                                            producer_id=metadata.producer_id,
                                            producer_epoch=metadata.producer_epoch,
                                            from_client=False)
                return InitProducerIdResult(ConcurrentTransactionsError.code)
            await self.state_manager.append_transaction_to_log(
                transactional_id, coordinator_epoch, metadata, transit)
        except KafkaError as exc:
            return InitProducerIdResult(exc.code)
        logger.info("Initialized transactionalId %s with producerId %d and producer epoch %d "
                    "on partition %d", transactional_id, metadata.producer_id,
                    metadata.producer_epoch, self.state_manager.partition_for(transactional_id))
        return InitProducerIdResult(NONE, metadata.producer_id, metadata.producer_epoch)

    async def _prepare_init_producer_id_transit(
            self, metadata: TransactionMetadata, timeout_ms: int,
            expected: tuple[int, int] | None) -> TxnTransitMetadata | None:
        """The Empty state with the next epoch; None after starting the fence of an ongoing
        transaction (Kafka's prepareInitProducerIdTransit)."""
        if metadata.pending_state is not None:
            raise ConcurrentTransactionsError()
        if expected is not None and not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected[0] == metadata.producer_id
                or (expected[0] == metadata.last_producer_id
                    and expected[1] >= 2**15 - 2)):
            raise ProducerFencedError()
        state = metadata.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT, _S.PREPARE_EPOCH_FENCE):
            raise ConcurrentTransactionsError()
        if state is _S.ONGOING:
            metadata.prepare_fence_producer_epoch()
            return None
        if state is _S.DEAD:
            raise ConcurrentTransactionsError()
        if metadata.is_producer_epoch_exhausted() and (
                expected is None or expected[1] == metadata.producer_epoch):
            new_id = await self.producer_ids.generate_producer_id()
            if metadata.pending_state is not None:
                raise ConcurrentTransactionsError()
            return metadata.prepare_producer_id_rotation(
                new_id, timeout_ms, self._now(), record_last_epoch=expected is not None)
        transit = metadata.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], self._now())
        if transit is None:
            raise ProducerFencedError()
        return transit

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

    async def handle_add_partitions_to_transaction(
            self, transactional_id: str, producer_id: int, producer_epoch: int,
            partitions: Iterable[TopicPartition]) -> int:
        """The error code for every partition (Kafka answers one code for all)."""
        if transactional_id == "":
            return InvalidRequestError.code
        wanted = set(partitions)
        try:
            entry = self.state_manager.get_transaction_state(transactional_id)
            if entry is None:
                return InvalidProducerIdMappingError.code
            metadata = entry.metadata
            if metadata.producer_id != producer_id:
                return InvalidProducerIdMappingError.code
            if metadata.producer_epoch != producer_epoch:
                return ProducerFencedError.code
            if metadata.pending_state is not None or metadata.state in (
                    _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE):
                return ConcurrentTransactionsError.code
            if metadata.state is _S.ONGOING and wanted <= metadata.topic_partitions:
                return NONE
            transit = metadata.prepare_add_partitions(wanted, self._now())
            await self.state_manager.append_transaction_to_log(
                transactional_id, entry.coordinator_epoch, metadata, transit)
        except KafkaError as exc:
            return exc.code
        return NONE

    # -- EndTxn ----------------------------------------------------------------------------------

    async def handle_end_transaction(self, transactional_id: str, producer_id: int,
                                     producer_epoch: int, commit: bool) -> int:
        if transactional_id == "":
            return InvalidRequestError.code
        try:
            entry = self.state_manager.get_transaction_state(transactional_id)
            if entry is None:
                return InvalidProducerIdMappingError.code
            await self._end_transaction(entry.metadata, entry.coordinator_epoch, commit=commit,
                                        producer_id=producer_id,
                                        producer_epoch=producer_epoch, from_client=True)
        except KafkaError as exc:
            return exc.code
        return NONE

    async def _end_transaction(self, metadata: TransactionMetadata, coordinator_epoch: int, *,
                               commit: bool, producer_id: int, producer_epoch: int,
                               from_client: bool) -> None:
        """Write PrepareCommit / PrepareAbort and start the markers (Kafka's endTransaction);
        raises the error to answer. Returns once the prepare state is written."""
        if metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError()
        if (from_client and producer_epoch != metadata.producer_epoch) or \
                producer_epoch < metadata.producer_epoch:
            raise ProducerFencedError()
        if metadata.pending_state is not None:
            raise ConcurrentTransactionsError()
        state = metadata.state
        if state is _S.ONGOING or (state is _S.PREPARE_EPOCH_FENCE and not commit):
            target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        elif state is (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            return  # a retry of an EndTxn that completed
        elif state is (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            raise ConcurrentTransactionsError()
        else:
            logger.debug("TransactionalId %s cannot %s in state %s", metadata.transactional_id,
                         "commit" if commit else "abort", state.kafka_name)
            raise InvalidTxnStateError()
        transit = metadata.prepare_abort_or_commit(target, self._now())
        await self.state_manager.append_transaction_to_log(
            metadata.transactional_id, coordinator_epoch, metadata, transit)
        self._spawn(self._send_markers_and_complete(metadata, coordinator_epoch),
                    f"Completing the transaction of {metadata.transactional_id}")

    async def _send_markers_and_complete(self, metadata: TransactionMetadata,
                                         coordinator_epoch: int) -> None:
        """Markers to every partition, then CompleteCommit / CompleteAbort written, retried
        while this broker still coordinates the id at ``coordinator_epoch``."""
        transactional_id = metadata.transactional_id
        entry = TxnMarkerEntry(transactional_id,
                               self.state_manager.partition_for(transactional_id),
                               coordinator_epoch, metadata.producer_id, metadata.producer_epoch,
                               metadata.state is _S.PREPARE_COMMIT,
                               frozenset(metadata.topic_partitions))
        try:
            await self.markers.send_markers(entry)
        except NotCoordinatorError:
            logger.info("Stopped sending the markers of %s: no longer its coordinator",
                        transactional_id)
            return
        while self.state_manager.is_coordinator_for(transactional_id, coordinator_epoch):
            if metadata.pending_state is not None:
                await self._sleep(COMPLETE_RETRY_BACKOFF_S)
                continue
            transit = metadata.prepare_complete(self._now())
            try:
                await self.state_manager.append_transaction_to_log(
                    transactional_id, coordinator_epoch, metadata, transit)
                logger.debug("Completed the transaction of %s: %s", transactional_id,
                             metadata.state.kafka_name)
                return
            except NotCoordinatorError:
                return
            except CoordinatorNotAvailableError:
                await self._sleep(COMPLETE_RETRY_BACKOFF_S)
            except KafkaError as exc:
                logger.error("Writing the completed state of %s failed: %s", transactional_id,
                             exc)
                await self._sleep(COMPLETE_RETRY_BACKOFF_S)

    async def _sleep(self, seconds: float) -> None:
        done: Deferred[None] = Deferred()
        self.clock.callLater(seconds, done.callback, None)
        await done

    # -- timers ----------------------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> None:
        """Abort every transaction past its timeout, fencing its producer (Kafka's
        abortTimedOutTransactions)."""
        for entry in self.state_manager.timed_out_transactions(self._now()):
            metadata = entry.metadata
            if metadata.state is _S.ONGOING:
                metadata.prepare_fence_producer_epoch()
            logger.info("Aborting the timed out transaction of %s (producerId %d, epoch %d)",
                        metadata.transactional_id, metadata.producer_id,
                        metadata.producer_epoch)
            self._spawn(self._abort_fenced(metadata, entry.coordinator_epoch),
                        f"Aborting the timed out transaction of {metadata.transactional_id}")

    async def _abort_fenced(self, metadata: TransactionMetadata, coordinator_epoch: int) -> None:
        try:
            await self._end_transaction(metadata, coordinator_epoch, commit=False,
                                        producer_id=metadata.producer_id,
                                        producer_epoch=metadata.producer_epoch,
                                        from_client=False)
        except KafkaError as exc:
            logger.info("Aborting the transaction of %s failed (%s); retried later",
                        metadata.transactional_id, exc.name)

    def remove_expired_transactional_ids(self) -> None:
        """Write a tombstone for every id idle for ``transactional.id.expiration.ms``."""
        now = self._now()
        for entry in self.state_manager.expired_transactional_ids(
                now, self.config.transactional_id_expiration_ms):
            metadata = entry.metadata
            transit = metadata.prepare_dead(now)
            self._spawn(self.state_manager.append_transaction_to_log(
                metadata.transactional_id, entry.coordinator_epoch, metadata, transit),
                f"Removing the expired transactional id {metadata.transactional_id}")
