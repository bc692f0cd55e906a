"""Record fields of many v2 batches at once, as numpy columns (the cleaner's key extraction).

The log cleaner needs, for every record of the segments it reads, the record's offset,
where its bytes are, whether it has a key and a value, and a hash of its key. Decoding
records one by one in Python costs microseconds each; ``scan_records`` instead joins the
batches' records sections (inflated) into one buffer and decodes each field for all
records at once with array operations, reusing the columnar reader's varint machinery
(``protocol.records.columnar``): record starts are found run by run (records of one size
follow each other), then every varint is read with one 8-byte gather per record.

``hash_keys`` hashes the keys in the same way: one gather of 8 key bytes per record and
per 8-byte word of the longest key, mixed with MurmurHash3's 64-bit finalizer. The cleaner's
offset map keys on these 64-bit hashes, as Kafka's SkimpyOffsetMap keys on MD5 digests: two
keys that collide would share one entry (for a million distinct keys the chance of any
collision is about 3e-8).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkaclone.common.errors import InvalidRecordError
from kafkaclone.protocol.records.batch import RECORD_BATCH_OVERHEAD
from kafkaclone.protocol.records.columnar import (
    RecordStartRuns,
    byte_words,
    find_record_starts,
    gather_varints,
)
from kafkaclone.protocol.records.common import COMPRESSION_CODEC_MASK, TIMESTAMP_TYPE_MASK
from kafkaclone.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    decompress,
)
from kafkaclone.protocol.records.record import read_varint, read_varlong

Int64Array = npt.NDArray[np.int64]
UInt64Array = npt.NDArray[np.uint64]

_PAD: Final = 16
_SMALL_SCAN: Final = 64
"""Up to this many records, ``any_null_key`` walks them in Python: numpy's fixed cost per
call (tens of microseconds a scan) is then larger than the walk."""
_MASKS: Final = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1],
                         dtype=np.uint64)
_SEED: Final = np.uint64(0x9E3779B97F4A7C15)
_MIX1: Final = np.uint64(0xFF51AFD7ED558CCD)
_MIX2: Final = np.uint64(0xC4CEB9FE1A85EC53)
_S33: Final = np.uint64(33)


@dataclass(frozen=True)
class ScannedBatch:
    """A v2 data batch to scan: its header fields the scan needs and its bytes."""

    base_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    records_count: int
    view: memoryview


@dataclass
class RecordScan:
    """The records of the scanned batches, one row per record, in log order."""

    data: bytes
    """The inflated records sections joined, followed by 16 zero bytes."""
    section_starts: list[int]
    """Where each batch's records section starts in ``data`` (one more: the end)."""
    batch_of: Int64Array
    """Row -> index of its batch in the list given to ``scan_records``."""
    offsets: Int64Array
    timestamps: Int64Array
    record_starts: Int64Array
    record_ends: Int64Array
    key_starts: Int64Array
    key_lengths: Int64Array
    """-1 for a null key."""
    value_lengths: Int64Array
    """-1 for a null value (a tombstone)."""

    @property
    def count(self) -> int:
        return len(self.offsets)

    def key_hashes(self) -> UInt64Array:
        return hash_keys(self.data, self.key_starts, self.key_lengths)


def _records_section(batch: ScannedBatch, max_decompressed_size: int) -> memoryview:
    payload = batch.view[RECORD_BATCH_OVERHEAD:]
    codec = batch.attributes & COMPRESSION_CODEC_MASK
    if codec and batch.records_count > 0:
        return memoryview(decompress(Codec.from_id(codec), payload,
                                     max_size=max_decompressed_size))
    return payload


def scan_records(
    batches: Sequence[ScannedBatch],
    *,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> RecordScan:
    """Decode the fields of every record of ``batches`` (v2 data batches, not control
    batches). InvalidRecordError for records that do not parse."""
    pieces = [_records_section(batch, max_decompressed_size) for batch in batches]
    data = b"".join([*pieces, bytes(_PAD)])
    section_starts = [0]
    runs = RecordStartRuns()
    at = 0
    for piece, batch in zip(pieces, batches, strict=True):
        piece_end = at + len(piece)
        if batch.records_count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {batch.records_count} in magic v2 batch")
        if batch.records_count:
            find_record_starts(data, at, piece_end, batch.records_count, runs)
        at = piece_end
        section_starts.append(at)
    counts = np.asarray([batch.records_count for batch in batches], dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    if not int(counts.sum()):
        return RecordScan(data, section_starts, empty, empty, empty, empty, empty, empty,
                          empty, empty)
    raw = np.frombuffer(data, dtype=np.uint8)
    words = byte_words(raw)
    starts: Int64Array = runs.positions()
    batch_of: Int64Array = np.repeat(np.arange(len(counts), dtype=np.int64), counts)

    lengths, size = gather_varints(words, starts, 5)
    pos = starts + size
    record_ends = pos + lengths
    section_ends = np.asarray(section_starts[1:], dtype=np.int64)[batch_of]
    if (lengths < 6).any() or (record_ends > section_ends).any():
        raise InvalidRecordError("Invalid record size: a record runs past its batch")
    pos = pos + 1  # attributes
    timestamp_deltas, size = gather_varints(words, pos, 10)
    pos = pos + size
    offset_deltas, size = gather_varints(words, pos, 5)
    pos = pos + size
    key_lengths, size = gather_varints(words, pos, 5)
    key_starts = pos + size
    pos = key_starts + np.maximum(key_lengths, 0)
    value_lengths, _ = gather_varints(words, pos, 5)
    if (pos >= record_ends).any():
        raise InvalidRecordError("Found invalid record structure: key or value runs past")

    base_offsets = np.asarray([batch.base_offset for batch in batches], dtype=np.int64)
    base_timestamps = np.asarray([batch.base_timestamp for batch in batches], dtype=np.int64)
    log_append_times = np.asarray(
        [batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else -1
         for batch in batches], dtype=np.int64)
    batch_log_append_time = log_append_times[batch_of]
    timestamps = np.where(batch_log_append_time >= 0, batch_log_append_time,
                          base_timestamps[batch_of] + timestamp_deltas)
    return RecordScan(
        data,
        section_starts,
        batch_of,
        base_offsets[batch_of] + offset_deltas,
        timestamps.astype(np.int64, copy=False),
        starts,
        record_ends,
        key_starts,
        np.where(key_lengths < 0, -1, key_lengths),
        np.where(value_lengths < 0, -1, value_lengths),
    )


def _fmix(h: UInt64Array) -> UInt64Array:
    h ^= h >> _S33
    h *= _MIX1
    h ^= h >> _S33
    h *= _MIX2
    h ^= h >> _S33
    return h


def hash_keys(data: bytes, key_starts: Int64Array, key_lengths: Int64Array) -> UInt64Array:
    """A 64-bit hash of each key ``data[start:start + length]`` (``data`` padded with 8
    zero bytes at least); null keys (length -1) hash like empty ones."""
    n = len(key_starts)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    words = byte_words(np.frombuffer(data, dtype=np.uint8))
    lengths = np.maximum(key_lengths, 0)
    h: UInt64Array = (lengths.astype(np.uint64) * _MIX1) ^ _SEED
    longest = int(lengths.max())
    last_word = len(words) - 1
    for k in range(0, max(longest, 1), 8):
        remaining = np.clip(lengths - k, 0, 8)
        word = words[np.minimum(key_starts + k, last_word)] & _MASKS[remaining]
        h = _fmix(h ^ word)
    return h


def any_null_key(batches: Sequence[ScannedBatch], *,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bool:
    """Whether any record of ``batches`` has a null key (a compacted topic refuses it).
    InvalidRecordError for records that do not parse."""
    if sum(batch.records_count for batch in batches) > _SMALL_SCAN:
        return bool((scan_records(batches, max_decompressed_size=max_decompressed_size)
                     .key_lengths < 0).any())
    for batch in batches:
        section = _records_section(batch, max_decompressed_size)
        pos = 0
        try:
            for _ in range(batch.records_count):
                length, pos = read_varint(section, pos)
                end = pos + length
                _, pos = read_varlong(section, pos + 1)  # attributes, timestamp delta
                _, pos = read_varint(section, pos)  # offset delta
                key_length, _ = read_varint(section, pos)
                if key_length < 0:
                    return True
                pos = end
        except IndexError:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF "
                                     "reached") from None
    return False
