"""Column-wise encoding of v2 records: keys and values given as Arrow-style binary columns
(an offsets array and one data buffer, as ``pyarrow.BinaryArray`` / ``StringArray`` hold
them) become the records of one or more record batches with numpy operations only, no
Python call per record. The counterpart of :mod:`kafkaclone.protocol.records.columnar`'s
decoder, used by the producer's ``send_batch`` (and so by the Spark writer).

The bytes of each batch's records are exactly what
:func:`kafkaclone.clients.records.encode_record` writes one at a time (a test checks it):
length, attributes 0, timestamp delta, offset delta, key, value, no headers. Varints are
written into a compact per-record scratch buffer, byte position by byte position across all
records at once (at most 10 passes);
the key and value bytes are copied into place run by run (records of one width, as
strided 2-D views), or through a boolean mask when the widths vary.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["CHUNK_RECORDS", "BinaryColumn", "EncodedRecords", "encode_records"]

Int64Array = npt.NDArray[np.int64]

CHUNK_RECORDS: Final = 16384
"""How many records a caller encodes per call: numpy's temporaries stay small enough
(128 KiB per column) to be reused by the allocator instead of mapped fresh each time,
which costs more than the arithmetic where page faults are slow (sandboxed VMs)."""
_SHIFTS: Final = np.arange(1, 10, dtype=np.uint64) * np.uint64(7)


@dataclass(frozen=True)
class BinaryColumn:
    """``n`` binary values: value ``i`` is ``data[offsets[i]:offsets[i + 1]]``, null where
    ``valid`` (if given) is False."""

    offsets: npt.NDArray[np.int64] | npt.NDArray[np.int32]
    data: npt.NDArray[np.uint8]
    valid: npt.NDArray[np.bool_] | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def of(cls, values: Sequence[bytes | None]) -> BinaryColumn:
        """A column of Python values (for tests and small inputs)."""
        lengths = np.array([0 if v is None else len(v) for v in values], dtype=np.int64)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(v for v in values if v is not None), dtype=np.uint8)
        valid = np.array([v is not None for v in values], dtype=np.bool_)
        return cls(offsets, data, None if valid.all() else valid)

    def lengths(self) -> Int64Array:
        """Each value's length, -1 for a null (the record's length field)."""
        offsets = self.offsets.astype(np.int64, copy=False)
        lengths = offsets[1:] - offsets[:-1]
        if self.valid is not None:
            lengths = np.where(self.valid, lengths, -1)
        return lengths

    def payload(self) -> npt.NDArray[np.uint8]:
        """The bytes of every value in order (the data buffer between the first and the
        last offset)."""
        return self.data[int(self.offsets[0]):int(self.offsets[-1])]

    def slice(self, start: int, stop: int) -> BinaryColumn:
        """Values ``start:stop`` (views, no copy)."""
        return BinaryColumn(self.offsets[start:stop + 1], self.data,
                            None if self.valid is None else self.valid[start:stop])

    def value(self, index: int) -> bytes | None:
        if self.valid is not None and not self.valid[index]:
            return None
        return self.data[int(self.offsets[index]):int(self.offsets[index + 1])].tobytes()


@dataclass(frozen=True)
class EncodedRecords:
    """The records of consecutive batches: batch ``b`` holds records
    ``starts[b]:starts[b + 1]`` and its bytes are ``buffer[positions[starts[b]]:
    positions[starts[b + 1]]]``."""

    buffer: npt.NDArray[np.uint8]
    starts: Int64Array
    """The first record of each batch, then the record count."""
    positions: Int64Array
    """Each record's first byte in ``buffer``, then the buffer's length."""
    record_sizes: Int64Array

    def batch_bytes(self, batch: int) -> bytes:
        first, end = self.starts[batch], self.starts[batch + 1]
        return self.buffer[self.positions[first]:self.positions[end]].tobytes()

    def batch_sizes(self) -> Int64Array:
        return self.positions[self.starts[1:]] - self.positions[self.starts[:-1]]


def zigzag(values: Int64Array) -> npt.NDArray[np.uint64]:
    v = values.astype(np.int64, copy=False)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def varint_sizes(zigzagged: npt.NDArray[np.uint64]) -> Int64Array:
    """Bytes of each (already zigzagged) varint: 1 + the number of 7-bit groups past the
    first."""
    sizes = np.ones(len(zigzagged), dtype=np.int64)
    for shift in _SHIFTS:
        more = (zigzagged >> shift) != 0
        if not more.any():
            break
        sizes += more
    return sizes


def pack_varints(fields: list[tuple[npt.NDArray[np.uint64], Int64Array]],
                 prefix: Int64Array | None = None) -> tuple[npt.NDArray[np.uint8], Int64Array]:
    """Each record's varints (``(zigzagged, sizes)`` per field, in order) back to back, as
    one compact buffer and each record's byte count. ``prefix[f]`` zero bytes follow field
    ``f`` (the attributes byte). Written into a small per-record scratch matrix, byte
    position by byte position of each field across all records at once."""
    count = len(fields[0][0])
    gaps = np.zeros(len(fields), dtype=np.int64) if prefix is None else prefix
    widths = np.zeros(count, dtype=np.int64)
    for (_z, sizes), gap in zip(fields, gaps.tolist(), strict=True):
        widths += sizes + gap
    row_width = int(widths.max(initial=0))
    scratch = np.zeros(count * row_width, dtype=np.uint8)
    matrix = scratch.reshape(count, row_width)
    column = np.zeros(count, dtype=np.int64)
    uniform: int | None = 0
    """The field's column when it is the same in every record (then written as a column
    slice, not scattered)."""
    rows = np.arange(count, dtype=np.int64) * row_width
    for (zigzagged, sizes), gap in zip(fields, gaps.tolist(), strict=True):
        for j in range(int(sizes.max(initial=0))):
            longer = sizes > j
            chunk = zigzagged >> np.uint64(7 * j)
            byte = (chunk & np.uint64(0x7F)).astype(np.uint8) | \
                ((sizes > j + 1).astype(np.uint8) << 7)
            if uniform is not None and longer.all():
                matrix[:, uniform + j] = byte
            else:
                scratch[(rows + column + j)[longer]] = byte[longer]
        column += sizes + gap
        first = int(sizes[0]) if count else 0
        uniform = None if uniform is None or not (sizes == first).all() else \
            uniform + first + gap
    if (widths == row_width).all():
        return scratch, widths
    keep = np.arange(row_width) < widths[:, None]
    return scratch.reshape(count, row_width)[keep], widths


def _copy_ranges(out: npt.NDArray[np.uint8], starts: Int64Array, lengths: Int64Array,
                 payload: npt.NDArray[np.uint8]) -> None:
    """Copy ``payload`` (the ranges' bytes, back to back) into the ranges
    ``[starts[i], starts[i] + lengths[i])`` of ``out`` (increasing, disjoint, not touching).

    Runs of ranges with one length and one stride (fixed-width values, the usual case) are
    copied as 2-D strided views, one numpy copy per run; many short runs (variable-width
    values) are copied through a boolean mask of ``out`` instead."""
    lengths = np.maximum(lengths, 0)
    count = len(lengths)
    if count == 0 or not lengths.any():
        return
    gaps = np.diff(starts)
    breaks = lengths[1:] != lengths[:-1]
    breaks[1:] |= gaps[1:] != gaps[:-1]
    firsts = np.concatenate(([0], np.flatnonzero(breaks) + 1, [count]))
    if len(firsts) - 1 <= max(16, count // 32):
        source = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths, out=source[1:])
        for a, b in zip(firsts[:-1].tolist(), firsts[1:].tolist(), strict=True):
            width = int(lengths[a])
            if width == 0:
                continue
            rows = b - a
            stride = int(gaps[a]) if rows > 1 else width
            target = np.lib.stride_tricks.as_strided(
                out[int(starts[a]):], shape=(rows, width), strides=(stride, 1))
            rows_of = payload[int(source[a]):int(source[b])].reshape(rows, width)
            if width < 16:  # column by column: numpy's inner loop runs over the rows
                for c in range(width):
                    target[:, c] = rows_of[:, c]
            else:
                target[...] = rows_of
        return
    nonempty = lengths > 0
    edges = np.zeros(len(out) + 1, dtype=np.int8)
    edges[starts[nonempty]] = 1
    edges[starts[nonempty] + lengths[nonempty]] = -1
    mask = np.cumsum(edges[:-1], dtype=np.int8).view(np.bool_)
    out[mask] = payload


def _uniform_runs(sizes: list[Int64Array]) -> list[int] | None:
    """The bounds of the runs of consecutive records whose every field has one width
    (fixed-width keys and values: a few runs per batch, where the offset delta's varint
    grows), or None when there are too many runs for run-by-run encoding to pay."""
    count = len(sizes[0])
    if count == 0:
        return None
    changes = np.zeros(count - 1, dtype=np.bool_)
    for field in sizes:
        changes |= field[1:] != field[:-1]
    breaks = np.flatnonzero(changes)
    if len(breaks) > max(8, count // 512):
        return None
    return [0, *(breaks + 1).tolist(), count]


def _write_varint_columns(rows: npt.NDArray[np.uint8], column: int,
                          zigzagged: npt.NDArray[np.uint64], size: int) -> int:
    """Write each row's varint (``size`` bytes in every row) at ``column`` of ``rows``,
    one byte position at a time (or all rows at once when they hold one value: lengths,
    equal timestamps); returns the next column."""
    first = zigzagged[0]
    if (zigzagged == first).all():
        # One byte position at a time: numpy's loop over a strided 1-D column is fast, a
        # 2-D block a few bytes wide is not.
        for j, constant in enumerate(_varint_bytes(int(first), size)):
            if constant:  # the buffer starts zeroed
                rows[:, column + j] = constant
        return column + size
    for j in range(size):
        byte = ((zigzagged >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        if j + 1 < size:
            byte |= 0x80
        rows[:, column + j] = byte
    return column + size


def _varint_bytes(zigzagged: int, size: int) -> bytes:
    return bytes(((zigzagged >> (7 * j)) & 0x7F) | (0x80 if j + 1 < size else 0)
                 for j in range(size))


def _encode_run(out: npt.NDArray[np.uint8], positions: Int64Array, a: int, b: int,
                fields: list[tuple[npt.NDArray[np.uint64], Int64Array]],
                value_len: tuple[npt.NDArray[np.uint64], Int64Array],
                keys: BinaryColumn | None, values: BinaryColumn,
                key_length: int, value_length: int) -> None:
    """Records ``a:b``, all of one layout, written as the rows of a 2-D view of ``out``:
    each field a column (or a block of columns for the key and value bytes)."""
    width = int(positions[a + 1] - positions[a])
    rows = out[int(positions[a]):int(positions[b])].reshape(b - a, width)
    column = 0
    for index, (zigzagged, sizes) in enumerate(fields):
        column = _write_varint_columns(rows, column, zigzagged[a:b], int(sizes[a]))
        if index == 0:
            column += 1  # the attributes byte: 0
    if key_length > 0 and keys is not None:
        start = int(keys.offsets[a])
        rows[:, column:column + key_length] = \
            keys.data[start:start + (b - a) * key_length].reshape(b - a, key_length)
        column += key_length
    column = _write_varint_columns(rows, column, value_len[0][a:b], int(value_len[1][a]))
    if value_length > 0:
        start = int(values.offsets[a])
        rows[:, column:column + value_length] = \
            values.data[start:start + (b - a) * value_length].reshape(b - a, value_length)
    # The last column, the header count, stays 0.


def encode_records(values: BinaryColumn, keys: BinaryColumn | None, timestamps: Int64Array,
                   batch_size: int) -> EncodedRecords:
    """Encode ``len(values)`` records (no headers) into consecutive batches of about
    ``batch_size`` bytes each (a batch ends at the first record that reaches a multiple of
    ``batch_size``; one record larger than that is a batch of its own). Offset deltas count
    from each batch's first record, timestamp deltas from its first record's timestamp."""
    count = len(values)
    value_lengths = values.lengths()
    key_lengths = keys.lengths() if keys is not None else np.full(count, -1, dtype=np.int64)
    value_len_z = zigzag(value_lengths)
    key_len_z = zigzag(key_lengths)
    value_len_sizes = varint_sizes(value_len_z)
    key_len_sizes = varint_sizes(key_len_z)
    payload = np.maximum(value_lengths, 0) + np.maximum(key_lengths, 0)
    # Batches: cut on an estimate with the largest delta varints (3 + 10 bytes) so that the
    # cut does not depend on the deltas it decides.
    estimate = np.cumsum(payload + value_len_sizes + key_len_sizes + 20)
    cuts = np.searchsorted(estimate, np.arange(batch_size, int(estimate[-1]) if count else 0,
                                               batch_size), side="left") + 1
    starts = np.unique(np.concatenate(([0], cuts[cuts < count], [count]))).astype(np.int64)
    batch_of = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    first = starts[batch_of]
    offset_delta_z = zigzag(np.arange(count, dtype=np.int64) - first)
    ts = timestamps.astype(np.int64, copy=False)
    timestamp_delta_z = zigzag(ts - ts[first])
    offset_delta_sizes = varint_sizes(offset_delta_z)
    timestamp_delta_sizes = varint_sizes(timestamp_delta_z)
    body = 1 + timestamp_delta_sizes + offset_delta_sizes + key_len_sizes + \
        value_len_sizes + payload + 1
    body_z = zigzag(body)
    body_sizes = varint_sizes(body_z)
    record_sizes = body_sizes + body
    positions = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(record_sizes, out=positions[1:])
    out = np.zeros(int(positions[-1]), dtype=np.uint8)  # the header count: 0
    fields = [(body_z, body_sizes), (timestamp_delta_z, timestamp_delta_sizes),
              (offset_delta_z, offset_delta_sizes), (key_len_z, key_len_sizes)]
    runs = _uniform_runs([body_sizes, timestamp_delta_sizes, offset_delta_sizes,
                          key_lengths, value_lengths])
    if runs is not None:
        for a, b in itertools.pairwise(runs):
            _encode_run(out, positions, a, b, fields, (value_len_z, value_len_sizes),
                        keys, values, int(key_lengths[a]), int(value_lengths[a]))
        return EncodedRecords(out, starts, positions, record_sizes)
    head, head_sizes = pack_varints(
        fields, prefix=np.array([1, 0, 0, 0], dtype=np.int64))  # 1: the attributes byte
    at = positions[:-1].copy()
    _copy_ranges(out, at, head_sizes, head)
    at += head_sizes
    if keys is not None:
        _copy_ranges(out, at, key_lengths, keys.payload())
    at += np.maximum(key_lengths, 0)
    value_head, _ = pack_varints([(value_len_z, value_len_sizes)])
    _copy_ranges(out, at, value_len_sizes, value_head)
    at += value_len_sizes
    _copy_ranges(out, at, value_lengths, values.payload())
    return EncodedRecords(out, starts, positions, record_sizes)
