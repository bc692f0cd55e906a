"""Record batches (magic 2): a zero-copy view, a builder and iteration over a buffer.

The batch header (61 bytes, Kafka's DefaultRecordBatch)::

    baseOffset            int64    0
    batchLength           int32    8    (bytes after this field)
    partitionLeaderEpoch  int32   12
    magic                 int8    16
    crc                   uint32  17    (CRC-32C of bytes 21..end)
    attributes            int16   21    (bits 0-2 codec, 3 timestamp type, 4 transactional,
                                         5 control, 6 delete horizon)
    lastOffsetDelta       int32   23
    baseTimestamp         int64   27
    maxTimestamp          int64   35
    producerId            int64   43
    producerEpoch         int16   51
    baseSequence          int32   53
    recordsCount          int32   57
    records ...                   61    (compressed as a whole if the codec is not NONE)

baseOffset and partitionLeaderEpoch lie outside the CRC, so a broker rewrites them in place
without recomputing it. The broker validates a batch with ``ensure_valid()`` (one CRC over
the batch, no per-record work) and never decodes records unless it must.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from crc32c import crc32c

from kafkaclone.common.errors import CorruptMessageError, InvalidRecordError
from kafkaclone.protocol.records.common import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
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

MAGIC_V2: Final = 2
HEADER_SIZE_UP_TO_MAGIC: Final = 17
RECORD_BATCH_OVERHEAD: Final = 61

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
RECORDS_COUNT_OFFSET: Final = 57

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")

_INT32_MAX: Final = 0x7FFFFFFF


class RecordBatch:
    """A view over one v2 batch in a buffer; copies nothing.

    The header is unpacked once; the setters write through to the buffer (which must then
    be writable: a bytearray or a memoryview of one) and keep the unpacked copy current.
    """

    __slots__ = ("_header", "_view")

    _view: memoryview
    _header: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]

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
        header = HEADER.unpack_from(view)
        if header[3] != MAGIC_V2:
            raise CorruptMessageError(f"not a v2 record batch (magic {header[3]})")
        size = header[1] + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or size > len(view):
            raise CorruptMessageError(
                f"Record batch is corrupt (batch length {header[1]} does not fit the "
                f"{len(view)} bytes available)"
            )
        self._view = view[:size]
        self._header = header

    @classmethod
    def _wrap(
        cls,
        view: memoryview,
        header: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int],
    ) -> RecordBatch:
        """The fast path of ``iter_batches``: bounds already checked."""
        batch = cls.__new__(cls)
        batch._view = view
        batch._header = header
        return batch

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records_count={self.records_count}, size_in_bytes={self.size_in_bytes}, "
            f"attributes={self.attributes:#x})"
        )

    # -- header fields, with Kafka's names --

    @property
    def base_offset(self) -> int:
        return self._header[0]

    @property
    def batch_length(self) -> int:
        return self._header[1]

    @property
    def partition_leader_epoch(self) -> int:
        return self._header[2]

    @property
    def magic(self) -> int:
        return self._header[3]

    @property
    def crc(self) -> int:
        return self._header[4]

    @property
    def attributes(self) -> int:
        return self._header[5]

    @property
    def last_offset_delta(self) -> int:
        return self._header[6]

    @property
    def base_timestamp(self) -> int:
        return self._header[7]

    @property
    def max_timestamp(self) -> int:
        return self._header[8]

    @property
    def producer_id(self) -> int:
        return self._header[9]

    @property
    def producer_epoch(self) -> int:
        return self._header[10]

    @property
    def base_sequence(self) -> int:
        return self._header[11]

    @property
    def records_count(self) -> int:
        return self._header[12]

    # -- derived --

    @property
    def last_offset(self) -> int:
        return self._header[0] + self._header[6]

    @property
    def next_offset(self) -> int:
        return self._header[0] + self._header[6] + 1

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping at int32 max (Kafka's incrementSequence)."""
        base_sequence = self._header[11]
        if base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self._header[6]
        if base_sequence > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base_sequence) - 1
        return base_sequence + delta

    @property
    def size_in_bytes(self) -> int:
        return self._header[1] + LOG_OVERHEAD

    @property
    def compression(self) -> Codec:
        """UnsupportedCompressionTypeError for codec ids 5-7."""
        return Codec.from_id(self._header[5] & COMPRESSION_CODEC_MASK)

    @property
    def is_compressed(self) -> bool:
        return self._header[5] & COMPRESSION_CODEC_MASK != 0

    @property
    def timestamp_type(self) -> int:
        """0 for CreateTime, 1 for LogAppendTime."""
        return LOG_APPEND_TIME if self._header[5] & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self._header[5] & TRANSACTIONAL_FLAG_MASK != 0

    @property
    def is_control(self) -> bool:
        return self._header[5] & CONTROL_FLAG_MASK != 0

    @property
    def has_producer_id(self) -> bool:
        return self._header[9] > NO_PRODUCER_ID

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

    def is_valid(self) -> bool:
        return crc32c(self._view[ATTRIBUTES_OFFSET:]) == self._header[4]

    def ensure_valid(self) -> None:
        """CorruptMessageError unless the stored CRC matches the content."""
        computed = crc32c(self._view[ATTRIBUTES_OFFSET:])
        if computed != self._header[4]:
            raise CorruptMessageError(
                f"Record is corrupt (stored crc = {self._header[4]}, computed crc = {computed})"
            )

    def validate_offset_range(self) -> None:
        """InvalidRecordError unless recordsCount is positive and matches lastOffsetDelta,
        the check Kafka's LogValidator makes on every produced v2 batch."""
        count = self._header[12]
        if self._header[6] < 0:
            raise InvalidRecordError("Batch has an invalid offset range")
        if count <= 0:
            raise InvalidRecordError("Invalid reported count for record batch")
        if self._header[6] + 1 != count:
            raise InvalidRecordError("Inconsistent batch offset range and record count")

    # -- in-place rewrites --

    def _writable(self) -> memoryview:
        if self._view.readonly:
            raise TypeError("the batch lies in a read-only buffer")
        return self._view

    def set_base_offset(self, base_offset: int) -> None:
        """Rewrite baseOffset (outside the CRC: the CRC stays valid)."""
        _INT64.pack_into(self._writable(), BASE_OFFSET_OFFSET, base_offset)
        self._header = HEADER.unpack_from(self._view)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Rewrite partitionLeaderEpoch (outside the CRC: the CRC stays valid)."""
        _INT32.pack_into(self._writable(), PARTITION_LEADER_EPOCH_OFFSET, epoch)
        self._header = HEADER.unpack_from(self._view)

    def set_max_timestamp(self, timestamp_type: int, max_timestamp: int) -> None:
        """Set the timestamp type bit and maxTimestamp, then recompute the CRC (what a
        broker does for LogAppendTime). Nothing is written if both are unchanged.

        The CRC is recomputed from the content, so validate the batch before calling this.
        """
        if timestamp_type == self.timestamp_type and max_timestamp == self.max_timestamp:
            return
        view = self._writable()
        attributes = self._header[5] & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        _INT16.pack_into(view, ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(view, MAX_TIMESTAMP_OFFSET, max_timestamp)
        _UINT32.pack_into(view, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
        self._header = HEADER.unpack_from(view)

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
        count = self._header[12]
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
        codec = self.compression
        if count == 0 and codec is not Codec.NONE:
            # An emptied batch (compaction keeps them for producer state) has no payload.
            return iter(())
        return iter_records(self.inflated_records_bytes(max_size=max_decompressed_size), count)

    def offset_of(self, record: Record) -> int:
        """The absolute offset of one of this batch's records."""
        return self._header[0] + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        """The timestamp of one of this batch's records: maxTimestamp under
        LogAppendTime, baseTimestamp + delta otherwise."""
        if self._header[5] & TIMESTAMP_TYPE_MASK:
            return self._header[8]
        return self._header[7] + record.timestamp_delta


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
    unpack_header = HEADER.unpack_from
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            _partial_tail(allow_partial_tail, remaining)
            return
        (length,) = unpack_int32(view, pos + LENGTH_OFFSET)
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
            yield RecordBatch._wrap(view[pos : pos + size], unpack_header(view, pos))
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
