"""Recovery after an unclean shutdown, and corruption: detected, truncated or refused,
never served."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kafkaclone.common.errors import CorruptMessageError
from kafkaclone.log.epoch_cache import EpochEntry
from kafkaclone.log.log import Log
from kafkaclone.log.segment import LogSegment
from kafkaclone.protocol.records import iter_batches
from tests.log.conftest import LogFactory, batches_of, make_batch

BATCH = make_batch(2)
SIZE = len(BATCH)
PROPS = {"segment.bytes": SIZE * 5, "index.interval.bytes": 1}


def filled(open_log: LogFactory, batches: int = 12, epochs: int = 3) -> Log:
    """A closed-and-reopenable log of ``batches`` two-record batches over 3 segments."""
    log = open_log(PROPS)
    for i in range(batches):
        log.append(BATCH, leader_epoch=i * epochs // batches)
    return log


def segment_path(log_dir: Path, base_offset: int, suffix: str = ".log") -> Path:
    return log_dir / f"{base_offset:020d}{suffix}"


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x10]))


def assert_consistent(log: Log) -> None:
    """Every batch valid and contiguous; each index entry names the batch at its position."""
    expected = log.log_start_offset
    data = log.read(log.log_start_offset, 10**9) if log.log_end_offset else None
    next_offset = log.log_segments[0].base_offset
    for segment in log.log_segments:
        positions = {}
        position = 0
        for batch in iter_batches(segment.log.read(0, segment.size), allow_partial_tail=False):
            assert batch.is_valid()  # type: ignore[union-attr]
            assert batch.base_offset >= next_offset
            positions[position] = batch.last_offset
            next_offset = batch.last_offset + 1
            position += batch.size_in_bytes
        assert position == segment.size
        for i in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(i)
            assert positions[entry.position] == entry.offset
    assert next_offset == log.log_end_offset
    if data is not None:
        assert batches_of(data.records)[0].last_offset >= expected


def reopen(open_log: LogFactory, log: Log, **kwargs: object) -> Log:
    log.close()
    return open_log(PROPS, **kwargs)


def test_unclean_shutdown_truncates_a_torn_tail(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    active = log.active_segment.base_offset
    log.close()
    with open(segment_path(log_dir, active), "ab") as f:
        f.write(BATCH[: SIZE // 2])
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 24
    assert_consistent(log)
    assert log.append(BATCH, leader_epoch=5).first_offset == 24


def test_bit_flip_past_recovery_point_truncates_there(open_log: LogFactory,
                                                      log_dir: Path) -> None:
    log = filled(open_log)
    assert [s.base_offset for s in log.log_segments] == [0, 10, 20]
    log.close()
    flip_byte(segment_path(log_dir, 10), 2 * SIZE + 40)  # third batch of segment 10
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=6)
    assert log.log_end_offset == 14
    assert [s.base_offset for s in log.log_segments] == [0, 10]
    assert_consistent(log)
    assert not segment_path(log_dir, 20).exists()


def test_segment_cut_in_the_middle(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    log.close()
    os.truncate(segment_path(log_dir, 10), 2 * SIZE + 7)
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 14
    assert_consistent(log)


def test_flipped_base_offset_is_caught(open_log: LogFactory, log_dir: Path) -> None:
    """baseOffset lies outside the CRC; recovery catches it by offset monotonicity."""
    log = filled(open_log)
    log.close()
    path = segment_path(log_dir, 10)
    with open(path, "r+b") as f:
        f.seek(SIZE)
        f.write(struct.pack(">q", 9))
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 12
    assert_consistent(log)


def test_corruption_before_the_recovery_point_is_refused_not_served(
    open_log: LogFactory, log_dir: Path
) -> None:
    log = filled(open_log)
    log.flush()
    log.close()
    flip_byte(segment_path(log_dir, 0), SIZE + 70)
    log = open_log(PROPS, recovery_point=24)  # clean shutdown: no re-validation
    assert log.log_end_offset == 24
    assert len(log.read(0, 10**6, min_one_message=True).records) == SIZE  # before the damage
    with pytest.raises(CorruptMessageError, match="refusing to serve"):
        log.read(2, 10**6)
    assert len(log.read(10, 10**6).records) > 0  # other segments still serve


def test_corrupt_index_is_rebuilt(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    expected = bytes(log.read(0, 10**6).records)
    log.close()
    segment_path(log_dir, 0, ".index").write_bytes(os.urandom(45))
    segment_path(log_dir, 10, ".index").write_bytes(struct.pack(">ii", 5, 999_999))
    segment_path(log_dir, 20, ".timeindex").write_bytes(struct.pack(">qiqi", 9, 1, 3, 2))
    log = open_log(PROPS)
    assert_consistent(log)
    assert bytes(log.read(0, 10**6).records) == expected
    assert log.read(13, 10).fetch_offset_metadata.relative_position_in_segment == SIZE


def test_missing_index_files_are_rebuilt(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    log.close()
    segment_path(log_dir, 10, ".index").unlink()
    segment_path(log_dir, 20, ".timeindex").unlink()
    log = open_log(PROPS)
    assert_consistent(log)
    assert log.active_segment.time_index.entries > 0
    log.close()
    assert segment_path(log_dir, 10, ".index").stat().st_size > 0


def test_stray_files_are_cleaned_up(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    log.close()
    for name in ("00000000000000000005.log.deleted", "00000000000000000030.index",
                 "00000000000000000005.log.cleaned", "leader-epoch-checkpoint.tmp"):
        (log_dir / name).write_bytes(b"x")
    log = open_log(PROPS)
    names = os.listdir(log_dir)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".tmp"))]
    assert "00000000000000000030.index" not in names


def test_epoch_cache_rebuilt_by_recovery(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    entries = log.leader_epoch_cache.epoch_entries
    assert [e.epoch for e in entries] == [0, 1, 2]
    log.close()
    (log_dir / "leader-epoch-checkpoint").unlink()
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=0)
    assert log.leader_epoch_cache.epoch_entries == entries


def test_epoch_cache_truncated_to_recovered_end(open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    log.close()
    for suffix in (".log", ".index", ".timeindex"):
        segment_path(log_dir, 20, suffix).unlink()
    os.truncate(segment_path(log_dir, 10), SIZE * 2)
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 14
    assert log.leader_epoch_cache.epoch_entries == [EpochEntry(0, 0), EpochEntry(1, 8)]


def test_log_start_offset_past_the_end_resets_the_log(open_log: LogFactory,
                                                      log_dir: Path) -> None:
    log = filled(open_log)
    log.close()
    log = open_log(PROPS, log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.log_segments] == [100]


def test_clean_reopen_skips_recovery(open_log: LogFactory, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    log = filled(open_log)
    log.close()
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment, *args: object, **kwargs: object) -> int:
        calls.append(self.base_offset)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "recover", counting)
    open_log(PROPS, recovery_point=24).close()
    assert calls == []
    open_log(PROPS, had_clean_shutdown=False, recovery_point=15).close()
    assert calls == [10, 20]  # from the segment holding the recovery point on


def test_preallocated_segments(open_log: LogFactory, log_dir: Path) -> None:
    props = {**PROPS, "preallocate": "true"}
    log = open_log(props)
    path = segment_path(log_dir, 0)
    assert path.stat().st_size == SIZE * 5  # reserved up front
    for _ in range(7):
        log.append(BATCH, leader_epoch=0)
    assert segment_path(log_dir, 0).stat().st_size == SIZE * 5  # rolled at 5 batches
    active = segment_path(log_dir, 10)
    assert active.stat().st_size == SIZE * 5
    # a crash leaves the preallocated zeros behind the data: recovery cuts them off
    os.truncate(active, SIZE * 5)
    log.close()
    os.truncate(active, SIZE * 5)
    log = open_log(props, had_clean_shutdown=False, recovery_point=0)
    assert log.log_end_offset == 14
    assert_consistent(log)
    log.close()
    assert active.stat().st_size == SIZE * 2  # a clean close trims


def test_a_new_leader_epoch_not_yet_written_is_recovered_from_its_batches(
        open_log: LogFactory, log_dir: Path) -> None:
    """A leader's new epoch is written after it starts leading (on an I/O thread): a crash
    before the write loses it from the checkpoint, and recovery finds it again in the
    batches above the recovery point."""
    log = filled(open_log)  # epochs 0, 1, 2
    log.flush()
    recovery_point = log.log_end_offset
    log.assign_epoch_start_offset(5, recovery_point, flush=False)
    assert log.leader_epoch_cache_unflushed
    log.append(BATCH, leader_epoch=5)
    log.append(BATCH, leader_epoch=5)
    checkpoint = (log_dir / "leader-epoch-checkpoint").read_text()
    assert checkpoint.splitlines()[-1] == "2 16"  # the crash: epoch 5 never written
    log.close_handlers()
    log = open_log(PROPS, had_clean_shutdown=False, recovery_point=recovery_point)
    assert log.leader_epoch_cache.latest_entry == EpochEntry(5, recovery_point)
    assert log.log_end_offset == recovery_point + 4


def test_flush_writes_a_pending_leader_epoch_before_moving_the_recovery_point(
        open_log: LogFactory, log_dir: Path) -> None:
    log = filled(open_log)
    start = log.log_end_offset
    log.assign_epoch_start_offset(5, start, flush=False)
    log.append(BATCH, leader_epoch=5)
    log.flush()
    assert not log.leader_epoch_cache_unflushed
    assert (log_dir / "leader-epoch-checkpoint").read_text().splitlines()[-1] == f"5 {start}"
