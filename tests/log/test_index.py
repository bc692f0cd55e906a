from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkaclone.log.index import (
    CorruptIndexError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

BASE = 1000


def offset_index(tmp_path: Path, max_size: int = 1024) -> OffsetIndex:
    index = OffsetIndex(tmp_path / "00000000000000001000.index", BASE, max_size)
    index.close()  # creates the (empty) file
    return index


def test_offset_index_lookup(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 11):
        index.append(BASE + i * 10, i * 100)
    assert index.entries == 10
    assert index.lookup(BASE - 5) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 5) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 10) == OffsetPosition(BASE + 10, 100)
    assert index.lookup(BASE + 55) == OffsetPosition(BASE + 50, 500)
    assert index.lookup(BASE + 10_000) == OffsetPosition(BASE + 100, 1000)
    assert index.last_offset == BASE + 100
    assert index.entry(2) == OffsetPosition(BASE + 30, 300)


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=16)
    index.append(BASE + 1, 0)
    with pytest.raises(ValueError, match="no larger than the last offset"):
        index.append(BASE + 1, 10)
    index.append(BASE + 2, 20)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(BASE + 3, 30)


def test_offset_index_file_format_is_big_endian_relative(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 3, 77)
    index.append(BASE + 9, 4096)
    assert index.path.read_bytes() == b""  # nothing written before a flush or close
    index.flush()
    assert index.path.read_bytes() == struct.pack(">iiii", 3, 77, 9, 4096)
    reloaded = OffsetIndex(index.path, BASE, 1024)
    assert [reloaded.entry(i) for i in range(2)] == [(BASE + 3, 77), (BASE + 9, 4096)]
    reloaded.sanity_check(log_size=5000)


def test_offset_index_truncate(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.flush()
    index.truncate_to(BASE + 30)  # removes entries >= 30
    assert index.entries == 2
    index.truncate_to(BASE + 15)
    assert index.entries == 1
    index.append(BASE + 40, 400)
    index.close()
    assert index.path.read_bytes() == struct.pack(">iiii", 10, 100, 40, 400)
    index.reset()
    index.close()
    assert index.path.read_bytes() == b""


@pytest.mark.parametrize(
    "content",
    [
        struct.pack(">ii", 5, 10) + b"\x01",  # partial entry
        struct.pack(">iiii", 5, 10, 3, 20),  # offsets out of order
        struct.pack(">iiii", 5, 10, 6, 10),  # positions not increasing
        struct.pack(">iiii", 5, 10, 0, 0),  # Kafka's preallocated zeros after a crash
    ],
)
def test_offset_index_sanity_check(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, BASE, 1024).sanity_check()


def test_offset_index_sanity_check_against_log_size(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(struct.pack(">ii", 5, 100))
    OffsetIndex(path, BASE).sanity_check(log_size=101)
    with pytest.raises(CorruptIndexError, match="beyond the end"):
        OffsetIndex(path, BASE).sanity_check(log_size=100)


def test_time_index(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, 1200)
    index.close()  # creates the (empty) file
    assert index.last_entry == TimestampOffset(-1, BASE)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 2)  # same timestamp: ignored
    index.maybe_append(250, BASE + 5)
    with pytest.raises(ValueError, match="no larger than the last offset"):
        index.maybe_append(300, BASE + 4)
    with pytest.raises(ValueError, match="no larger than the last timestamp"):
        index.maybe_append(200, BASE + 9)
    assert index.entries == 2
    assert index.lookup(99) == TimestampOffset(-1, BASE)
    assert index.lookup(100) == TimestampOffset(100, BASE + 1)
    assert index.lookup(249) == TimestampOffset(100, BASE + 1)
    assert index.lookup(10**12) == TimestampOffset(250, BASE + 5)
    index.close()
    assert index.path.read_bytes() == struct.pack(">qiqi", 100, 1, 250, 5)
    reloaded = TimeIndex(index.path, BASE, 1200)
    assert reloaded.last_entry == TimestampOffset(250, BASE + 5)
    reloaded.sanity_check()
    reloaded.truncate_to(BASE + 5)
    assert reloaded.entries == 1
    reloaded.close()
    assert reloaded.path.read_bytes() == struct.pack(">qi", 100, 1)


def test_time_index_many_entries_round_trip(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, 12 * 5000)
    for i in range(3000):
        index.maybe_append(1_600_000_000_000 + i * 7, BASE + i * 3)
    index.flush()
    reloaded = TimeIndex(index.path, BASE, 12 * 5000)
    assert [reloaded.entry(i) for i in (0, 1234, 2999)] == [
        index.entry(0), index.entry(1234), index.entry(2999)
    ]


def test_time_index_full_check_can_be_skipped(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, 12)
    index.maybe_append(1, BASE)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(2, BASE + 1)
    index.maybe_append(2, BASE + 1, skip_full_check=True)
    assert index.entries == 2


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(struct.pack(">qiqi", 100, 1, 50, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE).sanity_check()
    path.write_bytes(struct.pack(">qi", 100, 1) + b"\x00")
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, BASE).sanity_check()


def test_rename_and_delete(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(BASE + 1, 0)
    index.close()
    target = tmp_path / "00000000000000001000.index.deleted"
    index.rename_to(target)
    assert target.exists() and index.path == target
    assert index.delete() is True
    assert index.delete() is False
