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
from typing import Final, NamedTuple

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
from kafkaclone.log.file_records import BatchHeader
from kafkaclone.log.record_scan import ScannedBatch, any_null_key
from kafkaclone.protocol.records import (
    HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    Codec,
    RecordBatch,
    build_record_batch,
)

MAGIC_V2: Final = 2
NO_TIMESTAMP: Final = -1
CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1

_ATTRIBUTES_OFFSET: Final = 21
_TIMESTAMP_TYPE_MASK: Final = 0x08
_CONTROL_FLAG_MASK: Final = 0x20
_COMPRESSION_CODEC_MASK: Final = 0x07
_MIN_LEGACY_SIZE: Final = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0

_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_unpack_header = HEADER.unpack_from

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


class AnalyzedRecords(NamedTuple):
    """The framing of an append: each batch's position and header, and the valid bytes."""

    batches: list[tuple[int, BatchHeader]]
    valid_bytes: int

    @property
    def first_offset(self) -> int:
        return self.batches[0][1][0]

    @property
    def last_offset(self) -> int:
        header = self.batches[-1][1]
        return header[0] + header[6]

    def offsets_monotonic(self) -> bool:
        last = -1
        for _, header in self.batches:
            batch_last = header[0] + header[6]
            if header[6] < 0 or header[0] <= last or batch_last <= last:
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
    batches: list[tuple[int, BatchHeader]] = []
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
        (length,) = _INT32.unpack_from(view, position + 8)
        size = length + LOG_OVERHEAD
        if length < _MIN_LEGACY_SIZE:
            raise CorruptMessageError(
                f"Record size {length} is less than the minimum record overhead "
                f"({_MIN_LEGACY_SIZE})"
            )
        if size > remaining:
            if allow_partial_tail:
                break
            raise CorruptMessageError(
                f"The append ends with a partial batch: {remaining} of {size} bytes"
            )
        magic = view[position + 16]
        if magic != MAGIC_V2:
            if magic in (0, 1):
                raise UnsupportedForMessageFormatError(
                    f"Message format v{magic} is not supported for append (only v2)"
                )
            raise CorruptMessageError(f"Unknown magic {magic} at position {position}")
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptMessageError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})"
            )
        header: BatchHeader = _unpack_header(view, position)
        if is_client and header[0] != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append should be 0, but it is "
                f"{header[0]}"
            )
        if max_message_bytes is not None and size > max_message_bytes:
            raise MessageTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds the "
                f"maximum configured value of {max_message_bytes}."
            )
        if crc32c(view[position + _ATTRIBUTES_OFFSET : position + size]) != header[4]:
            raise CorruptMessageError(f"Record is corrupt (stored crc = {header[4]})")
        if leader_config is not None:
            if is_client:
                _validate_batch(header)
            _validate_batch_timestamps(header, now, timestamp_difference)
        batches.append((position, header))
        position += size
    return AnalyzedRecords(batches, position)


def _validate_batch(header: BatchHeader) -> None:
    """Kafka's LogValidator.validateBatch for magic 2 (a client's batch)."""
    base_offset, last_offset_delta, count = header[0], header[6], header[12]
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
    if header[5] & _CONTROL_FLAG_MASK:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header[9] >= 0 and header[11] < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header[11]} in record batch with producerId {header[9]}"
        )


def validate_keys_for_compacted_topic(view: memoryview, analyzed: AnalyzedRecords,
                                      topic_partition: object) -> None:
    """Kafka's LogValidator for a compacted topic: every record needs a key
    (InvalidRecordError otherwise, and nothing of the append is written). Only each
    record's length and key length are read: by a varint walk for a few records, by the
    cleaner's columnar scan for many."""
    batches = [
        ScannedBatch(h[0], h[5], h[7], h[8], h[12],
                     view[position : position + h[1] + LOG_OVERHEAD])
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


def _validate_batch_timestamps(header: BatchHeader, now: int, max_difference: int | None
                               ) -> None:
    """The per-record timestamp checks, made on the batch's base and max timestamps, if
    ``max_difference`` (from ``_timestamp_difference``) is not None."""
    if header[5] & _TIMESTAMP_TYPE_MASK:
        raise InvalidTimestampError(
            "Invalid timestamp type in the record batch. Producer should not set timestamp "
            "type to LogAppendTime."
        )
    if max_difference is not None:
        _check_timestamp(header[7], now, max_difference)
        _check_timestamp(header[8], now, max_difference)


def target_codec(config: LogConfig, header: BatchHeader) -> Codec:
    """The codec a batch is stored with: the producer's, unless compression.type says."""
    if config.compression_type == "producer":
        return Codec(header[5] & _COMPRESSION_CODEC_MASK)
    return COMPRESSION_TYPE_CODECS[config.compression_type]


def _recompress(
    view: memoryview, analyzed: AnalyzedRecords, config: LogConfig, now: int
) -> tuple[memoryview, AnalyzedRecords]:
    """Rebuild the batches whose codec differs from the topic's compression.type. Their
    records are decoded, so their timestamps are checked one by one."""
    parts: list[bytes | memoryview] = []
    for position, header in analyzed.batches:
        size = header[1] + LOG_OVERHEAD
        raw = view[position : position + size]
        codec = target_codec(config, header)
        if codec == header[5] & _COMPRESSION_CODEC_MASK:
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
        if header[1] + LOG_OVERHEAD > config.max_message_bytes:
            raise MessageTooLargeError(
                f"The record batch size in the append is {header[1] + LOG_OVERHEAD} bytes "
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
        target_codec(config, header) != header[5] & _COMPRESSION_CODEC_MASK
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
    for position, header in analyzed.batches:
        last_offset = offset + header[6]
        size = header[1] + LOG_OVERHEAD
        pack_offset(view, position, offset)
        pack_epoch(view, position + 12, leader_epoch)
        if log_append_time:
            RecordBatch(view[position : position + size]).set_max_timestamp(LOG_APPEND_TIME, now)
            add_entry((position, size, last_offset, now))
        else:
            batch_max_timestamp = header[8]
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
        len(analyzed.batches),  # batch_count
        analyzed.valid_bytes,
        leader_epoch,  # last_leader_epoch
    )
    return view, info, entries


def follower_append_info(analyzed: AnalyzedRecords, log_start_offset: int) -> LogAppendInfo:
    """The append info of batches that keep the offsets the leader gave them."""
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    record_count = 0
    for _, header in analyzed.batches:
        if header[8] > max_timestamp:
            max_timestamp = header[8]
            offset_of_max_timestamp = header[0] + header[6]
        record_count += header[12]
    return LogAppendInfo(
        first_offset=analyzed.first_offset,
        last_offset=analyzed.last_offset,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        log_append_time=NO_TIMESTAMP,
        log_start_offset=log_start_offset,
        record_count=record_count,
        batch_count=len(analyzed.batches),
        valid_bytes=analyzed.valid_bytes,
        last_leader_epoch=analyzed.batches[-1][1][2],
    )
