"""The "kafkaclone" PySpark data source: batch and streaming reads, batch and streaming
writes (Python Data Source API, PySpark >= 4.2).

Planning (options, offsets, input partitions) runs on the driver's Python worker, so a bad
option fails the query before any task starts; each input partition is one offset range
of one topic-partition, read on an executor by ``kafkaclone.spark.kafka.read_range``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from kafkaclone.spark import kafka
from kafkaclone.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    lag,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
    report_data_loss,
    resolve_offsets,
    subscribed_partitions,
)
from kafkaclone.spark.options import (
    KafkaCloneOptionError,
    ReaderOptions,
    WriterOptions,
    parse_reader_options,
    parse_writer_options,
)

logger = logging.getLogger(__name__)

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"


class KafkaInputPartition(InputPartition):
    """One Spark partition: its ``value`` is the OffsetRange to read."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)

    def offset_range(self) -> OffsetRange:
        value: OffsetRange = self.value
        return value


class KafkaCloneDataSource(DataSource):
    """``spark.read.format("kafkaclone")`` / ``readStream`` / ``write`` / ``writeStream``,
    with the options and schema of Spark's Kafka connector (see kafkaclone.spark.options)."""

    @classmethod
    def name(cls) -> str:
        return "kafkaclone"

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.options = dict(options)

    def _include_headers(self) -> bool:
        value = {k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")
        return str(value).strip().lower() == "true"

    def schema(self) -> str:
        if self._include_headers():
            return f"{SCHEMA}, {HEADERS_FIELD}"
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaCloneBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaCloneStreamReader(parse_reader_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaCloneWriter:
        options = parse_writer_options(self.options)
        check_sink_schema(schema, options)
        return KafkaCloneWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaCloneStreamWriter:
        options = parse_writer_options(self.options)
        check_sink_schema(schema, options)
        return KafkaCloneStreamWriter(options)


# -- batch --------------------------------------------------------------------------------


class KafkaCloneBatchReader(DataSourceReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        source = kafka.ClusterOffsets(options)
        try:
            partitions = subscribed_partitions(
                options.subscription, source, require_existing=options.fail_on_data_loss
            )
            if not partitions:
                return []
            start = resolve_offsets(options.starting, partitions, source, option="startingOffsets")
            end = resolve_offsets(options.ending, partitions, source, option="endingOffsets")
            earliest = source.earliest_offsets(partitions)
        finally:
            source.close()
        for tp, offset in start.items():
            if offset < earliest[tp]:
                report_data_loss(
                    options.fail_on_data_loss,
                    f"Cannot read {tp[0]}-{tp[1]} from offset {offset}: the log starts at "
                    f"{earliest[tp]}",
                )
                start[tp] = earliest[tp]
        ranges = plan_ranges(
            start, end, min_partitions=options.min_partitions,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        if partition is None or partition.value is None:
            return  # no ranges: Spark still runs one task, with an empty partition
        yield from kafka.read_range(self.options, partition.value)


# -- streaming ----------------------------------------------------------------------------


class KafkaCloneStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"topic": {"partition": offset}}`` (next offset to read), kept in the
    query's checkpoint by Spark. Each micro-batch's end is the latest offsets, limited by
    ``maxOffsetsPerTrigger`` (spread over the partitions by lag) and by the target of a
    ``Trigger.AvailableNow`` query; partitions and topics that appear are read from their
    earliest offset; ``minOffsetsPerTrigger`` holds a batch back until enough records or
    ``maxTriggerDelay`` have passed."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._source: kafka.ClusterOffsets | None = None
        self._target: PartitionOffsets | None = None
        self._last_batch_time = time.monotonic()

    @property
    def source(self) -> kafka.ClusterOffsets:
        if self._source is None:
            self._source = kafka.ClusterOffsets(self.options)
        return self._source

    def _partitions(self, *, initial: bool) -> list[tuple[str, int]]:
        return subscribed_partitions(
            self.options.subscription,
            self.source,
            require_existing=initial and self.options.fail_on_data_loss,
        )

    def initialOffset(self) -> dict[str, dict[str, int]]:
        partitions = self._partitions(initial=True)
        offsets = resolve_offsets(
            self.options.starting, partitions, self.source, option="startingOffsets"
        )
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.source.latest_offsets(self._partitions(initial=False))

    def _start_with_new_partitions(
        self, start: PartitionOffsets, partitions: list[tuple[str, int]]
    ) -> PartitionOffsets:
        """``start`` plus the partitions that appeared since, from their earliest offset;
        partitions that disappeared (a deleted topic) are data loss."""
        gone = [tp for tp in start if tp not in set(partitions)]
        for tp in gone:
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {tp[0]}-{tp[1]} was deleted or is not subscribed any more",
            )
        new = [tp for tp in partitions if tp not in start]
        out = {tp: offset for tp, offset in start.items() if tp not in gone}
        if new:
            logger.info("new partitions: %s", new)
            out.update(self.source.earliest_offsets(new))
        return out

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        start_offsets = offsets_from_json(start)
        if self._target is not None:
            partitions = sorted(self._target)
            latest = dict(self._target)
        else:
            partitions = self._partitions(initial=False)
            latest = self.source.latest_offsets(partitions)
        base = self._start_with_new_partitions(start_offsets, partitions)
        latest = {tp: max(latest[tp], base.get(tp, 0)) for tp in partitions}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(base, latest, limit.max_rows)
        else:
            end = latest
        minimum = self.options.min_offsets_per_trigger
        if minimum is not None and self._target is None:
            waited_ms = (time.monotonic() - self._last_batch_time) * 1000
            if lag(base, end) < minimum and waited_ms < self.options.max_trigger_delay_ms:
                return offsets_to_json(start_offsets)  # not enough yet: no batch
        if end != start_offsets:
            self._last_batch_time = time.monotonic()
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        try:
            return offsets_to_json(self.source.latest_offsets(self._partitions(initial=False)))
        except Exception:  # monitoring only: never fail the query for it
            logger.exception("could not read the latest offsets")
            return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        start_offsets = offsets_from_json(start)
        end_offsets = offsets_from_json(end)
        new = [tp for tp in end_offsets if tp not in start_offsets]
        if new:
            start_offsets.update(self.source.earliest_offsets(new))
        ranges = plan_ranges(
            start_offsets, end_offsets, min_partitions=self.options.min_partitions,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
        if partition is None or partition.value is None:
            return  # no ranges: Spark still runs one task, with an empty partition
        yield from kafka.read_range(self.options, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        group = self.options.commit_to_group
        if group is not None:
            try:
                self.source.commit(group, offsets_from_json(end))
            except Exception:  # progress reporting must not fail the query
                logger.exception("could not commit the query's offsets to group %s", group)

    def stop(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None


# -- writing ------------------------------------------------------------------------------


@dataclass
class KafkaCloneCommitMessage(WriterCommitMessage):
    records: int


class KafkaCloneWriter(DataSourceArrowWriter):
    """Batch writes: every row produced, acknowledged before the task ends (at least
    once, as Spark's Kafka sink)."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCloneCommitMessage:
        return KafkaCloneCommitMessage(kafka.write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCloneCommitMessage))
        logger.info("wrote %d records", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning("write aborted; records already acknowledged stay in the topics")


class KafkaCloneStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCloneCommitMessage:
        return KafkaCloneCommitMessage(kafka.write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCloneCommitMessage))
        logger.info("micro-batch %d: wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.warning("micro-batch %d aborted", batchId)


def check_sink_schema(schema: StructType, options: WriterOptions) -> None:
    """Spark's Kafka sink checks, on the driver: a ``value`` column of string or binary;
    ``key`` string or binary; ``topic`` string (or the ``topic`` option); ``partition``
    int; ``headers`` array<struct<key string, value binary>>."""
    fields = {f.name: f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], allowed):
            raise KafkaCloneOptionError(
                f"{name} attribute type must be {what}, not {fields[name].simpleString()}."
            )

    if "value" not in fields:
        raise KafkaCloneOptionError(
            "Required attribute 'value' not found in the data written to kafkaclone."
        )
    check("value", (StringType, BinaryType), "a string or binary")
    check("key", (StringType, BinaryType), "a string or binary")
    check("topic", (StringType,), "a string")
    check("partition", (IntegerType,), "an int")
    if options.topic is None and "topic" not in fields:
        raise KafkaCloneOptionError(
            "Topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic."
        )
    if options.include_headers and "headers" in fields:
        headers = fields["headers"]
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise KafkaCloneOptionError(
                "headers attribute type must be array<struct<key:string,value:binary>>, not "
                f"{headers.simpleString()}."
            )
