"""Record batches (magic 2): the header layout, a zero-copy view, a builder and iteration
over a buffer.

The batch header (61 bytes, Kafka's DefaultRecordBatch), the one declaration of the v2
layout (``HEADER``, the ``*_OFFSET`` and ``*_MASK`` constants below, ``BatchHeader``)::

    baseOffset            int64    0    (OFFSET_OFFSET, shared with legacy entries)
    batchLength           int32    8    (SIZE_OFFSET, shared: bytes after this field)
    partitionLeaderEpoch  int32   12
    magic                 int8    16    (MAGIC_OFFSET, shared)
    crc                   uint32  17    (CRC-32C of bytes 21..end)
    attributes            int16   21    (bits 0-2 codec, 3 timestamp type (both shared),
                                         4 transactional, 5 control, 6 delete horizon)
    lastOffsetDelta       int32   23
    baseTimestamp         int64   27
    maxTimestamp          int64   35
    producerId            int64   43
    producerEpoch         int16   51
    baseSequence          int32   53
    recordsCount          int32   57
    records ...                   61    (compressed as a whole if the codec is not NONE)

What both formats share lives in kafkaclone.protocol.records.common.

baseOffset and partitionLeaderEpoch lie outside the CRC, so a broker rewrites them in place
without recomputing it. The broker validates a batch with ``ensure_valid()`` (one CRC over
the batch, no per-record work) and never decodes records unless it must.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, NamedTuple

from crc32c import crc32c

from kafkaclone.common.errors import CorruptMessageError, InvalidRecordError
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    CREATE_TIME,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    OFFSET_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BytesLike,
    as_view,
)
from kafkaclone.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    compress,
    decompress,
)
from kafkaclone.protocol.records.legacy import (
    LEGACY_RECORD_OVERHEAD_V0,
    LegacyRecordBatch,
)
from kafkaclone.protocol.records.record import (
    ControlRecordType,
    EndTransactionMarker,
    Header,
    Record,
    append_record,
    iter_records,
)

# -- the v2 layout ------------------------------------------------------------------------

MAGIC_V2: Final = 2

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""The 13 header fields, in BatchHeader's order."""
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
"""Where the CRC-32C starts."""
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORD_BATCH_OVERHEAD: Final = 61
"""The header's size: the smallest batch."""

TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")

_INT32_MAX: Final = 0x7FFFFFFF


class BatchHeader(NamedTuple):
    """The header of a v2 batch, field by field with Kafka's names (``HEADER``'s order),
    plus what derives from it. ``unpack_header`` reads one from a buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression_codec(self) -> int:
        """The codec id in the attributes (0 NONE ... 4 ZSTD; 5-7 are no codec)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (0) or LOG_APPEND_TIME (1)."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.attributes & TRANSACTIONAL_FLAG_MASK != 0

    @property
    def is_control(self) -> bool:
        return self.attributes & CONTROL_FLAG_MASK != 0

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping at int32 max (Kafka's incrementSequence)."""
        base_sequence = self.base_sequence
        if base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.last_offset_delta
        if base_sequence > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base_sequence) - 1
        return base_sequence + delta


_unpack_header_fields: Final = HEADER.unpack_from
_new_tuple: Final = tuple.__new__


def unpack_header(buf: BytesLike, offset: int = 0) -> BatchHeader:
    """The header of the batch at ``offset`` in ``buf``, which must hold its 61 bytes.
    Checks nothing (not even the magic)."""
    # tuple.__new__ rather than BatchHeader._make: the same tuple, without _make's length
    # check (the struct has 13 fields), ~45 ns per batch on a path that runs per batch.
    return _new_tuple(BatchHeader, _unpack_header_fields(buf, offset))


class RecordBatch:
    """A view over one v2 batch in a buffer; copies nothing.

    The header is unpacked on first use (``header``), so a batch that is only framed and
    CRC-checked never unpacks it. The setters write through to the buffer (which must then
    be writable: a bytearray or a memoryview of one) and drop the unpacked copy.
    """

    __slots__ = ("_header", "_view")

    _view: memoryview
    _header: BatchHeader | None

    def __init__(self, buf: BytesLike) -> None:
        """View the batch at the start of ``buf`` (bytes after it are ignored).

        CorruptMessageError if ``buf`` is too short for the header or for the batch length
        the header declares, or if the magic is not 2.
        """
        view = as_view(buf)
        if len(view) < RECORD_BATCH_OVERHEAD:
            raise CorruptMessageError(
                f"Record batch is corrupt (the size {len(view)} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})"
            )
        header = unpack_header(view)
        if header.magic != MAGIC_V2:
            raise CorruptMessageError(f"not a v2 record batch (magic {header.magic})")
        size = header.size_in_bytes
        if size < RECORD_BATCH_OVERHEAD or size > len(view):
            raise CorruptMessageError(
                f"Record batch is corrupt (batch length {header.batch_length} does not fit the "
                f"{len(view)} bytes available)"
            )
        self._view = view[:size]
        self._header = header

    @classmethod
    def _wrap(cls, view: memoryview) -> RecordBatch:
        """The fast path of ``iter_batches``: bounds and magic already checked."""
        batch = cls.__new__(cls)
        batch._view = view
        batch._header = None
        return batch

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records_count={self.records_count}, size_in_bytes={self.size_in_bytes}, "
            f"attributes={self.attributes:#x})"
        )

    @property
    def header(self) -> BatchHeader:
        """The header fields, unpacked on first use."""
        header = self._header
        if header is None:
            header = self._header = unpack_header(self._view)
        return header

    # -- header fields, with Kafka's names --

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def batch_length(self) -> int:
        return self.header.batch_length

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def crc(self) -> int:
        return self.header.crc

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def last_offset_delta(self) -> int:
        return self.header.last_offset_delta

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def records_count(self) -> int:
        return self.header.records_count

    # -- derived --

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping at int32 max (Kafka's incrementSequence)."""
        return self.header.last_sequence

    @property
    def size_in_bytes(self) -> int:
        return len(self._view)

    @property
    def compression(self) -> Codec:
        """UnsupportedCompressionTypeError for codec ids 5-7."""
        return Codec.from_id(self.header.compression_codec)

    @property
    def is_compressed(self) -> bool:
        return self.header.compression_codec != 0

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def has_producer_id(self) -> bool:
        return self.header.has_producer_id

    # -- bytes --

    @property
    def view(self) -> memoryview:
        """The whole batch, as a view into the original buffer."""
        return self._view

    def header_bytes(self) -> memoryview:
        """The 61 header bytes."""
        return self._view[:RECORD_BATCH_OVERHEAD]

    def records_bytes(self) -> memoryview:
        """The records section as stored (compressed if the batch is)."""
        return self._view[RECORD_BATCH_OVERHEAD:]

    def to_bytes(self) -> bytes:
        return bytes(self._view)

    # -- validation --

    def compute_crc(self) -> int:
        """CRC-32C of the bytes from the attributes to the end."""
        return crc32c(self._view[ATTRIBUTES_OFFSET:])

    def _stored_crc(self) -> int:
        # Read from the bytes, so that validating a batch does not unpack its header.
        stored: int = _UINT32.unpack_from(self._view, CRC_OFFSET)[0]
        return stored

    def is_valid(self) -> bool:
        return crc32c(self._view[ATTRIBUTES_OFFSET:]) == self._stored_crc()

    def ensure_valid(self) -> None:
        """CorruptMessageError unless the stored CRC matches the content."""
        computed = crc32c(self._view[ATTRIBUTES_OFFSET:])
        stored = self._stored_crc()
        if computed != stored:
            raise CorruptMessageError(
                f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"
            )

    def validate_offset_range(self) -> None:
        """InvalidRecordError unless recordsCount is positive and matches lastOffsetDelta,
        the check Kafka's LogValidator makes on every produced v2 batch."""
        header = self.header
        count = header.records_count
        if header.last_offset_delta < 0:
            raise InvalidRecordError("Batch has an invalid offset range")
        if count <= 0:
            raise InvalidRecordError("Invalid reported count for record batch")
        if header.last_offset_delta + 1 != count:
            raise InvalidRecordError("Inconsistent batch offset range and record count")

    # -- in-place rewrites --

    def _writable(self) -> memoryview:
        if self._view.readonly:
            raise TypeError("the batch lies in a read-only buffer")
        return self._view

    def set_base_offset(self, base_offset: int) -> None:
        """Rewrite baseOffset (outside the CRC: the CRC stays valid)."""
        _INT64.pack_into(self._writable(), OFFSET_OFFSET, base_offset)
        self._header = None

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Rewrite partitionLeaderEpoch (outside the CRC: the CRC stays valid)."""
        _INT32.pack_into(self._writable(), PARTITION_LEADER_EPOCH_OFFSET, epoch)
        self._header = None

    def set_max_timestamp(self, timestamp_type: int, max_timestamp: int) -> None:
        """Set the timestamp type bit and maxTimestamp, then recompute the CRC (what a
        broker does for LogAppendTime). Nothing is written if both are unchanged.

        The CRC is recomputed from the content, so validate the batch before calling this.
        """
        header = self.header
        if timestamp_type == header.timestamp_type and max_timestamp == header.max_timestamp:
            return
        view = self._writable()
        attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        _INT16.pack_into(view, ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(view, MAX_TIMESTAMP_OFFSET, max_timestamp)
        _UINT32.pack_into(view, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
        self._header = None

    # -- records --

    def inflated_records_bytes(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
        """The records section, decompressed if needed (at most ``max_size`` bytes)."""
        codec = self.compression
        payload = self._view[RECORD_BATCH_OVERHEAD:]
        if codec is Codec.NONE:
            return bytes(payload)
        return decompress(codec, payload, max_size=max_size)

    def records(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> Iterator[Record]:
        """Decode the records (decompressing first if needed).

        InvalidRecordError if they do not match recordsCount or do not parse;
        CorruptMessageError / MessageTooLargeError / UnsupportedCompressionTypeError from
        decompression. Does not check the CRC: call ``ensure_valid()`` for that.
        """
        count = self.header.records_count
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
        codec = self.compression
        if count == 0 and codec is not Codec.NONE:
            # An emptied batch (compaction keeps them for producer state) has no payload.
            return iter(())
        return iter_records(self.inflated_records_bytes(max_size=max_decompressed_size), count)

    def offset_of(self, record: Record) -> int:
        """The absolute offset of one of this batch's records."""
        return self.header.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        """The timestamp of one of this batch's records: maxTimestamp under
        LogAppendTime, baseTimestamp + delta otherwise."""
        header = self.header
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return header.max_timestamp
        return header.base_timestamp + record.timestamp_delta


# -- iteration over a buffer of batches ---------------------------------------------------


def iter_batches(
    buf: BytesLike, *, allow_partial_tail: bool
) -> Iterator[RecordBatch | LegacyRecordBatch]:
    """The batches (magic 2) and legacy messages (magic 0/1) of ``buf``, as views.

    A trailing entry cut short is dropped when ``allow_partial_tail`` (a fetch response
    may end with one) and is CorruptMessageError otherwise; so is a size below the minimum
    or an unknown magic. Only lengths are checked here: call ``ensure_valid()`` on each
    entry for the CRC.
    """
    view = as_view(buf)
    end = len(view)
    pos = 0
    unpack_int32 = _INT32.unpack_from
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            _partial_tail(allow_partial_tail, remaining)
            return
        (length,) = unpack_int32(view, pos + SIZE_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptMessageError(
                f"Record size {length} is less than the minimum record overhead "
                f"({LEGACY_RECORD_OVERHEAD_V0})"
            )
        size = length + LOG_OVERHEAD
        if remaining < HEADER_SIZE_UP_TO_MAGIC or remaining < size:
            _partial_tail(allow_partial_tail, remaining)
            return
        magic = view[pos + MAGIC_OFFSET]
        if magic == MAGIC_V2:
            if size < RECORD_BATCH_OVERHEAD:
                raise CorruptMessageError(
                    f"Record batch is corrupt (the size {size} is smaller than the minimum "
                    f"allowed overhead {RECORD_BATCH_OVERHEAD})"
                )
            yield RecordBatch._wrap(view[pos : pos + size])
        elif magic <= 1:
            yield LegacyRecordBatch(view[pos : pos + size])
        else:
            raise CorruptMessageError(f"Unknown magic {magic} at position {pos}")
        pos += size


def _partial_tail(allowed: bool, remaining: int) -> None:
    if not allowed:
        raise CorruptMessageError(f"the buffer ends with a partial batch of {remaining} bytes")


def validate_batches(buf: BytesLike, *, allow_partial_tail: bool = False) -> int:
    """Check the framing and the CRC of every entry of ``buf``; return the entry count."""
    count = 0
    for batch in iter_batches(buf, allow_partial_tail=allow_partial_tail):
        batch.ensure_valid()
        count += 1
    return count


# -- building ---------------------------------------------------------------------------

RecordInput = (
    Record
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header] | None]
    | tuple[bytes | None, bytes | None, Sequence[Header] | None, int | None]
)
"""A record to build: a ``Record`` (relative offset and timestamp) or a tuple
``(key, value[, headers[, timestamp]])`` whose offset delta is its position and whose
timestamp (absolute, ms) defaults to the batch's base timestamp."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_record_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    codec: int = Codec.NONE,
    timestamp_type: int = CREATE_TIME,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """Encode one v2 batch, with its CRC, lastOffsetDelta and maxTimestamp.

    ``base_timestamp`` defaults to the first tuple's timestamp, or else the current time.
    lastOffsetDelta is the last record's offset delta and maxTimestamp the largest record
    timestamp (for LogAppendTime pass the append time as ``base_timestamp`` and no
    per-record timestamps).
    """
    codec = Codec.from_id(codec)
    items = list(records)
    if base_timestamp is None:
        base_timestamp = next(
            (
                item[3]
                for item in items
                if isinstance(item, tuple) and len(item) > 3 and item[3] is not None
            ),
            None,
        )
        if base_timestamp is None:
            base_timestamp = _now_ms()

    payload = bytearray()
    last_offset_delta = 0
    max_timestamp_delta = 0 if not items else None
    for index, item in enumerate(items):
        if isinstance(item, Record):
            offset_delta = item.offset_delta
            timestamp_delta = item.timestamp_delta
            append_record(
                payload,
                offset_delta,
                timestamp_delta,
                item.key,
                item.value,
                item.headers,
                item.attributes,
            )
        else:
            offset_delta = index
            headers: Sequence[Header] | None = item[2] if len(item) > 2 else None
            timestamp: int | None = item[3] if len(item) > 3 else None
            timestamp_delta = 0 if timestamp is None else timestamp - base_timestamp
            append_record(payload, offset_delta, timestamp_delta, item[0], item[1], headers or ())
        last_offset_delta = offset_delta
        if max_timestamp_delta is None or timestamp_delta > max_timestamp_delta:
            max_timestamp_delta = timestamp_delta
    assert max_timestamp_delta is not None

    attributes = codec.value
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK

    body = compress(codec, payload) if codec is not Codec.NONE else payload
    out = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    out[RECORD_BATCH_OVERHEAD:] = body
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        base_timestamp + max_timestamp_delta,
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_end_transaction_marker_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """A COMMIT or ABORT marker batch, as the transaction coordinator has it written:
    transactional, control, uncompressed, one record."""
    marker = EndTransactionMarker(control_type, coordinator_epoch)
    record = Record(key=marker.encode_key(), value=marker.encode_value())
    return build_record_batch(
        [record],
        base_offset=base_offset,
        base_timestamp=_now_ms() if timestamp is None else timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
