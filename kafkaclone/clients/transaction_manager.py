"""The idempotent producer's bookkeeping: Kafka's TransactionManager without transactions.

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

Method names are Kafka's (``TransactionManager``, ``RecordAccumulator`` and ``Sender``), in
snake case. Everything here runs on the producer's sender thread, except
:meth:`TransactionManager.maybe_fail_with_error` which ``send`` calls.
"""

from __future__ import annotations

import enum
import logging
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
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
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
    When the user set ``enable.idempotence=true`` a conflicting value raises
    ConfigException; when idempotence is on only by default, a conflicting value turns it
    off (logged)."""
    if not config.get_bool("enable.idempotence"):
        return False
    explicit = "enable.idempotence" in config.originals
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
    FATAL_ERROR = "FATAL_ERROR"


class TransactionManager:
    """The producer id, epoch and per-partition sequences of an idempotent producer (see
    the module docstring)."""

    def __init__(self, *, retry_backoff_s: float) -> None:
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
        if self.state is State.FATAL_ERROR:
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
        if self.state is State.FATAL_ERROR:
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
