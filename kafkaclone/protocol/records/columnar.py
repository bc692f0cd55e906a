"""Record batches decoded column-wise, for readers that want whole columns (Arrow, Spark).

``decode_columns(buf, start, end)`` reads the raw record bytes of a Fetch response (v2
batches of every codec, legacy v0/v1 message sets too, a trailing partial batch skipped)
and returns a ``RecordColumns``: the offsets, timestamps, timestamp types, keys, values and
headers of the records whose offset lies in ``[start, end)``, as flat buffers:

- ``offsets``, ``timestamps`` (ms), ``timestamp_types``: one int64 / int64 / int32 per record;
- keys and values: one ``data`` buffer (the batches' records sections, inflated and joined)
  with a start position and a length per record (length -1: null), so nothing is copied
  out of the fetched bytes per record;
- headers: only for the records that have any, ``{row: [(key, value), ...]}``.

With numpy installed (the ``spark`` extra brings it) the records are parsed with array
operations: the record starts are found with one pass over the length prefixes (or none
when a batch's records all have the same size, checked exactly), every field is then
decoded for all records at once. Without numpy the same columns are built by a plain loop,
in ``array.array`` buffers. ``RecordColumns.to_arrow()`` turns the columns into pyarrow
arrays (keys and values go through a binary-view array over ``data``, so pyarrow copies
each value once, in C++).

Errors are those of ``RecordBatch.records()``: CorruptMessageError for a bad CRC (checked
unless ``check_crcs=False``, as the consumer's ``check.crcs``), InvalidRecordError for
records that do not parse. Control batches (transaction markers) are skipped, as
consumers skip them; aborted transactions are not filtered (read_uncommitted).
"""

from __future__ import annotations

import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from crc32c import crc32c

from kafkaclone.common.errors import InvalidRecordError
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    iter_batches,
)
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    CREATE_TIME,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_MASK,
    BytesLike,
)
from kafkaclone.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    decompress,
)
from kafkaclone.protocol.records.legacy import LegacyRecordBatch
from kafkaclone.protocol.records.record import Header, _decode_header, read_varint, read_varlong

try:
    import numpy as np
except ImportError:  # pragma: no cover - the spark extra brings numpy
    np = None  # type: ignore[assignment]
    HAVE_NUMPY = False
else:
    HAVE_NUMPY = True

if TYPE_CHECKING:
    import pyarrow as pa

OFFSET_MAX: Final = (1 << 63) - 1
_PAD: Final = 16
"""Zero bytes after the joined data, so fixed-width gathers never leave the buffer."""


@dataclass(eq=False)
class RecordColumns:
    """Decoded records as columns (see the module docstring)."""

    count: int
    offsets: Any
    """int64 per record (numpy array, or ``array('q')`` without numpy)."""
    timestamps: Any
    """int64 milliseconds per record."""
    timestamp_types: Any
    """int32 per record: 0 CreateTime, 1 LogAppendTime (-1 for magic 0 messages)."""
    data: bytes
    """The inflated records sections the key and value positions point into, followed by
    16 zero bytes (so 8-byte reads at any position stay inside)."""
    key_starts: Any
    key_lengths: Any
    """int32 per record; -1 for a null key."""
    value_starts: Any
    value_lengths: Any
    headers: dict[int, list[Header]] = field(default_factory=dict)
    """Headers of the rows that have any (row index -> headers); empty if not decoded."""
    next_offset: int | None = None
    """The offset after the last complete batch in the buffer (records outside the range
    and control batches included): where the next fetch of this partition starts. None if
    the buffer held no complete batch."""
    bytes_consumed: int = 0
    """Bytes of the buffer taken by complete batches (a partial tail is not counted)."""

    @classmethod
    def empty(cls, next_offset: int | None = None) -> RecordColumns:
        return cls(
            0,
            _int_array("q", 0),
            _int_array("q", 0),
            _int_array("i", 0),
            bytes(_PAD),
            _int_array("q", 0),
            _int_array("i", 0),
            _int_array("q", 0),
            _int_array("i", 0),
            next_offset=next_offset,
        )

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"RecordColumns(count={self.count}, next_offset={self.next_offset})"

    def key(self, row: int) -> bytes | None:
        length = int(self.key_lengths[row])
        if length < 0:
            return None
        start = int(self.key_starts[row])
        return self.data[start : start + length]

    def value(self, row: int) -> bytes | None:
        length = int(self.value_lengths[row])
        if length < 0:
            return None
        start = int(self.value_starts[row])
        return self.data[start : start + length]

    def header_list(self, row: int) -> list[Header]:
        return self.headers.get(row, [])

    def rows(self) -> Iterator[tuple[int, int, int, bytes | None, bytes | None, list[Header]]]:
        """``(offset, timestamp, timestamp_type, key, value, headers)`` per record (builds
        Python objects: for tests and record-at-a-time consumers)."""
        for row in range(self.count):
            yield (
                int(self.offsets[row]),
                int(self.timestamps[row]),
                int(self.timestamp_types[row]),
                self.key(row),
                self.value(row),
                self.header_list(row),
            )

    # -- pyarrow --------------------------------------------------------------------------

    def to_arrow(self, *, include_headers: bool = True) -> dict[str, pa.Array]:
        """pyarrow arrays named as Spark's Kafka source names them: ``key``, ``value``
        (binary), ``offset`` (int64), ``timestamp`` (timestamp[us, UTC]), ``timestampType``
        (int32) and, if ``include_headers``, ``headers``
        (list<element: struct<key: string, value: binary>>). Needs pyarrow and numpy."""
        import numpy
        import pyarrow

        n = self.count
        data = pyarrow.py_buffer(self.data)
        out: dict[str, pyarrow.Array] = {
            "key": _binary_array(self.data, data, self.key_starts, self.key_lengths, n),
            "value": _binary_array(self.data, data, self.value_starts, self.value_lengths, n),
            "offset": pyarrow.array(numpy.asarray(self.offsets, dtype=numpy.int64)),
            "timestamp": pyarrow.array(
                numpy.asarray(self.timestamps, dtype=numpy.int64) * 1000,
                pyarrow.timestamp("us", tz="UTC"),
            ),
            "timestampType": pyarrow.array(
                numpy.asarray(self.timestamp_types, dtype=numpy.int32)
            ),
        }
        if include_headers:
            out["headers"] = self._headers_to_arrow()
        return out

    def _headers_to_arrow(self) -> pa.Array:
        import numpy
        import pyarrow

        header_type = header_arrow_type()
        counts = numpy.zeros(self.count, dtype=numpy.int32)
        keys: list[str] = []
        values: list[bytes | None] = []
        for row in sorted(self.headers):
            row_headers = self.headers[row]
            counts[row] = len(row_headers)
            for key, value in row_headers:
                # Spark reads header keys as Java strings: invalid UTF-8 is replaced.
                keys.append(key.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
                values.append(value)
        offsets = numpy.zeros(self.count + 1, dtype=numpy.int32)
        numpy.cumsum(counts, out=offsets[1:])
        element_type = header_type.value_type
        items = pyarrow.StructArray.from_arrays(
            [pyarrow.array(keys, pyarrow.string()), pyarrow.array(values, pyarrow.binary())],
            fields=list(element_type),
        )
        return pyarrow.ListArray.from_arrays(pyarrow.array(offsets), items, type=header_type)


def header_arrow_type() -> pa.DataType:
    """``list<element: struct<key: string, value: binary>>``, Spark's headers column."""
    import pyarrow

    return pyarrow.list_(
        pyarrow.field(
            "element",
            pyarrow.struct(
                [pyarrow.field("key", pyarrow.string()), pyarrow.field("value", pyarrow.binary())]
            ),
        )
    )


def _binary_array(raw: bytes, data: pa.Buffer, starts: Any, lengths: Any, n: int) -> pa.Array:
    """A binary array of ``n`` values at ``starts``/``lengths`` in ``raw``: an Arrow binary
    view array over the buffer (16 bytes per value: length, then the value itself if it
    fits in 12 bytes, else a 4-byte prefix, buffer index 0 and the start), cast to binary."""
    import numpy
    import pyarrow

    lengths_np = numpy.asarray(lengths, dtype=numpy.int64)
    valid = lengths_np >= 0
    if not valid.any():
        return pyarrow.nulls(n, pyarrow.binary())
    starts_np = numpy.asarray(starts, dtype=numpy.int64)
    sizes = numpy.where(valid, lengths_np, 0).astype(numpy.uint64)
    raw_np = numpy.frombuffer(raw, dtype=numpy.uint8)
    words = byte_words(raw_np)  # raw ends with _PAD zero bytes
    # Per value 16 bytes = four uint32: the length; then the value itself if it is 12 bytes
    # or shorter (zero past its end), else its first 4 bytes, buffer index 0, its start.
    views = numpy.zeros((n, 4), dtype="<u4")
    views[:, 0] = sizes
    first = words[numpy.clip(starts_np, 0, len(words) - 1)]
    one = numpy.uint64(1)
    byte_masks = (one << (numpy.minimum(sizes, 7) * numpy.uint64(8))) - one
    first &= numpy.where(sizes >= 8, numpy.uint64((1 << 64) - 1), byte_masks)
    views[:, 1] = first & numpy.uint64(0xFFFFFFFF)
    short = sizes <= 12
    views[:, 2] = numpy.where(short, first >> numpy.uint64(32), 0)
    tail_rows = numpy.flatnonzero(short & (sizes > 8))
    if len(tail_rows):
        tail_sizes = sizes[tail_rows] - numpy.uint64(8)
        tail = words[numpy.clip(starts_np[tail_rows] + 8, 0, len(words) - 1)]
        tail &= (numpy.uint64(1) << (tail_sizes * numpy.uint64(8))) - numpy.uint64(1)
        views[tail_rows, 3] = tail & numpy.uint64(0xFFFFFFFF)
    long_rows = ~short
    views[long_rows, 2] = 0
    views[long_rows, 3] = starts_np[long_rows]
    validity = None
    if not valid.all():
        validity = pyarrow.py_buffer(numpy.packbits(valid, bitorder="little").tobytes())
    view_array = pyarrow.Array.from_buffers(
        pyarrow.binary_view(), n, [validity, pyarrow.py_buffer(views.tobytes()), data]
    )
    # binary_view -> large_binary copies in bulk; straight to binary goes value by value.
    return view_array.cast(pyarrow.large_binary()).cast(pyarrow.binary())


def _int_array(typecode: str, n: int) -> Any:
    if HAVE_NUMPY:
        return np.zeros(n, dtype={"q": np.int64, "i": np.int32}[typecode])
    return array.array(typecode, bytes(n * array.array(typecode).itemsize))


# -- the batch pass -----------------------------------------------------------------------


@dataclass
class _Batches:
    """What the batch pass collects: the inflated records sections and per batch fields."""

    pieces: list[BytesLike] = field(default_factory=list)
    base_offsets: list[int] = field(default_factory=list)
    base_timestamps: list[int] = field(default_factory=list)
    log_append_times: list[int] = field(default_factory=list)
    """maxTimestamp for a LogAppendTime batch, else -1 (no override)."""
    timestamp_types: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    legacy: list[tuple[int, int, int, bytes | None, bytes | None]] = field(default_factory=list)
    """Records of magic 0/1 entries (offset, timestamp, type, key, value)."""
    next_offset: int | None = None
    bytes_consumed: int = 0


def _collect_batches(
    buf: BytesLike, start: int, end: int, check_crcs: bool, max_decompressed_size: int
) -> _Batches:
    out = _Batches()
    pieces_append = out.pieces.append
    base_offsets_append = out.base_offsets.append
    base_timestamps_append = out.base_timestamps.append
    log_append_times_append = out.log_append_times.append
    timestamp_types_append = out.timestamp_types.append
    counts_append = out.counts.append
    for batch in iter_batches(buf, allow_partial_tail=True):
        out.bytes_consumed += batch.size_in_bytes
        next_offset = batch.next_offset
        out.next_offset = next_offset if out.next_offset is None else max(
            out.next_offset, next_offset
        )
        if next_offset <= start:
            continue
        if isinstance(batch, LegacyRecordBatch):
            if batch.offset < start and not batch.is_compressed:
                continue
            if check_crcs:
                batch.ensure_valid()
            out.legacy.extend(
                (r.offset, r.timestamp, r.timestamp_type, r.key, r.value)
                for r in batch.records(max_decompressed_size=max_decompressed_size)
                if start <= r.offset < end
            )
            continue
        assert isinstance(batch, RecordBatch)
        header = batch.header
        if header.base_offset >= end:
            continue
        if check_crcs and crc32c(batch.view[ATTRIBUTES_OFFSET:]) != header.crc:
            batch.ensure_valid()  # raises with Kafka's message
        attributes = header.attributes
        count = header.records_count
        if attributes & CONTROL_FLAG_MASK or count == 0:
            continue
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
        payload = batch.view[RECORD_BATCH_OVERHEAD:]
        if attributes & COMPRESSION_CODEC_MASK:
            codec = Codec.from_id(attributes & COMPRESSION_CODEC_MASK)
            payload = memoryview(decompress(codec, payload, max_size=max_decompressed_size))
        pieces_append(payload)
        base_offsets_append(header.base_offset)
        base_timestamps_append(header.base_timestamp)
        if attributes & TIMESTAMP_TYPE_MASK:
            log_append_times_append(header.max_timestamp)
            timestamp_types_append(LOG_APPEND_TIME)
        else:
            log_append_times_append(-1)
            timestamp_types_append(CREATE_TIME)
        counts_append(count)
    return out


def decode_columns(
    buf: BytesLike,
    start: int = 0,
    end: int = OFFSET_MAX,
    *,
    include_headers: bool = True,
    check_crcs: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    use_numpy: bool | None = None,
) -> RecordColumns:
    """The records of ``buf`` with ``start <= offset < end``, as columns (see the module
    docstring). ``use_numpy`` forces a path (default: numpy when installed)."""
    if use_numpy is None:
        use_numpy = HAVE_NUMPY
    elif use_numpy and not HAVE_NUMPY:
        raise RuntimeError("numpy is not installed")
    batches = _collect_batches(buf, start, end, check_crcs, max_decompressed_size)
    if not batches.pieces and not batches.legacy:
        columns = RecordColumns.empty(batches.next_offset)
    elif use_numpy and not batches.legacy:
        columns = _decode_numpy(batches, start, end, include_headers)
    else:
        columns = _decode_python(batches, start, end, include_headers)
    columns.next_offset = batches.next_offset
    columns.bytes_consumed = batches.bytes_consumed
    return columns


# -- plain Python -------------------------------------------------------------------------


def _decode_python(batches: _Batches, start: int, end: int, include_headers: bool) -> RecordColumns:
    offsets = array.array("q")
    timestamps = array.array("q")
    timestamp_types = array.array("i")
    key_starts = array.array("q")
    key_lengths = array.array("i")
    value_starts = array.array("q")
    value_lengths = array.array("i")
    headers: dict[int, list[Header]] = {}
    data = bytearray()

    def append_blob(
        blob: bytes | None, starts: array.array[int], lengths: array.array[int]
    ) -> None:
        if blob is None:
            starts.append(0)
            lengths.append(-1)
        else:
            starts.append(len(data))
            lengths.append(len(blob))
            data.extend(blob)

    # Legacy messages first keep their relative order with v2 batches only when a buffer
    # does not mix formats; a broker never mixes them within one partition's fetch.
    for offset, timestamp, timestamp_type, key, value in batches.legacy:
        offsets.append(offset)
        timestamps.append(timestamp)
        timestamp_types.append(timestamp_type)
        append_blob(key, key_starts, key_lengths)
        append_blob(value, value_starts, value_lengths)

    for index, piece in enumerate(batches.pieces):
        payload = bytes(piece)
        base_offset = batches.base_offsets[index]
        base_timestamp = batches.base_timestamps[index]
        log_append_time = batches.log_append_times[index]
        timestamp_type = batches.timestamp_types[index]
        pos = 0
        payload_end = len(payload)
        for _ in range(batches.counts[index]):
            if pos >= payload_end:
                raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
            length, pos = read_varint(payload, pos)
            if length < 6 or length > payload_end - pos:
                raise InvalidRecordError(f"Invalid record size: expected {length} bytes")
            record_end = pos + length
            pos += 1  # attributes
            timestamp_delta, pos = read_varlong(payload, pos)
            offset_delta, pos = read_varint(payload, pos)
            key_length, pos = read_varint(payload, pos)
            key_at = pos
            if key_length >= 0:
                if key_length > record_end - pos:
                    raise InvalidRecordError("Found invalid record structure: key runs past")
                pos += key_length
            value_length, pos = read_varint(payload, pos)
            value_at = pos
            if value_length >= 0:
                if value_length > record_end - pos:
                    raise InvalidRecordError("Found invalid record structure: value runs past")
                pos += value_length
            header_count, pos = read_varint(payload, pos)
            if header_count < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
            record_headers = []
            for _h in range(header_count):
                header, pos = _decode_header(payload, pos, record_end)
                record_headers.append(header)
            if pos != record_end:
                raise InvalidRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload"
                )
            offset = base_offset + offset_delta
            if not start <= offset < end:
                continue
            if record_headers and include_headers:
                headers[len(offsets)] = record_headers
            offsets.append(offset)
            timestamps.append(
                log_append_time if log_append_time >= 0 else base_timestamp + timestamp_delta
            )
            timestamp_types.append(timestamp_type)
            append_blob(payload[key_at : key_at + key_length] if key_length >= 0 else None,
                        key_starts, key_lengths)
            append_blob(payload[value_at : value_at + value_length] if value_length >= 0 else None,
                        value_starts, value_lengths)
        if pos != payload_end:
            raise InvalidRecordError(
                "Incorrect declared batch size, records still remaining in file"
            )

    columns = RecordColumns(
        len(offsets),
        offsets,
        timestamps,
        timestamp_types,
        bytes(data + bytes(_PAD)),
        key_starts,
        key_lengths,
        value_starts,
        value_lengths,
        headers,
    )
    if HAVE_NUMPY:  # same types whichever path decoded
        columns = _arrays_to_numpy(columns)
    return columns


def _arrays_to_numpy(columns: RecordColumns) -> RecordColumns:
    def conv(values: Any, dtype: Any) -> Any:
        return np.frombuffer(values, dtype=dtype).copy() if len(values) else np.zeros(0, dtype)

    columns.offsets = conv(columns.offsets, np.int64)
    columns.timestamps = conv(columns.timestamps, np.int64)
    columns.timestamp_types = conv(columns.timestamp_types, np.int32)
    columns.key_starts = conv(columns.key_starts, np.int64)
    columns.key_lengths = conv(columns.key_lengths, np.int32)
    columns.value_starts = conv(columns.value_starts, np.int64)
    columns.value_lengths = conv(columns.value_lengths, np.int32)
    return columns


# -- numpy --------------------------------------------------------------------------------


_CONTINUATION_BITS: Final = 0x8080808080808080


def byte_words(raw: Any) -> Any:
    """Every 8-byte little-endian word of ``raw`` (uint8, padded with 8 zero bytes at
    least), one starting at each byte: ``words[p]`` holds bytes ``p .. p + 7``."""
    return np.ndarray(
        shape=(len(raw) - 7,), dtype="<u8", buffer=raw, offset=0, strides=(1,)
    )


def gather_varints(words: Any, pos: Any, max_bytes: int) -> tuple[Any, Any]:
    """Zigzag varints at positions ``pos``: ``(values int64, sizes)``, from one 8-byte
    gather per position (a second one for the rare 9- and 10-byte varlongs). A varint
    longer than ``max_bytes`` is InvalidRecordError."""
    # A malformed record may point past the end: clip (``take`` would copy ``words``).
    word = words[np.clip(pos, 0, len(words) - 1)]
    if not (word & np.uint64(0x80)).any():  # every varint one byte long
        value = (word & np.uint64(0x7F)).astype(np.int64)
        return (value >> 1) ^ -(value & 1), 1
    if not ((word & np.uint64(0x8080)) == np.uint64(0x8080)).any():  # one or two bytes
        low = word & np.uint64(0x7F)
        continued = (word >> np.uint64(7)) & np.uint64(1)
        high = ((word >> np.uint64(8)) & np.uint64(0x7F)) * continued
        value = low | (high << np.uint64(7))
        signed = value.astype(np.int64)
        return (signed >> 1) ^ -(signed & 1), (continued + np.uint64(1)).astype(np.int64)
    stops = ~word & np.uint64(_CONTINUATION_BITS)
    long_rows = np.flatnonzero(stops == 0)
    stops[long_rows] = np.uint64(1 << 63)
    lowest = stops & (~stops + np.uint64(1))
    size = (np.log2(lowest).astype(np.int64) + 1) // 8
    value = word & np.uint64(0x7F)
    for k in range(1, min(int(size.max()), 8)):
        part = (word >> np.uint64(8 * k)) & np.uint64(0x7F)
        value |= np.where(k < size, part << np.uint64(7 * k), np.uint64(0))
    if len(long_rows):
        if max_bytes <= 8:
            raise InvalidRecordError("Found invalid record structure: a varint is too long")
        for row in long_rows.tolist():
            extra = int(words[min(int(pos[row]) + 8, len(words) - 1)])
            ninth, tenth = extra & 0xFF, (extra >> 8) & 0xFF
            row_value = int(value[row]) | ((ninth & 0x7F) << 56)
            if ninth < 0x80:
                size[row] = 9
            elif tenth < 0x80:
                row_value |= (tenth & 0x01) << 63
                size[row] = 10
            else:
                raise InvalidRecordError("Found invalid record structure: a varlong is too long")
            value[row] = row_value & ((1 << 64) - 1)
    if (size > max_bytes).any():
        raise InvalidRecordError("Found invalid record structure: a varint is too long")
    decoded = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    return decoded, size


def find_record_starts(data: bytes, at: int, end: int, count: int, runs: RecordStartRuns) -> None:
    """Add the starts of the ``count`` records of the records section ``data[at:end]`` to
    ``runs``.

    Records of one size come in runs (a producer's records of one size differ only where
    a delta's varint grows a byte). At a record, the run that follows is guessed from its
    length prefix and checked exactly: a record at a predicted start that carries the same
    prefix has the same size, so the next prediction holds too. The prefix bytes at the
    predicted starts are read with one strided slice per prefix byte, and the run is as
    long as the slice's leading bytes equal the prefix (``lstrip``). Where sizes vary,
    records are stepped through one at a time, for longer stretches the more often
    guessing fails. The lengths are checked again (at least 6, inside the batch) when the
    fields are decoded.
    """
    pos = at
    index = 0
    window = 64
    single_steps = 0
    starts, strides, counts = runs.starts, runs.strides, runs.counts
    try:
        while index < count:
            if single_steps:
                stop = min(count, index + single_steps)
                while index < stop:
                    starts.append(pos)
                    b = data[pos]
                    if b < 0x80:
                        size = 1 + ((b >> 1) ^ -(b & 1))
                    else:
                        b2 = data[pos + 1]
                        if b2 < 0x80:
                            two = (b & 0x7F) | (b2 << 7)
                            size = 2 + ((two >> 1) ^ -(two & 1))
                        else:
                            length, after = read_varint(data, pos)
                            size = after - pos + length
                    strides.append(size)
                    counts.append(1)
                    pos += size
                    index += 1
                if not at <= pos <= end:
                    break
                continue
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                prefix_size = 1
            elif data[pos + 1] < 0x80:
                two = (b & 0x7F) | (data[pos + 1] << 7)
                length = (two >> 1) ^ -(two & 1)
                prefix_size = 2
            else:
                length, after = read_varint(data, pos)
                prefix_size = after - pos
            stride = prefix_size + length
            if length < 6 or pos + stride > end:
                break
            fit = min(count - index, (end - pos) // stride, window)
            run = fit
            for k in range(prefix_size):
                column = data[pos + k : pos + k + fit * stride : stride]
                run = min(run, fit - len(column.lstrip(data[pos + k : pos + k + 1])))
            starts.append(pos)
            strides.append(stride)
            counts.append(run)
            if run == window:
                window = min(window * 4, 1 << 20)
            elif run < 4 and fit > 4:
                single_steps = min(max(2 * single_steps, 32), 4096)
                window = 64
            index += run
            pos += run * stride
    except IndexError:
        raise InvalidRecordError("Incorrect declared batch size, premature EOF reached") from None
    if index < count or not at <= pos <= end:
        raise InvalidRecordError("Invalid record size: a record runs past the end of its batch")
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")


@dataclass
class RecordStartRuns:
    """Record starts as runs: ``counts[i]`` records ``strides[i]`` bytes apart from
    ``starts[i]``."""

    starts: list[int] = field(default_factory=list)
    strides: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def positions(self) -> Any:
        counts = np.asarray(self.counts, dtype=np.int64)
        total = int(counts.sum())
        first_index = np.zeros(len(counts), dtype=np.int64)
        np.cumsum(counts[:-1], out=first_index[1:])
        step = np.arange(total, dtype=np.int64) - np.repeat(first_index, counts)
        starts = np.repeat(np.asarray(self.starts, dtype=np.int64), counts)
        return starts + step * np.repeat(np.asarray(self.strides, dtype=np.int64), counts)


def _decode_numpy(batches: _Batches, start: int, end: int, include_headers: bool) -> RecordColumns:
    data = b"".join([*batches.pieces, bytes(_PAD)])
    raw = np.frombuffer(data, dtype=np.uint8)
    words = byte_words(raw)
    runs = RecordStartRuns()
    payload_ends = []
    at = 0
    for piece, count in zip(batches.pieces, batches.counts, strict=True):
        piece_end = at + len(piece)
        find_record_starts(data, at, piece_end, count, runs)
        at = piece_end
        payload_ends.append(at)
    starts = runs.positions()
    counts = np.asarray(batches.counts, dtype=np.int64)
    batch_of = np.repeat(np.arange(len(counts)), counts)

    lengths, pos = gather_varints(words, starts, 5)
    pos = pos + starts
    record_ends = pos + lengths
    if (lengths < 6).any() or (record_ends > np.asarray(payload_ends)[batch_of]).any():
        raise InvalidRecordError("Invalid record size: a record runs past its batch")
    pos = pos + 1  # attributes
    timestamp_deltas, size = gather_varints(words, pos, 10)
    pos = pos + size
    offset_deltas, size = gather_varints(words, pos, 5)
    pos = pos + size
    key_lengths, size = gather_varints(words, pos, 5)
    key_starts = pos + size
    pos = key_starts + np.maximum(key_lengths, 0)
    value_lengths, size = gather_varints(words, pos, 5)
    value_starts = pos + size
    pos = value_starts + np.maximum(value_lengths, 0)
    if (pos >= record_ends).any():  # the header count needs one byte at least
        raise InvalidRecordError("Found invalid record structure: key or value runs past")
    has_headers = raw.take(pos, mode="clip") != 0
    if ((pos + 1 != record_ends) & ~has_headers).any():
        raise InvalidRecordError("Invalid record size: the fields do not fill the record")

    offsets = np.asarray(batches.base_offsets, dtype=np.int64)[batch_of] + offset_deltas
    log_append_times = np.asarray(batches.log_append_times, dtype=np.int64)[batch_of]
    timestamps = np.where(
        log_append_times >= 0,
        log_append_times,
        np.asarray(batches.base_timestamps, dtype=np.int64)[batch_of] + timestamp_deltas,
    )
    timestamp_types = np.asarray(batches.timestamp_types, dtype=np.int32)[batch_of]

    header_rows = np.flatnonzero(has_headers)
    decoded_headers: dict[int, list[Header]] = {}
    for row in header_rows.tolist():
        header_at = int(pos[row])
        record_end = int(record_ends[row])
        header_count, header_at = read_varint(data, header_at)
        if header_count < 0:
            raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
        row_headers: list[Header] = []
        try:
            for _ in range(header_count):
                header, header_at = _decode_header(data, header_at, record_end)
                row_headers.append(header)
        except IndexError:
            raise InvalidRecordError("Found invalid record structure: headers run past") from None
        if header_at != record_end:
            raise InvalidRecordError("Invalid record size: the headers do not fill the record")
        decoded_headers[row] = row_headers

    selected = (offsets >= start) & (offsets < end)
    keep: Any = None
    if not selected.all():
        keep = np.flatnonzero(selected)
    headers: dict[int, list[Header]] = {}
    if include_headers and decoded_headers:
        if keep is None:
            headers = decoded_headers
        else:
            new_index = np.cumsum(selected) - 1
            headers = {
                int(new_index[row]): value
                for row, value in decoded_headers.items()
                if selected[row]
            }

    def pick(values: Any, dtype: Any) -> Any:
        values = values.astype(dtype, copy=False)
        return values if keep is None else values[keep]

    return RecordColumns(
        int(selected.sum()) if keep is not None else len(offsets),
        pick(offsets, np.int64),
        pick(timestamps, np.int64),
        pick(timestamp_types, np.int32),
        data,
        pick(key_starts, np.int64),
        pick(np.where(key_lengths < 0, -1, key_lengths), np.int32),
        pick(value_starts, np.int64),
        pick(np.where(value_lengths < 0, -1, value_lengths), np.int32),
        headers,
    )


def concat_columns(parts: Sequence[RecordColumns]) -> RecordColumns:
    """One ``RecordColumns`` holding the rows of ``parts`` in order (numpy only)."""
    parts = [part for part in parts if part.count]
    if not parts:
        return RecordColumns.empty()
    if len(parts) == 1:
        return parts[0]
    shifts = []
    total = 0
    for part in parts:
        shifts.append(total)
        total += len(part.data) - _PAD
    headers: dict[int, list[Header]] = {}
    row_base = 0
    for part in parts:
        for row, value in part.headers.items():
            headers[row_base + row] = value
        row_base += part.count

    def cat(name: str, dtype: Any, shift: bool = False) -> Any:
        arrays = [np.asarray(getattr(part, name), dtype=dtype) for part in parts]
        if shift:
            arrays = [values + offset for values, offset in zip(arrays, shifts, strict=True)]
        return np.concatenate(arrays)

    return RecordColumns(
        row_base,
        cat("offsets", np.int64),
        cat("timestamps", np.int64),
        cat("timestamp_types", np.int32),
        b"".join([*(part.data[: len(part.data) - _PAD] for part in parts), bytes(_PAD)]),
        cat("key_starts", np.int64, shift=True),
        cat("key_lengths", np.int32),
        cat("value_starts", np.int64, shift=True),
        cat("value_lengths", np.int32),
        headers,
        next_offset=parts[-1].next_offset,
    )
