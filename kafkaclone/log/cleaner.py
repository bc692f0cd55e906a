"""LogCleaner: log compaction, as Kafka 2.8's LogCleaner, LogCleanerManager and Cleaner.

For a log with ``cleanup.policy=compact`` the cleaner keeps, for every key, only the record
with the highest offset. The log is seen as a clean section (compacted before, up to the
offset in ``cleaner-offset-checkpoint``), a dirty section after it, and the uncleanable
tail: the active segment, anything at or past the high watermark, and segments younger
than ``min.compaction.lag.ms``. One cleaning of a log:

1. ``LogCleanerManager.grab_filthiest_compacted_log`` picks the log whose dirty share
   (cleanable bytes / clean + cleanable bytes) is the largest among those above their
   ``min.cleanable.dirty.ratio``, or any with a record older than ``max.compaction.lag.ms``.
2. ``Cleaner`` builds the offset map (key hash -> last offset, ``SkimpyOffsetMap``) over the
   dirty section, as far as ``log.cleaner.dedupe.buffer.size`` allows.
3. The segments from the start of the log to the end of the mapped section are grouped
   (a group fits one segment: ``segment.bytes``, ``segment.index.bytes``, int32 relative
   offsets) and each group is rewritten into one new segment named ``<base>.log.cleaned``
   (with its ``.index.cleaned`` and ``.timeindex.cleaned``). A record is kept if it is past
   the mapped section, or it is the latest of its key and has a value, or it is a tombstone
   (null value) whose segment was modified after the delete horizon (the clean section's
   last modification minus ``delete.retention.ms``). Keyless records are dropped. Offsets
   never change: a batch keeps its base and last offset, attributes (compression, timestamp
   type), producer fields and timestamps; a batch that kept all its records is copied as it
   is, one that lost some is rebuilt from the raw bytes of the records it keeps
   (recompressed with its codec), one that lost all goes, except the last batch of a
   producer, kept as an empty batch so that the producer's sequence survives.
4. ``Log.replace_segments`` swaps the new segment in: ``.cleaned`` -> ``.swap``, the old
   segments renamed ``.deleted``, ``.swap`` -> live. A crash at any point is repaired when
   the log is loaded (``.cleaned`` files deleted, a ``.swap`` segment completed).
5. The end of the mapped section becomes the log's entry in ``cleaner-offset-checkpoint``,
   and a summary is logged, as Kafka's ``log-cleaner.log`` shows it.

Threads and processes. Like Kafka, ``log.cleaner.threads`` threads clean, each with its
own offset map. The log's segment list belongs to the reactor thread, so a cleaner thread
touches broker state only through ``run_on_owner`` (``blockingCallFromThread`` in a
broker): choosing the log and noting the segments to clean (path, size, modification
time), swapping each cleaned segment in, and writing the checkpoint; each is short. The
expensive part, reading every non-active segment, building the map and writing the
``.cleaned`` files (``rewrite_segments``), works only on files nobody else writes, so the
append path takes no lock. In a broker (``CleanerConfig.use_process``) each cleaner thread
has that part done by a process of its own (``multiprocessing``, spawned) and just waits
for it: run in the thread, its Python and numpy work would hold the interpreter lock the
reactor needs, and measured produce throughput fell to about half while a log was being
cleaned (``benchmarks/bench_cleaner.py``). Tests run it in the calling thread.

Since the reactor may change the log meanwhile (retention deletes segments, a follower
truncates, the partition is deleted), a swap is refused when any of the segments it
replaces left the log or changed size, when the log was truncated since the cleaning
started, or when it was closed; the ``.cleaned`` files are then deleted and the cleaning
starts over later. Topic-level settings are read from the log's config when a cleaning
starts, so a dynamic change takes effect at the next cleaning.

Transactions (Kafka's CleanedTransactionMetadata). The first uncleanable offset is at
most the log's first unstable offset, so an ongoing transaction's records are never
cleaned. The log's aborted transactions (its ``.txnindex`` entries, collected when the
cleaning starts) are left out of the offset map, so they never hide a committed value, and
their batches are removed. A marker goes once nothing before it needs it and its segment is
past the delete horizon (as tombstones): an abort marker when no record of its transaction
is left (a cleaning that removes some keeps the marker and its ``.txnindex`` entry, the
next one removes it), a commit marker when no batch of its transaction was seen in the
group. The last data batch of each producer (or its last marker, if it wrote no data) is
kept, empty if need be.

Test crash points (``log.common.crash_point``): with ``KAFKACLONE_TEST_CRASH_POINT_FILE``
set, a broker can be made to kill -9 itself while writing ``.cleaned`` files, after the
``.swap`` rename or between the ``.deleted`` renames of a swap; off otherwise.

Key extraction is columnar (``log.record_scan``): the records of many batches are decoded
field by field with numpy, and keys are hashed the same way; no Python code runs per record
except for the few records that rebuilt batches keep.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.pool
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from crc32c import crc32c

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import KafkaError, KafkaStorageError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import OffsetCheckpointFile
from kafkaclone.log.common import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, crash_point
from kafkaclone.log.config import LONG_MAX, LogConfig
from kafkaclone.log.file_records import FileRecords
from kafkaclone.log.record_scan import Int64Array, ScannedBatch, UInt64Array, scan_records
from kafkaclone.log.segment import LogSegment, log_file, offset_index_file, time_index_file
from kafkaclone.log.transaction_index import (
    AbortedTxn,
    transaction_index_file,
)
from kafkaclone.protocol.records.batch import (
    CONTROL_FLAG_MASK,
    HEADER,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
)
from kafkaclone.protocol.records.compression import Codec, compress
from kafkaclone.protocol.records.record import (
    ControlRecordType,
    decode_control_record_key,
    decode_record,
)

if TYPE_CHECKING:
    from kafkaclone.log.log import Log
    from kafkaclone.log.manager import LogManager

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_INT32_MAX: Final = 2**31 - 1
_HASH_AND_OFFSET_BYTES: Final = 16
"""A map entry: an 8-byte key hash and an 8-byte offset (Kafka's: a 16-byte MD5 and 8)."""
_READ_CHUNK_BYTES: Final = 8 * 1024 * 1024
"""Bytes of batches scanned at a time (numpy amortises its per-call cost over them)."""
_READ_CHUNK_RECORDS: Final = 65536
_CRC_START: Final = 21
_ATTRIBUTES_OFFSET: Final = 21

T = TypeVar("T")
BoolArray = npt.NDArray[np.bool_]


class RunOnOwner(Protocol):
    """Run a function on the thread owning the logs (the reactor) and return its result."""

    def __call__(self, function: Callable[[], T]) -> T: ...


def run_here(function: Callable[[], T]) -> T:
    """``RunOnOwner`` for a caller that is the owning thread already (tests)."""
    return function()


class LogCleaningAbortedError(KafkaError):
    """The log changed under a cleaning (or the cleaner stops): the cleaning is dropped."""


# -- configuration --------------------------------------------------------------------------


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (Kafka's CleanerConfig)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 32 * 1024 * 1024
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    enable_cleaner: bool = True
    use_process: bool = False
    """Rewrite in a process per cleaner thread (see CleanerThread); a broker sets it."""


# -- the offset map ---------------------------------------------------------------------------


class SkimpyOffsetMap:
    """Key hash -> the highest offset seen for the key (Kafka's SkimpyOffsetMap), held as
    two sorted numpy arrays and filled and queried an array at a time. It holds at most
    ``slots * load_factor`` keys, ``slots`` being ``memory`` / 16 bytes."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory // _HASH_AND_OFFSET_BYTES, 1)
        self.max_size = max(int(self.slots * load_factor), 1)
        self._hashes: UInt64Array = np.zeros(0, dtype=np.uint64)
        self._offsets: Int64Array = np.zeros(0, dtype=np.int64)
        self.latest_offset = -1
        """The last offset mapped (records after it are kept whatever their key)."""

    @property
    def size(self) -> int:
        return len(self._hashes)

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._offsets = np.zeros(0, dtype=np.int64)
        self.latest_offset = -1

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def put_all(self, hashes: UInt64Array, offsets: Int64Array) -> int:
        """Map each hash to its offset (``offsets`` increasing, later ones win) until the
        map is full. Returns how many of the records (a prefix) were put."""
        n = len(hashes)
        if n == 0:
            return 0
        taken = n
        unique, first_seen = np.unique(hashes, return_index=True)
        new = ~self._contains(unique)
        new_count = int(new.sum())
        room = self.max_size - self.size
        if new_count > room:
            firsts = np.sort(first_seen[new])
            taken = int(firsts[room]) if room >= 0 else 0
        if taken == 0:
            return 0
        hashes = np.concatenate([self._hashes, hashes[:taken]])
        offsets = np.concatenate([self._offsets, offsets[:taken]])
        order = np.argsort(hashes, kind="stable")
        hashes = hashes[order]
        offsets = offsets[order]
        last_of_run = np.ones(len(hashes), dtype=bool)
        last_of_run[:-1] = hashes[1:] != hashes[:-1]
        self._hashes = hashes[last_of_run]
        self._offsets = offsets[last_of_run]
        return taken

    def _contains(self, hashes: UInt64Array) -> BoolArray:
        if not self.size:
            return np.zeros(len(hashes), dtype=bool)
        index = np.minimum(np.searchsorted(self._hashes, hashes), self.size - 1)
        found: BoolArray = self._hashes[index] == hashes
        return found

    def get_all(self, hashes: UInt64Array) -> Int64Array:
        """The offset mapped for each hash, -1 where there is none."""
        if not self.size:
            return np.full(len(hashes), -1, dtype=np.int64)
        index = np.minimum(np.searchsorted(self._hashes, hashes), self.size - 1)
        return np.where(self._hashes[index] == hashes, self._offsets[index], -1)

    def get(self, key_hash: int) -> int:
        return int(self.get_all(np.asarray([key_hash], dtype=np.uint64))[0])


# -- throttling and stats -------------------------------------------------------------------


class Throttler:
    """Sleep to keep the cleaner's I/O under ``log.cleaner.io.max.bytes.per.second``
    (Kafka's Throttler, checked every 300 ms)."""

    def __init__(self, bytes_per_second: float, check_interval_s: float = 0.3) -> None:
        self._rate = bytes_per_second
        self._interval = check_interval_s
        self._period_start = time.monotonic()
        self._observed = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if self._rate == float("inf"):
            return
        self._observed += observed
        now = time.monotonic()
        elapsed = now - self._period_start
        if elapsed > self._interval and self._observed > 0:
            if self._observed / elapsed > self._rate:
                time.sleep(self._observed / self._rate - elapsed)
            self._period_start = time.monotonic()
            self._observed = 0.0


@dataclass
class CleanerStats:
    """What one cleaning read and wrote (Kafka's CleanerStats)."""

    start_time: float = field(default_factory=time.monotonic)
    map_complete_time: float = 0.0
    end_time: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    invalid_messages_read: int = 0
    messages_written: int = 0
    buffer_utilization: float = 0.0

    def index_done(self) -> None:
        self.map_complete_time = time.monotonic()

    def all_done(self) -> None:
        self.end_time = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return max(self.end_time - self.start_time, 1e-9)

    @property
    def elapsed_index_secs(self) -> float:
        return max(self.map_complete_time - self.start_time, 1e-9)


def _mb(n: float) -> float:
    return n / (1024 * 1024)


def format_stats(thread_id: int, name: str, start: int, end: int, stats: CleanerStats) -> str:
    """Kafka's per-cleaning summary (LogCleaner.recordStats), as log-cleaner.log shows it."""
    elapsed = stats.elapsed_secs
    index_secs = stats.elapsed_index_secs
    clean_secs = max(elapsed - index_secs, 1e-9)
    read = stats.bytes_read
    return (
        f"\n\tLog cleaner thread {thread_id} cleaned log {name} (dirty section = "
        f"[{start}, {end}])\n"
        f"\t{_mb(read):,.1f} MB of log processed in {elapsed:,.1f} seconds "
        f"({_mb(read / elapsed):,.1f} MB/sec).\n"
        f"\tIndexed {_mb(stats.map_bytes_read):,.1f} MB in {index_secs:.1f} seconds "
        f"({_mb(stats.map_bytes_read) / index_secs:,.1f} Mb/sec, "
        f"{100 * index_secs / elapsed:.1f}% of total time)\n"
        f"\tBuffer utilization: {100 * stats.buffer_utilization:.1f}%\n"
        f"\tCleaned {_mb(read):,.1f} MB in {clean_secs:.1f} seconds "
        f"({_mb(read) / clean_secs:,.1f} Mb/sec, {100 * clean_secs / elapsed:.1f}% of total "
        f"time)\n"
        f"\tStart size: {_mb(read):,.1f} MB ({stats.messages_read:,d} messages)\n"
        f"\tEnd size: {_mb(stats.bytes_written):,.1f} MB ({stats.messages_written:,d} "
        f"messages)\n"
        f"\t{100.0 * (1.0 - stats.bytes_written / max(read, 1)):.1f}% size reduction "
        f"({100.0 * (1.0 - stats.messages_written / max(stats.messages_read, 1)):.1f}% fewer "
        f"messages)\n"
    )


# -- what a cleaning works on ----------------------------------------------------------------


@dataclass(frozen=True)
class SegmentFile:
    """A non-active segment's ``.log`` file as it was when the cleaning started: what the
    rewriting needs of it, picklable for a cleaner process."""

    base_offset: int
    path: Path
    size: int
    last_modified_ms: int
    offset_index_bytes: int
    time_index_bytes: int

    def open(self) -> FileRecords:
        """A read-only handle on the file, also if retention renamed it ``.deleted``
        meanwhile (the swap will be refused then)."""
        try:
            return FileRecords(self.path, read_only=True)
        except FileNotFoundError:
            return FileRecords(self.path.with_name(self.path.name + DELETED_FILE_SUFFIX),
                               read_only=True)


@dataclass(frozen=True)
class CleaningPlan:
    """Everything the rewriting of one log needs, picklable for a cleaner process."""

    log_name: str
    directory: Path
    config: LogConfig
    first_dirty_offset: int
    first_uncleanable_offset: int
    segments: tuple[SegmentFile, ...]
    map_memory: int
    map_load_factor: float
    io_buffer_size: int
    max_io_bytes_per_second: float
    aborted_txns: tuple[AbortedTxn, ...] = ()
    """The log's aborted transactions that began below the first uncleanable offset, from
    every segment's ``.txnindex`` (a marker may sit past the cleanable section)."""


@dataclass
class RewriteResult:
    """What the rewriting produced: the new first dirty offset, the stats, and for each
    ``<base>.log.cleaned`` written the base offsets of the segments it replaces."""

    end_offset: int
    stats: CleanerStats
    groups: list[list[int]]


@dataclass
class LogToClean:
    """A compacted log and its sections (Kafka's LogToClean), plus the snapshot of its
    non-active segments below the first uncleanable offset."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    needs_compaction_now: bool = False
    clean_bytes: int = 0
    cleanable_bytes: int = 0
    config: LogConfig = field(default_factory=LogConfig)
    segments: dict[int, tuple[LogSegment, SegmentFile]] = field(default_factory=dict)
    truncations: int = 0
    aborted_txns: tuple[AbortedTxn, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _segments_overlapping(segments: Sequence[LogSegment], start: int, end: int
                          ) -> list[LogSegment]:
    """Kafka's logSegments(from, to): the segment holding ``start`` and those after it
    that begin below ``end``."""
    chosen: list[LogSegment] = []
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= end:
            break
        if next_base is not None and next_base <= start:
            continue
        chosen.append(segment)
    return chosen


def cleanable_offsets(log: Log, last_clean_offset: int | None, now: int
                      ) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, checkpoint needs a reset), as
    Kafka's LogCleanerManager.cleanableOffsets."""
    log_start = log.log_start_offset
    checkpointed = log_start if last_clean_offset is None else last_clean_offset
    force_update = False
    if checkpointed < log_start:
        if not log.config.delete:
            logger.warning("Resetting first dirty offset of %s to log start offset %d since "
                           "the checkpointed offset %d is invalid.", log.name, log_start,
                           checkpointed)
        first_dirty, force_update = log_start, True
    elif checkpointed > log.log_end_offset:
        logger.warning("The last checkpoint dirty offset for partition %s is %d, which is "
                       "larger than the log end offset %d. Resetting to the log start "
                       "offset %d.", log.name, checkpointed, log.log_end_offset, log_start)
        first_dirty, force_update = log_start, True
    else:
        first_dirty = checkpointed
    segments = log.log_segments
    candidates = [log.high_watermark, segments[-1].base_offset]
    first_unstable = log.first_unstable_offset
    if first_unstable is not None:  # ongoing transactions are never cleaned
        candidates.append(first_unstable)
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in _segments_overlapping(segments[:-1], first_dirty, LONG_MAX):
            if segment.largest_timestamp > now - min_lag:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates)), force_update


def max_compaction_delay(log: Log, first_dirty_offset: int, now: int) -> int:
    """How far past max.compaction.lag.ms the oldest dirty record is (0 if it is not)."""
    max_lag = max(log.config.max_compaction_lag_ms, 0)
    if max_lag >= LONG_MAX:
        return 0
    segments = log.log_segments
    earliest = LONG_MAX
    for segment in _segments_overlapping(segments[:-1], first_dirty_offset, LONG_MAX):
        for _, header in segment.log.iter_headers(0):
            if header.max_timestamp > 0:
                earliest = min(earliest, header.max_timestamp)
            break
    clean_until = now - max_lag
    return clean_until - earliest if earliest < clean_until else 0


# -- the cleaner manager ---------------------------------------------------------------------


class LogCleanerManager:
    """Which logs need cleaning, which are being cleaned, and the cleaner checkpoints
    (Kafka's LogCleanerManager). Every method runs on the thread owning the logs."""

    def __init__(self, log_manager: LogManager, clock: Scheduler) -> None:
        self._log_manager = log_manager
        self._clock = clock
        self._in_progress: dict[TopicPartition, LogToClean] = {}
        self._aborted: set[TopicPartition] = set()
        self.uncleanable_partitions: set[TopicPartition] = set()
        self.dirtiest_log_cleanable_ratio = 0.0

    def checkpoint_file(self, directory: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(directory / CLEANER_OFFSET_CHECKPOINT)

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        offsets: dict[TopicPartition, int] = {}
        for directory in self._log_manager.live_log_dirs:
            try:
                offsets.update(self.checkpoint_file(directory).read())
            except KafkaStorageError as exc:
                logger.warning("Failed to access checkpoint file %s in dir %s: %s",
                               CLEANER_OFFSET_CHECKPOINT, directory, exc)
        return offsets

    def update_checkpoints(self, directory: Path, update: tuple[TopicPartition, int] | None
                           ) -> None:
        """Write ``update`` into ``directory``'s checkpoint, keeping only logs that live
        there."""
        file = self.checkpoint_file(directory)
        try:
            offsets = file.read()
        except KafkaStorageError:
            offsets = {}
        if update is not None:
            offsets[update[0]] = update[1]
        logs = self._log_manager.logs_by_topic_partition
        file.write({tp: offset for tp, offset in offsets.items()
                    if tp in logs and logs[tp].dir.parent == directory})

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The compacted log most in need of cleaning, marked in progress, with read-only
        descriptors on its cleanable segments; None if no log needs cleaning."""
        now = now_ms(self._clock)
        last_clean = self.all_cleaner_checkpoints()
        candidates: list[LogToClean] = []
        for tp, log in self._log_manager.logs_by_topic_partition.items():
            if (not log.config.compact or tp in self._in_progress
                    or tp in self.uncleanable_partitions or log.closed):
                continue
            try:
                first_dirty, uncleanable, force = cleanable_offsets(log, last_clean.get(tp), now)
                if force:
                    self.update_checkpoints(log.dir.parent, (tp, first_dirty))
                delay = max_compaction_delay(log, first_dirty, now)
            except KafkaError as exc:
                logger.error("Failed to calculate log cleaning stats for partition %s: %s",
                             tp, exc)
                continue
            segments = log.log_segments
            clean = _segments_overlapping(segments, -1, first_dirty)
            dirty = _segments_overlapping(segments, first_dirty, uncleanable)
            candidate = LogToClean(
                tp, log, first_dirty, uncleanable, delay > 0,
                clean_bytes=sum(s.size for s in clean),
                cleanable_bytes=sum(s.size for s in dirty) if uncleanable > first_dirty else 0,
            )
            if candidate.total_bytes > 0:
                candidates.append(candidate)
        self.dirtiest_log_cleanable_ratio = max(
            (c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [
            c for c in candidates
            if (c.needs_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
        self._snapshot(filthiest)
        self._in_progress[filthiest.topic_partition] = filthiest
        return filthiest

    @staticmethod
    def _snapshot(job: LogToClean) -> None:
        log = job.log
        job.config = log.config
        job.truncations = log.truncations
        job.aborted_txns = tuple(sorted(
            (txn for segment in log.log_segments for txn in segment.txn_index.all_aborted_txns()
             if txn.first_offset < job.first_uncleanable_offset),
            key=lambda txn: txn.first_offset))
        for segment in log.log_segments[:-1]:
            if segment.base_offset >= job.first_uncleanable_offset:
                break
            job.segments[segment.base_offset] = (segment, SegmentFile(
                segment.base_offset, segment.log.path, segment.size,
                segment.last_modified_ms(), segment.offset_index.entries * 8,
                segment.time_index.entries * 12,
            ))

    def check_swap(self, job: LogToClean, old_base_offsets: Sequence[int]) -> list[LogSegment]:
        """The segments a cleaned segment replaces; LogCleaningAbortedError unless they
        are still in the log, unchanged, and the log was not truncated or closed."""
        log = job.log
        tp = job.topic_partition
        if tp in self._aborted or log.closed or log.truncations != job.truncations:
            raise LogCleaningAbortedError(f"The cleaning of {tp} was aborted")
        old = [job.segments[base] for base in old_base_offsets]
        if not log.has_segments([segment for segment, _ in old]) or any(
            segment.size != file.size for segment, file in old
        ):
            raise LogCleaningAbortedError(
                f"The segments of {tp} being cleaned changed during the cleaning")
        return [segment for segment, _ in old]

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Drop the cleaning of ``tp`` in progress, if any (its swap will be refused)."""
        if tp in self._in_progress:
            self._aborted.add(tp)

    def done_cleaning(self, job: LogToClean, end_offset: int | None) -> None:
        """The cleaning finished (``end_offset``: the new first dirty offset) or failed
        (None)."""
        tp = job.topic_partition
        self._in_progress.pop(tp, None)
        aborted = tp in self._aborted
        self._aborted.discard(tp)
        if end_offset is not None and not aborted and not job.log.closed:
            self.update_checkpoints(job.log.dir.parent, (tp, end_offset))

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        self.uncleanable_partitions.add(tp)


# -- the cleaner -----------------------------------------------------------------------------


@dataclass
class _ReadBatch:
    header: BatchHeader
    view: memoryview


def _read_chunks(reader: FileRecords) -> Iterator[list[_ReadBatch]]:
    """The reader's batches, in lists of about 8 MiB or 64K records (arrays of that size
    stay in the CPU's caches while numpy makes its passes over them)."""
    chunk: list[_ReadBatch] = []
    size = 0
    records = 0
    for _, header, view in reader.iter_batches(0):
        chunk.append(_ReadBatch(header, view))
        size += len(view)
        records += header.records_count
        if size >= _READ_CHUNK_BYTES or records >= _READ_CHUNK_RECORDS:
            yield chunk
            chunk = []
            size = 0
            records = 0
    if chunk:
        yield chunk


def _scanned(batch: _ReadBatch) -> ScannedBatch:
    h = batch.header
    return ScannedBatch(h.base_offset, h.attributes, h.base_timestamp, h.max_timestamp,
                        h.records_count, batch.view)


def group_segments_by_size(segments: Sequence[SegmentFile], max_size: int,
                           max_index_size: int, first_uncleanable_offset: int
                           ) -> list[list[SegmentFile]]:
    """Consecutive segments grouped so that each group fits one segment (Kafka's
    groupSegmentsBySize): log bytes <= segment.bytes, each index <= segment.index.bytes,
    offsets within int32 of the group's base."""
    groups: list[list[SegmentFile]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index_bytes
        time_index_size = segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            nxt = segments[i]
            last_offset = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                           else first_uncleanable_offset - 1)
            if (log_size + nxt.size > max_size
                    or index_size + nxt.offset_index_bytes > max_index_size
                    or time_index_size + nxt.time_index_bytes > max_index_size
                    or last_offset - group[0].base_offset > _INT32_MAX):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index_bytes
            time_index_size += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


class ProducerLastOffsets:
    """Per producer id, the last offset of its last data batch and of its last batch
    below the uncleanable offset. Such batches are kept (empty if need be) so that the
    producer's state survives (Kafka's lastRecordsOfActiveProducers): its last data batch
    (sequence), or, if it wrote only markers there, its last marker (epoch)."""

    def __init__(self) -> None:
        self.last_data: dict[int, int] = {}
        self.last_batch: dict[int, int] = {}

    def note(self, h: BatchHeader) -> None:
        if h.producer_id < 0:
            return
        last = h.base_offset + h.last_offset_delta
        self.last_batch[h.producer_id] = last
        if not h.attributes & CONTROL_FLAG_MASK:
            self.last_data[h.producer_id] = last

    def keeps_data(self, h: BatchHeader) -> bool:
        return h.producer_id >= 0 and self.last_data.get(h.producer_id) == h.last_offset

    def keeps_marker(self, h: BatchHeader) -> bool:
        return (h.producer_id >= 0 and h.producer_id not in self.last_data
                and self.last_batch.get(h.producer_id) == h.last_offset)


@dataclass
class _AbortedTxnMetadata:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """What the cleaning of one group knows of transactions, fed the batches in offset
    order (Kafka's CleanedTransactionMetadata): ``aborted`` are the aborted transactions
    overlapping the group, from the transaction indexes."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda txn: txn.first_offset, reverse=True)
        self._ongoing_aborted: dict[int, _AbortedTxnMetadata] = {}
        self._ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []
        """The aborted transactions the cleaned segment's ``.txnindex`` must list."""

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._pending and self._pending[-1].first_offset <= offset:
            txn = self._pending.pop()
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnMetadata(txn))

    def on_control_batch_read(self, h: BatchHeader, control_type: ControlRecordType | None
                              ) -> bool:
        """Whether the marker may go: an abort marker once no record of its transaction is
        left (it stays, indexed, while this cleaning removes some), a commit marker when
        no batch of its transaction was seen here. An empty control batch may go."""
        self._consume_aborted_txns_up_to(h.last_offset)
        if control_type is None:
            return True
        if control_type == ControlRecordType.ABORT:
            metadata = self._ongoing_aborted.pop(h.producer_id, None)
            if metadata is not None and metadata.last_observed_batch_offset is not None:
                self.cleaned_index.append(metadata.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if h.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (and so goes)."""
        self._consume_aborted_txns_up_to(h.last_offset)
        if not h.attributes & TRANSACTIONAL_FLAG_MASK:
            return False
        metadata = self._ongoing_aborted.get(h.producer_id)
        if metadata is not None:
            metadata.last_observed_batch_offset = h.last_offset
            return True
        self._ongoing_committed.add(h.producer_id)
        return False


def _control_type(batch: _ReadBatch) -> ControlRecordType | None:
    """The type of a control batch's record; None for a batch without records."""
    if batch.header.records_count == 0:
        return None
    record, _ = decode_record(batch.view, RECORD_BATCH_OVERHEAD)
    return decode_control_record_key(record.key)


def _empty_batch_header(h: BatchHeader) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader: the batch's offsets, producer fields
    and max timestamp, no records, no compression."""
    attributes = h.attributes & ~COMPRESSION_CODEC_MASK
    out = bytearray(HEADER.pack(
        h.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
        attributes, h.last_offset_delta, h.max_timestamp, h.max_timestamp, h.producer_id,
        h.producer_epoch, h.base_sequence, 0))
    struct.pack_into(">I", out, 17, crc32c(out[_CRC_START:]))
    return bytes(out)


def _rebuilt_batch(h: BatchHeader, records: bytes, count: int, max_timestamp: int) -> bytes:
    """The batch with header ``h`` holding only ``records`` (their raw bytes, offset and
    timestamp deltas unchanged, so base offset, last offset delta and base timestamp stay):
    recompressed with the batch's codec, count and max timestamp updated, new CRC."""
    codec = h.attributes & COMPRESSION_CODEC_MASK
    payload = compress(Codec.from_id(codec), records) if codec else records
    if h.attributes & TIMESTAMP_TYPE_MASK:
        max_timestamp = h.max_timestamp
    header = bytearray(HEADER.pack(
        h.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        h.partition_leader_epoch, 2, 0, h.attributes, h.last_offset_delta, h.base_timestamp,
        max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, count))
    crc = crc32c(payload, crc32c(header[_ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + payload


class _WallClock:
    """The clock a cleaned segment is created with in a cleaner process."""

    def seconds(self) -> float:
        return time.time()

    def callLater(self, delay: float, callable: object, *args: object,
                  **kw: object) -> object:
        raise NotImplementedError("a cleaner process schedules nothing")


def rewrite_segments(plan: CleaningPlan,
                     check_done: Callable[[], None] = lambda: None) -> RewriteResult:
    """The expensive part of a cleaning, touching no broker state (a cleaner process runs
    it): build the offset map over the dirty section and write each group of segments into
    ``<base>.log.cleaned`` files, flushed."""
    return _Rewriter(plan, check_done).run()


class _Rewriter:
    def __init__(self, plan: CleaningPlan, check_done: Callable[[], None]) -> None:
        self.plan = plan
        self.offset_map = SkimpyOffsetMap(plan.map_memory, plan.map_load_factor)
        self._check_done = check_done
        self._io_buffer_size = max(plan.io_buffer_size, RECORD_BATCH_OVERHEAD)
        self._throttler = Throttler(plan.max_io_bytes_per_second)
        self._clock = _WallClock()
        self._aborted: dict[int, list[tuple[int, int]]] = {}
        for entry in plan.aborted_txns:
            self._aborted.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset))

    def _is_aborted(self, h: BatchHeader) -> bool:
        """A data batch of an aborted transaction (its records never count as a key's
        latest value: a read_committed consumer does not see them)."""
        if not h.attributes & TRANSACTIONAL_FLAG_MASK:
            return False
        return any(first <= h.base_offset <= last
                   for first, last in self._aborted.get(h.producer_id, ()))

    def run(self) -> RewriteResult:
        plan = self.plan
        stats = CleanerStats()
        readers = {s.base_offset: s.open() for s in plan.segments}
        try:
            self._build_offset_map(readers, stats)
            end_offset = self.offset_map.latest_offset + 1
            stats.index_done()
            clean_section = [s for s in plan.segments
                             if s.base_offset < plan.first_dirty_offset]
            delete_horizon_ms = (
                clean_section[-1].last_modified_ms - plan.config.delete_retention_ms
                if clean_section else 0
            )
            logger.info("Cleaning log %s (discarding tombstones prior to %d)...",
                        plan.log_name, delete_horizon_ms)
            producer_last_offsets = self._producer_last_offsets(readers)
            to_clean = [s for s in plan.segments if s.base_offset < end_offset]
            groups = group_segments_by_size(to_clean, plan.config.segment_bytes,
                                            plan.config.segment_index_bytes,
                                            plan.first_uncleanable_offset)
            written: list[list[int]] = []
            try:
                for group in groups:
                    self._clean_segments(group, readers, delete_horizon_ms,
                                         producer_last_offsets, stats)
                    written.append([s.base_offset for s in group])
            except Exception:
                for bases in written:
                    delete_cleaned_files(plan.directory, bases[0])
                raise
        finally:
            for reader in readers.values():
                reader.close_without_trim()
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return RewriteResult(end_offset, stats, written)

    # -- the offset map --

    def _build_offset_map(self, readers: Mapping[int, FileRecords],
                          stats: CleanerStats) -> None:
        plan = self.plan
        start, end = plan.first_dirty_offset, plan.first_uncleanable_offset
        segments = plan.segments
        logger.info("Building offset map for log %s in offset range [%d, %d).",
                    plan.log_name, start, end)
        for i, segment in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else end
            if segment.base_offset >= end or next_base <= start:
                continue
            for chunk in _read_chunks(readers[segment.base_offset]):
                self._check_done()
                if self._map_chunk(chunk, start, end, stats):
                    logger.debug("Offset map is full, segment with base offset %d is "
                                 "partially mapped", segment.base_offset)
                    return
        logger.info("Offset map for log %s complete.", plan.log_name)

    def _map_chunk(self, chunk: list[_ReadBatch], start: int, end: int,
                   stats: CleanerStats) -> bool:
        """Put the keys of a chunk of batches into the map; True if the map is full."""
        offset_map = self.offset_map
        data = [b for b in chunk
                if b.header.last_offset >= start and b.header.base_offset < end
                and not b.header.attributes & CONTROL_FLAG_MASK
                and not self._is_aborted(b.header)]
        chunk_bytes = sum(len(b.view) for b in chunk)
        stats.map_bytes_read += chunk_bytes
        self._throttler.maybe_throttle(chunk_bytes)
        if data:
            scan = scan_records([_scanned(b) for b in data])
            stats.map_messages_read += scan.count
            selected = (scan.offsets >= start) & (scan.offsets < end) & (scan.key_lengths >= 0)
            offsets = scan.offsets[selected]
            hashes = scan.key_hashes()[selected]
            taken = offset_map.put_all(hashes, offsets)
            if taken < len(offsets):
                offset_map.update_latest_offset(int(offsets[taken]) - 1)
                return True
        for b in chunk:
            last = b.header.base_offset + b.header.last_offset_delta
            if start <= last and b.header.base_offset < end:
                offset_map.update_latest_offset(min(last, end - 1))
        return False

    @staticmethod
    def _producer_last_offsets(readers: Mapping[int, FileRecords]) -> ProducerLastOffsets:
        last = ProducerLastOffsets()
        for base in sorted(readers):
            for _, header in readers[base].iter_headers(0):
                last.note(header)
        return last

    # -- rewriting --

    def _clean_segments(self, group: list[SegmentFile], readers: Mapping[int, FileRecords],
                        delete_horizon_ms: int, producer_last_offsets: ProducerLastOffsets,
                        stats: CleanerStats) -> None:
        plan = self.plan
        base_offset = group[0].base_offset
        delete_cleaned_files(plan.directory, base_offset)
        cleaned = LogSegment.open(plan.directory, base_offset, plan.config, self._clock,
                                  file_suffix=CLEANED_FILE_SUFFIX)
        bases = [s.base_offset for s in plan.segments]
        position = bases.index(group[-1].base_offset)
        upper_bound = (bases[position + 1] if position + 1 < len(bases)
                       else plan.first_uncleanable_offset)
        transactions = CleanedTransactionMetadata(
            [txn for txn in plan.aborted_txns
             if txn.first_offset < upper_bound and txn.last_offset >= base_offset])
        try:
            for segment in group:
                retain_deletes = segment.last_modified_ms > delete_horizon_ms
                logger.info("Cleaning segment %d in log %s into %d with deletion horizon %d, "
                            "%s deletes.", segment.base_offset, plan.log_name, base_offset,
                            delete_horizon_ms, "retaining" if retain_deletes else "discarding")
                self._clean_into(readers[segment.base_offset], cleaned, retain_deletes,
                                 producer_last_offsets, transactions, stats)
            # Aborted transactions whose marker is kept, with records in this group, stay
            # indexed for read_committed fetches (Kafka's cleanedIndex).
            for entry in transactions.cleaned_index:
                cleaned.txn_index.append(entry)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.log.set_last_modified_ms(group[-1].last_modified_ms)
        except Exception:
            cleaned.close_handlers()
            cleaned.delete_if_exists()
            raise
        cleaned.close_handlers()

    def _clean_into(self, source: FileRecords, dest: LogSegment, retain_deletes: bool,
                    producer_last_offsets: ProducerLastOffsets,
                    transactions: CleanedTransactionMetadata, stats: CleanerStats) -> None:
        latest = self.offset_map.latest_offset
        out = bytearray()
        for chunk in _read_chunks(source):
            self._check_done()
            chunk_bytes = sum(len(b.view) for b in chunk)
            stats.bytes_read += chunk_bytes
            self._throttler.maybe_throttle(chunk_bytes)
            # Kafka's shouldDiscardBatch, batch by batch in offset order: records of aborted
            # transactions go; a marker goes once nothing before it needs it and the
            # segment is past the delete horizon.
            discard = [
                (transactions.on_control_batch_read(b.header, _control_type(b))
                 and not retain_deletes)
                if b.header.attributes & CONTROL_FLAG_MASK
                else transactions.on_batch_read(b.header)
                for b in chunk
            ]
            data_index = [i for i, b in enumerate(chunk)
                          if not b.header.attributes & CONTROL_FLAG_MASK and not discard[i]]
            scan = scan_records([_scanned(chunk[i]) for i in data_index])
            stats.messages_read += scan.count
            offsets = scan.offsets
            found = self.offset_map.get_all(scan.key_hashes())
            has_key = scan.key_lengths >= 0
            keep = (offsets > latest) | (
                has_key & (offsets >= found) & ((scan.value_lengths >= 0) | retain_deletes))
            stats.invalid_messages_read += int((~has_key).sum())
            kept_counts = np.bincount(scan.batch_of, weights=keep,
                                      minlength=len(data_index)).astype(np.int64).tolist()
            row_starts = np.zeros(len(data_index) + 1, dtype=np.int64)
            np.cumsum([chunk[i].header.records_count for i in data_index], out=row_starts[1:])
            scanned_of = {chunk_index: n for n, chunk_index in enumerate(data_index)}
            for i, batch in enumerate(chunk):
                h = batch.header
                n = scanned_of.get(i)
                if h.attributes & CONTROL_FLAG_MASK:
                    if not discard[i] or producer_last_offsets.keeps_marker(h):
                        out += batch.view
                        stats.messages_written += h.records_count
                    continue
                if n is None:  # a batch of an aborted transaction
                    stats.messages_read += h.records_count
                    if producer_last_offsets.keeps_data(h):
                        out += _empty_batch_header(h)
                    continue
                kept = kept_counts[n]
                if kept == h.records_count:
                    out += batch.view
                elif kept == 0:
                    if producer_last_offsets.keeps_data(h):
                        out += _empty_batch_header(h)
                else:
                    lo, hi = int(row_starts[n]), int(row_starts[n + 1])
                    rows = lo + np.flatnonzero(keep[lo:hi])
                    starts = scan.record_starts[rows].tolist()
                    ends = scan.record_ends[rows].tolist()
                    raw = scan.data
                    records = b"".join([raw[s:e] for s, e in zip(starts, ends, strict=True)])
                    max_timestamp = int(scan.timestamps[rows].max())
                    out += _rebuilt_batch(h, records, kept, max_timestamp)
                stats.messages_written += kept
                if len(out) >= self._io_buffer_size:
                    self._append(dest, out, stats)
                    out = bytearray()
        if out:
            self._append(dest, out, stats)

    def _append(self, dest: LogSegment, out: bytearray, stats: CleanerStats) -> None:
        dest.append(out)
        crash_point("cleaner.writing-cleaned")
        stats.bytes_written += len(out)
        self._throttler.maybe_throttle(len(out))


def delete_cleaned_files(directory: Path, base_offset: int) -> None:
    for path in (log_file(directory, base_offset, CLEANED_FILE_SUFFIX),
                 offset_index_file(directory, base_offset, CLEANED_FILE_SUFFIX),
                 time_index_file(directory, base_offset, CLEANED_FILE_SUFFIX),
                 transaction_index_file(directory, base_offset, CLEANED_FILE_SUFFIX)):
        path.unlink(missing_ok=True)


Rewrite = Callable[[CleaningPlan], RewriteResult]
"""Runs ``rewrite_segments`` somewhere: in this thread, or in a cleaner process."""


class Cleaner:
    """Cleans one log at a time (Kafka's Cleaner): has the segments rewritten (``rewrite``:
    in the calling thread by default, in a cleaner process in a broker), then swaps each
    cleaned segment in on the log's owner (``run_on_owner``)."""

    def __init__(
        self,
        thread_id: int,
        config: CleanerConfig,
        manager: LogCleanerManager,
        clock: Scheduler,
        *,
        run_on_owner: RunOnOwner = run_here,
        rewrite: Rewrite | None = None,
        check_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.thread_id = thread_id
        self._config = config
        self._manager = manager
        self._clock = clock
        self._run_on_owner = run_on_owner
        self._check_done = check_done
        self._rewrite: Rewrite = rewrite or (lambda plan: rewrite_segments(plan, check_done))
        self.fail_before_swap: Callable[[int], None] | None = None
        """Test hook: called with each group's base offset after its .cleaned files are
        written, before the swap (raise to simulate a crash there)."""

    def plan(self, job: LogToClean) -> CleaningPlan:
        threads = max(self._config.num_threads, 1)
        return CleaningPlan(
            job.log.name, job.log.dir, job.config, job.first_dirty_offset,
            job.first_uncleanable_offset,
            tuple(file for _, file in sorted(job.segments.values(),
                                             key=lambda pair: pair[1].base_offset)),
            self._config.dedupe_buffer_size // threads,
            self._config.dedupe_buffer_load_factor,
            self._config.io_buffer_size // threads // 2,
            self._config.max_io_bytes_per_second / threads,
            job.aborted_txns,
        )

    def clean(self, job: LogToClean) -> tuple[int, CleanerStats]:
        """Clean the log of ``job``: returns the new first dirty offset and the stats."""
        result = self._rewrite(self.plan(job))
        log = job.log
        pending = list(result.groups)
        try:
            while pending:
                bases = pending[0]
                base_offset = bases[0]
                if self.fail_before_swap is not None:
                    self.fail_before_swap(base_offset)
                self._check_done()

                def swap(bases: list[int] = bases, base_offset: int = base_offset) -> None:
                    old = self._manager.check_swap(job, bases)
                    cleaned = LogSegment.open(log.dir, base_offset, job.config, self._clock,
                                              file_already_exists=True,
                                              file_suffix=CLEANED_FILE_SUFFIX)
                    logger.info("Swapping in cleaned segment %s for segment(s) %s in log %s",
                                cleaned, old, log)
                    try:
                        log.replace_segments(cleaned, old)
                    except BaseException:
                        cleaned.close_handlers()
                        raise

                self._run_on_owner(swap)
                pending.pop(0)
        except Exception:
            for bases in pending:
                delete_cleaned_files(log.dir, bases[0])
            raise
        return result.end_offset, result.stats


# -- the cleaner threads ---------------------------------------------------------------------


class CleanerThread:
    """One cleaner thread (Kafka's CleanerThread): clean the filthiest log, or back off.

    With ``CleanerConfig.use_process`` (a broker's setting) the thread has the rewriting
    done by a process of its own and only waits for it: the reading, key hashing and
    writing then never compete with the reactor for the interpreter lock."""

    def __init__(self, thread_id: int, config: CleanerConfig, manager: LogCleanerManager,
                 clock: Scheduler, run_on_owner: RunOnOwner, stopped: threading.Event) -> None:
        self.thread_id = thread_id
        self._config = config
        self._manager = manager
        self._run_on_owner = run_on_owner
        self._stopped = stopped
        self._pool: multiprocessing.pool.Pool | None = None
        self.cleaner = Cleaner(
            thread_id, config, manager, clock,
            run_on_owner=run_on_owner,
            rewrite=self._rewrite_in_process if config.use_process else None,
            check_done=self._check_done,
        )
        self.thread = threading.Thread(target=self.run, name=f"kafka-log-cleaner-thread-"
                                       f"{thread_id}", daemon=True)

    def _check_done(self) -> None:
        if self._stopped.is_set():
            raise LogCleaningAbortedError("The cleaner is shutting down")

    def _rewrite_in_process(self, plan: CleaningPlan) -> RewriteResult:
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(1)
        pending = self._pool.apply_async(rewrite_segments, (plan,))
        while True:
            try:
                result: RewriteResult = pending.get(timeout=0.5)
                return result
            except multiprocessing.TimeoutError:
                self._check_done()

    def run(self) -> None:
        backoff = self._config.backoff_ms / 1000.0
        try:
            while not self._stopped.is_set():
                try:
                    cleaned = self.clean_filthiest_log()
                except Exception:
                    if self._stopped.is_set():
                        return
                    logger.exception("%s: error while cleaning", self.thread.name)
                    cleaned = False
                if not cleaned:
                    self._stopped.wait(backoff)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the cleaner process, if one was started."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def clean_filthiest_log(self) -> bool:
        """One round: clean the filthiest log if one needs it. True if a log was cleaned."""
        job = self._run_on_owner(self._manager.grab_filthiest_compacted_log)
        if job is None:
            return False
        end_offset: int | None = None
        try:
            end_offset, stats = self.cleaner.clean(job)
            logger.info(format_stats(self.thread_id, job.log.name, job.first_dirty_offset,
                                     end_offset, stats))
        except LogCleaningAbortedError as exc:
            logger.info("%s", exc.message)
        except FileNotFoundError as exc:
            # The partition was deleted or moved during the cleaning: nothing to clean.
            logger.info("The files of %s went away during its cleaning: %s", job.log.name, exc)
        except Exception as exc:
            logger.error("Unexpected exception thrown when cleaning log %s. Marking its "
                         "partition (%s) as uncleanable: %s", job.log.name,
                         job.topic_partition, exc)
            self._run_on_owner(lambda: self._manager.mark_uncleanable(job.topic_partition))
        finally:
            final = end_offset
            self._run_on_owner(lambda: self._manager.done_cleaning(job, final))
        return end_offset is not None


class LogCleaner:
    """The cleaner threads of a broker and their manager (Kafka's LogCleaner)."""

    def __init__(self, config: CleanerConfig, log_manager: LogManager, clock: Scheduler,
                 run_on_owner: RunOnOwner = run_here) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_manager, clock)
        self._clock = clock
        self._run_on_owner = run_on_owner
        self._stopped = threading.Event()
        self.threads = self._new_threads()

    def _new_threads(self) -> list[CleanerThread]:
        return [CleanerThread(i, self.config, self.manager, self._clock, self._run_on_owner,
                              self._stopped)
                for i in range(self.config.num_threads)]

    def startup(self) -> None:
        logger.info("Starting the log cleaner")
        for thread in self.threads:
            thread.thread.start()

    def shutdown(self) -> None:
        """Stop the threads: a cleaning in progress is dropped at its next step (its
        swap, if it reaches the reactor, is refused once the logs are closed)."""
        logger.info("Shutting down the log cleaner.")
        self._stopped.set()

    @staticmethod
    def validate_reconfiguration(current: CleanerConfig, new: CleanerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration: ValueError with Kafka's message for a
        thread count that is not at least 1, or not within half to double the current."""
        if new.num_threads < 1:
            raise ValueError("Log cleaner threads should be at least 1")
        if new.num_threads < current.num_threads // 2:
            raise ValueError("Log cleaner threads cannot be reduced to less than half the "
                             f"current value {current.num_threads}")
        if new.num_threads > current.num_threads * 2:
            raise ValueError("Log cleaner threads cannot be increased to more than double "
                             f"the current value {current.num_threads}")

    def reconfigure(self, config: CleanerConfig) -> None:
        """Kafka's LogCleaner.reconfigure: the threads stop and new ones start with the new
        settings (throttle rate, buffers, backoff, thread count). Runs on the owning
        thread, so it does not wait for the old threads: each stops at its next step (the
        log it was cleaning stays in progress until it has let go of it)."""
        if config.max_io_bytes_per_second != self.config.max_io_bytes_per_second:
            logger.info("Updating logCleanerIoMaxBytesPerSecond: %s",
                        config.max_io_bytes_per_second)
        self.shutdown()
        self.config = config
        self._stopped = threading.Event()
        self.threads = self._new_threads()
        self.startup()

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)
