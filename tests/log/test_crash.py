"""kill -9 a process appending to a log at random moments; every restart must find a log
that ends at its last whole batch, holds only valid batches, each offset holding what was
written at it, and indexes that agree with a full scan."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.records import RecordBatch, iter_batches
from tests.log.crash_writer import PROPS, TOPIC_PARTITION

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 5
STARTUP_TIMEOUT = 30.0


def check_log(log: Log) -> int:
    """Assert the invariants; returns the number of records."""
    next_offset = log.log_segments[0].base_offset
    records = 0
    for segment in log.log_segments:
        data = segment.log.read(0, segment.size)
        position = 0
        batch_at: dict[int, RecordBatch] = {}
        for batch in iter_batches(data, allow_partial_tail=False):
            assert isinstance(batch, RecordBatch)
            assert batch.is_valid()
            assert batch.base_offset == next_offset
            for record in batch.records():
                offset = batch.offset_of(record)
                assert record.value is not None
                assert int(record.value.rstrip(b".")) == offset
                records += 1
            batch_at[position] = batch
            position += batch.size_in_bytes
            next_offset = batch.next_offset
        assert position == segment.size  # the segment ends at its last whole batch
        for i in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(i)
            assert batch_at[entry.position].last_offset == entry.offset
        previous = -1
        for i in range(segment.time_index.entries):
            entry = segment.time_index.entry(i)
            assert entry.timestamp > previous
            previous = entry.timestamp
            assert segment.base_offset <= entry.offset < next_offset
    assert next_offset == log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    return records


def reopen_and_check(log_dirs: str) -> tuple[int, int]:
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": log_dirs, **PROPS}),
                         clock=Clock())
    manager.startup()
    try:
        log = manager.get_log(TOPIC_PARTITION)
        if log is None:
            return 0, 0
        return log.log_end_offset, check_log(log)
    finally:
        manager.shutdown()
        # shutdown leaves the clean-shutdown marker; the next round must still recover
        # its own crash, so remove it as a crash would not have written it
        (Path(log_dirs) / ".kafka_cleanshutdown").unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.timeout(100)
def test_kill_minus_nine_at_random_moments(tmp_path: Path) -> None:
    rng = random.Random(20240601)
    log_dirs = str(tmp_path / "data")
    end_offsets = []
    for round_number in range(ROUNDS):
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.log.crash_writer", log_dirs, str(round_number),
             "--seconds", "20"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            assert process.stdout is not None
            deadline = time.monotonic() + STARTUP_TIMEOUT
            line = process.stdout.readline()
            assert line.startswith(b"ready"), (line, process.stderr.read() if
                                               process.stderr else b"")
            assert time.monotonic() < deadline
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
            assert process.returncode == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        end_offset, records = reopen_and_check(log_dirs)
        assert records == end_offset  # nothing before the end is missing
        end_offsets.append(end_offset)
    assert end_offsets == sorted(end_offsets)
    assert end_offsets[-1] > 0
