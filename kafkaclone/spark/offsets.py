"""Offset planning for the "kafkaclone" source, as Spark's Kafka source does it: resolving
starting and ending offsets, cutting them into input partitions (``minPartitions``),
streaming offsets as JSON and admission control (``maxOffsetsPerTrigger``) spread over the
partitions in proportion to their lag.

Nothing here talks to a broker: the cluster is reached through an ``OffsetSource`` (the
driver's consumer in ``kafkaclone.spark.kafka``, a fake in unit tests).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kafkaclone.spark.options import (
    EARLIEST,
    LATEST,
    KafkaCloneOptionError,
    OffsetSpec,
    Subscription,
    TopicPartition,
)

logger = logging.getLogger(__name__)

PartitionOffsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Data the query should have read is gone (failOnDataLoss=true), with Spark's advice."""

    def __init__(self, message: str) -> None:
        super().__init__(
            f"{message}. Some data may have been lost because they are not available in the "
            "cluster any more; either the data was aged out by the broker or the topic may "
            "have been deleted before all the data in the topic was processed. If you don't "
            'want your query to fail on such cases, set the source option "failOnDataLoss" '
            'to "false".'
        )


def report_data_loss(fail_on_data_loss: bool, message: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(message)
    logger.warning("%s. Some data may have been lost (failOnDataLoss=false).", message)


class OffsetSource(Protocol):
    """What planning needs from the cluster."""

    def topic_partitions(self) -> dict[str, int]:
        """Every topic of the cluster and its partition count."""
        ...

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets: ...

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is at least the given one, None if none is."""
        ...


def subscribed_partitions(
    subscription: Subscription, source: OffsetSource, *, require_existing: bool
) -> list[TopicPartition]:
    """The partitions the query reads, sorted. With ``require_existing``, a subscribed or
    assigned topic (or partition) that does not exist is an error."""
    topics = source.topic_partitions()
    if subscription.kind == "assign":
        missing = [tp for tp in subscription.partitions if tp[1] >= topics.get(tp[0], 0)]
        if missing and require_existing:
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise KafkaCloneOptionError(
                f"Assigned partitions do not exist in the cluster: {names}."
            )
        return sorted(tp for tp in subscription.partitions if tp not in missing)
    if subscription.kind == "subscribe" and require_existing:
        missing_topics = [t for t in subscription.topics if t not in topics]
        if missing_topics:
            raise KafkaCloneOptionError(
                f"Subscribed topics do not exist in the cluster: {', '.join(missing_topics)} "
                "(set failOnDataLoss=false to read the existing ones only)."
            )
    return sorted(
        (topic, partition)
        for topic, count in topics.items()
        if subscription.matches(topic)
        for partition in range(count)
    )


def resolve_offsets(
    spec: OffsetSpec,
    partitions: list[TopicPartition],
    source: OffsetSource,
    *,
    option: str,
) -> PartitionOffsets:
    """Concrete offsets for ``partitions``. Per partition offsets must name exactly the
    query's partitions (as Spark checks); -2 / -1 become the earliest / latest offsets."""
    if spec.kind == "earliest":
        return source.earliest_offsets(partitions)
    if spec.kind == "latest":
        return source.latest_offsets(partitions)
    if spec.kind == "offsets":
        _check_same_partitions(option, set(spec.offsets), set(partitions))
        earliest = [tp for tp, offset in spec.offsets.items() if offset == EARLIEST]
        latest = [tp for tp, offset in spec.offsets.items() if offset == LATEST]
        resolved = dict(spec.offsets)
        resolved.update(source.earliest_offsets(earliest) if earliest else {})
        resolved.update(source.latest_offsets(latest) if latest else {})
        return {tp: resolved[tp] for tp in partitions}
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        stamps = {tp: spec.timestamp for tp in partitions}
    else:
        _check_same_partitions(option, set(spec.offsets), set(partitions))
        stamps = dict(spec.offsets)
    found = source.offsets_for_times(stamps)
    missing = [tp for tp in partitions if found.get(tp) is None]
    latest_for_missing: PartitionOffsets = {}
    if missing:
        if spec.strategy == "error":
            names = ", ".join(f"{t}-{p} (timestamp {stamps[(t, p)]})" for t, p in missing)
            prefix = "starting" if option.startswith("starting") else "ending"
            raise KafkaCloneOptionError(
                f"No offset matched the timestamp given in '{option}' for {names}: every "
                f"record is older. Set the option '{prefix}OffsetsByTimestampStrategy' to "
                "'latest' to use the latest offset instead."
            )
        latest_for_missing = source.latest_offsets(missing)
    out: PartitionOffsets = {}
    for tp in partitions:
        offset = found.get(tp)
        out[tp] = latest_for_missing[tp] if offset is None else int(offset)
    return out


def _check_same_partitions(
    option: str, given: set[TopicPartition], wanted: set[TopicPartition]
) -> None:
    if given != wanted:
        extra = ", ".join(f"{t}-{p}" for t, p in sorted(given - wanted))
        absent = ", ".join(f"{t}-{p}" for t, p in sorted(wanted - given))
        raise KafkaCloneOptionError(
            f"Option '{option}' must give every partition the query reads and no other: "
            + (f"not read: {extra}" if extra else "")
            + ("; " if extra and absent else "")
            + (f"missing: {absent}" if absent else "")
            + "."
        )


# -- input partitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic-partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    min_partitions: int | None,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """One range per partition with data in ``[start, end)``, split as Spark's
    KafkaOffsetRangeCalculator does when there are fewer than ``min_partitions``: ranges
    smaller than the ideal size (total / minPartitions) stay whole, each larger one is cut
    into equal parts, their number in proportion to its share of the remaining data."""
    ranges = []
    for tp in sorted(start):
        if tp not in end:
            continue
        from_offset, until_offset = start[tp], end[tp]
        if until_offset < from_offset:
            report_data_loss(
                fail_on_data_loss,
                f"Partition {tp[0]}-{tp[1]}'s offset was changed from {from_offset} to "
                f"{until_offset}",
            )
            continue
        if until_offset > from_offset:
            ranges.append(OffsetRange(tp[0], tp[1], from_offset, until_offset))
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    ideal = total / min_partitions
    small = [r for r in ranges if r.size < ideal]
    large_total = sum(r.size for r in ranges if r.size >= ideal)
    remaining_parts = min_partitions - len(small)
    out = []
    for r in ranges:
        if r.size < ideal:
            out.append(r)
            continue
        # rounded half up, as Scala's Math.round (Python's round goes to even)
        parts = max(math.floor(r.size / large_total * remaining_parts + 0.5), 1)
        out.extend(split_range(r, parts))
    return out


def split_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` contiguous ranges of (nearly) equal size covering ``r`` exactly."""
    parts = min(parts, r.size)
    bounds = [r.from_offset + r.size * i // parts for i in range(parts + 1)]
    return [
        OffsetRange(r.topic, r.partition, bounds[i], bounds[i + 1]) for i in range(parts)
    ]


# -- streaming ----------------------------------------------------------------------------


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"partition": offset}}``, Spark's Kafka source offset format."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in value.items()
        for partition, offset in partitions.items()
    }


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> PartitionOffsets:
    """End offsets reading at most about ``limit`` records, shared among the partitions in
    proportion to their lag (Spark's rateLimit: a share below one record is rounded up, so
    every lagging partition moves; above one, down)."""
    lags = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        lag = lags[tp]
        if lag == 0:
            out[tp] = end
            continue
        share = limit * (lag / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end)
    return out


def lag(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> int:
    return sum(max(end[tp] - start.get(tp, end[tp]), 0) for tp in end)
