from __future__ import annotations

import os
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.errors import OffsetOutOfRangeError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafkaclone.log.epoch_cache import EpochEntry
from kafkaclone.log.validator import OffsetsOutOfOrderError, UnexpectedAppendOffsetError
from kafkaclone.protocol.records import Codec, RecordBatch
from tests.log.conftest import START_SECONDS, LogFactory, batches_of, make_batch, values_of

T0 = int(START_SECONDS * 1000)
HOUR_MS = 3_600_000


def follower_batch(base_offset: int, records: int, epoch: int, timestamp: int = T0) -> bytes:
    return make_batch(records, base_offset=base_offset, partition_leader_epoch=epoch,
                      timestamp=timestamp)


def test_new_log(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log()
    assert log.topic_partition == TopicPartition("topic", 0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.num_segments == 1
    # The index files are created on first use (Kafka's LazyIndex); a log loaded from a
    # directory creates its leader-epoch checkpoint empty, as Kafka's does.
    assert sorted(os.listdir(log_dir)) == [
        "00000000000000000000.log", "leader-epoch-checkpoint",
    ]


INDEX_FILES = ["00000000000000000000.index", "00000000000000000000.timeindex"]
LOG_FILE = "00000000000000000000.log"


def test_new_dir_log_has_only_its_log_file_until_used(open_log: LogFactory,
                                                       log_dir: Path) -> None:
    log = open_log({"index.interval.bytes": 1}, new_dir=True)
    assert (log.log_end_offset, log.recovery_point, log.latest_epoch) == (0, 0, None)
    assert os.listdir(log_dir) == [LOG_FILE]
    log.assign_epoch_start_offset(3, 0)  # a new leader: its epoch is on disk at once
    assert sorted(os.listdir(log_dir)) == [LOG_FILE, "leader-epoch-checkpoint"]
    log.append(make_batch(2, timestamp=T0 + 1), leader_epoch=3)
    log.append(make_batch(2, timestamp=T0 + 2), leader_epoch=3)
    log.flush()
    assert sorted(os.listdir(log_dir)) == sorted([LOG_FILE, *INDEX_FILES,
                                                  "leader-epoch-checkpoint"])
    assert (log_dir / INDEX_FILES[0]).stat().st_size == 8  # the first batch is not indexed
    log.close()
    reopened = open_log()
    assert reopened.log_end_offset == 4
    assert reopened.active_segment.offset_index.entries == 1
    assert reopened.leader_epoch_cache.epoch_entries == [EpochEntry(3, 0)]


def test_new_dir_log_over_an_existing_directory_loads_it(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch([b"a", b"b", b"c"]), leader_epoch=1)
    log.close()
    again = open_log(new_dir=True)
    assert again.log_end_offset == 3
    assert values_of(again.read(0, 10_000).records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert again.leader_epoch_cache.epoch_entries == [EpochEntry(1, 0)]


@pytest.mark.parametrize("clean", [True, False])
def test_empty_new_log_reopens_after_kill_style_close(open_log: LogFactory, log_dir: Path,
                                                      clean: bool) -> None:
    log = open_log(new_dir=True)
    log.close_handlers()  # nothing written out, as after kill -9
    reopened = open_log(had_clean_shutdown=clean)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (0, 0)
    assert not set(INDEX_FILES) & set(os.listdir(log_dir))  # no rebuild of empty indexes
    reopened.append(make_batch(1), leader_epoch=0)
    assert reopened.log_end_offset == 1


@pytest.mark.parametrize("clean", [True, False])
def test_log_with_data_but_no_index_files_reopens(open_log: LogFactory, log_dir: Path,
                                                  clean: bool) -> None:
    """kill -9 before any index file was written: recovery (or, after a clean shutdown,
    the missing files' sanity check) rebuilds the indexes from the .log."""
    log = open_log({"index.interval.bytes": 1}, new_dir=True)
    for i in range(3):
        log.append(make_batch(2, timestamp=T0 + i), leader_epoch=0)
    log.close_handlers()
    assert not set(INDEX_FILES) & set(os.listdir(log_dir))
    reopened = open_log({"index.interval.bytes": 1}, had_clean_shutdown=clean)
    assert reopened.log_end_offset == 6
    assert reopened.active_segment.offset_index.entries == 2
    assert reopened.active_segment.time_index.last_entry.timestamp == T0 + 2
    assert [offset for offset, _ in values_of(reopened.read(4, 10_000).records)] == [4, 5]
    reopened.close()
    assert set(INDEX_FILES) <= set(os.listdir(log_dir))


def test_new_dir_log_truncates_and_reopens(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log({"index.interval.bytes": 1}, new_dir=True)
    for i in range(4):
        log.append(make_batch(2, timestamp=T0 + i), leader_epoch=0)
    assert log.truncate_to(5)  # the batch holding offset 5 goes whole: the end is 4
    assert log.log_end_offset == 4
    assert log.active_segment.offset_index.entries == 1  # offset 3's; 5's and 7's went
    log.close()
    assert (log_dir / INDEX_FILES[0]).stat().st_size == 8
    reopened = open_log({"index.interval.bytes": 1})
    assert reopened.log_end_offset == 4
    assert reopened.active_segment.offset_index.entries == 1
    reopened.truncate_fully_and_start_at(10)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 10)
    reopened.close()
    names = os.listdir(log_dir)
    assert "00000000000000000010.log" in names
    assert not [name for name in names if name.endswith((".index", ".timeindex"))]


def test_append_assigns_offsets_and_reports(open_log: LogFactory) -> None:
    log = open_log()
    first = log.append(make_batch(3, timestamp=T0 + 5), leader_epoch=4)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (first.max_timestamp, first.offset_of_max_timestamp) == (T0 + 5, 2)
    assert (first.record_count, first.batch_count, first.log_append_time) == (3, 1, -1)
    two = make_batch(2, timestamp=T0 + 9) + make_batch(1, timestamp=T0 + 7)
    second = log.append(two, leader_epoch=4)
    assert (second.first_offset, second.last_offset) == (3, 5)
    assert (second.max_timestamp, second.offset_of_max_timestamp) == (T0 + 9, 4)
    assert second.valid_bytes == len(two)
    assert log.log_end_offset == 6
    stored = batches_of(log.read(0, 10_000).records)
    assert [(b.base_offset, b.last_offset) for b in stored] == [(0, 2), (3, 4), (5, 5)]
    assert all(b.partition_leader_epoch == 4 and b.is_valid() for b in stored)
    assert log.leader_epoch_cache.epoch_entries == [EpochEntry(4, 0)]


def test_append_does_not_modify_read_only_input(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch(1), leader_epoch=0)
    data = make_batch(1)
    log.append(data, leader_epoch=0)
    assert RecordBatch(data).base_offset == 0


def test_log_append_time(open_log: LogFactory, clock: Clock) -> None:
    log = open_log({"message.timestamp.type": "LogAppendTime"})
    clock.advance(10)
    info = log.append(make_batch(2, timestamp=T0 - 123) + make_batch(1), leader_epoch=0)
    assert info.log_append_time == T0 + 10_000
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 10_000, 2)
    for batch in batches_of(log.read(0, 10_000).records):
        assert batch.timestamp_type == 1 and batch.max_timestamp == T0 + 10_000
        assert batch.is_valid()


def test_read_semantics(open_log: LogFactory) -> None:
    log = open_log({"segment.bytes": 400})
    for i in range(20):
        log.append(make_batch([b"v%d" % (2 * i), b"v%d" % (2 * i + 1)]), leader_epoch=0)
    assert log.num_segments > 2
    # a read starting inside a batch returns that whole batch
    assert values_of(log.read(5, 1).records) == [(4, b"v4"), (5, b"v5")]
    # KIP-74: the first batch comes whole even when larger than max_bytes
    assert len(log.read(0, 1).records) > 1
    assert len(log.read(0, 1, min_one_message=False).records) == 0
    # the upper bound (the high watermark) excludes batches holding offsets >= it
    assert [o for o, _ in values_of(log.read(0, 10_000, upper_bound=6).records)] == list(range(6))
    assert len(log.read(6, 10_000, upper_bound=6).records) == 0
    # reads span to the next segment when a segment has nothing left
    segment_two = log.log_segments[1].base_offset
    got = values_of(log.read(segment_two - 1, 10_000).records)
    assert got[0][0] == segment_two - 2
    # the end of the log: empty; past it or below the start: out of range
    assert len(log.read(40, 100).records) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(41, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_roll_on_segment_bytes(open_log: LogFactory) -> None:
    batch = make_batch(1)
    log = open_log({"segment.bytes": len(batch) * 3})
    for _ in range(7):
        log.append(batch, leader_epoch=0)
    assert [s.base_offset for s in log.log_segments] == [0, 3, 6]
    assert all(s.size <= len(batch) * 3 for s in log.log_segments)


def test_roll_on_segment_ms_with_record_timestamps(open_log: LogFactory) -> None:
    log = open_log({"segment.ms": HOUR_MS})
    log.append(make_batch(1, timestamp=T0), leader_epoch=0)
    log.append(make_batch(1, timestamp=T0 + HOUR_MS), leader_epoch=0)
    assert log.num_segments == 1
    log.append(make_batch(1, timestamp=T0 + HOUR_MS + 1), leader_epoch=0)
    assert [s.base_offset for s in log.log_segments] == [0, 2]


def test_roll_on_segment_ms_with_jitter(open_log: LogFactory, clock: Clock) -> None:
    log = open_log({"segment.ms": HOUR_MS, "segment.jitter.ms": HOUR_MS // 2})
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < HOUR_MS // 2
    log.append(make_batch(1, timestamp=T0), leader_epoch=0)
    log.append(make_batch(1, timestamp=T0 + HOUR_MS - jitter), leader_epoch=0)
    assert log.num_segments == 1
    log.append(make_batch(1, timestamp=T0 + HOUR_MS - jitter + 1), leader_epoch=0)
    assert log.num_segments == 2


def test_roll_when_index_is_full(open_log: LogFactory) -> None:
    log = open_log({"segment.index.bytes": 8 * 3, "index.interval.bytes": 1})
    for _ in range(12):
        log.append(make_batch(1), leader_epoch=0)
    assert log.num_segments >= 3
    assert all(s.offset_index.entries <= 3 for s in log.log_segments)


def test_roll_flushes_old_segments_soon_after(open_log: LogFactory, clock: Clock) -> None:
    batch = make_batch(1)
    log = open_log({"segment.bytes": len(batch)})
    log.append(batch, leader_epoch=0)
    log.append(batch, leader_epoch=0)
    assert log.recovery_point == 0
    clock.advance(0)
    assert log.recovery_point == 1


def test_flush_messages_policy(open_log: LogFactory) -> None:
    log = open_log({"flush.messages": 3})
    log.append(make_batch(2), leader_epoch=0)
    assert log.recovery_point == 0
    log.append(make_batch(1), leader_epoch=0)
    assert log.recovery_point == 3
    log.flush()
    assert log.unflushed_messages == 0


def test_retention_ms_deletes_old_segments_after_delay(
    open_log: LogFactory, clock: Clock, log_dir: Path
) -> None:
    batch_size = len(make_batch(1))
    log = open_log({"segment.bytes": batch_size * 2, "retention.ms": HOUR_MS,
                    "file.delete.delay.ms": 5000})
    for i in range(6):
        log.append(make_batch(1, timestamp=T0 + i * HOUR_MS), leader_epoch=0)
    assert [s.base_offset for s in log.log_segments] == [0, 2, 4]
    clock.advance(4 * 3600 + 1)  # now: T0 + 4h + 1s; segment 0 newest record at T0 + 1h
    assert log.delete_old_segments() == 0  # nothing is deleted above the high watermark
    log.update_high_watermark(6)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.log_segments] == [4]
    assert log.log_start_offset == 4
    names = sorted(os.listdir(log_dir))
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000002.index.deleted" in names
    clock.advance(5)
    assert not [n for n in os.listdir(log_dir) if n.endswith(".deleted")]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)


def test_retention_of_everything_keeps_an_active_segment(
    open_log: LogFactory, clock: Clock
) -> None:
    log = open_log({"retention.ms": 1000})
    log.append(make_batch(3, timestamp=T0), leader_epoch=0)
    log.update_high_watermark(3)
    clock.advance(2)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.log_segments] == [3]
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert log.delete_old_segments() == 0  # the empty active segment stays


def test_retention_bytes(open_log: LogFactory) -> None:
    size = len(make_batch(1))
    log = open_log({"segment.bytes": size * 2, "retention.bytes": size * 3})
    for _ in range(8):
        log.append(make_batch(1), leader_epoch=0)
    log.update_high_watermark(8)
    assert log.delete_old_segments() == 2
    assert log.size == size * 4
    assert log.log_start_offset == 4


def test_retention_respects_cleanup_policy(open_log: LogFactory, clock: Clock) -> None:
    log = open_log({"retention.ms": 1000, "cleanup.policy": "compact", "segment.bytes": 200})
    for _ in range(5):
        log.append(make_batch(1, timestamp=T0), leader_epoch=0)
    log.update_high_watermark(5)
    clock.advance(100)
    assert log.delete_old_segments() == 0


def test_delete_records_before(open_log: LogFactory) -> None:
    size = len(make_batch(1))
    log = open_log({"segment.bytes": size * 2})
    for _ in range(6):
        log.append(make_batch(1), leader_epoch=2)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(4)
    log.update_high_watermark(6)
    assert log.delete_records_before(3) == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert values_of(log.read(3, 100).records)[0][0] == 3
    assert log.leader_epoch_cache.epoch_entries == [EpochEntry(2, 3)]
    assert log.delete_old_segments() == 1  # only [0, 1] lies wholly below the start
    assert log.log_segments[0].base_offset == 2
    assert log.log_start_offset == 3


def test_truncate_to(open_log: LogFactory) -> None:
    size = len(make_batch(2))
    log = open_log({"segment.bytes": size * 2})
    for epoch in range(5):
        log.append(make_batch(2), leader_epoch=epoch)
    log.update_high_watermark(10)
    log.flush()
    assert log.truncate_to(10) is False
    assert log.truncate_to(5) is True  # inside the batch [4, 5]: the whole batch goes
    assert log.log_end_offset == 4
    assert (log.high_watermark, log.recovery_point) == (4, 4)
    assert [s.base_offset for s in log.log_segments] == [0, 4]
    assert [e.epoch for e in log.leader_epoch_cache.epoch_entries] == [0, 1]
    info = log.append(make_batch(1), leader_epoch=7)
    assert info.first_offset == 4


def test_truncate_below_first_segment_and_fully(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch(5), leader_epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert [s.base_offset for s in log.log_segments] == [100]
    assert log.leader_epoch_cache.epoch_entries == []
    assert log.append(make_batch(1), leader_epoch=1).first_offset == 100
    assert log.truncate_to(50) is True
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)


def test_follower_append_keeps_offsets_and_epochs(open_log: LogFactory) -> None:
    log = open_log()
    data = follower_batch(0, 3, epoch=1) + follower_batch(3, 2, epoch=2)
    info = log.append_as_follower(data + data[:20])  # a partial batch at the end is dropped
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 4, 5)
    assert bytes(log.read(0, 10_000).records) == data
    assert log.leader_epoch_cache.epoch_entries == [EpochEntry(1, 0), EpochEntry(2, 3)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(follower_batch(4, 1, epoch=2))
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(follower_batch(9, 1, epoch=2) + follower_batch(7, 1, epoch=2))
    log.append_as_follower(follower_batch(10, 1, epoch=3))  # gaps are allowed
    assert log.log_end_offset == 11


def test_fetch_offset_by_timestamp(open_log: LogFactory) -> None:
    log = open_log({"segment.bytes": 300})
    for i in range(10):
        log.append(make_batch(2, timestamp=T0 + i * 100), leader_epoch=i // 5)
    assert log.num_segments > 1
    found = log.fetch_offset_by_timestamp(T0 + 450)
    assert found is not None and (found.timestamp, found.offset, found.leader_epoch) == (
        T0 + 500, 10, 1)
    assert log.fetch_offset_by_timestamp(T0 + 901) is None
    earliest = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
    assert earliest is not None and (earliest.offset, earliest.leader_epoch) == (0, 0)
    latest = log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (20, 1)


def test_end_offset_for_epoch(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch(3), leader_epoch=1)
    log.append(make_batch(2), leader_epoch=3)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)
    assert log.end_offset_for_epoch(3) == (3, 5)


def test_reopen_after_clean_close(open_log: LogFactory) -> None:
    log = open_log({"segment.bytes": 300})
    for i in range(10):
        log.append(make_batch(2, timestamp=T0 + i), leader_epoch=1)
    log.update_high_watermark(20)
    log.delete_records_before(3)
    log.flush()
    expected = bytes(log.read(3, 100_000).records)
    segments = [s.base_offset for s in log.log_segments]
    log.close()
    reopened = open_log({"segment.bytes": 300}, log_start_offset=3, recovery_point=20)
    assert [s.base_offset for s in reopened.log_segments] == segments
    assert (reopened.log_start_offset, reopened.log_end_offset) == (3, 20)
    assert reopened.recovery_point == 20
    assert bytes(reopened.read(3, 100_000).records) == expected
    assert reopened.leader_epoch_cache.epoch_entries == [EpochEntry(1, 3)]
    assert reopened.append(make_batch(1), leader_epoch=1).first_offset == 20


def test_recompression_per_topic_compression_type(open_log: LogFactory) -> None:
    log = open_log({"compression.type": "gzip"})
    log.append(make_batch([b"a" * 100, b"b" * 100]), leader_epoch=0)
    log.append(make_batch([b"c"], codec=Codec.LZ4), leader_epoch=0)
    stored = batches_of(log.read(0, 10_000).records)
    assert [b.compression for b in stored] == [Codec.GZIP, Codec.GZIP]
    assert values_of(log.read(0, 10_000).records) == [(0, b"a" * 100), (1, b"b" * 100),
                                                      (2, b"c")]
    producer = open_log({"compression.type": "producer"}, directory=log.dir.parent / "p-0")
    producer.append(make_batch([b"x"], codec=Codec.SNAPPY), leader_epoch=0)
    assert batches_of(producer.read(0, 1000).records)[0].compression == Codec.SNAPPY


def test_closed_log_refuses_work(open_log: LogFactory) -> None:
    log = open_log()
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append(make_batch(1), leader_epoch=0)


def test_a_many_batch_append_never_overfills_an_index(open_log: LogFactory) -> None:
    log = open_log({"segment.index.bytes": 8 * 2, "index.interval.bytes": 1})
    log.append(make_batch(1) * 5, leader_epoch=0)
    log.append(make_batch(1) * 5, leader_epoch=0)
    assert log.log_end_offset == 10
    assert all(s.offset_index.entries <= 2 for s in log.log_segments)


def test_offset_metadata(open_log: LogFactory) -> None:
    size = len(make_batch(2))
    log = open_log({"segment.bytes": size * 2})
    for _ in range(5):
        log.append(make_batch(2), leader_epoch=0)
    assert log.convert_to_offset_metadata(5) == (5, 4, 0)
    assert log.convert_to_offset_metadata(7) == (7, 4, size)
    assert log.convert_to_offset_metadata(10) == log.log_end_offset_metadata == (10, 8, size)
    empty = log.read(6, 100, upper_bound=6)
    assert len(empty.records) == 0 and empty.fetch_offset_metadata == (6, 4, size)
    with pytest.raises(OffsetOutOfRangeError):
        log.convert_to_offset_metadata(11)


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
@pytest.mark.parametrize("append_time", [False, True])
def test_fetch_offset_by_timestamp_agrees_with_a_full_scan(
        open_log: LogFactory, codec: Codec, append_time: bool) -> None:
    """Timestamps rising, falling and repeating inside batches, records of 1 and 2-byte
    lengths, targets on and between batch boundaries, a log start offset inside a batch:
    the lookup answers what reading every record answers."""
    import random

    from kafkaclone.protocol.records import build_record_batch

    rng = random.Random(7)
    props = {"segment.bytes": 4000, "index.interval.bytes": 200}
    if append_time:
        props["message.timestamp.type"] = "LogAppendTime"
    log = open_log(props)
    for b in range(40):
        records = []
        for r in range(rng.randint(1, 6)):
            ts = T0 + b * 50 + rng.randint(-30, 30) + (r * 7 if b % 3 else -r * 5)
            records.append((b"k", b"v" * rng.choice([3, 90]), None, ts))
        log.append(build_record_batch(records, codec=codec), leader_epoch=b // 10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(5)
    assert log.num_segments > 1

    every: list[tuple[int, int]] = []  # (offset, timestamp) of every record, read back
    position = log.log_start_offset
    while position < log.log_end_offset:
        for batch in batches_of(log.read(position, 10**7).records):
            every += [(batch.offset_of(r), batch.timestamp_of(r)) for r in batch.records()]
            position = batch.last_offset + 1
    assert [o for o, _ in every][-1] == log.log_end_offset - 1

    def scan(target: int) -> tuple[int, int] | None:
        for offset, ts in every:
            if offset >= log.log_start_offset and ts >= target:
                return ts, offset
        return None

    for target in [T0 - 100, *range(T0 - 40, T0 + 2050, 13), T0 + 5000]:
        found = log.fetch_offset_by_timestamp(target)
        expected = scan(target)
        assert (None if found is None else (found.timestamp, found.offset)) == expected, target
