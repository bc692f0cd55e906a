from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.log.config import LogConfig
from kafkaclone.log.file_records import LogOffsetPosition
from kafkaclone.log.segment import TAIL_BATCHES, LogSegment
from kafkaclone.protocol.records import RecordBatch
from tests.log.conftest import START_SECONDS, batches_of, make_batch, now_ms

T0 = int(START_SECONDS * 1000)


def with_offset(batch: bytes, base_offset: int) -> bytes:
    view = bytearray(batch)
    RecordBatch(view).set_base_offset(base_offset)
    return bytes(view)


@pytest.fixture
def segment(tmp_path: Path, clock: Clock) -> Iterator[LogSegment]:
    config = LogConfig.from_props({"index.interval.bytes": "100"})
    seg = LogSegment.open(tmp_path, 40, config, clock)
    yield seg
    seg.close()


def fill(segment: LogSegment, batches: int, records: int = 2, start_ts: int = T0) -> list[bytes]:
    """Append ``batches`` batches of ``records`` records from offset 40; timestamps grow."""
    out = []
    offset = segment.read_next_offset()
    for i in range(batches):
        batch = with_offset(make_batch(records, timestamp=start_ts + i * 10), offset)
        segment.append(batch)
        out.append(batch)
        offset += records
    return out


def test_files_are_named_by_20_digit_base_offset(tmp_path: Path, segment: LogSegment) -> None:
    assert os.listdir(tmp_path) == ["00000000000000000040.log"]  # indexes: on first use
    fill(segment, 1)
    segment.close()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000040.index",
        "00000000000000000040.log",
        "00000000000000000040.timeindex",
    ]


def test_append_and_read(segment: LogSegment) -> None:
    written = fill(segment, 10)
    assert segment.size == sum(len(b) for b in written)
    assert segment.read_next_offset() == 60
    data = segment.read(40, 10_000)
    assert data is not None and bytes(data.records) == b"".join(written)
    mid = segment.read(45, 10_000)  # offset 45 is inside the batch [44, 45]
    assert mid is not None
    assert batches_of(mid.records)[0].base_offset == 44
    assert mid.fetch_offset_metadata.relative_position_in_segment == 2 * len(written[0])
    assert segment.read(60, 10_000) is None


def test_read_returns_whole_batches_only(segment: LogSegment) -> None:
    written = fill(segment, 5)
    size = len(written[0])
    data = segment.read(40, 2 * size + size // 2)
    assert data is not None and len(data.records) == 2 * size
    too_small = segment.read(40, size - 1)
    assert too_small is not None and len(too_small.records) == 0
    kip74 = segment.read(40, 1, min_one_message=True)
    assert kip74 is not None and len(kip74.records) == size
    bounded = segment.read(40, 10_000, max_offset=46)
    assert bounded is not None
    assert [b.last_offset for b in batches_of(bounded.records)] == [41, 43, 45]


def test_sparse_offset_index(segment: LogSegment) -> None:
    written = fill(segment, 20)
    size = len(written[0])
    index = segment.offset_index
    assert 0 < index.entries < 20
    for i in range(index.entries):
        entry = index.entry(i)
        batch = RecordBatch(segment.log.read(entry.position, size))
        assert batch.last_offset == entry.offset  # Kafka's DumpLogSegments invariant
    assert segment.translate_offset(40) == (41, 0, size)
    assert segment.translate_offset(77) == (77, 18 * size, size)
    assert segment.translate_offset(80) is None


def test_time_index_and_find_offset_by_timestamp(segment: LogSegment) -> None:
    fill(segment, 20)
    assert segment.max_timestamp_so_far == T0 + 190
    assert segment.offset_of_max_timestamp_so_far == 79
    assert segment.time_index.entries > 0
    found = segment.find_offset_by_timestamp(T0 + 55)
    assert found is not None and (found.timestamp, found.offset) == (T0 + 60, 52)
    assert segment.find_offset_by_timestamp(T0 + 191) is None
    first = segment.find_offset_by_timestamp(0)
    assert first is not None and first.offset == 40
    later = segment.find_offset_by_timestamp(0, starting_offset=55)
    assert later is not None and later.offset == 55


def test_close_appends_final_time_index_entry_and_reopen(
    tmp_path: Path, clock: Clock
) -> None:
    config = LogConfig.from_props({"index.interval.bytes": "100"})
    segment = LogSegment.open(tmp_path, 40, config, clock)
    fill(segment, 7)
    segment.close()
    reopened = LogSegment.open(tmp_path, 40, config, clock, file_already_exists=True)
    try:
        reopened.sanity_check()
        assert reopened.time_index.last_entry == (T0 + 60, 53)
        assert reopened.max_timestamp_so_far == T0 + 60
        assert reopened.read_next_offset() == 54
        assert reopened.offset_index.entries == segment.offset_index.entries
    finally:
        reopened.close()


def test_truncate_to(segment: LogSegment) -> None:
    written = fill(segment, 10)
    size = len(written[0])
    assert segment.truncate_to(51) == 5 * size  # batch [50, 51] and later go
    assert segment.read_next_offset() == 50
    assert segment.size == 5 * size
    assert segment.offset_index.last_offset < 50
    assert segment.max_timestamp_so_far == T0 + 40
    assert segment.truncate_to(1000) == 0
    assert segment.truncate_to(40) == 5 * size
    assert segment.size == 0 and segment.read_next_offset() == 40


def test_recover_rebuilds_indexes_and_truncates_torn_tail(segment: LogSegment) -> None:
    written = fill(segment, 10)
    expected_index = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    segment.log.append(written[0][:30])  # a torn write
    segment.offset_index.reset()
    segment.time_index.reset()
    assert segment.recover() == 30
    assert [segment.offset_index.entry(i)
            for i in range(segment.offset_index.entries)] == expected_index
    assert segment.time_index.last_entry == (T0 + 90, 59)
    assert segment.read_next_offset() == 60


def test_recover_stops_at_bad_crc(segment: LogSegment) -> None:
    written = fill(segment, 6)
    size = len(written[0])
    position = 3 * size + 70  # inside the CRC-covered records of the fourth batch
    original = segment.log.read(position, 1)
    os.pwrite(segment.log._fd, bytes([original[0] ^ 0x01]), position)
    assert segment.recover() == 3 * size
    assert segment.read_next_offset() == 46


def test_recover_stops_at_non_monotonic_offsets(segment: LogSegment) -> None:
    fill(segment, 3)
    segment.log.append(with_offset(make_batch(2), 44))  # repeats offsets 44, 45
    size = len(make_batch(2))
    assert segment.recover() == size
    assert segment.read_next_offset() == 46


def test_should_roll(segment: LogSegment, clock: Clock) -> None:
    def roll(size: int = 0, ts: int = T0, offset: int = 41, ms: int = 10**9) -> bool:
        return segment.should_roll(
            max_segment_bytes=1000, max_segment_ms=ms, messages_size=size,
            max_timestamp_in_messages=ts, max_offset_in_messages=offset, now=now_ms(clock),
        )

    assert not roll()
    written = fill(segment, 1)
    assert roll(size=1001 - len(written[0]))
    assert not roll(size=1000 - len(written[0]))
    # segment.ms counts from the first batch's timestamp
    assert roll(ts=T0 + 101, ms=100)
    assert not roll(ts=T0 + 100, ms=100)
    assert roll(offset=40 + 2**31)


def test_should_roll_by_wall_clock_without_timestamps(segment: LogSegment, clock: Clock) -> None:
    segment.append(with_offset(make_batch(1, timestamp=-1), 40))
    params = dict(max_segment_bytes=10**6, messages_size=0, max_timestamp_in_messages=-1,
                  max_offset_in_messages=41)
    assert not segment.should_roll(max_segment_ms=5000, now=now_ms(clock), **params)  # type: ignore[arg-type]
    clock.advance(6)
    assert segment.should_roll(max_segment_ms=5000, now=now_ms(clock), **params)  # type: ignore[arg-type]


def test_change_suffix_and_delete(tmp_path: Path, segment: LogSegment) -> None:
    fill(segment, 2)
    segment.flush()  # writes out the index files
    segment.close_handlers()
    segment.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000040.index.deleted",
        "00000000000000000040.log.deleted",
        "00000000000000000040.timeindex.deleted",
    ]
    segment.delete_if_exists()
    assert os.listdir(tmp_path) == []


def _searched(segment: LogSegment, offset: int, starting_position: int = 0
              ) -> LogOffsetPosition | None:
    """translate_offset the long way: the offset index, then the batch headers on disk."""
    position = max(segment.offset_index.lookup(offset).position, starting_position)
    return segment.log.search_for_offset_with_size(offset, position)


def _assert_tail_agrees(segment: LogSegment) -> None:
    end = segment.read_next_offset()
    for offset in range(max(40, end - 2 * TAIL_BATCHES * 2 - 4), end + 3):
        expected = _searched(segment, offset)
        assert segment.translate_offset(offset) == expected, offset
        if expected is None:
            continue
        later = expected.position + expected.size
        assert segment.translate_offset(offset, later) == _searched(segment, offset, later)
        for max_size, max_offset in ((1, None), (10_000, None), (3 * expected.size, None),
                                     (10_000, offset + 5), (10_000, end)):
            read = segment.read(offset, max_size, max_offset=max_offset,
                                min_one_message=True, file_region=True)
            assert read is not None
            if max_offset is not None and expected.offset >= max_offset:
                assert len(read.records) == 0
                continue
            stop, _ = segment.log.whole_batches_end(expected, max_size, max_offset)
            assert read.records.position == expected.position
            assert len(read.records) == stop - expected.position, (offset, max_size, max_offset)


@pytest.mark.timeout(60)
def test_the_last_batches_appended_are_found_without_the_file(segment: LogSegment) -> None:
    """Reads at the log end use the places of the batches just appended: they give the
    answers the index and the headers on disk give, before and after truncation and
    recovery, and need no scan of the file."""
    fill(segment, 3 * TAIL_BATCHES)
    _assert_tail_agrees(segment)
    end = segment.read_next_offset()
    original = segment.log.search_for_offset_with_size
    try:
        segment.log.search_for_offset_with_size = None  # type: ignore[assignment,method-assign]
        assert segment.translate_offset(end - 1) == _searched_tail(segment, end - 1)
        assert segment.translate_offset(end) is None
    finally:
        segment.log.search_for_offset_with_size = original  # type: ignore[method-assign]
    segment.truncate_to(end - 21)  # inside a batch of two: it goes whole
    assert segment.read_next_offset() == end - 22
    _assert_tail_agrees(segment)
    fill(segment, 5)
    _assert_tail_agrees(segment)
    segment.recover()
    _assert_tail_agrees(segment)
    fill(segment, 3)
    _assert_tail_agrees(segment)


def _searched_tail(segment: LogSegment, offset: int) -> LogOffsetPosition:
    size = segment.size
    found = [p for p in segment._tail if p.offset >= offset]
    assert found and found[-1].position + found[-1].size == size
    return found[0]
