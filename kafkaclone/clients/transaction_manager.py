"""The idempotent and transactional producer's bookkeeping: Kafka's TransactionManager.

With ``enable.idempotence`` (the default, as in Kafka 3.x) the producer asks a broker for a
producer id (InitProducerId with a null transactional id) before its first Produce, and
stamps every batch with that id, its epoch and a base sequence. Sequences are per partition,
assigned when a batch is drained (not when records are appended), advanced by the batch's
record count and wrapping at 2^31 - 1. A retried batch keeps its sequence; the accumulator
puts it back at its sequence position (:func:`insert_in_sequence_order`) and sends it only
when it is the partition's first in-flight batch, so order survives retries. At most
:data:`MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE` batches of a partition are in
flight: the broker remembers the last five batches of each producer.

Errors are handled as the Java client (Kafka 3.x) does for an idempotent producer:

- DUPLICATE_SEQUENCE_NUMBER: the broker already has the batch; it is a success.
- OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID: the broker lost the producer's state or
  saw a gap. The epoch is bumped (KIP-360: locally, the idempotent producer owns its id; a
  new id is requested once the epoch is exhausted) and the partition's in-flight batches are
  re-sequenced from 0 under the new epoch, then retried. Only batches that cannot be retried
  safely (retries or ``delivery.timeout.ms`` exhausted) fail.
- PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (unless the batch was re-sequenced under a newer
  epoch of ours since it was sent), cluster authorization and unsupported versions are
  fatal: queued batches fail and every later ``send`` raises the error.

With ``transactional.id`` the same manager holds a :class:`TransactionalState` (the
transactions' state machine and request queue, described at its definition below).

Method names are Kafka's (``TransactionManager``, ``RecordAccumulator`` and ``Sender``), in
snake case. Everything here runs on the producer's sender thread, except
:meth:`TransactionManager.maybe_fail_with_error` which ``send`` calls.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from kafkaclone.clients.config import ConfigException, ProducerConfig
from kafkaclone.common.config_def import INT_MAX
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records.batch import NO_SEQUENCE

if TYPE_CHECKING:
    from kafkaclone.clients.producer import ProducerBatch

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE: Final = 5
NO_LAST_ACKED_SEQUENCE_NUMBER: Final = -1
MAX_EPOCH: Final = 2**15 - 1

PartitionKey = tuple[str, int]
"""(topic, partition): how the producer's accumulator keys a partition."""


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2^31 - 1 to 0 (DefaultRecordBatch's
    incrementSequence)."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def resolve_idempotence(config: ProducerConfig) -> bool:
    """Whether the producer is idempotent, with Kafka 3.x's rules (ProducerConfig's
    postProcessAndValidateIdempotenceConfigs, Kafka 3.2 and later).

    Idempotence needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5.
    When the user set ``enable.idempotence=true`` or a ``transactional.id`` (which
    implies idempotence, and refuses ``enable.idempotence=false``) a conflicting value raises
    ConfigException; when idempotence is on only by default, a conflicting value turns it
    off (logged)."""
    transactional = bool(config.get_optional_str("transactional.id"))
    if not config.get_bool("enable.idempotence"):
        if transactional:
            raise ConfigException(
                "Cannot set a transactional.id without also enabling idempotence.")
        return False
    # A transactional producer is idempotent, and its settings must allow it.
    explicit = "enable.idempotence" in config.originals or transactional
    enabled = True
    if config.get_int("retries") == 0:
        if explicit:
            raise ConfigException(
                "Must set retries to non-zero when using the idempotent producer.")
        logger.info("Idempotence will be disabled because retries is set to 0.")
        enabled = False
    acks = config.get_str("acks")
    if acks not in ("all", "-1"):
        if explicit:
            raise ConfigException(
                "Must set acks to all in order to use the idempotent producer. Otherwise we "
                "cannot guarantee idempotence.")
        logger.info("Idempotence will be disabled because acks is set to %s, not set to "
                    "'all'.", acks)
        enabled = False
    if config.get_int("max.in.flight.requests.per.connection") > \
            MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE:
        if explicit:
            raise ConfigException(
                "Must set max.in.flight.requests.per.connection to at most "
                f"{MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE} to use the "
                "idempotent producer.")
        logger.warning("Idempotence will be disabled because "
                       "max.in.flight.requests.per.connection is set higher than %d.",
                       MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE)
        enabled = False
    return enabled


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0

    def __str__(self) -> str:
        return f"(producerId={self.producer_id}, epoch={self.epoch})"


NO_PRODUCER_ID_AND_EPOCH: Final = ProducerIdAndEpoch(-1, -1)


def _by_sequence(batch: ProducerBatch) -> int:
    return batch.base_sequence


@dataclass
class TopicPartitionEntry:
    """One partition's sequence state (TransactionManager.TopicPartitionEntry)."""

    producer_id_and_epoch: ProducerIdAndEpoch
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE_NUMBER
    in_flight: list[ProducerBatch] = field(default_factory=list)
    """The batches sent and not yet completed, by base sequence (a handful at most)."""

    def reset_sequence_numbers(self, reset: Callable[[ProducerBatch], None]) -> None:
        for batch in self.in_flight:
            reset(batch)
        self.in_flight.sort(key=_by_sequence)


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class TransactionManager:
    """The producer id, epoch and per-partition sequences of an idempotent producer (see
    the module docstring)."""

    def __init__(self, *, retry_backoff_s: float, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000) -> None:
        self.retry_backoff_s = retry_backoff_s
        self.state = State.UNINITIALIZED
        self.producer_id_and_epoch = NO_PRODUCER_ID_AND_EPOCH
        self.last_error: KafkaError | None = None
        self._partitions: dict[PartitionKey, TopicPartitionEntry] = {}
        self._partitions_with_unresolved_sequences: dict[PartitionKey, int] = {}
        """Partition -> the next sequence expected once its expired batches resolve."""
        self._partitions_to_rewrite_sequences: set[PartitionKey] = set()
        self._epoch_bump_required = False
        self.init_producer_id_retry_at = 0.0
        """When a failed InitProducerId may be sent again (``retry.backoff.ms``)."""
        self.transactional: TransactionalState | None = None
        """The transaction state of a producer with a ``transactional.id``."""
        if transactional_id is not None:
            self.transactional = TransactionalState(self, transactional_id,
                                                    transaction_timeout_ms)

    # --- state ----------------------------------------------------------------------------

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id_and_epoch.is_valid

    @property
    def has_fatal_error(self) -> bool:
        return self.state is State.FATAL_ERROR

    def maybe_fail_with_error(self) -> None:
        """Raise the fatal error, if any (``send`` calls this)."""
        error = self.last_error
        if self.state is State.FATAL_ERROR and error is not None:
            raise type(error)(f"Cannot perform send because at least one previous idempotent "
                              f"request has failed with errors: {error.message}")

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        if self.transactional is not None:
            with self.transactional.lock:
                self.transactional.transition_to(State.FATAL_ERROR, error)
            return
        logger.error("The idempotent producer %s failed fatally: %s",
                     self.producer_id_and_epoch, error)
        self.state = State.FATAL_ERROR
        self.last_error = error

    def _set_producer_id_and_epoch(self, producer_id_and_epoch: ProducerIdAndEpoch) -> None:
        logger.info("ProducerId set to %d with epoch %d", producer_id_and_epoch.producer_id,
                    producer_id_and_epoch.epoch)
        self.producer_id_and_epoch = producer_id_and_epoch

    # --- InitProducerId -------------------------------------------------------------------

    def bump_idempotent_epoch_and_reset_id_if_needed(self, now: float) -> bool:
        """Apply a pending epoch bump; True when an InitProducerId should be sent now."""
        if self.state is State.FATAL_ERROR or self.transactional is not None:
            return False
        if self._epoch_bump_required:
            self._bump_idempotent_producer_epoch()
        return self.state is not State.INITIALIZING and not self.has_producer_id and \
            now >= self.init_producer_id_retry_at

    def _bump_idempotent_producer_epoch(self) -> None:
        if self.producer_id_and_epoch.epoch == MAX_EPOCH:
            self._reset_idempotent_producer_id()
        else:
            current = self.producer_id_and_epoch
            self._set_producer_id_and_epoch(
                ProducerIdAndEpoch(current.producer_id, current.epoch + 1))
        for tp in self._partitions_to_rewrite_sequences:
            self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
            self._partitions_with_unresolved_sequences.pop(tp, None)
        self._partitions_to_rewrite_sequences.clear()
        self._epoch_bump_required = False

    def _reset_idempotent_producer_id(self) -> None:
        logger.debug("Resetting idempotent producer ID. ID and epoch before reset are %s",
                     self.producer_id_and_epoch)
        self._set_producer_id_and_epoch(NO_PRODUCER_ID_AND_EPOCH)
        self.state = State.UNINITIALIZED

    def init_producer_id_started(self) -> None:
        self.state = State.INITIALIZING

    def retry_init_producer_id_at(self, when: float) -> None:
        """No broker could take the InitProducerId now: try again at ``when``."""
        self.init_producer_id_retry_at = when

    def init_producer_id_request(self) -> Any:
        """The InitProducerId body of an idempotent producer (no transactional id)."""
        return api.APIS[ApiKey.INIT_PRODUCER_ID].request(
            transactional_id=None, transaction_timeout_ms=INT_MAX, producer_id=-1,
            producer_epoch=-1)

    def handle_init_producer_id_response(self, response: Any, error: KafkaError | None,
                                         now: float) -> None:
        """InitProducerIdHandler.handleResponse: a new id, a retry after
        ``retry.backoff.ms``, or a fatal error."""
        if error is None:
            if response.error_code == NONE:
                self._set_producer_id_and_epoch(
                    ProducerIdAndEpoch(response.producer_id, response.producer_epoch))
                self.state = State.READY
                self.last_error = None
                for tp, entry in self._partitions.items():
                    if not entry.producer_id_and_epoch.is_valid:
                        # Re-sequenced while the exhausted id was being replaced.
                        self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
                return
            error = error_for_code(response.error_code)()
        if isinstance(error, UnsupportedVersionError):
            self.transition_to_fatal_error(unsupported_init_producer_id(str(error)))
        elif error.retriable or isinstance(error, ConcurrentTransactionsError):
            logger.debug("InitProducerId failed, retrying: %s", error)
            self.state = State.UNINITIALIZED
            self.retry_init_producer_id_at(now + self.retry_backoff_s)
        elif isinstance(error, InvalidProducerEpochError | ProducerFencedError):
            self.transition_to_fatal_error(ProducerFencedError(
                f"InitProducerId answered {error.name}: there is a newer producer with "
                f"this producer id; this producer cannot send any more"))
        elif isinstance(error, ClusterAuthorizationFailedError):
            self.transition_to_fatal_error(error)
        else:
            self.transition_to_fatal_error(type(error)(
                f"Unexpected error in InitProducerIdResponse; {error.message}"))

    # --- sequences --------------------------------------------------------------------------

    def _partition(self, tp: PartitionKey) -> TopicPartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = TopicPartitionEntry(self.producer_id_and_epoch)
        return entry

    def sequence_number(self, tp: PartitionKey) -> int:
        return self._partition(tp).next_sequence

    def last_acked_sequence(self, tp: PartitionKey) -> int:
        entry = self._partitions.get(tp)
        return NO_LAST_ACKED_SEQUENCE_NUMBER if entry is None else entry.last_acked_sequence

    def has_inflight_batches(self, tp: PartitionKey) -> bool:
        return bool(self._partition(tp).in_flight)

    def in_flight_count(self, tp: PartitionKey) -> int:
        entry = self._partitions.get(tp)
        return 0 if entry is None else len(entry.in_flight)

    def has_stale_producer_id_and_epoch(self, tp: PartitionKey) -> bool:
        return self.producer_id_and_epoch != self._partition(tp).producer_id_and_epoch

    def has_unresolved_sequence(self, tp: PartitionKey) -> bool:
        return tp in self._partitions_with_unresolved_sequences

    def first_in_flight_sequence(self, tp: PartitionKey) -> int:
        entry = self._partitions.get(tp)
        if entry is None or not entry.in_flight:
            return NO_SEQUENCE
        return entry.in_flight[0].base_sequence

    def _is_next_sequence(self, tp: PartitionKey, sequence: int) -> bool:
        return sequence - self.last_acked_sequence(tp) == 1

    def _start_sequences_at_beginning(self, tp: PartitionKey,
                                      producer_id_and_epoch: ProducerIdAndEpoch) -> None:
        """Re-sequence the partition's in-flight batches from 0 under ``producer_id_and_epoch``
        (TopicPartitionBookkeeper.startSequencesAtBeginning)."""
        entry = self._partition(tp)
        sequence = 0

        def reset(batch: ProducerBatch) -> None:
            nonlocal sequence
            batch.reset_producer_state(producer_id_and_epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)

        entry.reset_sequence_numbers(reset)
        entry.producer_id_and_epoch = producer_id_and_epoch
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE_NUMBER

    def maybe_update_producer_id_and_epoch(self, tp: PartitionKey) -> None:
        """After an epoch bump, restart a partition's sequences at 0 once none of its batches
        is in flight with the old epoch."""
        if self.has_stale_producer_id_and_epoch(tp) and not self.has_inflight_batches(tp):
            self._start_sequences_at_beginning(tp, self.producer_id_and_epoch)
            logger.debug("ProducerId of partition %s set to %s. Reinitialize sequence at "
                         "beginning.", tp, self.producer_id_and_epoch)

    def should_stop_drain(self, first: ProducerBatch, tp: PartitionKey) -> bool:
        """RecordAccumulator.shouldStopDrainBatchesForPartition: whether the partition's
        first queued batch must wait."""
        if self.state is State.FATAL_ERROR or not self.has_producer_id:
            return True
        if first.base_sequence == NO_SEQUENCE:
            if self.has_inflight_batches(tp) and self.has_stale_producer_id_and_epoch(tp):
                # A new batch at sequence 0 of the new epoch could overtake old-epoch ones.
                return True
            if self.has_unresolved_sequence(tp):
                return True
            if self.in_flight_count(tp) >= MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE:
                return True
            return False
        first_in_flight = self.first_in_flight_sequence(tp)
        # A retried batch goes out only when it is the partition's oldest in flight.
        return first_in_flight != NO_SEQUENCE and first.base_sequence != first_in_flight

    def set_producer_state(self, batch: ProducerBatch) -> None:
        """Stamp a batch being drained for the first time: the producer id and epoch, the
        partition's next sequence (RecordAccumulator.drain)."""
        tp = (batch.topic, batch.partition)
        self.maybe_update_producer_id_and_epoch(tp)
        entry = self._partition(tp)
        batch.set_producer_state(self.producer_id_and_epoch, entry.next_sequence)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.in_flight.append(batch)
        entry.in_flight.sort(key=_by_sequence)

    def _remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is not None and batch in entry.in_flight:
            entry.in_flight.remove(batch)

    # --- answers ----------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        entry = self._partition((batch.topic, batch.partition))
        last_sequence = batch.last_sequence
        if last_sequence > entry.last_acked_sequence:
            entry.last_acked_sequence = last_sequence
        self._remove_in_flight_batch(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: KafkaError,
                            adjust_sequence_numbers: bool) -> None:
        self._maybe_transition_to_error_state(batch, error)
        self._remove_in_flight_batch(batch)
        if self.state is State.FATAL_ERROR or self.transactional is not None:
            return
        tp = (batch.topic, batch.partition)
        if isinstance(error, OutOfOrderSequenceNumberError):
            logger.error("The broker returned %s for topic-partition %s-%d with producerId "
                         "%d, epoch %d, and sequence number %d", error.name, batch.topic,
                         batch.partition, batch.producer_id, batch.producer_epoch,
                         batch.base_sequence)
            self._request_epoch_bump_for_partition(tp)
        elif isinstance(error, UnknownProducerIdError):
            self._partitions.pop(tp, None)
            self._partitions_with_unresolved_sequences.pop(tp, None)
        elif adjust_sequence_numbers:
            self._request_epoch_bump_for_partition(tp)

    def _maybe_transition_to_error_state(self, batch: ProducerBatch, error: KafkaError) -> None:
        txn = self.transactional
        if txn is not None and not isinstance(
                error, InvalidProducerEpochError | ProducerFencedError |
                ClusterAuthorizationFailedError | TransactionalIdAuthorizationFailedError |
                UnsupportedVersionError):
            # Kafka's transactional producer: any other failed batch makes the transaction
            # abortable, and its abort bumps the epoch (the batch's sequence is lost).
            with txn.lock:
                if not txn.is_completing:
                    txn.epoch_bump_required = True
                txn.transition_to_abortable_error(error)
            return
        if isinstance(error, InvalidProducerEpochError) and not batch.sequence_has_been_reset:
            self.transition_to_fatal_error(InvalidProducerEpochError(
                f"The broker has a newer epoch than {batch.producer_epoch} for producer id "
                f"{batch.producer_id} on {batch.topic}-{batch.partition}; this producer cannot"
                f" send any more ({error.message})"))
        elif isinstance(error, ProducerFencedError | ClusterAuthorizationFailedError |
                        TransactionalIdAuthorizationFailedError | UnsupportedVersionError):
            self.transition_to_fatal_error(error)

    def _request_epoch_bump_for_partition(self, tp: PartitionKey) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite_sequences.add(tp)

    def can_retry(self, batch: ProducerBatch, error: KafkaError, log_start_offset: int) -> bool:
        """TransactionManager.canRetry for the idempotent producer: UNKNOWN_PRODUCER_ID and
        OUT_OF_ORDER_SEQUENCE_NUMBER are retried (after an epoch bump where there is a real
        gap); other errors when retriable."""
        tp = (batch.topic, batch.partition)
        if isinstance(error, UnknownProducerIdError):
            if log_start_offset == -1:
                return True  # the answer did not say; it will once the partition settles
            if batch.sequence_has_been_reset:
                return True  # the first failure already re-sequenced this batch
            if self.transactional is not None:
                return False  # the transaction becomes abortable; its abort bumps the epoch
            # Retention removed the producer's last batches (the last acknowledged offset is
            # below the log start), or the broker lost its state otherwise: either way an
            # idempotent producer bumps its epoch and re-sequences the partition from 0.
            self._request_epoch_bump_for_partition(tp)
            return True
        if isinstance(error, OutOfOrderSequenceNumberError):
            if not self.has_unresolved_sequence(tp) and (
                    batch.sequence_has_been_reset or
                    not self._is_next_sequence(tp, batch.base_sequence)):
                return True  # not the batch right after the last acknowledged one: wait
            if self.transactional is not None:
                return False
            if not self.has_unresolved_sequence(tp) or \
                    self._partitions_with_unresolved_sequences[tp] == batch.base_sequence:
                self._request_epoch_bump_for_partition(tp)
            return True
        if isinstance(error, InvalidProducerEpochError) and batch.sequence_has_been_reset:
            # Sent before this producer bumped its own epoch; it now carries the new one.
            return True
        return error.retriable

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        """A batch sent at least once expired: until the partition's in-flight batches
        complete, nobody knows whether the broker has it."""
        tp = (batch.topic, batch.partition)
        next_sequence = increment_sequence(batch.last_sequence, 1)
        current = self._partitions_with_unresolved_sequences.get(tp)
        self._partitions_with_unresolved_sequences[tp] = next_sequence if current is None \
            else max(current, next_sequence)

    def maybe_resolve_sequences(self) -> None:
        """Once a partition with an expired batch has nothing in flight: resolved if the
        acknowledgements reached the next sequence, else bump the epoch."""
        for tp in list(self._partitions_with_unresolved_sequences):
            if self.has_inflight_batches(tp):
                continue
            if not self._is_next_sequence(tp, self.sequence_number(tp)):
                logger.info("No inflight batches remaining for %s, last ack'd sequence for "
                            "partition is %d, next sequence is %d. Going to bump epoch and "
                            "reset sequence numbers.", tp, self.last_acked_sequence(tp),
                            self.sequence_number(tp))
                self._request_epoch_bump_for_partition(tp)
            del self._partitions_with_unresolved_sequences[tp]


def unsupported_init_producer_id(detail: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(
        f"{detail}: the idempotent producer (enable.idempotence=true, the default) needs "
        f"InitProducerId; set enable.idempotence=false to produce to this broker")


def insert_in_sequence_order(queue: deque[ProducerBatch], batch: ProducerBatch) -> None:
    """Put a retried batch back at its sequence position in its partition's queue
    (RecordAccumulator.insertInSequenceOrder): before every batch with a higher or no
    sequence."""
    ahead: list[ProducerBatch] = []
    while queue and queue[0].base_sequence != NO_SEQUENCE and \
            queue[0].base_sequence < batch.base_sequence:
        ahead.append(queue.popleft())
    queue.appendleft(batch)
    queue.extendleft(reversed(ahead))


# --- transactions -------------------------------------------------------------------------------
#
# With ``transactional.id`` the same TransactionManager also runs Kafka's transactions: the
# caller's API (init_transactions, begin_transaction, send_offsets_to_transaction,
# commit_transaction, abort_transaction) moves the state machine below and queues requests
# to the transaction coordinator (found with FindCoordinator key_type 1) or, for
# TxnOffsetCommit, to the group's coordinator (key_type 0). The sender thread sends them one
# at a time, in priority order (Kafka's TxnRequestHandler priorities), and each answer is
# handled as the Java client's handlers do: a retriable error re-queues the request (after a
# new coordinator lookup for NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE), PRODUCER_FENCED,
# INVALID_PRODUCER_EPOCH and the authorization errors are fatal, the others put the
# transaction in ABORTABLE_ERROR: it can only be aborted. A partition is added to the
# transaction (AddPartitionsToTxn) before its first batch is drained.


class TransactionAbortableError(InvalidTxnStateError):
    """The transaction hit an error and can only be aborted (``abort_transaction``); the
    error that caused it is ``__cause__`` (Kafka's ABORTABLE_ERROR state)."""


class TransactionAbortedError(InvalidTxnStateError):
    """A record queued in a transaction that was aborted before the record was sent
    (Kafka's TransactionAbortedException)."""

    description = "Failing batch since transaction was aborted"


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's key_type."""

    GROUP = 0
    TRANSACTION = 1


class Priority(enum.IntEnum):
    """The order queued transactional requests go in (Kafka's TxnRequestHandler
    priorities)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3


_TRANSACTIONAL_TRANSITIONS: Final[dict[State, frozenset[State]]] = {
    State.UNINITIALIZED: frozenset({State.READY}),
    State.INITIALIZING: frozenset({State.UNINITIALIZED, State.ABORTING_TRANSACTION}),
    State.READY: frozenset({State.INITIALIZING, State.COMMITTING_TRANSACTION,
                            State.ABORTING_TRANSACTION}),
    State.IN_TRANSACTION: frozenset({State.READY}),
    State.COMMITTING_TRANSACTION: frozenset({State.IN_TRANSACTION}),
    State.ABORTING_TRANSACTION: frozenset({State.IN_TRANSACTION, State.ABORTABLE_ERROR}),
    State.ABORTABLE_ERROR: frozenset({State.IN_TRANSACTION, State.COMMITTING_TRANSACTION,
                                      State.ABORTABLE_ERROR}),
}
"""Target state -> the states it may be entered from (TransactionManager.State
isTransitionValid); FATAL_ERROR may be entered from any."""


class TransactionalRequestResult:
    """What a transactional call waits for (Kafka's TransactionalRequestResult)."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.error: KafkaError | None = None
        self._done = threading.Event()

    @property
    def is_completed(self) -> bool:
        return self._done.is_set()

    def done(self) -> None:
        self._done.set()

    def fail(self, error: KafkaError) -> None:
        if not self._done.is_set():
            self.error = error
            self._done.set()

    def wait(self, timeout_s: float | None) -> None:
        if not self._done.wait(timeout_s):
            raise RequestTimedOutError(
                f"Timeout expired after {timeout_s} s while awaiting {self.operation}")
        if self.error is not None:
            raise self.error


@dataclass
class TxnRequestHandler:
    """One queued transactional request: its body, where it goes, how its answer is
    handled (a method of the TransactionManager) and the caller's result."""

    api_key: ApiKey
    priority: Priority
    body: Callable[[], Any]
    handle: Callable[[TxnRequestHandler, Any], None]
    result: TransactionalRequestResult
    coordinator_type: CoordinatorType | None = None
    """Sent to this coordinator; None: to any broker (FindCoordinator)."""
    is_retry: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def is_end_txn(self) -> bool:
        return self.api_key is ApiKey.END_TXN


def _response_error(code: int, message: str | None = None) -> KafkaError:
    return error_for_code(code)(message)


class TransactionalState:
    """The transactional half of the TransactionManager (see the comment above). The
    caller's thread and the sender thread both use it: every method holds ``lock``."""

    def __init__(self, tm: TransactionManager, transactional_id: str,
                 transaction_timeout_ms: int) -> None:
        self.tm = tm
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.lock = threading.RLock()
        self.pending: list[tuple[int, int, TxnRequestHandler]] = []
        self._sequence = itertools.count()
        self.in_flight: TxnRequestHandler | None = None
        self.coordinators: dict[CoordinatorType, int | None] = {
            CoordinatorType.TRANSACTION: None, CoordinatorType.GROUP: None}
        self.group_coordinator_key: str | None = None
        self.new_partitions: set[PartitionKey] = set()
        self.pending_partitions: set[PartitionKey] = set()
        self.partitions_in_transaction: set[PartitionKey] = set()
        self.transaction_started = False
        self.epoch_bump_required = False
        self.pending_result: TransactionalRequestResult | None = None
        self.pending_result_state: State | None = None

    # --- state ------------------------------------------------------------------------------

    def transition_to(self, target: State, error: KafkaError | None = None) -> None:
        tm = self.tm
        if target is not State.FATAL_ERROR and \
                tm.state not in _TRANSACTIONAL_TRANSITIONS[target]:
            raise InvalidTxnStateError(f"TransactionalId {self.transactional_id}: Invalid "
                                       f"transition attempted from state {tm.state.value} "
                                       f"to state {target.value}")
        if target in (State.FATAL_ERROR, State.ABORTABLE_ERROR):
            tm.last_error = error
            logger.error("[TransactionalId %s] Transiting to %s state due to %s",
                         self.transactional_id, target.value.lower(), error)
        else:
            logger.debug("[TransactionalId %s] Transition from state %s to %s",
                         self.transactional_id, tm.state.value, target.value)
        tm.state = target
        if target is State.FATAL_ERROR and error is not None:
            if self.pending_result is not None:
                self.pending_result.fail(error)

    def transition_to_fatal(self, error: KafkaError) -> None:
        with self.lock:
            self.transition_to(State.FATAL_ERROR, error)

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        with self.lock:
            if self.tm.state is State.ABORTING_TRANSACTION:
                logger.debug("Skipping transition to abortable error state since the "
                             "transaction is already being aborted. Underlying exception: %s",
                             error)
                return
            if self.tm.state not in _TRANSACTIONAL_TRANSITIONS[State.ABORTABLE_ERROR]:
                logger.warning("[TransactionalId %s] %s in state %s", self.transactional_id,
                               error, self.tm.state.value)
                return
            self.transition_to(State.ABORTABLE_ERROR, error)

    @property
    def has_error(self) -> bool:
        return self.tm.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    @property
    def is_completing(self) -> bool:
        return self.tm.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    @property
    def is_aborting(self) -> bool:
        return self.tm.state is State.ABORTING_TRANSACTION

    @property
    def has_abortable_error(self) -> bool:
        return self.tm.state is State.ABORTABLE_ERROR

    def maybe_fail_with_error(self) -> None:
        """Raise if the transaction is in an error state (Kafka's maybeFailWithError)."""
        tm = self.tm
        error = tm.last_error
        if tm.state is State.FATAL_ERROR and error is not None:
            raise type(error)(f"TransactionalId {self.transactional_id}: the producer "
                              f"failed fatally and must be closed: {error.message}")
        if tm.state is State.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"Cannot execute transactional method because we are in an error state "
                f"(abort the transaction): {error}") from error

    def fail_if_not_ready_for_send(self) -> None:
        with self.lock:
            if self.has_error:
                error = self.tm.last_error
                if self.tm.state is State.FATAL_ERROR and error is not None:
                    raise type(error)(f"Cannot perform send because at least one previous "
                                      f"transactional or idempotent request has failed with "
                                      f"errors: {error.message}")
                raise TransactionAbortableError(
                    f"Cannot perform send because at least one previous transactional or "
                    f"idempotent request has failed with errors: {error}") from error
            if self.tm.state is not State.IN_TRANSACTION:
                raise InvalidTxnStateError(
                    f"Cannot call send in state {self.tm.state.value}" if
                    self.tm.state is not State.UNINITIALIZED else
                    "Cannot perform a 'send' before completing a call to initTransactions "
                    "when transactions are enabled.")

    # --- the caller's API ------------------------------------------------------------------

    def _cached(self, target: State, start: Callable[[], TransactionalRequestResult]
                ) -> TransactionalRequestResult:
        """The pending result of an earlier call that timed out, if it was for the same
        operation (Kafka's handleCachedTransactionRequestResult): commit_transaction may
        be called again after a timeout."""
        if self.pending_result is not None:
            if self.pending_result_state is target:
                return self.pending_result
            if not self.pending_result.is_completed:
                raise InvalidTxnStateError(
                    f"Cannot attempt operation `{target.value}` because the previous call "
                    f"to `{self.pending_result.operation}` timed out and must be retried")
        result = start()
        self.pending_result, self.pending_result_state = result, target
        return result

    def completed(self, result: TransactionalRequestResult) -> None:
        """The caller saw ``result`` finish: forget it."""
        with self.lock:
            if self.pending_result is result:
                self.pending_result = self.pending_result_state = None

    def initialize_transactions(self) -> TransactionalRequestResult:
        with self.lock:
            def start() -> TransactionalRequestResult:
                self.transition_to(State.INITIALIZING)
                self.tm.producer_id_and_epoch = NO_PRODUCER_ID_AND_EPOCH
                return self._enqueue_init_producer_id(NO_PRODUCER_ID_AND_EPOCH)
            return self._cached(State.INITIALIZING, start)

    def begin_transaction(self) -> None:
        with self.lock:
            if self.pending_result is not None and not self.pending_result.is_completed:
                raise InvalidTxnStateError(
                    f"Cannot begin a transaction while `{self.pending_result.operation}` "
                    f"is pending")
            self.maybe_fail_with_error()
            if self.tm.state is State.UNINITIALIZED:
                raise InvalidTxnStateError(
                    "Cannot call begin_transaction before init_transactions")
            self.transition_to(State.IN_TRANSACTION)

    def begin_commit(self) -> TransactionalRequestResult:
        with self.lock:
            def start() -> TransactionalRequestResult:
                self.maybe_fail_with_error()
                self.transition_to(State.COMMITTING_TRANSACTION)
                return self._begin_completing(commit=True)
            return self._cached(State.COMMITTING_TRANSACTION, start)

    def begin_abort(self) -> TransactionalRequestResult:
        with self.lock:
            def start() -> TransactionalRequestResult:
                if self.tm.state is not State.ABORTABLE_ERROR:
                    self.maybe_fail_with_error()
                self.transition_to(State.ABORTING_TRANSACTION)
                self.new_partitions.clear()  # nothing more goes into this transaction
                return self._begin_completing(commit=False)
            return self._cached(State.ABORTING_TRANSACTION, start)

    def send_offsets_to_transaction(self, offsets: dict[PartitionKey, int], group_id: str,
                                    generation_id: int, member_id: str,
                                    group_instance_id: str | None
                                    ) -> TransactionalRequestResult:
        with self.lock:
            self.maybe_fail_with_error()
            if self.tm.state is not State.IN_TRANSACTION:
                raise InvalidTxnStateError(
                    f"Cannot send offsets if a transaction is not in progress (currentState= "
                    f"{self.tm.state.value})")
            result = TransactionalRequestResult("sendOffsetsToTransaction")
            pid = self.tm.producer_id_and_epoch
            handler = TxnRequestHandler(
                ApiKey.ADD_OFFSETS_TO_TXN, Priority.ADD_PARTITIONS_OR_OFFSETS,
                lambda: api.APIS[ApiKey.ADD_OFFSETS_TO_TXN].request(
                    transactional_id=self.transactional_id, producer_id=pid.producer_id,
                    producer_epoch=pid.epoch, group_id=group_id),
                self._handle_add_offsets, result, CoordinatorType.TRANSACTION,
                data={"offsets": dict(offsets), "group_id": group_id,
                      "generation_id": generation_id, "member_id": member_id,
                      "group_instance_id": group_instance_id})
            self._enqueue(handler)
            return result

    def maybe_add_partition(self, tp: PartitionKey) -> None:
        """Called by ``send`` (the caller's thread) for the record's partition."""
        with self.lock:
            if tp in self.partitions_in_transaction or tp in self.pending_partitions:
                return
            self.new_partitions.add(tp)

    def is_send_to_partition_allowed(self, tp: PartitionKey) -> bool:
        with self.lock:
            return self.tm.state is not State.FATAL_ERROR and \
                tp in self.partitions_in_transaction

    def _begin_completing(self, *, commit: bool) -> TransactionalRequestResult:
        if self.new_partitions:
            self._enqueue(self._add_partitions_handler())
        result = TransactionalRequestResult("commitTransaction" if commit
                                            else "abortTransaction")
        pid = self.tm.producer_id_and_epoch
        self._enqueue(TxnRequestHandler(
            ApiKey.END_TXN, Priority.END_TXN,
            lambda: api.APIS[ApiKey.END_TXN].request(
                transactional_id=self.transactional_id, producer_id=pid.producer_id,
                producer_epoch=pid.epoch, committed=commit),
            self._handle_end_txn, result, CoordinatorType.TRANSACTION,
            data={"commit": commit}))
        return result

    # --- the queue (sender thread) ------------------------------------------------------------

    def _enqueue(self, handler: TxnRequestHandler) -> None:
        heapq.heappush(self.pending, (handler.priority, next(self._sequence), handler))

    def reenqueue(self, handler: TxnRequestHandler) -> None:
        with self.lock:
            handler.is_retry = True
            self._enqueue(handler)

    def _enqueue_init_producer_id(self, current: ProducerIdAndEpoch,
                                  result: TransactionalRequestResult | None = None
                                  ) -> TransactionalRequestResult:
        if result is None:
            result = TransactionalRequestResult("initTransactions")
        self._enqueue(TxnRequestHandler(
            ApiKey.INIT_PRODUCER_ID, Priority.INIT_PRODUCER_ID,
            lambda: api.APIS[ApiKey.INIT_PRODUCER_ID].request(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=current.producer_id, producer_epoch=current.epoch),
            self._handle_init_producer_id, result, CoordinatorType.TRANSACTION))
        return result

    def _add_partitions_handler(self) -> TxnRequestHandler:
        self.pending_partitions |= self.new_partitions
        partitions = sorted(self.new_partitions)
        self.new_partitions.clear()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        pid = self.tm.producer_id_and_epoch
        request_cls = api.APIS[ApiKey.ADD_PARTITIONS_TO_TXN].request
        return TxnRequestHandler(
            ApiKey.ADD_PARTITIONS_TO_TXN, Priority.ADD_PARTITIONS_OR_OFFSETS,
            lambda: request_cls(
                transactional_id=self.transactional_id, producer_id=pid.producer_id,
                producer_epoch=pid.epoch,
                topics=[request_cls.structs["AddPartitionsToTxnTopic"](name=t, partitions=p)
                        for t, p in by_topic.items()]),
            self._handle_add_partitions, TransactionalRequestResult("addPartitions"),
            CoordinatorType.TRANSACTION, data={"partitions": set(partitions)})

    def lookup_coordinator(self, coordinator_type: CoordinatorType, key: str) -> None:
        with self.lock:
            self.coordinators[coordinator_type] = None
            if any(h.api_key is ApiKey.FIND_COORDINATOR and h.data["type"] is coordinator_type
                   for _, _, h in self.pending):
                return
            self._enqueue(TxnRequestHandler(
                ApiKey.FIND_COORDINATOR, Priority.FIND_COORDINATOR,
                lambda: api.APIS[ApiKey.FIND_COORDINATOR].request(
                    key=key, key_type=int(coordinator_type)),
                self._handle_find_coordinator, TransactionalRequestResult("findCoordinator"),
                None, data={"type": coordinator_type, "key": key}))

    def coordinator_key(self, handler: TxnRequestHandler) -> str:
        if handler.coordinator_type is CoordinatorType.GROUP:
            group_id: str = handler.data["group_id"]
            return group_id
        return self.transactional_id

    def next_request(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        """The next request to send, or None (Kafka's nextRequest): new partitions go
        first, EndTxn waits until every batch of the transaction has its answer."""
        with self.lock:
            if self.new_partitions and self.tm.state is State.IN_TRANSACTION:
                self._enqueue(self._add_partitions_handler())
            while self.pending:
                handler = self.pending[0][2]
                if handler.is_end_txn and has_incomplete_batches:
                    return None
                heapq.heappop(self.pending)
                if self._maybe_terminate_with_error(handler):
                    continue
                if handler.is_end_txn and not self.transaction_started:
                    # Nothing was added to the transaction: nothing to end at the broker.
                    logger.debug("Not sending EndTxn for completed transaction since no "
                                 "partitions or offsets were successfully added")
                    self._complete_transaction()
                    handler.result.done()
                    continue
                return handler
            return None

    def _maybe_terminate_with_error(self, handler: TxnRequestHandler) -> bool:
        if not self.has_error:
            return False
        if self.tm.state is State.ABORTABLE_ERROR and handler.is_end_txn and \
                not handler.data["commit"]:
            return False
        if handler.api_key is ApiKey.FIND_COORDINATOR and \
                self.tm.state is State.ABORTABLE_ERROR:
            return False
        error = self.tm.last_error or TransactionAbortedError()
        handler.result.fail(error if self.tm.state is State.FATAL_ERROR
                            else _abortable(error))
        return True

    def fail_pending(self) -> None:
        """After a fatal error: fail every queued request's caller."""
        with self.lock:
            while self.pending:
                handler = heapq.heappop(self.pending)[2]
                self._maybe_terminate_with_error(handler)

    def has_pending(self) -> bool:
        with self.lock:
            return bool(self.pending) or bool(self.new_partitions)

    def _complete_transaction(self, next_state: State = State.READY) -> None:
        self.transition_to(next_state)
        self.tm.last_error = None
        self.transaction_started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.partitions_in_transaction.clear()

    # --- answers (sender thread) --------------------------------------------------------------

    def handle_response(self, handler: TxnRequestHandler, response: Any,
                        error: KafkaError | None) -> None:
        with self.lock:
            self.in_flight = None
            if error is not None:
                # Disconnected or timed out: find the coordinator again and retry.
                logger.debug("%s failed (%s), retrying", handler.api_key.name, error)
                if handler.coordinator_type is not None:
                    self.lookup_coordinator(handler.coordinator_type,
                                            self.coordinator_key(handler))
                self.reenqueue(handler)
                return
            handler.handle(handler, response)

    def _fatal(self, handler: TxnRequestHandler, error: KafkaError) -> None:
        self.transition_to(State.FATAL_ERROR, error)
        handler.result.fail(error)

    def _abortable(self, handler: TxnRequestHandler, error: KafkaError) -> None:
        self.transition_to_abortable_error(error)
        handler.result.fail(_abortable(error))

    def _fenced(self, handler: TxnRequestHandler, code: int) -> None:
        self._fatal(handler, ProducerFencedError(
            f"There is a newer producer with the same transactionalId "
            f"{self.transactional_id} which fences the current one "
            f"({_response_error(code).name} from {handler.api_key.name})"))

    def _retry_on_coordinator_error(self, handler: TxnRequestHandler, code: int) -> bool:
        """The shared retriable cases; True when handled."""
        if code in (CoordinatorNotAvailableError.code, NotCoordinatorError.code):
            assert handler.coordinator_type is not None
            self.lookup_coordinator(handler.coordinator_type, self.coordinator_key(handler))
            self.reenqueue(handler)
            return True
        if code in (CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code):
            self.reenqueue(handler)
            return True
        return False

    def _handle_find_coordinator(self, handler: TxnRequestHandler, response: Any) -> None:
        code = response.error_code
        coordinator_type: CoordinatorType = handler.data["type"]
        if code == NONE:
            self.coordinators[coordinator_type] = response.node_id
            handler.result.done()
        elif code == CoordinatorNotAvailableError.code or \
                _response_error(code).retriable:
            self.reenqueue(handler)
        elif code == TransactionalIdAuthorizationFailedError.code:
            self._fatal(handler, TransactionalIdAuthorizationFailedError())
        elif code == GroupAuthorizationFailedError.code:
            self._abortable(handler, GroupAuthorizationFailedError(
                f"Not authorized to access group {handler.data['key']}"))
        else:
            self._fatal(handler, _response_error(
                code, f"Could not find a coordinator with type {coordinator_type.name} with "
                      f"key {handler.data['key']} due to unexpected error: "
                      f"{response.error_message}"))

    def _handle_init_producer_id(self, handler: TxnRequestHandler, response: Any) -> None:
        code = response.error_code
        if code == NONE:
            tm = self.tm
            tm._set_producer_id_and_epoch(
                ProducerIdAndEpoch(response.producer_id, response.producer_epoch))
            tm.last_error = None
            self.transition_to(State.READY)
            self.epoch_bump_required = False
            handler.result.done()
        elif self._retry_on_coordinator_error(handler, code):
            return
        elif code in (ProducerFencedError.code, InvalidProducerEpochError.code):
            self._fenced(handler, code)
        elif code in (TransactionalIdAuthorizationFailedError.code,
                      ClusterAuthorizationFailedError.code):
            self._fatal(handler, _response_error(code))
        else:
            self._fatal(handler, _response_error(
                code, f"Unexpected error in InitProducerIdResponse; "
                      f"{_response_error(code).message}"))

    def _handle_add_partitions(self, handler: TxnRequestHandler, response: Any) -> None:
        partitions: set[PartitionKey] = handler.data["partitions"]
        errors = {(topic.name, p.partition_index): p.error_code
                  for topic in response.results for p in topic.results}
        failed: dict[PartitionKey, int] = {}
        for tp, code in errors.items():
            if code == NONE:
                continue
            if self._retry_on_coordinator_error(handler, code):
                return
            if code in (CoordinatorLoadInProgressError.code,
                        UnknownTopicOrPartitionError.code):
                self.reenqueue(handler)
                return
            if code in (ProducerFencedError.code, InvalidProducerEpochError.code):
                self._fenced(handler, code)
                return
            if code in (TransactionalIdAuthorizationFailedError.code,
                        InvalidTxnStateError.code):
                self._fatal(handler, _response_error(code))
                return
            if code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
                self.pending_partitions -= partitions
                self._abortable(handler, _response_error(code))
                return
            if code == OperationNotAttemptedError.code:
                continue
            failed[tp] = code
        if failed:
            self.pending_partitions -= partitions
            codes = ", ".join(f"{t}-{p}: {_response_error(c).name}"
                              for (t, p), c in sorted(failed.items()))
            first = _response_error(next(iter(failed.values())),
                                    f"Could not add partitions to transaction due to "
                                    f"errors: {codes}")
            self._abortable(handler, first)
            return
        self.partitions_in_transaction |= partitions
        self.pending_partitions -= partitions
        self.transaction_started = True
        logger.debug("[TransactionalId %s] Successfully added partitions %s to transaction",
                     self.transactional_id, sorted(partitions))
        handler.result.done()

    def _handle_add_offsets(self, handler: TxnRequestHandler, response: Any) -> None:
        code = response.error_code
        if code == NONE:
            self.transaction_started = True
            group_id: str = handler.data["group_id"]
            self._enqueue(TxnRequestHandler(
                ApiKey.TXN_OFFSET_COMMIT, Priority.ADD_PARTITIONS_OR_OFFSETS,
                lambda: self._txn_offset_commit_body(handler.data),
                self._handle_txn_offset_commit, handler.result, CoordinatorType.GROUP,
                data=handler.data))
            if self.coordinators[CoordinatorType.GROUP] is None:
                self.lookup_coordinator(CoordinatorType.GROUP, group_id)
        elif self._retry_on_coordinator_error(handler, code):
            return
        elif code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
            self._abortable(handler, _response_error(code))
        elif code in (ProducerFencedError.code, InvalidProducerEpochError.code):
            self._fenced(handler, code)
        elif code == TransactionalIdAuthorizationFailedError.code:
            self._fatal(handler, _response_error(code))
        elif code == GroupAuthorizationFailedError.code:
            self._abortable(handler, GroupAuthorizationFailedError(
                f"Not authorized to access group {handler.data['group_id']}"))
        else:
            self._fatal(handler, _response_error(
                code, f"Unexpected error in AddOffsetsToTxnResponse: "
                      f"{_response_error(code).message}"))

    def _txn_offset_commit_body(self, data: dict[str, Any]) -> Any:
        request_cls = api.APIS[ApiKey.TXN_OFFSET_COMMIT].request
        s = request_cls.structs
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in sorted(data["offsets"].items()):
            by_topic.setdefault(topic, []).append(s["TxnOffsetCommitRequestPartition"](
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        pid = self.tm.producer_id_and_epoch
        return request_cls(
            transactional_id=self.transactional_id, group_id=data["group_id"],
            producer_id=pid.producer_id, producer_epoch=pid.epoch,
            generation_id=data["generation_id"], member_id=data["member_id"],
            group_instance_id=data["group_instance_id"],
            topics=[s["TxnOffsetCommitRequestTopic"](name=t, partitions=p)
                    for t, p in by_topic.items()])

    def _handle_txn_offset_commit(self, handler: TxnRequestHandler, response: Any) -> None:
        offsets: dict[PartitionKey, int] = handler.data["offsets"]
        retry = False
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                code = p.error_code
                if code == NONE:
                    offsets.pop(tp, None)
                elif code in (CoordinatorNotAvailableError.code, NotCoordinatorError.code,
                              RequestTimedOutError.code):
                    self.lookup_coordinator(CoordinatorType.GROUP, handler.data["group_id"])
                    retry = True
                elif code in (CoordinatorLoadInProgressError.code,
                              UnknownTopicOrPartitionError.code,
                              ConcurrentTransactionsError.code):
                    retry = True
                elif code == GroupAuthorizationFailedError.code:
                    self._abortable(handler, GroupAuthorizationFailedError(
                        f"Not authorized to access group {handler.data['group_id']}"))
                    return
                elif code in (ProducerFencedError.code, InvalidProducerEpochError.code):
                    self._fenced(handler, code)
                    return
                elif code in (FencedInstanceIdError.code,
                              TransactionalIdAuthorizationFailedError.code):
                    self._fatal(handler, _response_error(code))
                    return
                elif code in (UnknownMemberIdError.code, IllegalGenerationError.code):
                    self._abortable(handler, _response_error(
                        code, "Transaction offset commit failed due to consumer group "
                              "metadata mismatch: " + _response_error(code).message))
                    return
                else:
                    self._fatal(handler, _response_error(
                        code, f"Unexpected error in TxnOffsetCommitResponse: "
                              f"{_response_error(code).message}"))
                    return
        if not offsets:
            handler.result.done()
        elif retry:
            self.reenqueue(handler)
        else:
            self._fatal(handler, InvalidTxnStateError(
                f"TxnOffsetCommit answered nothing for {sorted(offsets)}"))

    def _handle_end_txn(self, handler: TxnRequestHandler, response: Any) -> None:
        code = response.error_code
        if code == NONE:
            if self.epoch_bump_required:
                # KIP-360: after an abortable produce error the aborted transaction's
                # sequences are unknown; bump the epoch (InitProducerId with the current id
                # and epoch), which restarts them at 0. The abort completes with it.
                self._complete_transaction(State.INITIALIZING)
                self._enqueue_init_producer_id(self.tm.producer_id_and_epoch, handler.result)
                return
            self._complete_transaction(State.READY)
            handler.result.done()
        elif self._retry_on_coordinator_error(handler, code):
            return
        elif code in (ProducerFencedError.code, InvalidProducerEpochError.code):
            self._fenced(handler, code)
        elif code in (UnknownProducerIdError.code, InvalidProducerIdMappingError.code):
            self._abortable(handler, _response_error(code))
        elif code in (TransactionalIdAuthorizationFailedError.code, InvalidTxnStateError.code):
            self._fatal(handler, _response_error(code))
        else:
            self._fatal(handler, _response_error(
                code, f"Unhandled error in EndTxnResponse: {_response_error(code).message}"))


def _abortable(error: KafkaError) -> KafkaError:
    if isinstance(error, TransactionAbortableError | TransactionAbortedError):
        return error
    wrapped = TransactionAbortableError(
        f"The transaction must be aborted: {error.name}: {error.message}")
    wrapped.__cause__ = error
    return wrapped
