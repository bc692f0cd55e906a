"""LogSegment: one ``.log`` file of record batches and its ``.index``, ``.timeindex`` and
``.txnindex`` (the aborted transactions whose markers it holds: log/transaction_index.py).

The three files share a name, the segment's base offset as 20 zero-padded digits
(``00000000000000001234.log``). The segment indexes the batches it is given every
``index.interval.bytes``: an offset index entry maps a batch's last offset to the batch's
position, a time index entry maps the segment's largest timestamp so far to the offset of
the batch that carried it.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from crc32c import crc32c

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import CorruptMessageError, InvalidRecordError
from kafkaclone.log.common import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    NO_TIMESTAMP,
    TIME_INDEX_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
    filename_prefix_from_offset,
)
from kafkaclone.log.config import LogConfig
from kafkaclone.log.epoch_cache import LeaderEpochFileCache
from kafkaclone.log.file_records import FileRecords, LogOffsetPosition, whole_batches_length
from kafkaclone.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from kafkaclone.log.transaction_index import (
    CorruptTransactionIndexError,
    TransactionIndex,
    transaction_index_file,
)
from kafkaclone.protocol.records import RecordBatch
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER,
    NO_PARTITION_LEADER_EPOCH,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
)
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
)
from kafkaclone.protocol.records.record import read_varint, read_varlong

logger = logging.getLogger(__name__)

_INT32_MAX: Final = 2**31 - 1
TAIL_BATCHES: Final = 64
"""How many of the last batches appended a segment remembers the place of. Followers and
consumers keeping up read the batches just appended: found here, they need no index
lookup and no scan of batch headers read from the file (with small batches, up to an index
interval's worth of them per read)."""
_EMPTY: Final = memoryview(b"")
_FIRST_RECORD_PREFIX: Final = 21
"""Enough bytes for a record's length (varint), attributes, timestamp delta (varlong) and
offset delta (varint)."""


def log_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(base_offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix_from_offset(base_offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (
        filename_prefix_from_offset(base_offset) + TIME_INDEX_FILE_SUFFIX + suffix
    )


class LogSegment:
    """A segment of a partition log. Not thread-safe: the Log owns it."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Scheduler,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index or TransactionIndex(
            base_offset, transaction_index_file(log.path.parent, base_offset))
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self._created_ms = now_ms(clock)
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        last = time_index.last_entry
        self._max_timestamp_so_far = last.timestamp
        self._offset_of_max_timestamp_so_far = last.offset
        self._next_offset: int | None = None
        self._tail: list[LogOffsetPosition] = []
        """The last batches appended (at most 2 * TAIL_BATCHES), in file order and ending
        at the end of the file: (last offset, position, size) each."""

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        clock: Scheduler,
        *,
        file_already_exists: bool = False,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or, unless ``file_already_exists``, create) the segment's files: the
        ``.log`` file; the index files are created when first written (``close``,
        ``flush``) once there is something to index."""
        log = FileRecords(
            log_file(directory, base_offset, file_suffix),
            create=not file_already_exists,
            preallocate_bytes=config.segment_bytes if config.preallocate else 0,
        )
        try:
            offset_index = OffsetIndex(
                offset_index_file(directory, base_offset, file_suffix),
                base_offset,
                config.segment_index_bytes,
            )
            time_index = TimeIndex(
                time_index_file(directory, base_offset, file_suffix),
                base_offset,
                config.segment_index_bytes,
            )
            txn_index = TransactionIndex(
                base_offset, transaction_index_file(directory, base_offset, file_suffix))
        except BaseException:
            log.close()
            raise
        return cls(
            log,
            offset_index,
            time_index,
            base_offset,
            config.index_interval_bytes,
            config.random_segment_jitter(),
            clock,
            txn_index,
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # -- state --

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_so_far

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._offset_of_max_timestamp_so_far

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime if no batch had one (what
        retention.ms is checked against)."""
        if self._max_timestamp_so_far >= 0:
            return self._max_timestamp_so_far
        return self.log.last_modified_ms()

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset for an empty segment)."""
        if self._next_offset is None:
            start = self.offset_index.last_entry.position
            next_offset = self.base_offset
            for _, header in self.log.iter_headers(start):
                next_offset = header.next_offset
            self._next_offset = next_offset
        return self._next_offset

    def _indexes_full(self) -> bool:
        """A full index takes no more entries; the log rolls before the next append."""
        return self.offset_index.is_full or self.time_index.is_full

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # -- append --

    def append(self, records: bytes | bytearray | memoryview,
               entries: Sequence[tuple[int, int, int, int]] | None = None) -> None:
        """Append whole batches (offsets already assigned) and index them. ``entries``:
        each batch's (position in ``records``, size, last offset, max timestamp) when the
        caller has them already (the leader's append computed them while assigning
        offsets); otherwise they are read from the batch headers. The batches are written
        first, so a failed write leaves the indexes as they were."""
        if not records:
            return
        if entries:
            batches = entries
        else:
            batches = []
            position = 0
            end = len(records)
            unpack = HEADER.unpack_from
            while position < end:
                # Named locals, not a BatchHeader: a follower indexes every batch it
                # replicates here, and building the header object would triple the cost.
                (base_offset, batch_length, _partition_leader_epoch, _magic, _crc,
                 _attributes, last_offset_delta, _base_timestamp, max_timestamp,
                 _producer_id, _producer_epoch, _base_sequence,
                 _records_count) = unpack(records, position)
                size = batch_length + LOG_OVERHEAD
                batches.append((position, size, base_offset + last_offset_delta,
                                max_timestamp))
                position += size
        last_offset = batches[-1][2]
        if not self.can_convert_to_relative_offset(last_offset):
            raise ValueError(
                f"Offset {last_offset} cannot be stored in the segment at {self.base_offset}"
            )
        physical_position = self.log.size
        self.log.append(records)
        tail = self._tail
        for position, size, batch_last_offset, _ in batches:
            tail.append(LogOffsetPosition(batch_last_offset, physical_position + position, size))
        if len(tail) > 2 * TAIL_BATCHES:
            del tail[:-TAIL_BATCHES]
        if physical_position == 0:
            self._rolling_based_timestamp = batches[0][3]
        interval = self.index_interval_bytes
        for position, size, batch_last_offset, max_timestamp in batches:
            if max_timestamp > self._max_timestamp_so_far:
                self._max_timestamp_so_far = max_timestamp
                self._offset_of_max_timestamp_so_far = batch_last_offset
            # Fullness is asked only when an entry is due: it changes only when one is added.
            if self._bytes_since_last_index_entry > interval and not self._indexes_full():
                self.offset_index.append(batch_last_offset, physical_position + position)
                self.time_index.maybe_append(
                    self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
                )
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += size
        self._next_offset = last_offset + 1

    # -- reads --

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` or the first after it: the first batch, from the
        index's position on, whose last offset is >= ``offset``; None past the end."""
        tail = self._tail
        if tail and offset > tail[0].offset:
            # Among the batches just appended: the batch before the one found is known.
            if offset > tail[-1].offset:
                return None
            found = tail[bisect_left(tail, offset, key=_last_offset)]
            if found.position >= starting_position:
                return found
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(offset,
                                                    max(mapping.position, starting_position))

    def _whole_batches_end(self, first: LogOffsetPosition, max_size: int,
                           max_offset: int | None) -> tuple[int, int]:
        """FileRecords.whole_batches_end, from the remembered batches when ``first`` is
        one of them."""
        tail = self._tail
        index = bisect_left(tail, first.offset, key=_last_offset)
        if index == len(tail) or tail[index] != first:
            return self.log.whole_batches_end(first, max_size, max_offset)
        limit = min(self.log.size, first.position + max(max_size, first.size))
        end = first.position + first.size
        next_offset = first.offset + 1
        for entry in tail[index + 1:]:
            if entry.position + entry.size > limit or (max_offset is not None
                                                       and entry.offset >= max_offset):
                break
            end = entry.position + entry.size
            next_offset = entry.offset + 1
        return end, next_offset

    def read(
        self,
        start_offset: int,
        max_size: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = False,
        file_region: bool = False,
    ) -> FetchDataInfo | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes
        (but the first batch whole if ``min_one_message``), none with an offset at or past
        ``max_offset``. None if ``start_offset`` is past the last batch.

        Read as bytes, every batch returned has its CRC checked: CorruptMessageError rather
        than serve a batch damaged on disk (recovery only re-validates what lies past the
        recovery point). With ``file_region`` the records are a range of the file, found
        from the batch headers alone, for the socket to send without reading them (Kafka's
        read: no CRC check; consumers check CRCs)."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self}")
        mapping = self.translate_offset(start_offset)
        if mapping is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, mapping.position)
        if max_offset is not None and mapping.offset >= max_offset:
            return FetchDataInfo(metadata, _EMPTY)
        fetch_size = max(max_size, mapping.size) if min_one_message else max_size
        if fetch_size < mapping.size:
            return FetchDataInfo(metadata, _EMPTY)
        if file_region:
            end, next_offset = self._whole_batches_end(mapping, fetch_size, max_offset)
            return FetchDataInfo(metadata, self.log.slice(mapping.position,
                                                          end - mapping.position),
                                 next_offset=next_offset)
        data = memoryview(self.log.read(mapping.position, fetch_size))
        try:
            valid = whole_batches_length(data, max_offset, verify_crc=True)
        except CorruptMessageError as exc:
            logger.error("Corrupt data in %s, at or after position %d: %s", self.log.path,
                         mapping.position, exc)
            raise
        return FetchDataInfo(metadata, data[:valid] if valid < len(data) else data)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= the target;
        None if this segment has none."""
        if starting_offset is None:
            starting_offset = self.base_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for batch_position, header in self.log.iter_headers(position):
            base_offset = header.base_offset
            if (header.max_timestamp < timestamp
                    or base_offset + header.last_offset_delta < starting_offset):
                continue
            if base_offset >= starting_offset and not header.attributes & COMPRESSION_CODEC_MASK:
                found = self._first_record_if_at_or_after(batch_position, header, timestamp)
                if found is not None:
                    return found
            batch = RecordBatch(self.log.read(batch_position, header.size_in_bytes))
            for record in batch.records():
                record_timestamp = batch.timestamp_of(record)
                offset = batch.offset_of(record)
                if record_timestamp >= timestamp and offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(
                        record_timestamp,
                        offset,
                        None if epoch == NO_PARTITION_LEADER_EPOCH else epoch,
                    )
        return None

    def _first_record_if_at_or_after(self, position: int, header: BatchHeader,
                                     timestamp: int) -> TimestampAndOffset | None:
        """The first record of an uncompressed batch, if its timestamp is >= the target:
        read from its first bytes (length, attributes, timestamp and offset deltas) without
        reading or decoding the whole batch (the usual case of a lookup landing on a batch
        boundary). None when it does not qualify or does not parse; the caller then decodes
        the batch."""
        head = self.log.read(position + RECORD_BATCH_OVERHEAD, _FIRST_RECORD_PREFIX)
        try:
            # The length: skipped (one or two bytes inline, longer through read_varint).
            if head[0] < 0x80:
                pos = 1
            elif head[1] < 0x80:
                pos = 2
            else:
                _, pos = read_varint(head, 0)
            pos += 1  # attributes
            b = head[pos]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                timestamp_delta, pos = read_varlong(head, pos)
            b = head[pos]
            offset_delta = (b >> 1) ^ -(b & 1) if b < 0x80 else read_varint(head, pos)[0]
        except (InvalidRecordError, IndexError):
            return None
        if header.attributes & TIMESTAMP_TYPE_MASK:
            record_timestamp = header.max_timestamp  # LogAppendTime: the batch's for all
        else:
            record_timestamp = header.base_timestamp + timestamp_delta
        if record_timestamp < timestamp or offset_delta != 0:
            return None
        epoch = header.partition_leader_epoch
        return TimestampAndOffset(record_timestamp, header.base_offset,
                                  None if epoch == NO_PARTITION_LEADER_EPOCH else epoch)

    # -- rolling --

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """How long this segment has been open, by the first batch's timestamp if it has
        one, else by the wall clock since the segment was created."""
        if self._rolling_based_timestamp is None and self.log.size > 0:
            for _, header in self.log.iter_headers(0):
                self._rolling_based_timestamp = header.max_timestamp
                break
        if self._rolling_based_timestamp is not None and self._rolling_based_timestamp >= 0:
            return message_timestamp - self._rolling_based_timestamp
        return now - self._created_ms

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now: int,
    ) -> bool:
        """Kafka's roll rule: the segment would grow past segment.bytes, it is older than
        segment.ms minus its jitter, an index is full, or the offsets would not fit."""
        size = self.log.size
        if size > max_segment_bytes - messages_size or self._indexes_full():
            return True
        if not self.can_convert_to_relative_offset(max_offset_in_messages):
            return True
        return size > 0 and (
            self.time_waited_for_roll(now, max_timestamp_in_messages)
            > max_segment_ms - self.roll_jitter_ms
        )

    def on_become_inactive_segment(self) -> None:
        """The segment was rolled: record its largest timestamp in the time index and
        write the index files out."""
        self._append_final_time_index_entry()
        self.offset_index.close()
        self.time_index.close()
        self.log.trim()

    def _append_final_time_index_entry(self) -> None:
        if self._max_timestamp_so_far >= 0:
            self.time_index.maybe_append(
                self._max_timestamp_so_far,
                self._offset_of_max_timestamp_so_far,
                skip_full_check=True,
            )

    # -- truncation and recovery --

    def truncate_to(self, offset: int) -> int:
        """Remove the batches holding ``offset`` and later ones; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self._tail = []
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self._created_ms = now_ms(self._clock)
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._next_offset = None
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = (
            self._read_largest_timestamp()
        )
        return truncated

    def _read_largest_timestamp(self) -> tuple[int, int]:
        last = self.time_index.last_entry
        timestamp, offset = last.timestamp, last.offset
        start = self.offset_index.lookup(last.offset).position
        for _, header in self.log.iter_headers(start):
            if header.max_timestamp > timestamp:
                timestamp, offset = header.max_timestamp, header.last_offset
        return timestamp, offset

    def recover(self, leader_epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Re-read every batch, checking framing, CRC and offsets; rebuild both indexes;
        truncate at the first invalid batch. Returns the bytes truncated. The transaction
        index is emptied: the Log rebuilds it while it replays the producer state."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._max_timestamp_so_far = NO_TIMESTAMP
        self._offset_of_max_timestamp_so_far = self.base_offset
        valid_bytes = 0
        last_index_entry = 0
        next_offset = self.base_offset
        try:
            for position, header, batch in self.log.iter_batches(0):
                base_offset, last_offset_delta = header.base_offset, header.last_offset_delta
                last_offset = base_offset + last_offset_delta
                if crc32c(batch[ATTRIBUTES_OFFSET:]) != header.crc:
                    raise CorruptMessageError(
                        f"Record is corrupt (stored crc = {header.crc}) at position {position}"
                    )
                if last_offset_delta < 0 or base_offset < next_offset:
                    raise InvalidRecordError(
                        f"Batch at position {position} has offsets [{base_offset}, "
                        f"{last_offset}] but the previous batch ended at {next_offset - 1}"
                    )
                if not self.can_convert_to_relative_offset(last_offset):
                    raise InvalidRecordError(
                        f"Batch at position {position} has last offset {last_offset}, "
                        f"outside the segment starting at {self.base_offset}"
                    )
                if header.max_timestamp > self._max_timestamp_so_far:
                    self._max_timestamp_so_far = header.max_timestamp
                    self._offset_of_max_timestamp_so_far = last_offset
                if (valid_bytes - last_index_entry > self.index_interval_bytes
                        and not self._indexes_full()):
                    self.offset_index.append(last_offset, valid_bytes)
                    self.time_index.maybe_append(
                        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
                    )
                    last_index_entry = valid_bytes
                valid_bytes += len(batch)
                next_offset = last_offset + 1
                epoch = header.partition_leader_epoch
                if leader_epoch_cache is not None and epoch >= 0:
                    latest = leader_epoch_cache.latest_epoch
                    if latest is None or epoch > latest:
                        leader_epoch_cache.assign(epoch, base_offset)
        except (CorruptMessageError, InvalidRecordError) as exc:
            logger.warning(
                "Found invalid messages in log segment %s at byte offset %d: %s",
                self.log.path, valid_bytes, exc,
            )
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            logger.debug(
                "Truncated %d invalid bytes at the end of segment %s during recovery",
                truncated, self.log.path,
            )
        self._tail = []
        self.log.truncate_to(valid_bytes)
        self._append_final_time_index_entry()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._next_offset = next_offset
        self._rolling_based_timestamp = None
        return truncated

    def sanity_check(self) -> None:
        """CorruptIndexError (rebuild the indexes) if an index file of a non-empty log is
        missing (an empty segment's index files are created on first use), or an index
        is inconsistent with itself or with the log's size."""
        if self.log.size > 0:
            for index in (self.offset_index, self.time_index):
                if not index.file_exists():
                    raise CorruptIndexError(f"Index file {index.path} does not exist")
        self.offset_index.sanity_check(self.log.size)
        self.time_index.sanity_check()
        last_offset_entry = self.offset_index.last_entry
        if self.time_index.entries and self.time_index.last_entry.offset > (
            self.base_offset + _INT32_MAX
        ):
            raise CorruptIndexError(f"Time index {self.time_index.path} is out of range")
        if self.offset_index.entries and not self.can_convert_to_relative_offset(
            last_offset_entry.offset
        ):
            raise CorruptIndexError(f"Offset index {self.offset_index.path} is out of range")
        try:
            self.txn_index.sanity_check()
        except CorruptTransactionIndexError as exc:
            raise CorruptIndexError(str(exc)) from exc

    # -- files --

    def flush(self) -> None:
        """fsync the log and write out and fsync both indexes."""
        self.log.flush()
        has_data = self.log.size > 0
        self.offset_index.flush(create=has_data)
        self.time_index.flush(create=has_data)
        self.txn_index.flush()

    def close(self) -> None:
        """Write the indexes out (with the segment's largest timestamp) and close."""
        try:
            self._append_final_time_index_entry()
            has_data = self.log.size > 0
            self.offset_index.close(create=has_data)
            self.time_index.close(create=has_data)
        finally:
            self.log.close()

    def close_handlers(self) -> None:
        """Close the file without writing anything (the segment is being deleted)."""
        self.log.close_without_trim()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files, e.g. from ``.log`` to ``.log.deleted``."""
        directory = self.log.path.parent

        def renamed(path: Path) -> Path:
            name = path.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return directory / (name + new_suffix)

        self.log.rename_to(renamed(self.log.path))
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def update_dir(self, directory: Path) -> None:
        """The directory holding the files was renamed to ``directory``."""
        self.log.path = directory / self.log.path.name
        self.offset_index.path = directory / self.offset_index.path.name
        self.time_index.path = directory / self.time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def has_suffix(self, suffix: str) -> bool:
        return self.log.path.name.endswith(suffix)

    def delete_if_exists(self) -> None:
        self.log.delete()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()


def _last_offset(position: LogOffsetPosition) -> int:
    return position.offset
