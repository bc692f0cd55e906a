from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import LeaderEpochCheckpointFile
from kafkaclone.log.epoch_cache import EpochEntry, LeaderEpochFileCache


class Leo:
    def __init__(self) -> None:
        self.value = 0

    def __call__(self) -> int:
        return self.value


def make_cache(tmp_path: Path, leo: Leo | None = None) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(
        TopicPartition("t", 0),
        leo or Leo(),
        LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint"),
    )


def test_assign_persists_and_reloads(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: no change
    cache.assign(2, 10)
    assert cache.epoch_entries == [EpochEntry(0, 0), EpochEntry(2, 10)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 10\n"
    assert make_cache(tmp_path).epoch_entries == cache.epoch_entries
    assert cache.latest_epoch == 2
    assert cache.epoch_for_offset(9) == 0
    assert cache.epoch_for_offset(10) == 2


def test_assign_removes_conflicting_entries(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(3, 20)
    cache.assign(2, 15)  # an older epoch arriving again: entries >= it or >= 15 go
    assert cache.epoch_entries == [EpochEntry(1, 0), EpochEntry(2, 15)]
    cache.assign(2, 12)  # same epoch, earlier start offset: replaced
    assert cache.epoch_entries == [EpochEntry(1, 0), EpochEntry(2, 12)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_end_offset_for(tmp_path: Path) -> None:
    leo = Leo()
    cache = make_cache(tmp_path, leo)
    assert cache.end_offset_for(0) == (-1, -1)
    cache.assign(1, 10)
    cache.assign(3, 20)
    cache.assign(6, 30)
    leo.value = 42
    assert cache.end_offset_for(-1) == (-1, -1)
    assert cache.end_offset_for(6) == (6, 42)  # the current epoch ends at the LEO
    assert cache.end_offset_for(3) == (3, 30)
    assert cache.end_offset_for(4) == (3, 30)  # unknown epoch between two known ones
    assert cache.end_offset_for(0) == (0, 10)  # older than everything known
    assert cache.end_offset_for(7) == (-1, -1)


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(25)
    assert cache.latest_epoch == 3
    cache.truncate_from_end(10)
    assert cache.epoch_entries == [EpochEntry(1, 0)]
    assert make_cache(tmp_path).epoch_entries == [EpochEntry(1, 0)]


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, offset)
    cache.truncate_from_start(5)
    assert cache.epoch_entries == [EpochEntry(1, 5), EpochEntry(2, 10), EpochEntry(3, 20)]
    cache.truncate_from_start(15)
    assert cache.epoch_entries == [EpochEntry(2, 15), EpochEntry(3, 20)]
    cache.truncate_from_start(20)
    assert cache.epoch_entries == [EpochEntry(3, 20)]
    cache.clear_and_flush()
    assert make_cache(tmp_path).epoch_entries == []


@pytest.mark.timeout(30)
def test_flushes_from_two_threads_write_one_at_a_time(tmp_path: Path) -> None:
    """An I/O thread writes a new leader's epoch while the owning thread changes and writes
    the cache: the writes do not interleave and the last one has every entry."""
    cache = make_cache(tmp_path)
    cache.assign(0, 0)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(200):
                cache.flush()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    for epoch in range(1, 201):
        cache.assign(epoch, epoch * 10, flush=False)
        if epoch % 20 == 0:
            cache.truncate_from_start(0)
    thread.join(timeout=20)
    assert not thread.is_alive() and errors == []
    cache.flush()
    assert not cache.unflushed
    assert make_cache(tmp_path).epoch_entries == cache.epoch_entries
    assert cache.latest_entry == EpochEntry(200, 2000)
