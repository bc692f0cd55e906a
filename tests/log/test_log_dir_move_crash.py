"""A move between log directories killed with SIGKILL (tests/log/dir_move_crasher.py) at
each point of the copy and of the swap: the next start loads one good current log with
every record (the future log too while the swap had not begun), the move can finish, and
nothing is left of the old log after it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.log.log import Log
from tests.log.conftest import values_of
from tests.log.dir_move_crasher import (
    CRASH_POINTS,
    RECORDS,
    TOPIC_PARTITION,
    copy,
    manager_for,
)

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


def check_records(log: Log, count: int) -> None:
    values: list[tuple[int, bytes | None]] = []
    for _ in range(count):  # bounded: a read returns at least one batch
        if len(values) >= count:
            break
        values += values_of(log.read(len(values), 1 << 20).records)
    assert values == [(offset, str(offset).encode()) for offset in range(count)]
    assert log.log_end_offset == count


@pytest.mark.slow
@pytest.mark.parametrize("crash_point", CRASH_POINTS)
def test_a_move_killed_at_any_point_leaves_one_good_log(tmp_path: Path,
                                                        crash_point: str) -> None:
    first, second = tmp_path / "d1", tmp_path / "d2"
    run = subprocess.run(
        [sys.executable, "-m", "tests.log.dir_move_crasher", str(first), str(second),
         crash_point], cwd=REPO, capture_output=True, timeout=90, check=False)
    assert run.returncode == -signal.SIGKILL, run.stdout + run.stderr
    clock = Clock()
    manager = manager_for([str(first), str(second)], clock)
    manager.startup()
    try:
        assert manager.offline_log_dirs == []
        current = manager.get_log(TOPIC_PARTITION)
        assert current is not None
        check_records(current, RECORDS)
        future = manager.future_logs.get(TOPIC_PARTITION)
        if crash_point in ("mid-copy", "before-rename"):
            assert current.dir == first / "move-0"
            assert future is not None and future.dir.parent == second
            copied = future.log_end_offset
            if crash_point == "mid-copy":
                assert RECORDS // 2 <= copied < RECORDS
            else:
                assert copied == RECORDS
            check_records(future, copied)
            copy(current, future, RECORDS)
            assert manager.replace_current_with_future_log(TOPIC_PARTITION) is future
        else:
            assert future is None
        moved = manager.get_log(TOPIC_PARTITION)
        assert moved is not None and moved.dir == second / "move-0"
        check_records(moved, RECORDS)
        clock.advance(120)  # past file.delete.delay.ms: the -delete directory goes
        assert [p.name for p in first.iterdir() if p.name.startswith("move-0")] == []
        assert [p.name for p in second.iterdir() if p.name.startswith("move-0")] == [
            "move-0"]
    finally:
        manager.shutdown()
    again = manager_for([str(first), str(second)], Clock())
    again.startup()
    try:
        log = again.get_log(TOPIC_PARTITION)
        assert log is not None and log.dir == second / "move-0"
        assert again.future_logs == {}
        check_records(log, RECORDS)
    finally:
        again.shutdown()
