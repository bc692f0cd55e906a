"""LogValidator: the checks an append makes, batch by batch, and offset assignment.

Kafka's LogValidator, kept at the batch level: the header fields, the CRC over the batch,
the record count against lastOffsetDelta, the batch's base and max timestamps. Records
are decoded only where the topic's ``compression.type`` asks the broker to recompress.
Only magic 2 batches are accepted; legacy (v0/v1) message sets are refused with
UNSUPPORTED_FOR_MESSAGE_FORMAT (the Produce handler up-converts those of Produce v0-2
first, with kafkaclone.log.conversion).

Validation never changes the buffer; ``assign_offsets`` then rewrites baseOffset and
partitionLeaderEpoch in place (outside the CRC), and under LogAppendTime the timestamp
type and maxTimestamp (recomputing the CRC).
"""

from __future__ import annotations

import struct
from typing import Final

from crc32c import crc32c

from kafkaclone.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnknownServerError,
    UnsupportedForMessageFormatError,
)
from kafkaclone.log.common import AppendOrigin, LogAppendInfo
from kafkaclone.log.config import LONG_MAX, LogConfig
from kafkaclone.log.record_scan import ScannedBatch, any_null_key
from kafkaclone.protocol.records import Codec, RecordBatch, build_record_batch
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    HEADER,
    MAGIC_V2,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
)
from kafkaclone.protocol.records.common import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    OFFSET_OFFSET,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from kafkaclone.protocol.records.legacy import LEGACY_RECORD_OVERHEAD_V0, MAGIC_V0, MAGIC_V1

_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_unpack_header_fields: Final = HEADER.unpack_from

COMPRESSION_TYPE_CODECS: Final = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


class OffsetsOutOfOrderError(UnknownServerError):
    """A follower append whose offsets do not increase (Kafka's OffsetsOutOfOrderException)."""


class UnexpectedAppendOffsetError(UnknownServerError):
    """A follower append starting below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


IndexEntry = tuple[int, int, int, int]
"""A batch as the segment indexes it: (position in the append, size, last offset, max
timestamp)."""


HeaderFields = tuple[int, ...]
"""A batch header as ``HEADER.unpack_from`` returns it: a plain tuple, in BatchHeader's
field order."""


class AnalyzedRecords:
    """The framing of an append: each batch's position and header, and the valid bytes.

    The headers stay the plain tuples ``HEADER.unpack_from`` returns (``header_fields``),
    which the loops every append runs (here and in Log) read into named locals;
    ``batches`` names them for the rest. A BatchHeader per batch would cost each append
    ~0.3 us a batch: a tuple subclass is slower to make and to free than a tuple of ints,
    and the garbage collector never stops tracking it.
    """

    __slots__ = ("header_fields", "valid_bytes")

    def __init__(self, header_fields: list[tuple[int, HeaderFields]], valid_bytes: int
                 ) -> None:
        self.header_fields = header_fields
        self.valid_bytes = valid_bytes

    @property
    def batch_count(self) -> int:
        return len(self.header_fields)

    @property
    def batches(self) -> list[tuple[int, BatchHeader]]:
        """Each batch's position and header."""
        make_header = BatchHeader._make
        return [(position, make_header(fields)) for position, fields in self.header_fields]

    @property
    def first_offset(self) -> int:
        return BatchHeader._make(self.header_fields[0][1]).base_offset

    @property
    def last_offset(self) -> int:
        return BatchHeader._make(self.header_fields[-1][1]).last_offset

    def offsets_monotonic(self) -> bool:
        last = -1
        for _, fields in self.header_fields:
            (base_offset, _batch_length, _partition_leader_epoch, _magic, _crc, _attributes,
             last_offset_delta, _base_timestamp, _max_timestamp, _producer_id,
             _producer_epoch, _base_sequence, _records_count) = fields
            batch_last = base_offset + last_offset_delta
            if last_offset_delta < 0 or base_offset <= last or batch_last <= last:
                return False
            last = batch_last
        return True


def analyze_records(
    view: memoryview,
    *,
    origin: AppendOrigin,
    max_message_bytes: int | None,
    allow_partial_tail: bool = False,
    leader_config: LogConfig | None = None,
    now: int = 0,
) -> AnalyzedRecords:
    """Check the framing, magic, size and CRC of every batch (Kafka's
    analyzeAndValidateRecords). A trailing partial batch is CorruptMessageError unless
    ``allow_partial_tail`` (a follower's fetch), which drops it.

    With ``leader_config``, also make the leader's per-batch checks (LogValidator's
    validateBatch and the timestamp checks against ``now``) in the same pass."""
    batches: list[tuple[int, HeaderFields]] = []
    # Decided once per append rather than once per batch.
    is_client = origin is AppendOrigin.CLIENT
    timestamp_difference = None if leader_config is None else _timestamp_difference(leader_config)
    end = len(view)
    position = 0
    while position < end:
        remaining = end - position
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                break
            raise CorruptMessageError(
                f"The append ends with a partial batch of {remaining} bytes"
            )
        (length,) = _INT32.unpack_from(view, position + SIZE_OFFSET)
        size = length + LOG_OVERHEAD
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptMessageError(
                f"Record size {length} is less than the minimum record overhead "
                f"({LEGACY_RECORD_OVERHEAD_V0})"
            )
        if size > remaining:
            if allow_partial_tail:
                break
            raise CorruptMessageError(
                f"The append ends with a partial batch: {remaining} of {size} bytes"
            )
        magic = view[position + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            if magic in (MAGIC_V0, MAGIC_V1):
                raise UnsupportedForMessageFormatError(
                    f"Message format v{magic} is not supported for append (only v2)"
                )
            raise CorruptMessageError(f"Unknown magic {magic} at position {position}")
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptMessageError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})"
            )
        fields: HeaderFields = _unpack_header_fields(view, position)
        (base_offset, _batch_length, _partition_leader_epoch, _magic, crc, attributes,
         last_offset_delta, base_timestamp, max_timestamp, producer_id, _producer_epoch,
         base_sequence, records_count) = fields
        if is_client and base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append should be 0, but it is "
                f"{base_offset}"
            )
        if max_message_bytes is not None and size > max_message_bytes:
            raise MessageTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds the "
                f"maximum configured value of {max_message_bytes}."
            )
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            raise CorruptMessageError(f"Record is corrupt (stored crc = {crc})")
        if leader_config is not None:
            if is_client:
                _validate_batch(base_offset, last_offset_delta, records_count, attributes,
                                producer_id, base_sequence)
            _validate_batch_timestamps(attributes, base_timestamp, max_timestamp, now,
                                       timestamp_difference)
        batches.append((position, fields))
        position += size
    return AnalyzedRecords(batches, position)


def _validate_batch(base_offset: int, last_offset_delta: int, count: int, attributes: int,
                    producer_id: int, base_sequence: int) -> None:
    """Kafka's LogValidator.validateBatch for magic 2 (a client's batch)."""
    last_offset = base_offset + last_offset_delta
    if last_offset_delta + 1 <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{base_offset}, {last_offset}]"
        )
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
    if last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{base_offset}, {last_offset}] and count of "
            f"records {count}"
        )
    if attributes & CONTROL_FLAG_MASK:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if producer_id >= 0 and base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {base_sequence} in record batch with producerId "
            f"{producer_id}"
        )


def validate_keys_for_compacted_topic(view: memoryview, analyzed: AnalyzedRecords,
                                      topic_partition: object) -> None:
    """Kafka's LogValidator for a compacted topic: every record needs a key
    (InvalidRecordError otherwise, and nothing of the append is written). Only each
    record's length and key length are read: by a varint walk for a few records, by the
    cleaner's columnar scan for many."""
    batches = [
        ScannedBatch(h.base_offset, h.attributes, h.base_timestamp, h.max_timestamp,
                     h.records_count, view[position : position + h.batch_length + LOG_OVERHEAD])
        for position, h in analyzed.batches
    ]
    if any_null_key(batches):
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition "
            f"{topic_partition}."
        )


def _validate_timestamp(timestamp: int, now: int, config: LogConfig) -> None:
    if not config.log_append_time:
        _check_timestamp(timestamp, now, config.message_timestamp_difference_max_ms)


def _check_timestamp(timestamp: int, now: int, max_difference: int) -> None:
    if timestamp != NO_TIMESTAMP and abs(timestamp - now) > max_difference:
        raise InvalidTimestampError(
            f"Timestamp {timestamp} of message is out of range. The timestamp should be "
            f"within [{now - max_difference}, {now + max_difference}]"
        )


def _timestamp_difference(config: LogConfig) -> int | None:
    """The largest difference from now a batch's timestamps may have, or None if they are
    not checked (LogAppendTime, or message.timestamp.difference.max.ms is unlimited)."""
    if config.log_append_time or config.message_timestamp_difference_max_ms >= LONG_MAX:
        return None
    return config.message_timestamp_difference_max_ms


def _validate_batch_timestamps(attributes: int, base_timestamp: int, max_timestamp: int,
                               now: int, max_difference: int | None) -> None:
    """The per-record timestamp checks, made on the batch's base and max timestamps, if
    ``max_difference`` (from ``_timestamp_difference``) is not None."""
    if attributes & TIMESTAMP_TYPE_MASK:
        raise InvalidTimestampError(
            "Invalid timestamp type in the record batch. Producer should not set timestamp "
            "type to LogAppendTime."
        )
    if max_difference is not None:
        _check_timestamp(base_timestamp, now, max_difference)
        _check_timestamp(max_timestamp, now, max_difference)


def target_codec(config: LogConfig, header: BatchHeader) -> Codec:
    """The codec a batch is stored with: the producer's, unless compression.type says."""
    if config.compression_type == "producer":
        return Codec(header.compression_codec)
    return COMPRESSION_TYPE_CODECS[config.compression_type]


def _recompress(
    view: memoryview, analyzed: AnalyzedRecords, config: LogConfig, now: int
) -> tuple[memoryview, AnalyzedRecords]:
    """Rebuild the batches whose codec differs from the topic's compression.type. Their
    records are decoded, so their timestamps are checked one by one."""
    parts: list[bytes | memoryview] = []
    for position, header in analyzed.batches:
        raw = view[position : position + header.size_in_bytes]
        codec = target_codec(config, header)
        if codec == header.compression_codec:
            parts.append(raw)
            continue
        batch = RecordBatch(raw)
        records = list(batch.records())
        for record in records:
            _validate_timestamp(batch.timestamp_of(record), now, config)
        parts.append(
            build_record_batch(
                records,
                codec=codec,
                base_timestamp=batch.base_timestamp,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                is_transactional=batch.is_transactional,
            )
        )
    rebuilt = memoryview(bytearray(b"".join(parts)))
    reanalyzed = analyze_records(rebuilt, origin=AppendOrigin.CLIENT, max_message_bytes=None)
    for _, header in reanalyzed.batches:
        if header.size_in_bytes > config.max_message_bytes:
            raise MessageTooLargeError(
                f"The record batch size in the append is {header.size_in_bytes} bytes "
                f"after recompression, which exceeds the maximum configured value of "
                f"{config.max_message_bytes}."
            )
    return rebuilt, reanalyzed


def validate_and_assign_offsets(
    view: memoryview,
    analyzed: AnalyzedRecords,
    *,
    next_offset: int,
    leader_epoch: int,
    now: int,
    config: LogConfig,
    log_start_offset: int,
) -> tuple[memoryview, LogAppendInfo, list[IndexEntry]]:
    """Assign offsets from ``next_offset`` to batches that ``analyze_records`` checked
    with ``leader_config`` (recompressing first if compression.type says so).

    ``view`` must be writable. Returns the records to write (``view`` itself, or a new
    buffer if batches were recompressed), the append info, and each batch's
    (position, size, last offset, max timestamp) for the segment's indexes.
    """
    if config.compression_type != "producer" and any(
        target_codec(config, header) != header.compression_codec
        for _, header in analyzed.batches
    ):
        view, analyzed = _recompress(view, analyzed, config, now)

    log_append_time = config.log_append_time
    offset = next_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    entries: list[IndexEntry] = []
    add_entry = entries.append
    pack_offset = _INT64.pack_into
    pack_epoch = _INT32.pack_into
    for position, fields in analyzed.header_fields:
        (_base_offset, batch_length, _partition_leader_epoch, _magic, _crc, _attributes,
         last_offset_delta, _base_timestamp, batch_max_timestamp, _producer_id,
         _producer_epoch, _base_sequence, _records_count) = fields
        last_offset = offset + last_offset_delta
        size = batch_length + LOG_OVERHEAD
        pack_offset(view, position + OFFSET_OFFSET, offset)
        pack_epoch(view, position + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        if log_append_time:
            RecordBatch(view[position : position + size]).set_max_timestamp(LOG_APPEND_TIME, now)
            add_entry((position, size, last_offset, now))
        else:
            add_entry((position, size, last_offset, batch_max_timestamp))
            if batch_max_timestamp > max_timestamp:
                max_timestamp = batch_max_timestamp
                offset_of_max_timestamp = last_offset
        offset = last_offset + 1
    if log_append_time:
        max_timestamp = now
        offset_of_max_timestamp = offset - 1
    # Positional: keywords double the cost of making this 10-field tuple, once per append.
    info = LogAppendInfo(
        next_offset,  # first_offset
        offset - 1,  # last_offset
        max_timestamp,
        offset_of_max_timestamp,
        now if log_append_time else NO_TIMESTAMP,  # log_append_time
        log_start_offset,
        offset - next_offset,  # record_count
        analyzed.batch_count,
        analyzed.valid_bytes,
        leader_epoch,  # last_leader_epoch
    )
    return view, info, entries


def follower_append_info(analyzed: AnalyzedRecords, log_start_offset: int) -> LogAppendInfo:
    """The append info of batches that keep the offsets the leader gave them."""
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    record_count = 0
    last_leader_epoch = -1
    for _, fields in analyzed.header_fields:
        (base_offset, _batch_length, partition_leader_epoch, _magic, _crc, _attributes,
         last_offset_delta, _base_timestamp, batch_max_timestamp, _producer_id,
         _producer_epoch, _base_sequence, records_count) = fields
        if batch_max_timestamp > max_timestamp:
            max_timestamp = batch_max_timestamp
            offset_of_max_timestamp = base_offset + last_offset_delta
        record_count += records_count
        last_leader_epoch = partition_leader_epoch
    return LogAppendInfo(
        first_offset=analyzed.first_offset,
        last_offset=analyzed.last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        log_append_time=NO_TIMESTAMP,
        log_start_offset=log_start_offset,
        record_count=record_count,
        batch_count=analyzed.batch_count,
        valid_bytes=analyzed.valid_bytes,
        last_leader_epoch=last_leader_epoch,
    )
