"""A hypothesis state machine: random appends, rolls, truncations, DeleteRecords, retention
runs and reopenings (clean and unclean) against a simple model of the log's content."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from twisted.internet.task import Clock

from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.protocol.records import build_record_batch
from tests.log.conftest import START_SECONDS, values_of

CONFIG = LogConfig.from_props({
    "segment.bytes": "3000",
    "index.interval.bytes": "150",
    "retention.bytes": "8000",
    "retention.ms": "60000",
    "file.delete.delay.ms": "1000",
})


@dataclass
class ModelBatch:
    first: int
    last: int
    values: list[bytes]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kc-stateful-"))
        self.dir = self.tmp / "model-0"
        self.clock = Clock()
        self.clock.advance(START_SECONDS)
        self.log: Log | None = None
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.high_watermark = 0
        self.sequence = 0

    @initialize()
    def open(self) -> None:
        self.log = Log(self.dir, CONFIG, clock=self.clock)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.log_start

    def _log(self) -> Log:
        assert self.log is not None
        return self.log

    # -- rules ---------------------------------------------------------------------------

    @rule(count=st.integers(1, 6), size=st.sampled_from([1, 20, 150, 400]))
    def append(self, count: int, size: int) -> None:
        values = []
        for _ in range(count):
            self.sequence += 1
            values.append(str(self.sequence).encode().ljust(size, b"-"))
        now = int(self.clock.seconds() * 1000)
        batch = build_record_batch([(None, value, None, now) for value in values])
        info = self._log().append(batch, leader_epoch=1)
        assert info.first_offset == self.end
        self.batches.append(ModelBatch(info.first_offset, info.last_offset, values))

    @rule()
    def roll(self) -> None:
        self._log().roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        log = self._log()
        target = data.draw(st.integers(log.log_start_offset, self.end))
        log.truncate_to(target)
        kept = [b for b in self.batches if b.last < target]
        if len(kept) < len(self.batches):
            new_end = self.batches[len(kept)].first
            self.batches = kept
            self.log_start = min(self.log_start, new_end)
            self.high_watermark = min(self.high_watermark, new_end)

    @rule(data=st.data())
    def advance_high_watermark(self, data: st.DataObject) -> None:
        self.high_watermark = data.draw(st.integers(self.high_watermark, self.end))
        assert self._log().update_high_watermark(self.high_watermark) == self.high_watermark

    @precondition(lambda self: self.high_watermark > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.high_watermark))
        assert self._log().delete_records_before(offset) == max(offset, self.log_start)
        self.log_start = max(offset, self.log_start)

    @rule(seconds=st.sampled_from([0, 1, 30, 61]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def retention(self) -> None:
        log = self._log()
        before = log.log_start_offset
        log.delete_old_segments()
        after = log.log_start_offset
        assert after >= before
        if after > before:
            assert after <= self.high_watermark  # nothing past the high watermark goes
            assert after == log.log_segments[0].base_offset  # whole segments only
            self.log_start = after
        if CONFIG.retention_bytes >= 0 and log.num_segments > 1:
            assert log.size - log.log_segments[0].size < CONFIG.retention_bytes or (
                log.log_segments[1].base_offset > self.high_watermark
            )

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        log = self._log()
        if clean:
            log.flush()
        recovery_point = log.recovery_point
        log.close()
        self.log = Log(
            self.dir, CONFIG, clock=self.clock, log_start_offset=self.log_start,
            recovery_point=recovery_point, high_watermark=self.high_watermark,
            had_clean_shutdown=clean,
        )

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        log = self._log()
        assert log.log_end_offset == self.end
        assert log.log_start_offset == self.log_start
        assert log.high_watermark == self.high_watermark

    @invariant()
    def reads_match_the_model(self) -> None:
        log = self._log()
        expected = [
            (batch.first + i, value)
            for batch in self.batches
            for i, value in enumerate(batch.values)
            if batch.first + i >= self.log_start
        ]
        got: list[tuple[int, bytes | None]] = []
        offset = self.log_start
        while offset < self.end:
            fetched = log.read(offset, 700)
            records = [(o, v) for o, v in values_of(fetched.records) if o >= offset]
            assert records, f"no progress reading at {offset}"
            got.extend(records)
            offset = records[-1][0] + 1
        assert got == expected


LogMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogStateMachine = LogMachine.TestCase
