"""A segment's sparse indexes, in Kafka's binary formats (all integers big-endian).

``.index`` (OffsetIndex), 8 bytes per entry::

    relativeOffset  int32   offset - segment base offset (the last offset of the batch)
    position        int32   byte position of that batch in the .log file

``.timeindex`` (TimeIndex), 12 bytes per entry::

    timestamp       int64   the largest timestamp seen so far in the segment
    relativeOffset  int32   the offset of the batch holding it, relative to the base

Both are sorted, so lookups are binary searches. The entries live in memory in
``array`` columns (one C int per field) and ``bisect`` searches them; the file is the
persistent copy. New entries are written to the file on ``flush()`` and ``close()`` only:
after a crash the log is recovered from the recovery point and the indexes of every
segment past it are rebuilt from the .log file, so an index never needs to be more
current on disk than the data it points into. Unlike Kafka, files are not preallocated
to ``segment.index.bytes``: a file is always exactly its entries.

A new segment's index files are created when first written (as Kafka's LazyIndex creates
them on first use), not with the segment: an empty segment has none, and a missing index
file of an empty segment is an empty index (``LogSegment.sanity_check``). Writing one out
(``flush``/``close``) with ``create=True`` creates the file even with no entries, which the
segment asks for once its log holds data (a missing index of a non-empty log is rebuilt).
"""

from __future__ import annotations

import operator
import os
import sys
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice
from pathlib import Path
from typing import Final, NamedTuple

from kafkaclone.log.common import NO_TIMESTAMP

_LITTLE_ENDIAN: Final = sys.byteorder == "little"
_INT32_MAX: Final = 2**31 - 1


class CorruptIndexError(Exception):
    """An index file whose content cannot be right; the segment rebuilds it from the log."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def _read_file(path: Path, entry_size: int) -> tuple[bytes, int]:
    """The whole entries of a file and its length (-1 if there is no file)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return b"", -1
    return data[: len(data) - len(data) % entry_size], len(data)


def _big_endian(column: array[int]) -> array[int]:
    if _LITTLE_ENDIAN:
        column.byteswap()
    return column


class _Index:
    """What the two indexes share: the file, the entry count, flushing, truncation."""

    ENTRY_SIZE: int = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max(max_index_size, 0) // self.ENTRY_SIZE
        self._offsets: array[int] = array("i")
        self._persisted = 0
        """How many entries the file holds (the first ones)."""
        self._file_length = 0
        self._file_exists = False

    # -- entries --

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self._max_entries

    def resize(self, max_index_size: int) -> None:
        """Change the capacity (segment.index.bytes changed, or the segment rolled)."""
        self._max_entries = max(max_index_size, 0) // self.ENTRY_SIZE

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > _INT32_MAX:
            raise ValueError(
                f"offset {offset} does not fit the index of the segment at {self.base_offset}"
            )
        return relative

    def _slot_after_truncation(self, offset: int) -> int:
        """How many entries stay when truncating to ``offset`` (those below it)."""
        return bisect_left(self._offsets, offset - self.base_offset)

    def _drop_from(self, keep: int) -> None:
        raise NotImplementedError

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        keep = self._slot_after_truncation(offset)
        if keep < len(self._offsets):
            self._drop_from(keep)

    def reset(self) -> None:
        """Remove every entry."""
        self._drop_from(0)

    # -- the file --

    def _encode(self, start: int) -> bytes:
        raise NotImplementedError

    def _write_pending(self, *, fsync: bool, create: bool) -> None:
        pending = len(self._offsets) - self._persisted
        length = len(self._offsets) * self.ENTRY_SIZE
        if not self._file_exists and not self._offsets and not create:
            return  # nothing to write, and no file needed yet
        if self._file_exists and pending == 0 and self._file_length == length and not fsync:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if pending:
                os.pwrite(fd, self._encode(self._persisted), self._persisted * self.ENTRY_SIZE)
            if self._file_length > length:
                os.ftruncate(fd, length)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._persisted = len(self._offsets)
        self._file_length = length
        self._file_exists = True

    def _truncate_file(self, entries: int) -> None:
        if entries < self._persisted:
            self._persisted = entries

    def flush(self, *, create: bool = True) -> None:
        """Write the entries not yet in the file and fsync it; with no file yet and no
        entries, create it only if ``create``."""
        self._write_pending(fsync=True, create=create)

    def close(self, *, create: bool = True) -> None:
        """Write the entries not yet in the file (no fsync: flush first for durability);
        with no file yet and no entries, create it only if ``create``."""
        self._write_pending(fsync=False, create=create)

    def rename_to(self, path: Path) -> None:
        try:
            os.replace(self.path, path)
        except FileNotFoundError:
            pass
        self.path = path

    def delete(self) -> bool:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def file_exists(self) -> bool:
        return self.path.exists()


class OffsetIndex(_Index):
    """Offset -> position of the batch holding it, one entry per index.interval.bytes."""

    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int = -1) -> None:
        """Load ``path`` if it exists. ``max_index_size`` is segment.index.bytes (-1: the
        current size of the file, for reading only)."""
        data, length = _read_file(path, self.ENTRY_SIZE)
        if max_index_size < 0:
            max_index_size = max(length, 0)
        super().__init__(path, base_offset, max_index_size)
        interleaved = array("i")
        interleaved.frombytes(data)
        _big_endian(interleaved)
        self._offsets = interleaved[0::2]
        self._positions: array[int] = interleaved[1::2]
        self._persisted = len(self._offsets)
        self._file_length = max(length, 0)
        self._file_exists = length >= 0

    @property
    def last_offset(self) -> int:
        """The last indexed offset, or the base offset if the index is empty."""
        if not self._offsets:
            return self.base_offset
        return self.base_offset + self._offsets[-1]

    @property
    def last_entry(self) -> OffsetPosition:
        if not self._offsets:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[-1], self._positions[-1])

    def entry(self, n: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + self._offsets[n], self._positions[n])

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; (base offset, 0) if none.
        The batch holding ``target_offset`` starts at or after the position returned."""
        slot = bisect_right(self._offsets, target_offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._offsets[slot], self._positions[slot])

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must be larger than the last one."""
        offsets = self._offsets
        relative = offset - self.base_offset
        if offsets and relative <= offsets[-1]:
            raise ValueError(
                f"Attempt to append an offset ({offset}) to position {len(offsets)} "
                f"no larger than the last offset appended ({self.last_offset}) to {self.path}."
            )
        if len(offsets) >= self._max_entries:
            raise ValueError(f"Attempt to append to a full index (size = {self.entries}).")
        if relative < 0 or relative > _INT32_MAX:
            self._relative(offset)  # raises
        offsets.append(relative)
        self._positions.append(position)

    def _drop_from(self, keep: int) -> None:
        del self._offsets[keep:]
        del self._positions[keep:]
        self._truncate_file(keep)

    def _encode(self, start: int) -> bytes:
        count = len(self._offsets) - start
        interleaved = array("i", bytes(8 * count))
        interleaved[0::2] = self._offsets[start:]
        interleaved[1::2] = self._positions[start:]
        return _big_endian(interleaved).tobytes()

    def sanity_check(self, log_size: int | None = None) -> None:
        """CorruptIndexError unless the file holds whole entries, strictly increasing in
        offset and position, pointing inside a log of ``log_size`` bytes."""
        if self._file_length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._file_length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}."
            )
        offsets, positions = self._offsets, self._positions
        if not offsets:
            return
        if offsets[0] < 0 or positions[0] < 0:
            raise CorruptIndexError(f"Corrupt index found, index file ({self.path}) has a "
                                    f"negative first entry ({offsets[0]}, {positions[0]}).")
        if not _strictly_increasing(offsets) or not _strictly_increasing(positions):
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has entries out of order."
            )
        if log_size is not None and positions[-1] >= log_size:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) points at position "
                f"{positions[-1]} beyond the end of the log ({log_size} bytes)."
            )


class TimeIndex(_Index):
    """Timestamp -> offset: an entry whenever the segment's largest timestamp grows, at
    most one per index.interval.bytes (and one when the segment is closed)."""

    ENTRY_SIZE = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int = -1) -> None:
        data, length = _read_file(path, self.ENTRY_SIZE)
        if max_index_size < 0:
            max_index_size = max(length, 0)
        super().__init__(path, base_offset, max_index_size)
        self._timestamps, self._offsets = _decode_time_entries(data)
        self._persisted = len(self._offsets)
        self._file_length = max(length, 0)
        self._file_exists = length >= 0

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) if the index is empty."""
        if not self._offsets:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._offsets[-1])

    def entry(self, n: int) -> TimestampOffset:
        return TimestampOffset(self._timestamps[n], self.base_offset + self._offsets[n])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= the target; (-1, base offset) if none.
        Records with a timestamp >= the target lie at or after the offset returned."""
        slot = bisect_right(self._timestamps, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._offsets[slot])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last one."""
        offsets, timestamps = self._offsets, self._timestamps
        if not skip_full_check and len(offsets) >= self._max_entries:
            raise ValueError(f"Attempt to append to a full time index (size = {self.entries}).")
        relative = offset - self.base_offset
        if offsets:
            if relative < offsets[-1]:
                raise ValueError(
                    f"Attempt to append an offset ({offset}) to slot {self.entries} no larger "
                    f"than the last offset appended ({self.last_entry.offset}) to {self.path}."
                )
            if timestamp < timestamps[-1]:
                raise ValueError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no "
                    f"larger than the last timestamp appended ({timestamps[-1]}) to "
                    f"{self.path}."
                )
            if timestamp == timestamps[-1]:
                return
        elif timestamp <= NO_TIMESTAMP:
            return
        if relative < 0 or relative > _INT32_MAX:
            self._relative(offset)  # raises
        timestamps.append(timestamp)
        offsets.append(relative)

    def _drop_from(self, keep: int) -> None:
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self._truncate_file(keep)

    def _encode(self, start: int) -> bytes:
        return _encode_time_entries(self._timestamps[start:], self._offsets[start:])

    def sanity_check(self) -> None:
        """CorruptIndexError unless the file holds whole entries with strictly increasing
        timestamps and non-decreasing, non-negative offsets."""
        if self._file_length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Time index file {self.path} is corrupt, found {self._file_length} bytes "
                f"which is neither positive nor a multiple of {self.ENTRY_SIZE}."
            )
        if not self._offsets:
            return
        if self._offsets[0] < 0:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has a negative "
                f"relative offset ({self._offsets[0]})."
            )
        if not _strictly_increasing(self._timestamps) or not _non_decreasing(self._offsets):
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has entries out "
                "of order."
            )


def _strictly_increasing(column: array[int]) -> bool:
    return all(map(operator.lt, column, islice(column, 1, None)))


def _non_decreasing(column: array[int]) -> bool:
    return all(map(operator.le, column, islice(column, 1, None)))


# A time index entry is 12 bytes: an int64 then an int32. The columns are split out of (and
# woven back into) the packed entries with strided slice copies, one per byte of a field,
# which keeps loading and writing in C instead of a Python loop per entry.


def _decode_time_entries(data: bytes) -> tuple[array[int], array[int]]:
    count = len(data) // 12
    timestamps = bytearray(8 * count)
    offsets = bytearray(4 * count)
    for byte in range(8):
        timestamps[byte::8] = data[byte::12]
    for byte in range(4):
        offsets[byte::4] = data[8 + byte :: 12]
    timestamp_column = array("q")
    timestamp_column.frombytes(timestamps)
    offset_column = array("i")
    offset_column.frombytes(offsets)
    return _big_endian(timestamp_column), _big_endian(offset_column)


def _encode_time_entries(timestamps: array[int], offsets: array[int]) -> bytes:
    count = len(offsets)
    timestamp_bytes = _big_endian(array("q", timestamps)).tobytes()
    offset_bytes = _big_endian(array("i", offsets)).tobytes()
    out = bytearray(12 * count)
    for byte in range(8):
        out[byte::12] = timestamp_bytes[byte::8]
    for byte in range(4):
        out[8 + byte :: 12] = offset_bytes[byte::4]
    return bytes(out)
