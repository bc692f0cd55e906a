"""The writer's columnar path (kafkaclone.spark.kafka.ColumnGatherer) against a producer
that only records its ``send_batch`` calls: no cluster, no Spark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from kafkaclone.spark import kafka

pytestmark = pytest.mark.timeout(60)


@dataclass
class Options:
    topic: str | None = "t"
    include_headers: bool = False


@dataclass
class RecordingProducer:
    calls: list[tuple[str, int, list[bytes | None], list[bytes | None] | None]] = field(
        default_factory=list)

    def send_batch(self, topic: str, partition: int, values: BinaryColumn,
                   keys: BinaryColumn | None, timestamps: Any) -> list[Any]:
        assert len(timestamps) == len(values)
        self.calls.append((
            topic, partition, [values.value(i) for i in range(len(values))],
            None if keys is None else [keys.value(i) for i in range(len(keys))]))
        return []

    def choose_partition(self, topic: str) -> int:
        return 7

    def sent(self, topic: str, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        out: list[tuple[bytes | None, bytes | None]] = []
        for t, p, values, keys in self.calls:
            if (t, p) == (topic, partition):
                out += zip(keys or [None] * len(values), values, strict=True)
        return out


def batch(first: int, count: int, partitions: int, *, keys: bool,
          strings: bool = False) -> pa.RecordBatch:
    ids = range(first, first + count)
    columns = {
        "partition": pa.array([i % partitions for i in ids], pa.int32()),
        "value": pa.array([f"v{i}" if strings else b"v%d" % i for i in ids]),
    }
    if keys:
        columns["key"] = pa.array([None if i % 5 == 0 else b"k%d" % i for i in ids])
    return pa.record_batch(list(columns.values()), names=list(columns))


def expected(rows: range, partition: int, partitions: int,
             keyed: set[int]) -> list[tuple[bytes | None, bytes | None]]:
    return [(b"k%d" % i if i in keyed and i % 5 else None, b"v%d" % i)
            for i in rows if i % partitions == partition]


def test_rows_are_gathered_per_partition_over_batches_in_order() -> None:
    producer = RecordingProducer()
    gatherer = kafka.ColumnGatherer(producer)
    # Keyless batches, then keyed ones, then a string value column: one partition's rows
    # joined over all of them, keys null where a batch had none.
    assert gatherer.add(Options(), batch(0, 1000, 3, keys=False))
    assert gatherer.add(Options(), batch(1000, 1000, 3, keys=True))
    assert gatherer.add(Options(), batch(2000, 1000, 3, keys=True, strings=True))
    assert producer.calls == []  # nothing reaches the producer before a chunk is full
    gatherer.flush()
    keyed = set(range(1000, 3000))
    for partition in range(3):
        assert producer.sent("t", partition) == expected(range(3000), partition, 3, keyed)
    assert len(producer.calls) == 3


def test_a_partition_is_sent_when_its_chunk_is_full() -> None:
    producer = RecordingProducer()
    gatherer = kafka.ColumnGatherer(producer)
    per_batch = 10_000
    batches = kafka.WRITER_CHUNK_RECORDS * 2 // per_batch + 1
    for n in range(batches):
        assert gatherer.add(Options(), batch(n * per_batch, per_batch, 2, keys=False))
    assert producer.calls  # chunks went out before the flush
    assert all(len(values) >= kafka.WRITER_CHUNK_RECORDS for _t, _p, values, _k in
               producer.calls)
    gatherer.flush()
    total = batches * per_batch
    for partition in range(2):
        assert producer.sent("t", partition) == expected(range(total), partition, 2, set())


def test_single_partition_batches_and_keyless_rows_without_a_partition() -> None:
    producer = RecordingProducer()
    gatherer = kafka.ColumnGatherer(producer)
    one = pa.record_batch([pa.array([4] * 3, pa.int32()), pa.array([b"a", b"b", None])],
                          names=["partition", "value"])
    keyless = pa.record_batch([pa.array([b"x", b"y"])], names=["value"])
    assert gatherer.add(Options(), one)
    assert gatherer.add(Options(), keyless)
    gatherer.flush()
    assert producer.sent("t", 4) == [(None, b"a"), (None, b"b"), (None, None)]
    assert producer.sent("t", 7) == [(None, b"x"), (None, b"y")]


def test_rows_the_columnar_path_does_not_take() -> None:
    gatherer = kafka.ColumnGatherer(RecordingProducer())
    keyed_without_partition = pa.record_batch([pa.array([b"k"]), pa.array([b"v"])],
                                              names=["key", "value"])
    assert not gatherer.add(Options(), keyed_without_partition)
    null_partition = pa.record_batch([pa.array([1, None], pa.int32()),
                                      pa.array([b"v", b"w"])], names=["partition", "value"])
    assert not gatherer.add(Options(), null_partition)
    two_topics = pa.record_batch([pa.array(["a", "b"]), pa.array([b"v", b"w"])],
                                 names=["topic", "value"])
    assert not gatherer.add(Options(topic=None), two_topics)
    assert gatherer.pending == {}


def fixed(first: int, count: int, partitions: int, value_type: pa.DataType,
          keys: bool = False) -> pa.RecordBatch:
    """Values (and keys) of one width: gathered by the one-copy path."""
    ids = range(first, first + count)
    columns = {"partition": pa.array([i % partitions for i in ids], pa.int32()),
               "value": pa.array([b"v%06d" % i for i in ids]).cast(value_type)}
    if keys:
        columns["key"] = pa.array([b"k%05d" % i for i in ids])
    return pa.record_batch(list(columns.values()), names=list(columns))


def test_values_of_one_width_are_gathered_in_order_from_any_arrow_layout() -> None:
    producer = RecordingProducer()
    gatherer = kafka.ColumnGatherer(producer)
    sliced = fixed(0, 2000, 3, pa.binary()).slice(500, 1000)  # rows 500-1499, offset 500
    assert gatherer.add(Options(), sliced)
    assert gatherer.add(Options(), fixed(1500, 1000, 3, pa.string()))
    assert gatherer.add(Options(), fixed(2500, 1000, 3, pa.large_binary()))
    gatherer.flush()
    for partition in range(3):
        assert producer.sent("t", partition) == [
            (None, b"v%06d" % i) for i in range(500, 3500) if i % 3 == partition]


def test_keys_of_one_width_and_a_batch_of_other_widths_after_them() -> None:
    producer = RecordingProducer()
    gatherer = kafka.ColumnGatherer(producer)
    assert gatherer.add(Options(), fixed(0, 900, 2, pa.binary(), keys=True))
    assert gatherer.add(Options(), batch(900, 100, 2, keys=False))  # widths vary: Arrow
    gatherer.flush()
    for partition in range(2):
        assert producer.sent("t", partition) == \
            [(b"k%05d" % i, b"v%06d" % i) for i in range(900) if i % 2 == partition] + \
            [(None, b"v%d" % i) for i in range(900, 1000) if i % 2 == partition]
