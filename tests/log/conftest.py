"""Fixtures for the log tests: a clock at a realistic time, batch builders, log factories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.task import Clock

from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.protocol.records import RecordBatch, build_record_batch, iter_batches

START_SECONDS = 1_600_000_000.0


def now_ms(clock: Clock) -> int:
    return int(clock.seconds() * 1000)


@pytest.fixture
def clock() -> Clock:
    c = Clock()
    c.advance(START_SECONDS)
    return c


def make_batch(
    values: list[bytes] | int = 1,
    *,
    timestamp: int | None = None,
    base_offset: int = 0,
    value_size: int = 10,
    **kwargs: Any,
) -> bytes:
    """A v2 batch of records (one per value, or ``values`` records of ``value_size``
    bytes) all at ``timestamp`` (default: START_SECONDS)."""
    if isinstance(values, int):
        values = [bytes([65 + i % 26]) * value_size for i in range(values)]
    ts = int(START_SECONDS * 1000) if timestamp is None else timestamp
    return build_record_batch(
        [(b"key", value, None, ts) for value in values], base_offset=base_offset, **kwargs
    )


def batches_of(data: bytes | memoryview) -> list[RecordBatch]:
    return [b for b in iter_batches(data, allow_partial_tail=False) if isinstance(b, RecordBatch)]


def values_of(data: bytes | memoryview) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in ``data``."""
    out = []
    for batch in batches_of(data):
        for record in batch.records():
            out.append((batch.offset_of(record), record.value))
    return out


LogFactory = Callable[..., Log]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path, clock: Clock) -> Iterator[LogFactory]:
    """Open logs on ``log_dir`` with topic configs ``props``; closes them after."""
    opened: list[Log] = []

    def factory(props: dict[str, object] | None = None, **kwargs: Any) -> Log:
        config = LogConfig.from_props({k: str(v) for k, v in (props or {}).items()})
        log = Log(
            kwargs.pop("directory", log_dir),
            config,
            clock=kwargs.pop("clock", clock),
            **kwargs,
        )
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()
