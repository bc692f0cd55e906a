"""A transactional id's state on its coordinator: Kafka 2.8's ``TransactionMetadata``,
``TransactionState`` and ``TxnTransitMetadata``.

The state machine lists its legal transitions as data (:data:`VALID_PREVIOUS_STATES`, Kafka's
``TransactionState.validPreviousStates``); :meth:`TransactionMetadata.complete_transition_to`
refuses anything else with :class:`IllegalTransactionStateTransition`::

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
    Ongoing --EndTxn--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn, timeout--> PrepareAbort --markers written--> CompleteAbort
    Ongoing --InitProducerId (fencing)--> PrepareEpochFence --> PrepareAbort
    Empty / CompleteCommit / CompleteAbort --transactional.id.expiration.ms--> Dead

A change is made in two steps, as in Kafka: ``prepare_*`` computes the next state
(:class:`TxnTransitMetadata`, what the transaction log record will hold) and marks it
pending; once the record is written, ``complete_transition_to`` applies it (or
``clear_pending`` drops it when the write failed). While a state is pending, other requests
for the id answer CONCURRENT_TRANSACTIONS.

Nothing here does I/O or looks at a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kafkaclone.common.topic_partition import TopicPartition

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
SHORT_MAX: Final = 2**15 - 1


class TransactionState(enum.Enum):
    """The states, with the byte the transaction log stores for each (Kafka's
    TransactionState.id)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))


_S = TransactionState

VALID_PREVIOUS_STATES: Final[Mapping[TransactionState, frozenset[TransactionState]]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
"""For each state, the states a transaction may enter it from."""

COMPLETED_STATES: Final = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
"""States with no transaction in progress: a new one may begin, the id may expire."""


class IllegalTransactionStateTransition(RuntimeError):
    """A transition the state machine does not allow: a coordinator bug, never a client's."""


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The next state of a transactional id: what its transaction log record holds."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass
class TransactionMetadata:
    """One transactional id (see the module docstring). Reactor thread only."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransitMetadata
                     ) -> TransactionMetadata:
        """The metadata a loaded transaction log record describes."""
        return cls(transactional_id, transit.producer_id, transit.last_producer_id,
                   transit.producer_epoch, transit.last_producer_epoch, transit.txn_timeout_ms,
                   transit.txn_state, set(transit.topic_partitions),
                   transit.txn_start_timestamp, transit.txn_last_update_timestamp)

    def __repr__(self) -> str:
        return (f"TransactionMetadata(transactionalId={self.transactional_id}, "
                f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
                f"txnTimeoutMs={self.txn_timeout_ms}, state={self.state.kafka_name}, "
                f"pendingState={self.pending_state}, "
                f"topicPartitions={sorted(map(str, self.topic_partitions))})")

    # -- preparing transitions -----------------------------------------------------------------

    def _prepare(self, state: TransactionState, *, producer_id: int | None = None,
                 producer_epoch: int | None = None, last_producer_epoch: int | None = None,
                 txn_timeout_ms: int | None = None,
                 topic_partitions: Iterable[TopicPartition] | None = None,
                 txn_start_timestamp: int | None = None, now_ms: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} is already in pending state "
                f"{self.pending_state.kafka_name} while trying to move to {state.kafka_name}")
        self._check_transition(state)
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(self.last_producer_epoch if last_producer_epoch is None
                                 else last_producer_epoch),
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            txn_state=state,
            topic_partitions=frozenset(self.topic_partitions if topic_partitions is None
                                       else topic_partitions),
            txn_start_timestamp=(self.txn_start_timestamp if txn_start_timestamp is None
                                 else txn_start_timestamp),
            txn_last_update_timestamp=now_ms,
        )

    def _check_transition(self, target: TransactionState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} failed transition to state "
                f"{target.kafka_name}: it is {self.state.kafka_name}, and only "
                f"{sorted(s.kafka_name for s in VALID_PREVIOUS_STATES[target])} may precede it")

    def is_producer_epoch_exhausted(self) -> bool:
        return self.producer_epoch >= SHORT_MAX - 1

    def prepare_fence_producer_epoch(self) -> None:
        """Kafka's prepareFenceProducerEpoch: bump the epoch in memory (not persisted) so the
        abort that follows fences the producer of the ongoing transaction."""
        self._check_transition(_S.PREPARE_EPOCH_FENCE)
        if self.pending_state is not None:
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} has pending state "
                f"{self.pending_state.kafka_name}")
        if not self.is_producer_epoch_exhausted():
            self.producer_epoch += 1
        self.state = _S.PREPARE_EPOCH_FENCE

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int,
                                         expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | None:
        """Kafka's prepareIncrementProducerEpoch: a producer (re)initialises. Without an
        expected epoch the epoch goes up by one; with one (KIP-360) it must be the current
        epoch (bump) or the previous one (a retry of a bump that succeeded: no change).
        None: the producer is fenced (PRODUCER_FENCED)."""
        if self.is_producer_epoch_exhausted():
            raise IllegalTransactionStateTransition(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(_S.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                             txn_timeout_ms=txn_timeout_ms, topic_partitions=(),
                             txn_start_timestamp=-1, now_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int,
                                     now_ms: int, *, record_last_epoch: bool
                                     ) -> TxnTransitMetadata:
        """Kafka's prepareProducerIdRotation: the epoch is exhausted, a new id starts at 0."""
        transit = self._prepare(_S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                                last_producer_epoch=(self.producer_epoch if record_last_epoch
                                                     else NO_PRODUCER_EPOCH),
                                txn_timeout_ms=txn_timeout_ms, topic_partitions=(),
                                txn_start_timestamp=-1, now_ms=now_ms)
        return TxnTransitMetadata(
            transit.producer_id, self.producer_id, transit.producer_epoch,
            transit.last_producer_epoch, transit.txn_timeout_ms, transit.txn_state,
            transit.topic_partitions, transit.txn_start_timestamp,
            transit.txn_last_update_timestamp)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition],
                               now_ms: int) -> TxnTransitMetadata:
        start = now_ms if self.state in COMPLETED_STATES else self.txn_start_timestamp
        return self._prepare(_S.ONGOING, topic_partitions=self.topic_partitions | set(partitions),
                             txn_start_timestamp=start, now_ms=now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int
                                ) -> TxnTransitMetadata:
        return self._prepare(state, now_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """CompleteCommit / CompleteAbort once every marker is written; no partitions left."""
        target = (_S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT
                  else _S.COMPLETE_ABORT)
        return self._prepare(target, topic_partitions=(), now_ms=now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(_S.DEAD, topic_partitions=(), now_ms=now_ms)

    # -- completing transitions -----------------------------------------------------------------

    def clear_pending(self) -> None:
        """The record of the pending state could not be written: nothing changed."""
        self.pending_state = None

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply the written state (Kafka's completeTransitionTo)."""
        if self.pending_state is not transit.txn_state:
            raise IllegalTransactionStateTransition(
                f"TransactionalId {self.transactional_id} completes a transition to "
                f"{transit.txn_state.kafka_name} while its pending state is "
                f"{self.pending_state.kafka_name if self.pending_state else None}")
        self._check_transition(transit.txn_state)
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.state = transit.txn_state
        self.pending_state = None
