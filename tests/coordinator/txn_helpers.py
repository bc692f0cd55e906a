"""Test support for the transaction coordinator: an in-memory ``__transaction_state``, a
markers channel that records what it is asked to send, and a coordinator on task.Clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import NONE, NotCoordinatorError
from kafkaclone.coordinator.transaction.coordinator import (
    TransactionConfig,
    TransactionCoordinator,
    TxnMarkerEntry,
)
from kafkaclone.coordinator.transaction.log import TransactionLogRecord, read_txn_record
from kafkaclone.coordinator.transaction.state_manager import TransactionStateManager

NUM_PARTITIONS = 4
MAX_TIMEOUT_MS = 900_000
EXPIRATION_MS = 7 * 24 * 3600 * 1000
ABORT_INTERVAL_MS = 10_000
REMOVE_INTERVAL_MS = 3_600_000


class MemoryTransactionLog:
    """``__transaction_state`` in lists; ``error`` is the code the next appends answer and
    ``hold`` makes appends wait."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        self.error = NONE
        self.hold: Deferred[None] | None = None

    async def append(self, partition: int, key: bytes, value: bytes | None,
                     timeout_ms: int) -> int:
        if self.hold is not None:
            await self.hold
        if self.error != NONE:
            return self.error
        self.partitions.setdefault(partition, []).append((key, value))
        return NONE

    async def read(self, partition: int) -> Sequence[tuple[bytes | None, bytes | None]]:
        return list(self.partitions.get(partition, []))

    def records(self, partition: int) -> list[TransactionLogRecord]:
        return [read_txn_record(k, v) for k, v in self.partitions.get(partition, [])]


@dataclass
class RecordingMarkers:
    """A TxnMarkerSender: each entry waits until the test calls :meth:`write_all`."""

    sent: list[TxnMarkerEntry] = field(default_factory=list)
    waiting: list[tuple[TxnMarkerEntry, Deferred[None]]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)

    async def send_markers(self, entry: TxnMarkerEntry) -> None:
        done: Deferred[None] = Deferred()
        self.sent.append(entry)
        self.waiting.append((entry, done))
        await done

    def remove_markers_for_txn_partition(self, txn_partition: int) -> None:
        self.removed.append(txn_partition)
        for entry, done in list(self.waiting):
            if entry.txn_partition == txn_partition:
                self.waiting.remove((entry, done))
                done.errback(NotCoordinatorError())

    def write_all(self) -> None:
        waiting, self.waiting = self.waiting, []
        for _, done in waiting:
            done.callback(None)


class CountingProducerIds:
    def __init__(self, start: int = 1000) -> None:
        self.next = start

    async def generate_producer_id(self) -> int:
        self.next += 1
        return self.next - 1


@dataclass
class Harness:
    clock: task.Clock
    log: MemoryTransactionLog
    markers: RecordingMarkers
    coordinator: TransactionCoordinator

    @property
    def state_manager(self) -> TransactionStateManager:
        return self.coordinator.state_manager


def make_harness(*, owned: Sequence[int] = tuple(range(NUM_PARTITIONS)),
                 coordinator_epoch: int = 0) -> Harness:
    clock = task.Clock()
    clock.advance(1_000_000)
    log = MemoryTransactionLog()
    markers = RecordingMarkers()
    config = TransactionConfig(
        transactional_id_expiration_ms=EXPIRATION_MS, transaction_max_timeout_ms=MAX_TIMEOUT_MS,
        transaction_state_log_num_partitions=NUM_PARTITIONS,
        abort_timed_out_transactions_interval_ms=ABORT_INTERVAL_MS,
        remove_expired_transactional_ids_interval_ms=REMOVE_INTERVAL_MS,
        request_timeout_ms=30_000)
    state_manager = TransactionStateManager(NUM_PARTITIONS, log, request_timeout_ms=30_000)
    coordinator = TransactionCoordinator(1, config, state_manager, CountingProducerIds(),
                                         markers, clock)
    coordinator.startup()
    for partition in owned:
        coordinator.on_election(partition, coordinator_epoch)
    return Harness(clock, log, markers, coordinator)
