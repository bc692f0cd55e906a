"""FileRecords: a segment's .log file, record batches laid end to end.

Appends are one ``pwrite`` at the end; reads are one ``pread`` (no mmap: a mapped file
that another part of the log truncates turns a later read into SIGBUS), or, for the Fetch
path, a :class:`~kafkaclone.common.file_region.FileRegion` the socket server sends with
``sendfile`` (Kafka's ``slice``). The size is tracked in memory, so it always means "bytes
of whole batches appended", whatever a torn write left behind the end.

The descriptor is a :class:`~kafkaclone.common.file_region.SharedFile`: closing the
FileRecords gives up its use, and the descriptor closes once no region being sent holds it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

from crc32c import crc32c

from kafkaclone.common.errors import CorruptMessageError
from kafkaclone.common.file_region import FileRegion, SharedFile
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    unpack_header,
)
from kafkaclone.protocol.records.common import LOG_OVERHEAD

HEADER_SCAN_CHUNK: Final = 8 * 1024
"""Bytes read at a time when only batch headers are needed (an index gap is ~4 KiB)."""
HEADER_SCAN_FIRST: Final = 1024
"""A header scan's first read; batches this large or larger are scanned header by header."""
BATCH_SCAN_CHUNK: Final = 4 * 1024 * 1024
"""Bytes read at a time when whole batches are needed (recovery)."""


def _check_header(batch_length: int, magic: int, position: int, path: Path) -> int:
    """The batch size; CorruptMessageError for an impossible length or magic."""
    size = batch_length + LOG_OVERHEAD
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptMessageError(
            f"Found record size {size} smaller than the minimum batch overhead "
            f"({RECORD_BATCH_OVERHEAD}) at position {position} in {path}"
        )
    if magic != MAGIC_V2:
        raise CorruptMessageError(
            f"Found unsupported magic {magic} at position {position} in {path}"
        )
    return size


_CLOSED: Final = SharedFile(-1)


class LogOffsetPosition(NamedTuple):
    """Where the batch holding an offset is: its last offset, position and size (Kafka's
    FileRecords.LogOffsetPosition)."""

    offset: int
    position: int
    size: int


class FileRecords:
    """The record batches of one segment file."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = False,
        read_only: bool = False,
        preallocate_bytes: int = 0,
    ) -> None:
        """Open ``path``. ``preallocate_bytes`` (Kafka's ``preallocate``) reserves the
        space of a new file up front; the file is trimmed to its batches on close."""
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        self._file = SharedFile(self._fd)
        self.path = path
        self._read_only = read_only
        self._size = os.fstat(self._fd).st_size
        if create and preallocate_bytes > 0 and self._size == 0:
            try:
                os.posix_fallocate(self._fd, 0, preallocate_bytes)
            except BaseException:
                self.close()
                raise

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the end; returns the bytes written."""
        total = len(data)
        written = os.pwrite(self._fd, data, self._size)
        if written < total:
            # A short write (a signal, a full disk): write the rest. Slicing only here
            # keeps the usual one-call append free of a new memoryview.
            view = memoryview(data)
            while written < total:
                written += os.pwrite(self._fd, view[written:], self._size + written)
        self._size += total
        return total

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file)."""
        size = min(size, self._size - position)
        if size <= 0:
            return b""
        return os.pread(self._fd, size, position)

    def slice(self, position: int, size: int) -> FileRegion:
        """``size`` bytes from ``position`` as a region of this file, to be sent as they are
        (the caller knows they are whole batches within the file)."""
        return FileRegion(self._file, position, size)

    def whole_batches_end(self, first: LogOffsetPosition, max_size: int,
                          max_offset: int | None) -> tuple[int, int]:
        """Where a read starting with the batch ``first`` (always taken) ends: (end
        position, next offset) of the batches from it that end within ``max_size`` bytes
        of its position and hold no offset at or past ``max_offset``. Headers only: no
        batch body is read (and no CRC checked, as Kafka's read does not)."""
        limit = min(self._size, first.position + max(max_size, first.size))
        next_offset = first.offset + 1
        end = first.position + first.size
        chunk = b""
        chunk_start = end
        unpack = HEADER.unpack_from
        want = HEADER_SCAN_FIRST
        while end + RECORD_BATCH_OVERHEAD <= limit:
            offset = end - chunk_start
            if offset + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk = os.pread(self._fd, min(want, limit - end), end)
                chunk_start = end
                offset = 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    break
            (base_offset, batch_length, _partition_leader_epoch, magic, _crc, _attributes,
             last_offset_delta, _base_timestamp, _max_timestamp, _producer_id,
             _producer_epoch, _base_sequence, _records_count) = unpack(chunk, offset)
            size = batch_length + LOG_OVERHEAD
            last_offset = base_offset + last_offset_delta
            if (size < RECORD_BATCH_OVERHEAD or magic != MAGIC_V2 or end + size > limit
                    or (max_offset is not None and last_offset >= max_offset)):
                break  # a damaged header ends the read before it, as a bytes read does
            end += size
            next_offset = last_offset + 1
            want = RECORD_BATCH_OVERHEAD if size >= HEADER_SCAN_FIRST else HEADER_SCAN_CHUNK
        return end, next_offset

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; returns the bytes removed."""
        on_disk = os.fstat(self._fd).st_size
        if target_size > self._size:
            raise ValueError(
                f"Attempt to truncate log segment {self.path} to {target_size} bytes failed, "
                f"size of this log segment is {self._size} bytes."
            )
        if target_size < on_disk:
            os.ftruncate(self._fd, target_size)
        truncated = self._size - target_size
        self._size = target_size
        return truncated

    def flush(self) -> None:
        os.fsync(self._fd)

    def trim(self) -> None:
        """Cut the file to its batches (drop preallocated space)."""
        if not self._read_only and os.fstat(self._fd).st_size > self._size:
            os.ftruncate(self._fd, self._size)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.trim()
            finally:
                self._release()

    def close_without_trim(self) -> None:
        """Close, leaving the file as it is (it is about to be deleted)."""
        if self._fd >= 0:
            self._release()

    def _release(self) -> None:
        """Give up this object's use of the descriptor: it closes now, or when the last
        region cut from it has been sent."""
        self._fd = -1
        self._file = _CLOSED

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def delete(self) -> bool:
        """Close and remove the file; False if it was already gone."""
        self.close_without_trim()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def last_modified_ms(self) -> int:
        return os.stat(self.path).st_mtime_ns // 1_000_000

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self.path, ns=(time.time_ns(), ms * 1_000_000))

    # -- scanning --

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[
        tuple[int, BatchHeader]
    ]:
        """(position, header) of each whole batch from ``start`` (a batch boundary) to
        ``end``. Stops at a batch cut short by the end; CorruptMessageError for a length
        or magic no batch can have."""
        limit = self._size if end is None else min(end, self._size)
        position = start
        chunk = b""
        chunk_start = start
        # Read a little first; then a chunk of headers while batches are small, or just the
        # next header once they are large (a chunk would hold only one).
        want = HEADER_SCAN_FIRST
        while position + RECORD_BATCH_OVERHEAD <= limit:
            offset = position - chunk_start
            if offset + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk = os.pread(self._fd, min(want, limit - position), position)
                chunk_start = position
                offset = 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    return
            header = unpack_header(chunk, offset)
            size = _check_header(header.batch_length, header.magic, position, self.path)
            if position + size > limit:
                return
            yield position, header
            position += size
            want = RECORD_BATCH_OVERHEAD if size >= HEADER_SCAN_FIRST else HEADER_SCAN_CHUNK

    def search_for_offset_with_size(self, target_offset: int,
                                    starting_position: int) -> LogOffsetPosition | None:
        """The first batch from ``starting_position`` (a batch boundary) whose last offset
        is at least ``target_offset``; None past the last batch (Kafka's
        searchForOffsetWithSize)."""
        # iter_headers' scan, on named locals rather than BatchHeaders: every fetch runs
        # it, over a dozen headers or more when batches are small, and building header
        # objects would cost it more than a microsecond.
        limit = self._size
        position = starting_position
        chunk = b""
        chunk_start = position
        unpack = HEADER.unpack_from
        want = HEADER_SCAN_FIRST
        while position + RECORD_BATCH_OVERHEAD <= limit:
            offset = position - chunk_start
            if offset + RECORD_BATCH_OVERHEAD > len(chunk):
                chunk = os.pread(self._fd, min(want, limit - position), position)
                chunk_start = position
                offset = 0
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    return None
            (base_offset, batch_length, _partition_leader_epoch, magic, _crc, _attributes,
             last_offset_delta, _base_timestamp, _max_timestamp, _producer_id,
             _producer_epoch, _base_sequence, _records_count) = unpack(chunk, offset)
            size = _check_header(batch_length, magic, position, self.path)
            if position + size > limit:
                return None
            last_offset = base_offset + last_offset_delta
            if last_offset >= target_offset:
                return LogOffsetPosition(last_offset, position, size)
            position += size
            want = RECORD_BATCH_OVERHEAD if size >= HEADER_SCAN_FIRST else HEADER_SCAN_CHUNK
        return None

    def iter_batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of each whole batch from ``start``, read in large
        chunks. Stops at a batch cut short by the end of the file; CorruptMessageError
        for a length or magic no batch can have."""
        limit = self._size
        position = start
        while position < limit:
            want = min(max(BATCH_SCAN_CHUNK, RECORD_BATCH_OVERHEAD), limit - position)
            chunk = memoryview(os.pread(self._fd, want, position))
            offset = 0
            while offset + RECORD_BATCH_OVERHEAD <= len(chunk):
                header = unpack_header(chunk, offset)
                size = _check_header(header.batch_length, header.magic, position + offset,
                                     self.path)
                if offset + size > len(chunk):
                    break
                yield position + offset, header, chunk[offset : offset + size]
                offset += size
            if offset == 0:
                # Not even one whole batch in the chunk: read exactly the next batch.
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    return
                header = unpack_header(chunk, 0)
                size = _check_header(header.batch_length, header.magic, position, self.path)
                if position + size > limit:
                    return
                batch = memoryview(os.pread(self._fd, size, position))
                if len(batch) < size:
                    return
                yield position, header, batch
                offset = size
            position += offset


def whole_batches_length(
    data: bytes | memoryview, max_offset: int | None = None, *, verify_crc: bool = False
) -> int:
    """The length of the longest prefix of ``data`` made of whole batches (each with a last
    offset below ``max_offset``, if given). With ``verify_crc`` the prefix also ends before
    the first batch that fails its CRC, and CorruptMessageError if that is the first."""
    view = memoryview(data)
    end = len(view)
    position = 0
    unpack = HEADER.unpack_from
    while position + RECORD_BATCH_OVERHEAD <= end:
        # Named locals, not a BatchHeader: every fetch runs this loop, and building the
        # header object would cost it a third of its time with small batches.
        (base_offset, batch_length, _partition_leader_epoch, _magic, crc, _attributes,
         last_offset_delta, _base_timestamp, _max_timestamp, _producer_id, _producer_epoch,
         _base_sequence, _records_count) = unpack(view, position)
        size = batch_length + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or position + size > end:
            break
        last_offset = base_offset + last_offset_delta
        if max_offset is not None and last_offset >= max_offset:
            break
        if verify_crc and crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            if position > 0:
                break
            raise CorruptMessageError(
                f"Found a corrupt batch (stored crc = {crc}) at offsets "
                f"[{base_offset}, {last_offset}]: refusing to serve it"
            )
        position += size
    return position
