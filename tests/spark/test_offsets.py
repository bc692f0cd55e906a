"""Offset planning and the streaming offset logic of the "kafkaclone" source, against an
in-memory cluster view (no broker, no Spark)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafkaclone.spark.offsets import (
    DataLossError,
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    resolve_offsets,
    split_range,
    subscribed_partitions,
)
from kafkaclone.spark.options import (
    KafkaCloneOptionError,
    OffsetSpec,
    TopicPartition,
    parse_reader_options,
)
from kafkaclone.spark.source import KafkaCloneStreamReader


class FakeCluster:
    """Topics with per-partition (log start, log end) offsets and record timestamps."""

    def __init__(self, logs: dict[str, list[tuple[int, int]]]) -> None:
        self.logs = logs
        self.timestamps: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []

    def topic_partitions(self) -> dict[str, int]:
        return {topic: len(parts) for topic, parts in self.logs.items()}

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {(t, p): self.logs[t][p][0] for t, p in partitions}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {(t, p): self.logs[t][p][1] for t, p in partitions}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, ts in timestamps.items():
            out[tp] = next((o for o, t in self.timestamps.get(tp, []) if t >= ts), None)
        return out

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.commits.append((group, dict(offsets)))

    def close(self) -> None:
        pass


BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def stream_reader(cluster: FakeCluster, **options: str) -> KafkaCloneStreamReader:
    reader = KafkaCloneStreamReader(parse_reader_options({**BOOTSTRAP, **options}, streaming=True))
    reader._source = cluster  # type: ignore[assignment]
    return reader


def test_subscribed_partitions() -> None:
    cluster = FakeCluster({"a": [(0, 5)] * 2, "b": [(0, 1)], "logs-1": [(0, 0)]})
    options = parse_reader_options({**BOOTSTRAP, "subscribePattern": "logs-.*"}, streaming=False)
    assert subscribed_partitions(options.subscription, cluster, require_existing=True) == [
        ("logs-1", 0)
    ]
    options = parse_reader_options({**BOOTSTRAP, "subscribe": "a,b,zz"}, streaming=False)
    with pytest.raises(KafkaCloneOptionError, match="do not exist in the cluster: zz"):
        subscribed_partitions(options.subscription, cluster, require_existing=True)
    assert subscribed_partitions(options.subscription, cluster, require_existing=False) == [
        ("a", 0), ("a", 1), ("b", 0)
    ]
    options = parse_reader_options({**BOOTSTRAP, "assign": '{"a": [1, 7]}'}, streaming=False)
    with pytest.raises(KafkaCloneOptionError, match="a-7"):
        subscribed_partitions(options.subscription, cluster, require_existing=True)


def test_resolve_offsets() -> None:
    cluster = FakeCluster({"a": [(3, 10), (0, 20)]})
    parts = [("a", 0), ("a", 1)]
    assert resolve_offsets(OffsetSpec("earliest"), parts, cluster, option="x") == {
        ("a", 0): 3, ("a", 1): 0
    }
    spec = OffsetSpec("offsets", offsets={("a", 0): -1, ("a", 1): 7})
    assert resolve_offsets(spec, parts, cluster, option="x") == {("a", 0): 10, ("a", 1): 7}
    with pytest.raises(KafkaCloneOptionError, match="missing: a-1"):
        resolve_offsets(OffsetSpec("offsets", offsets={("a", 0): 1}), parts, cluster, option="x")
    cluster.timestamps[("a", 0)] = [(3, 100), (4, 200)]
    spec = OffsetSpec("timestamp", timestamp=150)
    with pytest.raises(KafkaCloneOptionError, match="No offset matched the timestamp"):
        resolve_offsets(spec, parts, cluster, option="startingTimestamp")
    spec = OffsetSpec("timestamp", timestamp=150, strategy="latest")
    assert resolve_offsets(spec, parts, cluster, option="startingTimestamp") == {
        ("a", 0): 4, ("a", 1): 20
    }


def test_one_range_per_partition_and_min_partitions_split() -> None:
    start = {("a", 0): 0, ("a", 1): 10, ("a", 2): 5, ("a", 3): 0}
    end = {("a", 0): 100, ("a", 1): 10, ("a", 2): 6, ("a", 3): 300}
    ranges = plan_ranges(start, end, min_partitions=None, fail_on_data_loss=True)
    assert ranges == [
        OffsetRange("a", 0, 0, 100), OffsetRange("a", 2, 5, 6), OffsetRange("a", 3, 0, 300)
    ]
    split = plan_ranges(start, end, min_partitions=8, fail_on_data_loss=True)
    # ideal size 401/8 ~ 50: a-2 stays whole; a-0 and a-3 share 7 parts, 100:300 -> 2 and 5
    assert [r for r in split if r.partition == 2] == [OffsetRange("a", 2, 5, 6)]
    assert [r.size for r in split if r.partition == 0] == [50, 50]
    assert [r.size for r in split if r.partition == 3] == [60] * 5
    for tp in (("a", 0), ("a", 3)):
        parts = [r for r in split if (r.topic, r.partition) == tp]
        assert parts[0].from_offset == start[tp] and parts[-1].until_offset == end[tp]
        assert all(x.until_offset == y.from_offset for x, y in itertools.pairwise(parts))
    assert split_range(OffsetRange("t", 0, 0, 3), 5) == [
        OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2), OffsetRange("t", 0, 2, 3)
    ]


def test_offset_going_backwards_is_data_loss() -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        plan_ranges({("a", 0): 10}, {("a", 0): 5}, min_partitions=None, fail_on_data_loss=True)
    assert plan_ranges(
        {("a", 0): 10}, {("a", 0): 5}, min_partitions=None, fail_on_data_loss=False
    ) == []


def test_rate_limit_spreads_by_lag() -> None:
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 50}
    latest = {("a", 0): 300, ("a", 1): 100, ("a", 2): 50}
    end = rate_limit(start, latest, 100)
    assert end == {("a", 0): 75, ("a", 1): 25, ("a", 2): 50}
    assert rate_limit(start, latest, 1000) == latest
    # a share below one record still moves the partition
    tiny = rate_limit({("a", 0): 0, ("a", 1): 0}, {("a", 0): 1000, ("a", 1): 1}, 10)
    assert tiny == {("a", 0): 9, ("a", 1): 1}


def test_offsets_json_round_trip() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert offsets_from_json(as_json) == offsets


def test_stream_reader_micro_batches_and_new_partitions() -> None:
    cluster = FakeCluster({"a": [(0, 100), (0, 50)]})
    reader = stream_reader(
        cluster, subscribe="a,b", startingOffsets="earliest", maxOffsetsPerTrigger="60",
        failOnDataLoss="false",
    )
    start = reader.initialOffset()
    assert start == {"a": {"0": 0, "1": 0}}
    assert isinstance(reader.getDefaultReadLimit(), ReadMaxRows)
    end = reader.latestOffset(start, ReadMaxRows(60))
    assert end == {"a": {"0": 40, "1": 20}}
    parts = reader.partitions(start, end)
    assert [p.value for p in parts] == [OffsetRange("a", 0, 0, 40), OffsetRange("a", 1, 0, 20)]
    # a new topic appears: read from its earliest offset
    cluster.logs["b"] = [(5, 8)]
    end2 = reader.latestOffset(end, ReadAllAvailable())
    assert end2 == {"a": {"0": 100, "1": 50}, "b": {"0": 8}}
    assert [p.value for p in reader.partitions(end, end2)][-1] == OffsetRange("b", 0, 5, 8)
    # nothing new: the same offsets back, no partitions
    assert reader.latestOffset(end2, ReadAllAvailable()) == end2
    assert reader.partitions(end2, end2) == []


def test_stream_reader_available_now_stops_at_the_target() -> None:
    cluster = FakeCluster({"a": [(0, 100)]})
    reader = stream_reader(cluster, subscribe="a", startingOffsets="earliest")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    cluster.logs["a"] = [(0, 500)]  # data arriving after the trigger started
    assert reader.latestOffset(start, ReadMaxRows(30)) == {"a": {"0": 30}}
    assert reader.latestOffset({"a": {"0": 90}}, ReadMaxRows(30)) == {"a": {"0": 100}}
    assert reader.latestOffset({"a": {"0": 100}}, ReadMaxRows(30)) == {"a": {"0": 100}}


def test_stream_reader_min_offsets_per_trigger() -> None:
    cluster = FakeCluster({"a": [(0, 5)]})
    reader = stream_reader(
        cluster, subscribe="a", startingOffsets="earliest", minOffsetsPerTrigger="10",
        maxTriggerDelay="1h",
    )
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # too few: wait
    cluster.logs["a"] = [(0, 12)]
    assert reader.latestOffset(start, ReadAllAvailable()) == {"a": {"0": 12}}


def test_deleted_partition_is_data_loss_and_commit_goes_to_the_group() -> None:
    cluster = FakeCluster({"a": [(0, 10)], "b": [(0, 3)]})
    reader = stream_reader(
        cluster, subscribe="a,b", startingOffsets="latest", commitToGroup="etl"
    )
    start = reader.initialOffset()
    assert start == {"a": {"0": 10}, "b": {"0": 3}}
    reader.commit(start)
    assert cluster.commits == [("etl", {("a", 0): 10, ("b", 0): 3})]
    del cluster.logs["b"]
    with pytest.raises(DataLossError, match="b-0 was deleted"):
        reader.latestOffset(start, ReadAllAvailable())
