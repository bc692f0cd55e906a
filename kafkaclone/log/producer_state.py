"""ProducerStateManager: what a partition knows of its idempotent producers (Kafka 2.8's
kafka.log.ProducerStateManager, ProducerStateEntry, ProducerAppendInfo, BatchMetadata).

Per producer id: its epoch, the metadata of its last 5 batches (last sequence, last
offset, offset delta, timestamp), and the two fields transactions use (coordinator epoch,
first offset of the ongoing transaction). A leader checks each client batch against it:

- a batch with the same epoch and sequence range as one of the last 5 is a duplicate: the
  log answers with the offsets it got the first time and appends nothing;
- an older epoch is INVALID_PRODUCER_EPOCH;
- a new epoch must start at sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER, or
  UNKNOWN_PRODUCER_ID when the partition has no epoch for the producer at all);
- otherwise the sequence must follow the last one (wrapping after Int.MaxValue), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.

Transactions (Kafka 2.8's ongoingTxns / unreplicatedTxns / CompletedTxn): a transactional
batch from a producer with no open transaction starts one at its first offset; a COMMIT or
ABORT marker (a control batch, written for the transaction coordinator) ends it, refused
with INVALID_PRODUCER_EPOCH for an older producer epoch and TRANSACTION_COORDINATOR_FENCED
for an older coordinator epoch. A completed transaction holds the last stable offset back
until its marker is below the high watermark; the Log indexes the aborted ones
(log/transaction_index.py).

Replicated batches (a follower's fetch) and the batches re-read at recovery update the state
without those checks, so every replica knows the same producers.

The state is kept in ``<20-digit offset>.snapshot`` files in the partition directory,
Kafka's format (version 1)::

    version                   int16
    crc                       uint32   CRC-32C of everything after this field
    producer_entries          int32 count, then per producer:
        producer_id               int64
        epoch                     int16
        last_sequence             int32
        last_offset               int64
        offset_delta              int32
        timestamp                 int64
        coordinator_epoch         int32
        current_txn_first_offset  int64   (-1: none)

A snapshot holds the state as of its offset (every batch below it), and keeps only the last
batch of each producer, as Kafka's does.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from crc32c import crc32c

from kafkaclone.common.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import AppendOrigin, filename_prefix_from_offset, offset_from_filename
from kafkaclone.protocol.records.batch import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    RecordBatch,
)
from kafkaclone.protocol.records.common import LOG_OVERHEAD
from kafkaclone.protocol.records.record import ControlRecordType, EndTransactionMarker

logger = logging.getLogger(__name__)

PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
PRODUCER_SNAPSHOT_VERSION: Final = 1
NUM_BATCHES_TO_RETAIN: Final = 5
"""How many batches per producer the duplicate check remembers (Kafka's
ProducerStateEntry.NumBatchesToRetain; the client's max.in.flight limit with idempotence)."""

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
INT32_MAX: Final = 2**31 - 1

DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 7 * 24 * 60 * 60 * 1000
"""Kafka 2.8 expires a producer after transactional.id.expiration.ms of silence."""
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: Final = 10 * 60 * 1000

_SNAPSHOT_HEADER: Final = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY: Final = struct.Struct(">qhiqiqiq")
_CRC_OFFSET: Final = 2
_ENTRIES_OFFSET: Final = 6  # the CRC covers the bytes from here on


class CorruptSnapshotError(Exception):
    """A producer snapshot that cannot be read (Kafka's CorruptSnapshotException)."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap after Int.MaxValue."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def is_producer_snapshot_name(name: str) -> bool:
    prefix, _, suffix = name.partition(".")
    return f".{suffix}" == PRODUCER_SNAPSHOT_FILE_SUFFIX and len(prefix) == 20 and prefix.isdigit()


def has_producer_id(header: BatchHeader) -> bool:
    """Whether a v2 batch header names a producer (idempotent or transactional)."""
    return header.producer_id > NO_PRODUCER_ID


class ProducerBatch(NamedTuple):
    """What the producer state reads of one v2 batch, with the offsets the log gives it."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    first_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    end_txn_marker: EndTransactionMarker | None = None
    """The COMMIT or ABORT marker a control batch carries (None for other batches)."""

    @property
    def last_offset(self) -> int:
        return self.first_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @classmethod
    def from_header(cls, header: BatchHeader, first_offset: int | None = None,
                    max_timestamp: int | None = None,
                    batch_bytes: bytes | bytearray | memoryview | None = None
                    ) -> ProducerBatch:
        """From an unpacked v2 batch header; ``first_offset`` and ``max_timestamp`` override
        the header's (a leader's append before it writes them). A control batch's marker is
        read from ``batch_bytes`` (the whole batch)."""
        marker = None
        if header.is_control and batch_bytes is not None:
            marker = end_txn_marker_of(batch_bytes)
        return cls(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.last_offset_delta,
            header.base_offset if first_offset is None else first_offset,
            header.max_timestamp if max_timestamp is None else max_timestamp,
            header.is_transactional,
            header.is_control,
            marker,
        )


def end_txn_marker_of(batch_bytes: bytes | bytearray | memoryview) -> EndTransactionMarker | None:
    """The transaction marker of a control batch (None if its record is no COMMIT/ABORT)."""
    batch = RecordBatch(batch_bytes)
    for record in batch.records():
        if record.key is None or len(record.key) < 4:
            return None
        try:
            return EndTransactionMarker.from_record(record)
        except InvalidRecordError:
            return None
    return None


def batch_bytes_at(view: memoryview, position: int, header: BatchHeader) -> memoryview:
    """The bytes of the batch at ``position`` in ``view``."""
    return view[position:position + LOG_OVERHEAD + header.batch_length]


class TxnMetadata(NamedTuple):
    """An ongoing (or completed, not yet replicated) transaction of one producer."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker (Kafka's CompletedTxn): ``last_offset`` is the
    marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class BatchMetadata(NamedTuple):
    """A batch the producer wrote (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """One producer as a partition knows it (Kafka's ProducerStateEntry)."""

    producer_id: int
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[0].first_seq

    @property
    def first_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[0].first_offset

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batch_metadata[-1].last_seq

    @property
    def last_data_offset(self) -> int:
        return -1 if self.is_empty else self.batch_metadata[-1].last_offset

    @property
    def last_offset_delta(self) -> int:
        return 0 if self.is_empty else self.batch_metadata[-1].offset_delta

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int,
                  offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A new epoch forgets the batches of the old one."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def update(self, next_entry: ProducerStateEntry) -> None:
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        for batch in next_entry.batch_metadata:
            self._add_batch_metadata(batch)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def find_duplicate_batch(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The remembered batch with ``batch``'s epoch and exact sequence range, if any."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = batch.base_sequence, batch.last_sequence
        # last_seq is a stored field, first_seq is computed: compare the stored one first
        # (every batch of a producer in order is checked against all 5, none matching).
        for metadata in self.batch_metadata:
            if metadata.last_seq == last_seq and metadata.first_seq == first_seq:
                return metadata
        return None


class ProducerAppendInfo:
    """The state changes one append makes for one producer, checked before anything is
    written and applied after (Kafka's ProducerAppendInfo)."""

    def __init__(self, topic_partition: TopicPartition, producer_id: int,
                 current_entry: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = ProducerStateEntry(
            producer_id,
            producer_epoch=current_entry.producer_epoch,
            coordinator_epoch=current_entry.coordinator_epoch,
            last_timestamp=current_entry.last_timestamp,
            current_txn_first_offset=current_entry.current_txn_first_offset,
        )
        self.started_transactions: list[TxnMetadata] = []
        self.completed_transactions: list[CompletedTxn] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated_entry.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {producer_epoch}, which is smaller than the last "
                f"seen epoch {self.updated_entry.producer_epoch}")
            if self.origin is AppendOrigin.REPLICATION:
                logger.warning("%s", message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, append_first_seq: int, offset: int) -> None:
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if append_first_seq != 0:
                if updated.producer_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceNumberError(
                        f"Invalid sequence number for new epoch of producer "
                        f"{self.producer_id} at offset {offset} in partition "
                        f"{self.topic_partition}: {producer_epoch} (request epoch), "
                        f"{append_first_seq} (seq. number), {updated.producer_epoch} "
                        f"(current producer epoch)")
                raise UnknownProducerIdError(
                    f"Found no record of producerId={self.producer_id} on the broker at offset "
                    f"{offset} in partition {self.topic_partition}. It is possible that the "
                    f"last message with the producerId={self.producer_id} has been removed due "
                    f"to hitting the retention limit.")
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # With no epoch known (all of the producer's data deleted), any sequence is accepted.
        if not (self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
                or _in_sequence(current_last_seq, append_first_seq)):
            raise OutOfOrderSequenceNumberError(
                f"Out of order sequence number for producerId {self.producer_id} at offset "
                f"{offset} in partition {self.topic_partition}: {append_first_seq} (incoming "
                f"seq. number), {current_last_seq} (current end sequence number)")

    def append(self, batch: ProducerBatch) -> CompletedTxn | None:
        if batch.is_control:
            if batch.end_txn_marker is None:
                return None  # a control batch of another kind (or unreadable): no effect
            return self.append_end_txn_marker(batch.end_txn_marker, batch.producer_epoch,
                                              batch.first_offset, batch.max_timestamp)
        self.append_data_batch(batch)
        return None

    def append_end_txn_marker(self, marker: EndTransactionMarker, producer_epoch: int,
                              offset: int, timestamp: int) -> CompletedTxn:
        """A COMMIT or ABORT marker written by the transaction coordinator closes the
        producer's transaction (Kafka's appendEndTxnMarker). INVALID_PRODUCER_EPOCH for an
        older epoch, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset} "
                f"in partition {self.topic_partition}: {marker.coordinator_epoch} (zombie), "
                f"{updated.coordinator_epoch} (current)")
            if self.origin is AppendOrigin.REPLICATION:
                logger.info("%s", message)
            else:
                raise TransactionCoordinatorFencedError(message)
        first_offset = updated.current_txn_first_offset
        if first_offset is None:
            # A marker with no data before it (an empty transaction) is its own transaction.
            first_offset = offset
            self.started_transactions.append(TxnMetadata(self.producer_id, offset))
        updated.maybe_update_producer_epoch(producer_epoch)
        updated.current_txn_first_offset = None
        updated.coordinator_epoch = marker.coordinator_epoch
        updated.last_timestamp = timestamp
        completed = CompletedTxn(self.producer_id, first_offset, offset,
                                 marker.control_type is ControlRecordType.ABORT)
        self.completed_transactions.append(completed)
        return completed

    def append_data_batch(self, batch: ProducerBatch) -> None:
        first_offset = batch.first_offset
        self._check_producer_epoch(batch.producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(batch.producer_epoch, batch.base_sequence, first_offset)
        updated = self.updated_entry
        updated.add_batch(batch.producer_epoch, batch.last_sequence, batch.last_offset,
                          batch.last_offset - first_offset, batch.max_timestamp)
        if updated.current_txn_first_offset is not None and not batch.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}")
        if updated.current_txn_first_offset is None and batch.is_transactional:
            # Kafka 2.8: a transactional batch from a producer with no ongoing transaction
            # starts one (the coordinator added the partition before the producer sent it).
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ContinuingBatch(NamedTuple):
    """A data batch that continues a known producer's sequence in its current epoch, with
    no transaction open or started: every check of :class:`ProducerAppendInfo` passes, and
    applying it adds its metadata to the producer's entry
    (:meth:`ProducerStateManager.continuing_batch`)."""

    entry: ProducerStateEntry
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int


_NOT_PLAIN_DATA: Final = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK


class ProducerStateManager:
    """The producers of one partition, their snapshots, and the offset up to which the
    state covers the log (``map_end_offset``)."""

    def __init__(self, topic_partition: TopicPartition, log_dir: Path, *,
                 max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 load_snapshots: bool = True) -> None:
        """``load_snapshots=False``: ``log_dir`` was just created, it holds none."""
        self.topic_partition = topic_partition
        self.log_dir = log_dir
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        """Open transactions by first offset."""
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        """Completed transactions whose marker is not below the high watermark yet, by
        first offset: they still hold the last stable offset back."""
        self._snapshots: dict[int, Path] = self._load_snapshots() if load_snapshots else {}
        self._last_map_offset = 0
        self._last_snap_offset = 0

    def _load_snapshots(self) -> dict[int, Path]:
        snapshots: dict[int, Path] = {}
        if self.log_dir.is_dir():
            for name in os.listdir(self.log_dir):
                if is_producer_snapshot_name(name):
                    snapshots[offset_from_filename(name)] = self.log_dir / name
        return dict(sorted(snapshots.items()))

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.topic_partition}, producers={len(self.producers)}, "
                f"map_end_offset={self._last_map_offset})")

    # -- offsets and snapshots -----------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    @property
    def is_empty(self) -> bool:
        return not self.producers

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return next(reversed(self._snapshots), None)

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return next(iter(self._snapshots), None)

    def update_map_end_offset(self, last_offset: int) -> None:
        self._last_map_offset = last_offset

    def update_log_dir(self, log_dir: Path) -> None:
        """The partition directory was renamed (deletion): snapshots moved with it."""
        self.log_dir = log_dir
        self._snapshots = {offset: log_dir / path.name for offset, path in self._snapshots.items()}

    def take_snapshot(self) -> None:
        """Write the state as of ``map_end_offset``, unless a snapshot there exists."""
        if self._last_map_offset <= self._last_snap_offset:
            return
        path = producer_snapshot_file(self.log_dir, self._last_map_offset)
        write_snapshot(path, self.producers.values())
        logger.info("%s: wrote producer snapshot at offset %d with %d producer ids",
                    self.topic_partition, self._last_map_offset, len(self.producers))
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset

    def _latest_snapshot_file(self) -> tuple[int, Path] | None:
        if not self._snapshots:
            return None
        offset = next(reversed(self._snapshots))
        return offset, self._snapshots[offset]

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` (its segment is being deleted) and rename it
        ``.deleted``; the renamed path, for the caller to delete with the segment."""
        path = self._snapshots.pop(offset, None)
        if path is None or not path.exists():
            return None
        renamed = path.with_name(path.name + ".deleted")
        os.replace(path, renamed)
        return renamed

    def delete_snapshots_after(self, offset: int) -> None:
        """Recovery re-reads the log from ``offset``: the state must be replayed from there."""
        for snapshot_offset in [o for o in self._snapshots if o > offset]:
            self._remove_and_delete_snapshot(snapshot_offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot_offset in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snapshot_offset)

    # -- loading -------------------------------------------------------------------------

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            current_time_ms: int) -> None:
        """Drop the snapshots outside (log start offset, log end offset] and, unless the
        state already ends at ``log_end_offset``, reload it from the latest snapshot left;
        the caller then replays the log from ``map_end_offset``."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            self._clear_state()
            self._load_from_snapshot(log_start_offset, current_time_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, current_time_ms: int) -> None:
        while True:
            latest = self._latest_snapshot_file()
            if latest is None:
                self._last_snap_offset = log_start_offset
                self._last_map_offset = log_start_offset
                return
            offset, path = latest
            try:
                logger.info("%s: loading producer state from snapshot file '%s'",
                            self.topic_partition, path)
                for entry in read_snapshot(path):
                    if not self._is_producer_expired(current_time_ms, entry):
                        self._load_producer_entry(entry)
            except CorruptSnapshotError as exc:
                logger.warning("%s: failed to load producer snapshot from '%s': %s",
                               self.topic_partition, path, exc)
                self._clear_state()
                self._remove_and_delete_snapshot(offset)
                continue
            self._last_snap_offset = offset
            self._last_map_offset = offset
            return

    def _load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            first_offset = entry.current_txn_first_offset
            self.ongoing_txns[first_offset] = TxnMetadata(entry.producer_id, first_offset)

    def _clear_state(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear_state()
        for snapshot_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(snapshot_offset)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Kafka 2.8 keeps producers whose data retention removed (they expire by time);
        only the offsets move, and completed transactions below it stop counting."""
        self._remove_unreplicated_transactions(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    # -- transactions ----------------------------------------------------------------------

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        if not self.unreplicated_txns:
            return  # the usual case, after every append that moves the high watermark
        for first_offset, txn in list(self.unreplicated_txns.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self.unreplicated_txns[first_offset]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is now replicated stop holding the LSO."""
        self._remove_unreplicated_transactions(high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet both completed and replicated
        (Kafka's firstUnstableOffset); None when there is none."""
        ongoing, unreplicated = self.ongoing_txns, self.unreplicated_txns
        if not ongoing and not unreplicated:
            return None  # the usual case, asked for each partition of every fetch
        return min([*ongoing, *unreplicated])

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO once ``completed_txn`` is complete (what its index entry records): the
        first offset of another producer's open transaction, else past its marker."""
        for first_offset in sorted(self.ongoing_txns):
            if self.ongoing_txns[first_offset].producer_id != completed_txn.producer_id:
                return first_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed_txn} on partition "
                             f"{self.topic_partition} which was not started")
        self.unreplicated_txns[completed_txn.first_offset] = txn._replace(
            last_offset=completed_txn.last_offset)

    # -- expiry --------------------------------------------------------------------------

    def _is_producer_expired(self, current_time_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and current_time_ms - entry.last_timestamp >= self.max_producer_id_expiration_ms)

    def remove_expired_producers(self, current_time_ms: int) -> int:
        """Forget the producers silent for longer than the expiration; how many."""
        expired = [pid for pid, entry in self.producers.items()
                   if self._is_producer_expired(current_time_ms, entry)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- appends -------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {append_info.producer_id} passed to update "
                             f"for partition {self.topic_partition}")
        updated = append_info.updated_entry
        current = self.producers.get(append_info.producer_id)
        if current is None:
            self.producers[append_info.producer_id] = updated
        else:
            current.update(updated)
        for txn in append_info.started_transactions:
            self.ongoing_txns[txn.first_offset] = txn

    def continuing_batch(self, producer_id: int, producer_epoch: int, base_sequence: int,
                         attributes: int, last_offset_delta: int, first_offset: int,
                         max_timestamp: int, *, check_sequence: bool
                         ) -> ContinuingBatch | None:
        """The common batch, checked without :class:`ProducerAppendInfo`: a data batch
        outside transactions from a producer this partition knows, in its current epoch,
        and (``check_sequence``, a client's append) right after its last sequence, so no
        remembered batch can be its duplicate. None for anything else: a new producer or
        epoch, a gap, a retry, a transaction, a marker; :meth:`analyze_and_validate` decides
        those. Apply with :meth:`apply_continuing` once the batch is written."""
        if attributes & _NOT_PLAIN_DATA:
            return None
        entry = self.producers.get(producer_id)
        if (entry is None or entry.producer_epoch != producer_epoch or not entry.batch_metadata
                or entry.current_txn_first_offset is not None):
            return None
        if check_sequence and not _in_sequence(entry.batch_metadata[-1].last_seq,
                                               base_sequence):
            return None
        return ContinuingBatch(entry, increment_sequence(base_sequence, last_offset_delta),
                               first_offset + last_offset_delta, last_offset_delta,
                               max_timestamp)

    @staticmethod
    def apply_continuing(batches: Iterable[ContinuingBatch]) -> None:
        """What :meth:`update` does with the append info of these batches:
        :meth:`ProducerStateEntry.add_batch` in the entry's own epoch, inline."""
        for entry, last_seq, last_offset, offset_delta, timestamp in batches:
            remembered = entry.batch_metadata
            if len(remembered) == NUM_BATCHES_TO_RETAIN:
                remembered.popleft()
            remembered.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
            entry.last_timestamp = timestamp

    def analyze_and_validate(self, batches: Iterable[ProducerBatch], origin: AppendOrigin
                             ) -> tuple[dict[int, ProducerAppendInfo], BatchMetadata | None]:
        """Kafka's Log.analyzeAndValidateProducerState: check the batches of one append and
        collect their updates (not applied yet), or find that a client batch is a
        duplicate of one already written: (updates, the duplicate's metadata)."""
        updated: dict[int, ProducerAppendInfo] = {}
        for batch in batches:
            if not batch.has_producer_id:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self.producers.get(batch.producer_id)
                duplicate = None if entry is None else entry.find_duplicate_batch(batch)
                if duplicate is not None:
                    return updated, duplicate
            append_info = updated.get(batch.producer_id)
            if append_info is None:
                append_info = updated[batch.producer_id] = self.prepare_update(
                    batch.producer_id, origin)
            append_info.append(batch)
        return updated, None

    def load_batches(self, batches: Iterable[ProducerBatch],
                     on_completed_txn: Callable[[CompletedTxn, int], None] | None = None
                     ) -> None:
        """Rebuild from batches read back from the log (Kafka's loadProducersFromLog), one
        batch at a time; ``on_completed_txn(txn, last stable offset)`` for each marker."""
        for batch in batches:
            if not batch.has_producer_id:
                continue
            append_info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            completed = append_info.append(batch)
            self.update(append_info)
            if completed is not None:
                if on_completed_txn is not None:
                    on_completed_txn(completed, self.last_stable_offset(completed))
                self.complete_txn(completed)


# -- snapshot files ----------------------------------------------------------------------


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    entries = list(entries)
    buffer = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(entries))
    _SNAPSHOT_HEADER.pack_into(buffer, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(entries))
    position = _SNAPSHOT_HEADER.size
    for entry in entries:
        _SNAPSHOT_ENTRY.pack_into(
            buffer, position, entry.producer_id, entry.producer_epoch, entry.last_seq,
            entry.last_data_offset, entry.last_offset_delta, entry.last_timestamp,
            entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset)
        position += _SNAPSHOT_ENTRY.size
    struct.pack_into(">I", buffer, _CRC_OFFSET, crc32c(buffer[_ENTRIES_OFFSET:]))
    with open(path, "wb") as out:
        out.write(buffer)


def read_snapshot(path: Path) -> Iterator[ProducerStateEntry]:
    """The entries of a snapshot file; CorruptSnapshotError if it is not one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptSnapshotError(f"Cannot read {path}: {exc}") from exc
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"Snapshot is too short ({len(data)} bytes)")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[_ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
            f"Computed crc: {computed}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {count} entries in {len(data)} bytes")
    entries = []
    for index in range(count):
        (producer_id, epoch, seq, offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) = _SNAPSHOT_ENTRY.unpack_from(
            data, _SNAPSHOT_HEADER.size + index * _SNAPSHOT_ENTRY.size)
        batches: deque[BatchMetadata] = deque()
        if offset >= 0:
            batches.append(BatchMetadata(seq, offset, offset_delta, timestamp))
        entries.append(ProducerStateEntry(
            producer_id, batches, epoch, coordinator_epoch, timestamp,
            txn_first_offset if txn_first_offset >= 0 else None))
    return iter(entries)
