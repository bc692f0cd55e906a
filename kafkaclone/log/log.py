"""Log: one partition's log, a sequence of segments (Kafka's kafka.log.Log).

The last segment is the active one and takes the appends; the others are read-only until
retention deletes them whole. The log tracks four offsets:

* log start offset: the first offset a reader may ask for (moved up by retention and
  DeleteRecords; checkpointed in ``log-start-offset-checkpoint``);
* log end offset (LEO): the offset the next append gets;
* high watermark: the offset below which every batch is replicated, set by the caller
  (the partition) and checkpointed in ``replication-offset-checkpoint``; retention never
  deletes past it;
* recovery point: everything below it has been fsynced; after an unclean shutdown only
  the segments from the one holding the recovery point on are re-validated;

and, from the producer state, the last stable offset (LSO): the first offset of the oldest
transaction not yet completed and replicated, capped by the high watermark; read_committed
consumers read below it, and learn of the aborted transactions in what they read from the
segments' ``.txnindex`` files.

Not thread-safe: like the rest of the broker state it belongs to the reactor thread.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import (
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kafkaclone.common.file_region import FileRegion
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from kafkaclone.log.common import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    EARLIEST_TIMESTAMP,
    INDEX_FILE_SUFFIX,
    LATEST_TIMESTAMP,
    LOG_FILE_SUFFIX,
    NO_TIMESTAMP,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    AbortedTransaction,
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
    crash_point,
    offset_from_filename,
    parse_topic_partition_name,
)
from kafkaclone.log.config import LogConfig
from kafkaclone.log.epoch_cache import LeaderEpochFileCache
from kafkaclone.log.index import CorruptIndexError
from kafkaclone.log.log_dir_failure_channel import LogDirFailureChannel
from kafkaclone.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NO_PRODUCER_ID,
    CompletedTxn,
    ContinuingBatch,
    ProducerAppendInfo,
    ProducerBatch,
    ProducerStateManager,
    batch_bytes_at,
    has_producer_id,
)
from kafkaclone.log.segment import LogSegment, log_file
from kafkaclone.log.transaction_index import AbortedTxn
from kafkaclone.log.validator import (
    AnalyzedRecords,
    HeaderFields,
    IndexEntry,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
    analyze_records,
    follower_append_info,
    validate_and_assign_offsets,
    validate_keys_for_compacted_topic,
)
from kafkaclone.protocol.records.batch import BatchHeader, unpack_header
from kafkaclone.protocol.records.common import LOG_OVERHEAD

logger = logging.getLogger(__name__)
_PRODUCER_ID: Final = BatchHeader._fields.index("producer_id")
"""Where a header tuple (AnalyzedRecords.header_fields) holds the producer id."""

ProducerUpdates = dict[int, ProducerAppendInfo] | list[ContinuingBatch]
"""What an append changes in the producer state, applied once it is written: the append
infos of the full check, or only batches continuing their producers' sequences."""

_EMPTY: Final = memoryview(b"")

P = ParamSpec("P")
R = TypeVar("R")


def _storage_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Turn an OSError from the filesystem into KafkaStorageError (Kafka's
    maybeHandleIOException): the log directory is failing, not the request, and is reported
    to the log's LogDirFailureChannel, which takes it offline."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            message = _report_io_error(args[0], method.__name__, exc)
            raise KafkaStorageError(f"{message}: {exc}") from exc
        except KafkaStorageError as exc:
            if isinstance(exc.__cause__, OSError):  # a checkpoint or snapshot write
                _report_io_error(args[0], method.__name__, exc.__cause__)
            raise

    return wrapper


def _report_io_error(log: Any, operation: str, exc: OSError) -> str:
    assert isinstance(log, Log)
    message = f"Error in {operation} for log {log.dir}"
    if log.log_dir_failure_channel is not None:
        log.log_dir_failure_channel.maybe_add_offline_log_dir(log.dir.parent, message, exc)
    return message


class Log:
    """A partition's log: append, read, truncate, roll, retention, recovery."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        clock: Scheduler,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
        topic_partition: TopicPartition | None = None,
        max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        new_dir: bool = False,
    ) -> None:
        """Open the log in ``directory`` (created if missing), recovering it from
        ``recovery_point`` unless ``had_clean_shutdown``; its producer state from the
        latest snapshot and the log past it. ``new_dir``: a new log, whose directory is
        expected not to exist: once this call has created it, nothing is read from it (no
        listing, no checkpoint, no index), and the log holds only the directory and its
        first segment's ``.log`` file; if the directory exists after all, it is loaded."""
        self.dir = Path(directory)
        self.config = config
        self._clock = clock
        self.topic_partition = topic_partition or parse_topic_partition_name(self.dir.name)
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = 0
        self._last_flush_ms = now_ms(clock)
        self.flush_time_listener: Callable[[float], None] | None = None
        """Told how long each flush took, in ms (Kafka's LogFlushStats)."""
        self.log_dir_failure_channel: LogDirFailureChannel | None = None
        """Where an I/O error takes this log's directory offline (set by the LogManager)."""
        self._scheduled: list[Any] = []
        self._pending_deletes: list[LogSegment] = []
        self._recovered_from: int | None = None
        """The base offset of the first segment recovery re-read (its transaction index
        is rebuilt by replaying the producer state from there)."""
        self._closed = False
        self.truncations = 0
        """Times the log was truncated: the cleaner drops a cleaning that saw a change."""
        try:
            created = new_dir and _create_dir(self.dir)
            if not created:
                self.dir.mkdir(parents=True, exist_ok=True)
            self.producer_state_manager = ProducerStateManager(
                self.topic_partition, self.dir,
                max_producer_id_expiration_ms=max_producer_id_expiration_ms,
                load_snapshots=not created)
            self.leader_epoch_cache = LeaderEpochFileCache(
                self.topic_partition,
                lambda: self.log_end_offset,
                LeaderEpochCheckpointFile(self.dir / LEADER_EPOCH_CHECKPOINT),
                load=not created,
            )
            if created:
                self._add_segment(LogSegment.open(self.dir, self._log_start_offset,
                                                  self.config, self._clock))
                next_offset = self._recovery_point = self._log_start_offset
            else:
                next_offset = self._load_segments(had_clean_shutdown)
        except OSError as exc:
            self._abandon_segments()
            raise KafkaStorageError(f"Error while loading log dir {self.dir}: {exc}") from exc
        except BaseException:
            self._abandon_segments()
            raise
        self._next_offset_metadata = LogOffsetMetadata(
            next_offset, self.active_segment.base_offset, self.active_segment.size
        )
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._high_watermark = self._log_start_offset
        try:
            self._rebuild_producer_state(next_offset, had_clean_shutdown)
        except OSError as exc:
            self._abandon_segments()
            raise KafkaStorageError(f"Error while loading log dir {self.dir}: {exc}") from exc
        if high_watermark is not None:
            self.update_high_watermark(high_watermark)

    def __repr__(self) -> str:
        return (
            f"Log(dir={self.dir}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset})"
        )

    # -- offsets and state ---------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(segment.size for segment in self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers it."""
        return self.leader_epoch_cache.end_offset_for(leader_epoch)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes
        self.active_segment.offset_index.resize(config.segment_index_bytes)
        self.active_segment.time_index.resize(config.segment_index_bytes)

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, clamped to [log start offset, log end offset]."""
        self._high_watermark = min(max(high_watermark, self._log_start_offset),
                                   self.log_end_offset)
        self.producer_state_manager.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not completed and replicated."""
        first = self.producer_state_manager.first_unstable_offset
        return None if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The LSO: a read_committed consumer reads below it (Kafka's lastStableOffset:
        the first unstable offset, capped by the high watermark)."""
        first = self.first_unstable_offset
        return self._high_watermark if first is None else min(first, self._high_watermark)

    @_storage_errors
    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTransaction]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from
        the transaction indexes of the segment of ``start_offset`` on (Kafka's
        collectAbortedTransactions)."""
        found: list[AbortedTransaction] = []
        for segment in self._segments[max(self._floor_index(start_offset), 0):]:
            result = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(AbortedTransaction(txn.producer_id, txn.first_offset)
                         for txn in result.aborted_transactions)
            if result.is_complete:
                break
        return found

    def with_aborted_transactions(self, data: FetchDataInfo) -> FetchDataInfo:
        """A read_committed read: ``data`` with the aborted transactions overlapping its
        records (Kafka's addAbortedTransactions)."""
        records = data.records
        if not records:
            return data._replace(aborted_transactions=[])
        if isinstance(records, FileRegion):
            return data._replace(aborted_transactions=self.collect_aborted_transactions(
                data.fetch_offset_metadata.message_offset, data.next_offset))
        position, upper_bound = 0, data.fetch_offset_metadata.message_offset
        while position + LOG_OVERHEAD <= len(records):
            header = unpack_header(records, position)
            upper_bound = header.last_offset + 1
            position += header.size_in_bytes
        return data._replace(aborted_transactions=self.collect_aborted_transactions(
            data.fetch_offset_metadata.message_offset, upper_bound))

    def _index_completed_txn(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """An aborted transaction goes into the index of the segment holding its marker
        (unless it is there already: a replay after a truncation)."""
        if not completed.is_aborted:
            return
        index = max(self._floor_index(completed.last_offset), 0)
        txn_index = self._segments[index].txn_index
        last = txn_index.last_offset
        if last is None or last < completed.last_offset:
            txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                        completed.last_offset, last_stable_offset))

    # -- loading and recovery ------------------------------------------------------------

    def _load_segments(self, had_clean_shutdown: bool) -> int:
        """Open every segment, rebuilding broken indexes, recover if needed; returns the
        log end offset."""
        swap_offsets = self._remove_temp_files()
        base_offsets = sorted(
            offset_from_filename(name)
            for name in os.listdir(self.dir)
            if name.endswith(LOG_FILE_SUFFIX) and _is_segment_name(name)
        )
        for base_offset in base_offsets:
            self._add_segment(LogSegment.open(
                self.dir, base_offset, self.config, self._clock, file_already_exists=True
            ))
        self._complete_swap_operations(swap_offsets)
        # Segments that recovery will re-read anyway need no index check here.
        to_recover = [] if had_clean_shutdown else self._segments_in_range(
            self._recovery_point, None
        )
        for segment in self._segments:
            if segment in to_recover:
                continue
            try:
                segment.sanity_check()
            except CorruptIndexError as exc:
                logger.warning(
                    "Found a corrupted index file corresponding to log file %s due to %s, "
                    "recovering segment and rebuilding index files...",
                    segment.log.path, exc,
                )
                segment.recover(self.leader_epoch_cache)
                self._note_recovered(segment)
        return self._recover_log(had_clean_shutdown)

    def _note_recovered(self, segment: LogSegment) -> None:
        if self._recovered_from is None or segment.base_offset < self._recovered_from:
            self._recovered_from = segment.base_offset

    def _remove_temp_files(self) -> list[int]:
        """Delete the files a crash left half-done and return the base offsets of the
        ``.swap`` segments to complete (Kafka's removeTempFilesAndCollectSwapFiles):
        ``.cleaned`` and ``.deleted`` files go; a ``.swap`` log is kept (its indexes are
        rebuilt) unless a ``.cleaned`` file at or below its offset shows that the swap it
        belongs to never finished renaming, in which case the old segments are intact and
        the swap file goes too."""
        names = os.listdir(self.dir)
        log_prefixes = {
            name[: -len(LOG_FILE_SUFFIX)] for name in names if name.endswith(LOG_FILE_SUFFIX)
        }
        swap_logs: list[int] = []
        min_cleaned_offset: int | None = None
        for name in names:
            path = self.dir / name
            if not path.is_file():
                continue
            if name.endswith(CLEANED_FILE_SUFFIX) and _is_segment_name(name):
                offset = offset_from_filename(name)
                if min_cleaned_offset is None or offset < min_cleaned_offset:
                    min_cleaned_offset = offset
            if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, ".tmp")):
                logger.info("Deleting stray temporary file %s", path)
                path.unlink()
            elif name.endswith(SWAP_FILE_SUFFIX):
                if name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX) and _is_segment_name(name):
                    swap_logs.append(offset_from_filename(name))
                else:
                    logger.info("Deleting index swap file %s (rebuilt from its log)", path)
                    path.unlink()
            elif name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
                prefix = name.rsplit(".", 1)[0]
                if prefix not in log_prefixes:
                    logger.info("Found an orphaned index file %s, with no corresponding log "
                                "file.", path)
                    path.unlink()
        valid: list[int] = []
        for offset in sorted(swap_logs):
            path = log_file(self.dir, offset, SWAP_FILE_SUFFIX)
            if min_cleaned_offset is not None and offset >= min_cleaned_offset:
                logger.info("Deleting invalid swap file %s minCleanedFileOffset: %d", path,
                            min_cleaned_offset)
                path.unlink()
            else:
                valid.append(offset)
        return valid

    def _complete_swap_operations(self, swap_offsets: Sequence[int]) -> None:
        """Finish the swaps a crash interrupted (Kafka's completeSwapOperations): each
        ``.swap`` segment, its indexes rebuilt, replaces the live segments it covers."""
        for base_offset in swap_offsets:
            segment = LogSegment.open(self.dir, base_offset, self.config, self._clock,
                                      file_already_exists=True, file_suffix=SWAP_FILE_SUFFIX)
            logger.info("%s: found log file %s from interrupted swap operation, repairing.",
                        self.name, segment.log.path)
            segment.recover()
            self._note_recovered(segment)  # its .txnindex is rebuilt by the replay
            end = max(segment.read_next_offset(), base_offset + 1)
            old = [s for s in self._segments if base_offset <= s.base_offset < end]
            self._swap_in(segment, old, renamed_to_swap=True)

    def _recover_log(self, had_clean_shutdown: bool) -> int:
        if not had_clean_shutdown:
            unflushed = self._segments_in_range(self._recovery_point, None)
            for i, segment in enumerate(unflushed):
                logger.info("%s: recovering unflushed segment %d", self.name,
                            segment.base_offset)
                truncated = segment.recover(self.leader_epoch_cache)
                self._note_recovered(segment)
                if truncated > 0:
                    logger.warning(
                        "%s: corruption found in segment %d, truncating to offset %d",
                        self.name, segment.base_offset, segment.read_next_offset(),
                    )
                    rest = unflushed[i + 1 :]
                    self._remove_segments(rest)
                    self._delete_segment_files(rest, async_delete=True)
                    break
        log_end_offset: int | None = None
        if self._segments:
            log_end_offset = self.active_segment.read_next_offset()
            if log_end_offset < self._log_start_offset:
                logger.warning(
                    "%s: deleting all segments because logEndOffset (%d) is smaller than "
                    "logStartOffset (%d). This could happen if segment files were deleted "
                    "from the file system.", self.name, log_end_offset, self._log_start_offset,
                )
                doomed = list(self._segments)
                self._remove_segments(doomed)
                self._delete_segment_files(doomed, async_delete=True)
                self.leader_epoch_cache.clear_and_flush()
                log_end_offset = None
        if not self._segments:
            self._add_segment(
                LogSegment.open(self.dir, self._log_start_offset, self.config, self._clock)
            )
        if log_end_offset is None:
            log_end_offset = self.active_segment.read_next_offset()
        if had_clean_shutdown:
            self._recovery_point = log_end_offset
        else:
            self._recovery_point = min(self._recovery_point, log_end_offset)
        return log_end_offset

    # -- the segment list ----------------------------------------------------------------

    def _add_segment(self, segment: LogSegment) -> None:
        slot = bisect_right(self._base_offsets, segment.base_offset)
        self._base_offsets.insert(slot, segment.base_offset)
        self._segments.insert(slot, segment)

    def _remove_segments(self, segments: Sequence[LogSegment]) -> None:
        doomed = {id(segment) for segment in segments}
        self._segments = [s for s in self._segments if id(s) not in doomed]
        self._base_offsets = [s.base_offset for s in self._segments]

    def _floor_index(self, offset: int) -> int:
        """The index of the segment whose base offset is the largest <= ``offset``
        (-1 if none)."""
        return bisect_right(self._base_offsets, offset) - 1

    def _segments_in_range(self, from_offset: int, to_offset: int | None) -> list[LogSegment]:
        """The segments holding offsets in [from_offset, to_offset)."""
        start = max(self._floor_index(from_offset), 0)
        return [
            segment
            for segment in self._segments[start:]
            if to_offset is None or segment.base_offset < to_offset
        ]

    # -- append --------------------------------------------------------------------------

    @_storage_errors
    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append batches as the leader: validate them (LogValidator), assign offsets from
        the log end offset, stamp ``leader_epoch``. Nothing is written if any batch is
        invalid. Raises CorruptMessageError, MessageTooLargeError, RecordListTooLargeError,
        InvalidTimestampError, InvalidRecordError, UnsupportedForMessageFormatError."""
        view = _writable_view(records)
        config = self.config
        now = now_ms(self._clock)
        analyzed = analyze_records(
            view, origin=origin, max_message_bytes=config.max_message_bytes,
            leader_config=config, now=now,
        )
        if not analyzed.batch_count:
            return self._empty_append_info()
        if config.compact:
            validate_keys_for_compacted_topic(view, analyzed, self.topic_partition)
        updated_producers, duplicate = self._analyze_producer_state(view, analyzed, origin, now)
        if duplicate is not None:
            return duplicate
        view, info, entries = validate_and_assign_offsets(
            view,
            analyzed,
            next_offset=self._next_offset_metadata.message_offset,
            leader_epoch=leader_epoch,
            now=now,
            config=config,
            log_start_offset=self._log_start_offset,
        )
        self._check_append_size(len(view))
        if leader_epoch >= 0:
            self._maybe_assign_epoch_start_offset(leader_epoch, info.first_offset)
        self._write(view, info, now, entries)
        self._update_producer_state(updated_producers, info)
        return info

    @_storage_errors
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs. A
        partial batch at the end is dropped. OffsetsOutOfOrderError if the offsets do not
        increase, UnexpectedAppendOffsetError if they start below the log end offset."""
        view = _flat_view(records)
        analyzed = analyze_records(
            view, origin=AppendOrigin.REPLICATION, max_message_bytes=None,
            allow_partial_tail=True,
        )
        if not analyzed.batch_count:
            return self._empty_append_info()
        if not analyzed.offsets_monotonic():
            raise OffsetsOutOfOrderError(
                f"Out of order offsets found in append to {self.topic_partition}: "
                f"{[header.base_offset for _, header in analyzed.batches]}"
            )
        if analyzed.first_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.topic_partition}. First offset "
                f"{analyzed.first_offset} is less than the next offset "
                f"{self.log_end_offset}. First 10 offsets in append: "
                f"{[header.base_offset for _, header in analyzed.batches[:10]]}, last offset in "
                f"append: {analyzed.last_offset}. Log start offset = "
                f"{self._log_start_offset}",
                analyzed.first_offset,
                analyzed.last_offset,
            )
        view = view[: analyzed.valid_bytes]
        info = follower_append_info(analyzed, self._log_start_offset)
        self._check_append_size(len(view))
        state = self.producer_state_manager
        with_producer: list[tuple[int, HeaderFields]] = []
        continuing: list[ContinuingBatch] | None = []
        for position, fields in analyzed.header_fields:
            # Named locals from the plain header tuple (see AnalyzedRecords): a follower
            # runs this for every batch it replicates.
            (base_offset, _batch_length, partition_leader_epoch, _magic, _crc, attributes,
             last_offset_delta, _base_timestamp, max_timestamp, producer_id,
             producer_epoch, base_sequence, _records_count) = fields
            if partition_leader_epoch >= 0:
                self._maybe_assign_epoch_start_offset(partition_leader_epoch, base_offset)
            if producer_id > NO_PRODUCER_ID:
                with_producer.append((position, fields))
                if continuing is not None:
                    batch = state.continuing_batch(
                        producer_id, producer_epoch, base_sequence, attributes,
                        last_offset_delta, base_offset, max_timestamp, check_sequence=False)
                    if batch is None:
                        continuing = None
                    else:
                        continuing.append(batch)
        updated_producers: ProducerUpdates
        if continuing is not None:
            updated_producers = continuing
        else:
            producer_batches: list[ProducerBatch] = []
            for position, fields in with_producer:
                header = BatchHeader._make(fields)
                batch_bytes = batch_bytes_at(view, position, header) if header.is_control else None
                producer_batches.append(ProducerBatch.from_header(header,
                                                                  batch_bytes=batch_bytes))
            updated_producers, _ = state.analyze_and_validate(producer_batches,
                                                              AppendOrigin.REPLICATION)
        self._write(view, info, now_ms(self._clock))
        self._update_producer_state(updated_producers, info)
        return info

    def _analyze_producer_state(
        self, view: memoryview, analyzed: AnalyzedRecords, origin: AppendOrigin, now: int
    ) -> tuple[ProducerUpdates, LogAppendInfo | None]:
        """Check a leader's append against the producer state before offsets are assigned
        (Kafka's analyzeAndValidateProducerState): the producers' updates, or the append
        info of the batch this one duplicates (nothing is to be written then).
        OutOfOrderSequenceNumberError, InvalidProducerEpochError, UnknownProducerIdError."""
        # Most appends name no producer: the header tuples are read as they are, and
        # BatchHeaders made only for the batches that do.
        for _, fields in analyzed.header_fields:
            if fields[_PRODUCER_ID] > NO_PRODUCER_ID:
                break
        else:
            return {}, None
        offset = self._next_offset_metadata.message_offset
        max_timestamp = now if self.config.log_append_time else None
        if origin is AppendOrigin.CLIENT and len(analyzed.header_fields) == 1:
            # An idempotent producer's next batch (Produce v3+ carries one per partition).
            (_base_offset, _batch_length, _partition_leader_epoch, _magic, _crc, attributes,
             last_offset_delta, _base_timestamp, header_max_timestamp, producer_id,
             producer_epoch, base_sequence, _records_count) = analyzed.header_fields[0][1]
            continuing = self.producer_state_manager.continuing_batch(
                producer_id, producer_epoch, base_sequence, attributes, last_offset_delta,
                offset, header_max_timestamp if max_timestamp is None else max_timestamp,
                check_sequence=True)
            if continuing is not None:
                return [continuing], None
        batches = []
        for position, header in analyzed.batches:
            if has_producer_id(header):
                batch_bytes = batch_bytes_at(view, position, header) if header.is_control else None
                batches.append(ProducerBatch.from_header(header, offset, max_timestamp,
                                                         batch_bytes))
            offset += header.last_offset_delta + 1
        updated, duplicate = self.producer_state_manager.analyze_and_validate(batches, origin)
        if duplicate is None:
            return updated, None
        logger.debug("%s: duplicate batch at offsets [%d, %d]", self.name,
                     duplicate.first_offset, duplicate.last_offset)
        return updated, LogAppendInfo(
            duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
            duplicate.last_offset, duplicate.timestamp, self._log_start_offset, 0, 0, 0, -1)

    def _update_producer_state(self, updated: ProducerUpdates, info: LogAppendInfo) -> None:
        producer_state = self.producer_state_manager
        if not updated:
            producer_state.update_map_end_offset(info.last_offset + 1)
            return
        if isinstance(updated, list):
            producer_state.apply_continuing(updated)
            producer_state.update_map_end_offset(info.last_offset + 1)
            return
        completed_txns: list[CompletedTxn] = []
        for append_info in updated.values():
            producer_state.update(append_info)
            completed_txns.extend(append_info.completed_transactions)
        for completed in sorted(completed_txns, key=lambda txn: txn.last_offset):
            self._index_completed_txn(completed, producer_state.last_stable_offset(completed))
            producer_state.complete_txn(completed)
        producer_state.update_map_end_offset(info.last_offset + 1)

    def _empty_append_info(self) -> LogAppendInfo:
        offset = self.log_end_offset
        return LogAppendInfo(
            first_offset=offset, last_offset=offset - 1, max_timestamp=NO_TIMESTAMP,
            offset_of_max_timestamp=-1, log_append_time=NO_TIMESTAMP,
            log_start_offset=self._log_start_offset, record_count=0, batch_count=0,
            valid_bytes=0, last_leader_epoch=-1,
        )

    def _check_append_size(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {size} bytes in append to partition "
                f"{self.topic_partition}, which exceeds the maximum configured segment size "
                f"of {self.config.segment_bytes}."
            )

    @_storage_errors
    def assign_epoch_start_offset(self, epoch: int, start_offset: int, *,
                                  flush: bool = True) -> None:
        """Record that leader epoch ``epoch`` starts at ``start_offset`` (a new leader).
        ``flush=False``: the caller writes the checkpoint (``flush_leader_epoch_cache``)
        before the new leader accepts anything (the LogManager writes many in parallel)."""
        latest = self.leader_epoch_cache.latest_entry
        if latest is None or latest.epoch != epoch:
            self.leader_epoch_cache.assign(epoch, start_offset, flush=flush)

    @property
    def leader_epoch_cache_unflushed(self) -> bool:
        return self.leader_epoch_cache.unflushed

    @_storage_errors
    def flush_leader_epoch_cache(self) -> None:
        """Write the leader-epoch checkpoint if an assignment left it to write (any
        thread: the log's owner waits meanwhile)."""
        if self.leader_epoch_cache.unflushed:
            self.leader_epoch_cache.flush()

    def _maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        latest = self.leader_epoch_cache.latest_entry
        if latest is None or latest.epoch != epoch or start_offset < latest.start_offset:
            self.leader_epoch_cache.assign(epoch, start_offset)

    def _write(self, view: memoryview, info: LogAppendInfo, now: int,
               entries: list[IndexEntry] | None = None) -> None:
        self._check_open()
        segment = self._maybe_roll(len(view), info, now)
        segment.append(view, entries)
        end_offset = info.last_offset + 1
        self._next_offset_metadata = LogOffsetMetadata(end_offset, segment.base_offset,
                                                       segment.size)
        if end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo, now: int) -> LogSegment:
        segment = self._segments[-1]
        config = self.config
        max_segment_ms = config.segment_ms
        if config.max_compaction_lag_ms < max_segment_ms and config.compact:
            max_segment_ms = config.max_compaction_lag_ms
        if segment.should_roll(
            max_segment_bytes=config.segment_bytes,
            max_segment_ms=max_segment_ms,
            messages_size=messages_size,
            max_timestamp_in_messages=info.max_timestamp,
            max_offset_in_messages=info.last_offset,
            now=now,
        ):
            logger.debug(
                "%s: rolling new log segment (log_size = %d/%d, offset_index_size = %d/%d, "
                "time_index_size = %d/%d)", self.name, segment.size, config.segment_bytes,
                segment.offset_index.entries, segment.offset_index.max_entries,
                segment.time_index.entries, segment.time_index.max_entries,
            )
            return self.roll(info.first_offset)
        return segment

    @_storage_errors
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset); the
        old ones are flushed shortly after (scheduled), which moves the recovery point."""
        self._check_open()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_offset:
            if active.size == 0:
                return active
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self.topic_partition} with start "
                f"offset {new_offset} while it already exists."
            )
        if new_offset < active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self.topic_partition} with start "
                f"offset {new_offset} lower than start offset of the active segment {active}"
            )
        if log_file(self.dir, new_offset).exists():
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self.topic_partition} with start "
                f"offset {new_offset} while its file already exists."
            )
        active.on_become_inactive_segment()
        # A snapshot at the new segment's base: recovery can start from it.
        self.producer_state_manager.update_map_end_offset(new_offset)
        self.producer_state_manager.take_snapshot()
        segment = LogSegment.open(self.dir, new_offset, self.config, self._clock)
        self._add_segment(segment)
        self._next_offset_metadata = LogOffsetMetadata(self.log_end_offset, new_offset, 0)
        logger.info("%s: rolled new log segment at offset %d", self.name, new_offset)
        self._schedule(0, self._flush_after_roll, new_offset)
        return segment

    def _flush_after_roll(self, offset: int) -> None:
        if not self._closed:
            self.flush(offset)

    # -- flush ---------------------------------------------------------------------------

    @_storage_errors
    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery point, offset) (default: the
        log end offset) and move the recovery point to ``offset``."""
        self._check_open()
        if offset is None:
            offset = self.log_end_offset
        if offset <= self._recovery_point:
            return
        # A leader's new epoch is written on the I/O threads after it leads: until then it
        # is recoverable from the batches above the recovery point, so the recovery point
        # does not pass them before it is on disk.
        if self.leader_epoch_cache.unflushed:
            self.leader_epoch_cache.flush()
        started = time.perf_counter()
        for segment in self._segments_in_range(self._recovery_point, offset):
            segment.flush()
        if self.flush_time_listener is not None:
            self.flush_time_listener((time.perf_counter() - started) * 1000.0)
        self._recovery_point = offset
        self._last_flush_ms = now_ms(self._clock)

    # -- producer state ------------------------------------------------------------------

    def _rebuild_producer_state(self, last_offset: int, reload_from_clean_shutdown: bool
                                ) -> None:
        """Bring the producer state to ``last_offset``: from the latest snapshot not past
        it, then the batches of the log after it (Kafka's rebuildProducerState). A log
        with no snapshot after a clean shutdown never had producers (it predates them):
        empty snapshots at the last two segment bases and ``last_offset`` save the scan."""
        producer_state = self.producer_state_manager
        bases = self._base_offsets[-2:]
        offsets_to_snapshot = sorted({*bases, last_offset})
        if producer_state.latest_snapshot_offset is None and reload_from_clean_shutdown:
            for offset in offsets_to_snapshot:
                producer_state.update_map_end_offset(offset)
                producer_state.take_snapshot()
            return
        if self._recovered_from is not None:
            # The recovered segments' transaction indexes are rebuilt by the replay.
            producer_state.delete_snapshots_after(self._recovered_from)
            self._recovered_from = None
        was_empty = producer_state.is_empty and producer_state.map_end_offset >= last_offset
        producer_state.truncate_and_reload(self._log_start_offset, last_offset,
                                           now_ms(self._clock))
        if last_offset > producer_state.map_end_offset and not was_empty:
            logger.info("%s: rebuilding producer state from offset %d to %d", self.name,
                        producer_state.map_end_offset, last_offset)
            for segment in self._segments_in_range(producer_state.map_end_offset, last_offset):
                start = max(segment.base_offset, producer_state.map_end_offset,
                            self._log_start_offset)
                producer_state.update_map_end_offset(start)
                if segment.base_offset in offsets_to_snapshot:
                    producer_state.take_snapshot()
                found = segment.translate_offset(start)
                if found is None:
                    continue
                log_file_records = segment.log
                producer_state.load_batches(
                    (ProducerBatch.from_header(
                        header, batch_bytes=(log_file_records.read(position, header.size_in_bytes)
                                             if header.is_control else None))
                     for position, header in log_file_records.iter_headers(found.position)
                     if header.base_offset < last_offset and has_producer_id(header)),
                    self._index_completed_txn,
                )
        producer_state.update_map_end_offset(last_offset)
        producer_state.take_snapshot()

    @_storage_errors
    def remove_expired_producers(self) -> int:
        """Forget producers silent for longer than the expiration (Kafka's
        PeriodicProducerExpirationCheck); how many were forgotten."""
        return self.producer_state_manager.remove_expired_producers(now_ms(self._clock))

    @_storage_errors
    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        """Delete the producer snapshots below both the recovery point's segment and the
        second-to-last segment (Kafka's minSnapshotsOffsetToRetain); that offset."""
        active_base = self.active_segment.base_offset
        index = self._floor_index(active_base - 1)
        two_segments_min = self._segments[index].base_offset if index >= 0 else active_base
        index = self._floor_index(self._recovery_point - 1)
        recovery_base = (self._segments[index].base_offset if index >= 0
                         else self._recovery_point)
        min_offset = min(recovery_base, two_segments_min)
        self.producer_state_manager.delete_snapshots_before(min_offset)
        return min_offset

    # -- read ----------------------------------------------------------------------------

    @_storage_errors
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        *,
        min_one_message: bool = True,
        file_region: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` (but
        the first batch whole even if larger, when ``min_one_message``: KIP-74), none
        holding an offset >= ``upper_bound`` (e.g. the high watermark; default the log end
        offset). OffsetOutOfRangeError outside [log start offset, log end offset]. With
        ``file_region`` the records are a range of a segment file rather than bytes
        (LogSegment.read)."""
        end_offset = self.log_end_offset
        if start_offset > end_offset or start_offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition "
                f"{self.topic_partition}, but we only have log segments in the range "
                f"{self._log_start_offset} to {end_offset}."
            )
        max_offset = end_offset if upper_bound is None else min(upper_bound, end_offset)
        if start_offset >= max_offset:
            return FetchDataInfo(self.convert_to_offset_metadata(start_offset), _EMPTY)
        index = max(self._floor_index(start_offset), 0)
        segments = self._segments
        while index < len(segments):
            fetched = segments[index].read(
                start_offset, max_bytes, max_offset=max_offset,
                min_one_message=min_one_message, file_region=file_region)
            if fetched is not None:
                return fetched
            index += 1
        return FetchDataInfo(self._next_offset_metadata, _EMPTY)

    @_storage_errors
    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset``'s batch starts: its segment and position (the log end offset's
        is the end of the active segment). OffsetOutOfRangeError outside the log."""
        if offset == self.log_end_offset:
            return self._next_offset_metadata
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Offset {offset} is out of range for partition {self.topic_partition}: "
                f"[{self._log_start_offset}, {self.log_end_offset}]"
            )
        for segment in self._segments[max(self._floor_index(offset), 0):]:
            mapping = segment.translate_offset(offset)
            if mapping is not None:
                return LogOffsetMetadata(offset, segment.base_offset, mapping.position)
        return self._next_offset_metadata

    @_storage_errors
    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp is >= the target, or the
        log start offset for EARLIEST_TIMESTAMP (-2), the log end offset for
        LATEST_TIMESTAMP (-1); None if no record is that recent."""
        if target_timestamp == EARLIEST_TIMESTAMP:
            earliest = self.leader_epoch_cache.earliest_entry
            epoch = (
                earliest.epoch
                if earliest is not None and earliest.start_offset <= self._log_start_offset
                else None
            )
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, self.latest_epoch)
        for segment in list(self._segments):
            if segment.largest_timestamp >= target_timestamp:
                return segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
        return None

    # -- truncation and log start --------------------------------------------------------

    @_storage_errors
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything from ``target_offset`` on (a follower diverged from its
        leader). A batch holding ``target_offset`` goes whole. Returns False if there was
        nothing to remove."""
        self._check_open()
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic_partition} to a "
                             f"negative offset ({target_offset}).")
        if target_offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        logger.info("%s: truncating to offset %d", self.name, target_offset)
        self.truncations += 1
        if self._segments[0].base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        doomed = [segment for segment in self._segments if segment.base_offset > target_offset]
        self._remove_segments(doomed)
        self._delete_segment_files(doomed, async_delete=True)
        active = self.active_segment
        active.truncate_to(target_offset)
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)
        end_offset = active.read_next_offset()
        self._next_offset_metadata = LogOffsetMetadata(end_offset, active.base_offset,
                                                       active.size)
        self.leader_epoch_cache.truncate_from_end(end_offset)
        self._log_start_offset = min(self._log_start_offset, end_offset)
        self._recovery_point = min(self._recovery_point, end_offset)
        self._high_watermark = min(self._high_watermark, end_offset)
        self._rebuild_producer_state(end_offset, reload_from_clean_shutdown=False)
        return True

    @_storage_errors
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything and restart the log, empty, at ``new_offset``."""
        self._check_open()
        logger.info("%s: truncate and start at offset %d", self.name, new_offset)
        self.truncations += 1
        doomed = list(self._segments)
        self._remove_segments(doomed)
        self._delete_segment_files(doomed, async_delete=True)
        self._add_segment(LogSegment.open(self.dir, new_offset, self.config, self._clock))
        self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state_manager.truncate_fully_and_start_at(new_offset)
        self._log_start_offset = new_offset
        self._recovery_point = new_offset
        self._high_watermark = new_offset

    @_storage_errors
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (never past the high
        watermark: OffsetOutOfRangeError). Whole segments below it are deleted by the next
        retention run. Returns the log start offset."""
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{self._high_watermark}"
            )
        self._maybe_increment_log_start_offset(offset)
        return self._log_start_offset

    def _maybe_increment_log_start_offset(self, new_log_start_offset: int) -> None:
        if new_log_start_offset <= self._log_start_offset:
            return
        logger.info("%s: incrementing log start offset to %d", self.name,
                    new_log_start_offset)
        self._log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        self.producer_state_manager.on_log_start_offset_incremented(new_log_start_offset)
        if self._high_watermark < new_log_start_offset:
            self._high_watermark = new_log_start_offset
        if self._recovery_point < new_log_start_offset:
            self._recovery_point = new_log_start_offset

    # -- retention -----------------------------------------------------------------------

    @_storage_errors
    def delete_old_segments(self) -> int:
        """One retention run: delete the segments wholly below the log start offset and,
        with cleanup.policy=delete, those past retention.bytes or retention.ms. Returns
        the number of segments deleted."""
        self._check_open()
        deleted = self._delete_segments_where(self._breaches_log_start_offset)
        if self.config.delete:
            deleted += self._delete_retention_size_breached_segments()
            deleted += self._delete_retention_ms_breached_segments()
        return deleted

    def _breaches_log_start_offset(self, segment: LogSegment, next_segment: LogSegment | None
                                   ) -> bool:
        return next_segment is not None and next_segment.base_offset <= self._log_start_offset

    def _delete_retention_ms_breached_segments(self) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        start_ms = now_ms(self._clock)

        def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
            return start_ms - segment.largest_timestamp > retention_ms

        return self._delete_segments_where(breached)

    def _delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self.config.retention_bytes
        size = self.size
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def breached(segment: LogSegment, next_segment: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self._delete_segments_where(breached)

    def _delete_segments_where(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> int:
        """Delete the oldest segments while ``predicate`` holds and each lies wholly below
        the high watermark (the empty active segment is never deleted)."""
        deletable: list[LogSegment] = []
        for i, segment in enumerate(self._segments):
            is_last = i == len(self._segments) - 1
            next_segment = None if is_last else self._segments[i + 1]
            upper_bound = self.log_end_offset if next_segment is None else next_segment.base_offset
            if (
                self._high_watermark >= upper_bound
                and predicate(segment, next_segment)
                and not (is_last and segment.size == 0)
            ):
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self.roll()
        self._remove_segments(deletable)
        self._delete_segment_files(deletable, async_delete=True)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return len(deletable)

    # -- compaction -----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def has_segments(self, segments: Sequence[LogSegment]) -> bool:
        """Whether every one of ``segments`` is still part of the log (retention,
        truncation or deletion did not remove it)."""
        live = {id(segment) for segment in self._segments}
        return all(id(segment) in live for segment in segments)

    @_storage_errors
    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment]
                         ) -> None:
        """Swap a cleaned segment (files ``*.cleaned``) in for the segments it was cleaned
        from (Kafka's replaceSegments). Crash-safe in three steps: the new files are
        renamed ``*.swap``; the old segments leave the list and their files are renamed
        ``*.deleted`` (removed after file.delete.delay.ms); the ``.swap`` suffix is
        dropped. A crash before the first rename leaves ``.cleaned`` files, deleted on
        load; after it, loading completes the swap."""
        self._check_open()
        self._swap_in(new_segment, old_segments, renamed_to_swap=False)

    def _swap_in(self, new_segment: LogSegment, old_segments: Sequence[LogSegment], *,
                 renamed_to_swap: bool) -> None:
        if not renamed_to_swap:
            new_segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            crash_point("cleaner.after-swap-rename")
        self._remove_segments(old_segments)
        self._add_segment(new_segment)
        self._delete_segment_files(old_segments, async_delete=True,
                                   crash_point_name="cleaner.mid-delete")
        new_segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")

    # -- deleting files ------------------------------------------------------------------

    def _delete_segment_files(self, segments: Sequence[LogSegment], *, async_delete: bool,
                              crash_point_name: str | None = None) -> None:
        """Rename the segments' files to ``*.deleted`` now and remove them after
        file.delete.delay.ms (or now). ``crash_point_name``: the test crash point after the
        first rename (see ``log.common.crash_point``)."""
        for segment in segments:
            segment.close_handlers()
            if not segment.has_suffix(DELETED_FILE_SUFFIX):
                segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            if crash_point_name is not None:
                crash_point(crash_point_name)
            snapshot = self.producer_state_manager.remove_and_mark_snapshot_for_deletion(
                segment.base_offset)
            if snapshot is not None:
                self._schedule(self.config.file_delete_delay_ms / 1000.0, _unlink, snapshot)
        if not segments:
            return
        if async_delete:
            pending = list(segments)
            self._pending_deletes.extend(pending)
            self._schedule(self.config.file_delete_delay_ms / 1000.0, self._delete_now, pending)
        else:
            self._delete_now(list(segments))

    def _delete_now(self, segments: list[LogSegment]) -> None:
        for segment in segments:
            logger.info("%s: deleting segment files %s", self.name, segment.log.path.name)
            try:
                segment.delete_if_exists()
            except OSError as exc:
                logger.warning("%s: could not delete %s: %s", self.name, segment.log.path, exc)
            if segment in self._pending_deletes:
                self._pending_deletes.remove(segment)

    def _schedule(self, delay_seconds: float, function: Callable[..., None], *args: Any
                  ) -> None:
        self._scheduled = [call for call in self._scheduled if call.active()]
        self._scheduled.append(self._clock.callLater(delay_seconds, function, *args))

    # -- lifecycle -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"The log for partition {self.topic_partition} is closed")

    def _close_segments(self) -> None:
        for segment in self._segments:
            try:
                segment.close()
            except (OSError, KafkaError):
                logger.exception("%s: error closing segment %s", self.dir, segment)

    def _abandon_segments(self) -> None:
        """Close the files of a log that failed to load, writing nothing."""
        for segment in self._segments:
            segment.close_handlers()

    def _cancel_scheduled(self) -> None:
        for call in self._scheduled:
            if call.active():
                call.cancel()
        self._scheduled.clear()
        self._delete_now(list(self._pending_deletes))

    def close_handlers(self) -> None:
        """Close the files, writing nothing (Kafka's closeHandlers): the log's directory
        failed."""
        if self._closed:
            return
        self._closed = True
        for call in self._scheduled:
            if call.active():
                call.cancel()
        self._scheduled.clear()
        self._abandon_segments()

    @_storage_errors
    def close(self) -> None:
        """Write the indexes out and close every file (flush first for durability);
        segments waiting for deletion are deleted now."""
        if self._closed:
            return
        self._closed = True
        self._cancel_scheduled()
        try:  # the state at the log end: no log scan at the next start
            self.producer_state_manager.take_snapshot()
        except OSError as exc:
            logger.error("%s: could not write the producer snapshot: %s", self.name, exc)
        self._close_segments()

    @_storage_errors
    def rename_dir(self, name: str) -> None:
        """Move the log directory to a sibling named ``name`` (deletion, ``-delete``)."""
        target = self.dir.parent / name
        os.replace(self.dir, target)
        self.dir = target
        for segment in self._segments:
            segment.update_dir(target)
        self.producer_state_manager.update_log_dir(target)
        self.leader_epoch_cache.set_checkpoint(
            LeaderEpochCheckpointFile(target / LEADER_EPOCH_CHECKPOINT)
        )

    @_storage_errors
    def delete(self) -> None:
        """Close the log and remove its directory with every file in it."""
        self._closed = True
        self._cancel_scheduled()
        for segment in self._segments:
            segment.close_handlers()
        self._segments = []
        self._base_offsets = []
        shutil.rmtree(self.dir, ignore_errors=True)


def _create_dir(directory: Path) -> bool:
    """Create ``directory``; False if it exists already."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return False
    return True


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning("Could not delete %s: %s", path, exc)


def _is_segment_name(name: str) -> bool:
    prefix = name.split(".", 1)[0]
    return len(prefix) == 20 and prefix.isdigit()


def _flat_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def _writable_view(records: bytes | bytearray | memoryview) -> memoryview:
    """A flat, writable view of ``records`` (a copy if they are read-only): the log
    rewrites offsets in place."""
    view = _flat_view(records)
    if view.readonly:
        view = memoryview(bytearray(view))
    return view
