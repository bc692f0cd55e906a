"""Message format conversion for clients older than Kafka 0.11.

The log holds magic 2 record batches only (``log.message.format.version`` is 2.8), so:

- Produce v0-2 carries legacy message sets (magic 0 or 1). :func:`up_convert` turns one
  into a single magic 2 batch, as Kafka's LogValidator does before the append
  (``convertAndAssignOffsetsNonCompressed`` and ``validateMessagesAndAssignOffsetsCompressed``):
  keys, values and timestamps kept (magic 0 has none: NO_TIMESTAMP), compressed with the
  source codec; the append then recompresses to the topic's ``compression.type`` if it
  names another codec and applies LogAppendTime, as for any batch.
- Fetch v0-3 expects magic 0 (v0-1) or magic 1 (v2-3). :func:`down_convert` rewrites the
  stored batches as Kafka's ``RecordsUtil.downConvert`` does, within the size rules of
  ``LazyDownConversionRecords``.
"""

from __future__ import annotations

from kafkaclone.common.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    UnsupportedCompressionTypeError,
)
from kafkaclone.protocol.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Codec,
    LegacyRecord,
    LegacyRecordBatch,
    RecordBatch,
    RecordInput,
    build_legacy_message_set,
    build_record_batch,
    iter_batches,
    iter_legacy_entries,
)
from kafkaclone.protocol.records.batch import MAGIC_V2
from kafkaclone.protocol.records.legacy import MAGIC_V0, MAGIC_V1


def fetch_magic(fetch_version: int) -> int:
    """The message format a Fetch version reads: magic 0 for v0-1, 1 for v2-3, else 2."""
    if fetch_version <= 1:
        return MAGIC_V0
    if fetch_version <= 3:
        return MAGIC_V1
    return MAGIC_V2


# -- produce: up-conversion ---------------------------------------------------------------


def up_convert(records: memoryview) -> memoryview | None:
    """The entries of a Produce v0-2 partition as magic 2, writable, or None if it holds
    no complete entry (a trailing partial entry is dropped, as Kafka's batch iterator does).

    Kafka's LogValidator rules for what a client sends: every entry has the magic of the
    first; a magic 2 batch or a compressed legacy wrapper comes alone; the messages of a
    magic 1 wrapper have offsets 0..n-1 (its own offset is n-1, or 0 from some clients).
    A magic 2 batch is returned as it is; legacy messages are rebuilt into one magic 2
    batch with the source codec. InvalidRecordError for a broken rule or wrapper,
    CorruptMessageError for a bad CRC or framing, InvalidTimestampError for a producer
    that set LogAppendTime.
    """
    entries = list(iter_batches(records, allow_partial_tail=True))
    if not entries:
        return None
    first = entries[0]
    for entry in entries[1:]:
        if entry.magic != first.magic:
            raise InvalidRecordError(
                f"Batch magic {entry.magic} is not the same as the first batch's magic byte "
                f"{first.magic}")
    if len(entries) > 1 and (first.magic == MAGIC_V2
                             or any(entry.is_compressed for entry in entries)):
        raise InvalidRecordError("Compressed outer record has more than one batch")
    if first.magic == MAGIC_V2:
        return memoryview(bytearray(first.view))
    source_codec = first.compression if first.is_compressed else Codec.NONE
    converted: list[RecordInput] = []
    timestamps: list[int] = []
    for entry in entries:
        entry.ensure_valid()
        assert isinstance(entry, LegacyRecordBatch)
        if entry.timestamp_type == LOG_APPEND_TIME:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message {entry!r}. Producer should not set "
                f"timestamp type to LogAppendTime.")
        messages = list(entry.records())
        if entry.is_compressed and entry.magic == MAGIC_V1:
            for expected, message in enumerate(messages):
                if message.offset != expected:
                    raise InvalidRecordError(
                        f"Inner record inside the compressed record batch does not have "
                        f"incremental offsets, expected offset is {expected}")
        converted.extend((message.key, message.value, None, message.timestamp)
                         for message in messages)
        timestamps.extend(m.timestamp for m in messages if m.timestamp != NO_TIMESTAMP)
    # Kafka checks every legacy message's timestamp against
    # message.timestamp.difference.max.ms; the append checks a batch's base and max
    # timestamps, so the base is the smallest (record timestamps are unchanged by it).
    base_timestamp = min(timestamps) if timestamps else NO_TIMESTAMP
    return memoryview(bytearray(build_record_batch(converted, codec=source_codec,
                                                   base_timestamp=base_timestamp)))


# -- fetch: down-conversion ---------------------------------------------------------------


def _convert_batch(batch: RecordBatch, to_magic: int, first_offset: int) -> bytes:
    """One magic 2 batch as a magic ``to_magic`` message set (b"" if nothing is left)."""
    if batch.is_control:
        return b""
    codec = batch.compression
    if codec is Codec.ZSTD:
        raise UnsupportedCompressionTypeError(
            "Down-conversion of zstandard-compressed batches is not supported")
    compressed = codec is not Codec.NONE
    messages = []
    for record in batch.records():
        offset = batch.offset_of(record)
        # An uncompressed set can start at the fetch offset; a compressed wrapper is sent
        # whole and the client skips what it did not ask for. Under LogAppendTime every
        # record's timestamp is the batch's (timestamp_of), as the legacy wrapper says.
        if compressed or offset >= first_offset:
            messages.append(LegacyRecord(offset, batch.timestamp_of(record), record.key,
                                         record.value))
    if not messages:
        return b""
    return build_legacy_message_set(messages, magic=to_magic, codec=codec,
                                    timestamp_type=batch.timestamp_type)


def down_convert(records: memoryview, to_magic: int, first_offset: int) -> bytes:
    """Stored batches as a magic 0 or 1 message set for Fetch v0-3.

    As Kafka's lazy down-conversion: control batches are left out; offsets are kept; a
    compressed batch becomes one wrapper with the batch's codec (lz4 keeps the broken
    frame header checksum of magic 0); headers are dropped. The answer may be as large as
    the stored bytes read or as the first converted batch, whichever is larger: the first
    converted batch is always whole, later messages are sent while they fit whole.
    UnsupportedCompressionTypeError for a zstd batch.
    """
    limit = len(records)
    out = bytearray()
    for batch in iter_batches(records, allow_partial_tail=True):
        if batch.magic <= to_magic:
            piece = bytes(batch.view)
        elif isinstance(batch, RecordBatch):
            piece = _convert_batch(batch, to_magic, first_offset)
        else:  # a magic 1 entry for a magic 0 reader (not in a log of magic 2)
            piece = build_legacy_message_set(batch.records(), magic=to_magic,
                                             codec=batch.compression)
        if not piece:
            continue
        if not out:
            out += piece
            limit = max(limit, len(piece))
            continue
        for entry in iter_legacy_entries(piece, allow_partial_tail=False):
            if len(out) + entry.size_in_bytes > limit:
                return bytes(out)
            out += entry.view
        if len(out) >= limit:
            break
    return bytes(out)
