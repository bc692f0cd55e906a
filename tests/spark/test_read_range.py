"""An executor's read of one offset range (kafkaclone.spark.kafka.read_range) against an
in-memory consumer: exact ranges, partial batches, compaction gaps, data loss, retries."""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from kafkaclone.common.errors import NotLeaderOrFollowerError
from kafkaclone.protocol.records import Codec, build_record_batch
from kafkaclone.spark import kafka
from kafkaclone.spark.offsets import DataLossError, OffsetRange
from kafkaclone.spark.options import parse_reader_options


@dataclass
class TopicPartition:
    topic: str
    partition: int
    offset: int = -1001


@dataclass
class Fetched:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    records: memoryview
    next_offset: int | None
    """The offset after the last whole batch (RawFetch's)."""


class FakeLog:
    """One partition: batches (base offset -> bytes), a log start offset, and faults."""

    def __init__(self, batches: list[bytes], log_start: int = 0) -> None:
        self.batches = batches
        self.log_start = log_start
        self.failures_left = 0
        self.consumers = 0

    @property
    def high_watermark(self) -> int:
        from kafkaclone.protocol.records import iter_batches

        last = 0
        for batch in self.batches:
            for b in iter_batches(batch, allow_partial_tail=False):
                last = b.next_offset
        return last

    def fetch(self, position: int, max_bytes: int) -> bytes:
        from kafkaclone.protocol.records import iter_batches

        out = b""
        for batch in self.batches:
            (b,) = iter_batches(batch, allow_partial_tail=False)
            if b.next_offset > max(position, self.log_start):
                out += batch
        return out[:max_bytes] if len(out) > max_bytes else out


class FakeConsumer:
    log: FakeLog
    max_bytes = 700

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = conf
        self.position = 0
        self.closed = False
        self.log.consumers += 1

    def assign(self, partitions: list[TopicPartition]) -> None:
        (tp,) = partitions
        self.tp = tp
        self.position = tp.offset

    def seek(self, tp: TopicPartition) -> None:
        self.position = tp.offset

    def poll_raw(self, timeout: float) -> list[Fetched]:
        if self.log.failures_left:
            self.log.failures_left -= 1
            raise NotLeaderOrFollowerError("leader moved")
        data = self.log.fetch(self.position, self.max_bytes)
        from kafkaclone.protocol.records.columnar import decode_columns

        next_offset = decode_columns(data).next_offset
        if next_offset is not None:
            self.position = next_offset
        return [Fetched(self.tp.topic, self.tp.partition, self.log.high_watermark,
                        self.log.log_start, memoryview(data), next_offset)]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLog]:
    batches = []
    offset = 0
    for i in range(12):
        count = 5 + i % 4
        batches.append(
            build_record_batch(
                [(None, b"v%d" % (offset + j)) for j in range(count)],
                base_offset=offset, codec=Codec.GZIP if i % 3 == 0 else Codec.NONE,
            )
        )
        offset += count
    fake_log = FakeLog(batches)
    FakeConsumer.log = fake_log
    fake = types.SimpleNamespace(Consumer=FakeConsumer, TopicPartition=TopicPartition)
    monkeypatch.setattr(kafka, "_clients", lambda: fake)
    yield fake_log


def options(**extra: str) -> Any:
    return parse_reader_options(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
         "fetchOffset.retryIntervalMs": "0", "kafkaConsumer.pollTimeoutMs": "2000", **extra},
        streaming=False,
    )


def read(opts: Any, start: int, until: int) -> list[tuple[int, bytes]]:
    batches = list(kafka.read_range(opts, OffsetRange("t", 3, start, until)))
    assert all(b.schema == kafka.arrow_schema(opts.include_headers) for b in batches)
    table = pa.Table.from_batches(batches, schema=kafka.arrow_schema(opts.include_headers))
    assert set(table.column("partition").to_pylist()) <= {3}
    assert set(table.column("topic").to_pylist()) <= {"t"}
    return list(zip(table.column("offset").to_pylist(), table.column("value").to_pylist(),
                    strict=True))


def test_exact_ranges_over_partial_fetches(log: FakeLog) -> None:
    total = log.high_watermark
    for start, until in [(0, total), (3, 4), (7, 40), (total - 1, total), (11, 12)]:
        assert read(options(), start, until) == [
            (o, b"v%d" % o) for o in range(start, until)
        ]


def test_compaction_gaps_are_not_data_loss(log: FakeLog) -> None:
    log.batches = [build_record_batch([(None, b"v%d" % o)], base_offset=o) for o in (0, 4, 9)]
    assert read(options(), 0, 10) == [(0, b"v0"), (4, b"v4"), (9, b"v9")]


def test_retriable_errors_restart_the_consumer(log: FakeLog) -> None:
    log.failures_left = 3
    assert [o for o, _v in read(options(), 0, 20)] == list(range(20))
    assert log.consumers == 4
    log.failures_left = 5  # more than fetchOffset.numRetries + 1 in a row
    with pytest.raises(NotLeaderOrFollowerError):
        read(options(), 0, 20)


def test_offsets_below_the_log_start_are_data_loss(log: FakeLog) -> None:
    log.log_start = 10
    log.batches = [b for b in log.batches if kafka.decode_columns(b).next_offset > 10]
    with pytest.raises(DataLossError, match="the log starts at"):
        read(options(), 2, 30)
    got = read(options(failOnDataLoss="false"), 2, 30)
    assert got[0][0] >= 10 and [o for o, _v in got] == list(range(got[0][0], 30))


def test_a_range_past_the_end_of_the_log(log: FakeLog) -> None:
    end = log.high_watermark
    with pytest.raises(DataLossError, match="ends at offset"):
        read(options(**{"kafkaConsumer.pollTimeoutMs": "300"}), end - 2, end + 5)
    got = read(options(failOnDataLoss="false", **{"kafkaConsumer.pollTimeoutMs": "300"}),
               end - 2, end + 5)
    assert [o for o, _v in got] == [end - 2, end - 1]
