"""The cluster side of the "kafkaclone" Spark source and sink, through kafkaclone.clients:
the driver's offset lookups, an executor's read of one offset range (column-wise, into
Arrow record batches) and an executor's writes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from kafkaclone.common.errors import KafkaError, OffsetOutOfRangeError
from kafkaclone.protocol.records.columnar import RecordColumns, decode_columns
from kafkaclone.protocol.records.columnar_builder import CHUNK_RECORDS, BinaryColumn
from kafkaclone.spark.offsets import OffsetRange, PartitionOffsets, report_data_loss
from kafkaclone.spark.options import ReaderOptions, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

METADATA_TIMEOUT_S: Final = 30.0
EXECUTOR_FETCH_DEFAULTS: Final = {
    # Bigger fetches than the client's defaults: a task reads one partition sequentially.
    "max.partition.fetch.bytes": str(8 * 1024 * 1024),
    "fetch.max.bytes": str(64 * 1024 * 1024),
}


def _clients() -> Any:
    import kafkaclone.clients as clients

    return clients


class ClusterOffsets:
    """The driver's view of the cluster (an ``OffsetSource``): one consumer, no group,
    used for metadata, watermarks and timestamp lookups, each retried
    ``fetchOffset.numRetries`` times."""

    def __init__(self, options: ReaderOptions) -> None:
        self._options = options
        self._consumer: Any = None

    def _get(self) -> Any:
        if self._consumer is None:
            self._consumer = _clients().Consumer(self._options.consumer_config())
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None

    def _retrying(self, what: str, call: Any) -> Any:
        attempts = self._options.fetch_offset_num_retries + 1
        for attempt in range(attempts):
            try:
                return call(self._get())
            except (KafkaError, OSError) as exc:
                if attempt + 1 == attempts:
                    raise
                logger.warning("%s failed (%s), retrying", what, exc)
                self.close()
                time.sleep(self._options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def topic_partitions(self) -> dict[str, int]:
        def call(consumer: Any) -> dict[str, int]:
            metadata = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
            out = {}
            for name, topic in metadata.topics.items():
                if getattr(topic, "error", None) is not None or name.startswith("__"):
                    continue
                out[name] = len(topic.partitions)
            return out

        result: dict[str, int] = self._retrying("listing topics", call)
        return result

    def _watermarks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        clients = _clients()

        def call(consumer: Any) -> dict[TopicPartition, Any]:
            return {
                (t, p): consumer.get_watermark_offsets(
                    clients.TopicPartition(t, p), timeout=METADATA_TIMEOUT_S
                )
                for t, p in partitions
            }

        result: dict[TopicPartition, Any] = self._retrying("fetching offsets", call)
        return result

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: int(low) for tp, (low, _high) in self._watermarks(partitions).items()}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return {tp: int(high) for tp, (_low, high) in self._watermarks(partitions).items()}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        clients = _clients()
        query = [clients.TopicPartition(t, p, ts) for (t, p), ts in timestamps.items()]

        def call(consumer: Any) -> dict[TopicPartition, int | None]:
            found = consumer.offsets_for_times(query, timeout=METADATA_TIMEOUT_S)
            return {
                (tp.topic, tp.partition): (None if tp.offset is None or tp.offset < 0
                                           else int(tp.offset))
                for tp in found
            }

        result: dict[TopicPartition, int | None] = self._retrying("looking up timestamps", call)
        return result

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group`` (the query's progress, for monitoring)."""
        clients = _clients()
        conf = dict(self._options.consumer_config())
        conf["group.id"] = group
        consumer = clients.Consumer(conf)
        try:
            consumer.commit(
                offsets=[clients.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                asynchronous=False,
            )
        finally:
            consumer.close()


# -- reading ------------------------------------------------------------------------------


def arrow_schema(include_headers: bool) -> pa.Schema:
    import pyarrow

    from kafkaclone.protocol.records.columnar import header_arrow_type

    fields = [
        pyarrow.field("key", pyarrow.binary()),
        pyarrow.field("value", pyarrow.binary()),
        pyarrow.field("topic", pyarrow.string()),
        pyarrow.field("partition", pyarrow.int32()),
        pyarrow.field("offset", pyarrow.int64()),
        pyarrow.field("timestamp", pyarrow.timestamp("us", tz="UTC")),
        pyarrow.field("timestampType", pyarrow.int32()),
    ]
    if include_headers:
        fields.append(pyarrow.field("headers", header_arrow_type()))
    return pyarrow.schema(fields)


def to_record_batch(
    columns: RecordColumns, topic: str, partition: int, schema: pa.Schema
) -> pa.RecordBatch:
    """Spark's Kafka schema as one Arrow record batch."""
    import numpy
    import pyarrow

    include_headers = "headers" in schema.names
    arrays = columns.to_arrow(include_headers=include_headers)
    n = columns.count
    name = topic.encode("utf-8")
    topic_array = pyarrow.Array.from_buffers(
        pyarrow.string(),
        n,
        [
            None,
            pyarrow.py_buffer(numpy.arange(n + 1, dtype=numpy.int32) * len(name)),
            pyarrow.py_buffer(name * n),
        ],
    )
    partition_array = pyarrow.array(numpy.full(n, partition, dtype=numpy.int32))
    ordered = [
        arrays["key"],
        arrays["value"],
        topic_array,
        partition_array,
        arrays["offset"],
        arrays["timestamp"],
        arrays["timestampType"],
    ]
    if include_headers:
        ordered.append(arrays["headers"])
    return pyarrow.RecordBatch.from_arrays(ordered, schema=schema)


def read_range(options: ReaderOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range``, exactly, as Arrow record batches (one per fetched
    chunk), read with a consumer assigned to the one partition.

    A retriable client error (a broker gone, a leader moved) closes the consumer and
    starts a new one at the next offset to read, up to ``fetchOffset.numRetries`` times in
    a row; no progress within ``kafkaConsumer.pollTimeoutMs`` is an error. Offsets below
    the log start offset (deleted by retention) are data loss, reported per
    ``failOnDataLoss``; gaps inside the log (compaction, transaction markers, aborted
    transactions under ``kafka.isolation.level=read_committed``) are not.
    """
    clients = _clients()
    topic, partition = offset_range.topic, offset_range.partition
    until = offset_range.until_offset
    position = offset_range.from_offset
    schema = arrow_schema(options.include_headers)
    conf = {**EXECUTOR_FETCH_DEFAULTS, **options.consumer_config()}
    conf.setdefault("enable.auto.commit", "false")
    conf.pop("group.id", None)
    poll_timeout = options.poll_timeout_ms / 1000
    consumer: Any = None
    failures = 0
    last_progress = time.monotonic()
    try:
        while position < until:
            if consumer is None:
                consumer = clients.Consumer(conf)
                consumer.assign([clients.TopicPartition(topic, partition, position)])
            try:
                fetched = consumer.poll_raw(min(1.0, poll_timeout))
            except OffsetOutOfRangeError:
                low, high = consumer.get_watermark_offsets(
                    clients.TopicPartition(topic, partition), timeout=METADATA_TIMEOUT_S
                )
                if position < low:
                    report_data_loss(
                        options.fail_on_data_loss,
                        f"Cannot fetch offset {position} of {topic}-{partition}: the log "
                        f"starts at {low}",
                    )
                    position = min(low, until)
                    consumer.seek(clients.TopicPartition(topic, partition, position))
                    continue
                report_data_loss(
                    options.fail_on_data_loss,
                    f"{topic}-{partition} ends at offset {high}, before the end of the "
                    f"range to read ({until})",
                )
                return
            except (KafkaError, OSError) as exc:
                retriable = getattr(exc, "retriable", True)
                failures += 1
                if not retriable or failures > options.fetch_offset_num_retries + 1:
                    raise
                logger.warning(
                    "reading %s-%d at offset %d failed (%s), retrying with a new consumer",
                    topic, partition, position, exc,
                )
                consumer.close()
                consumer = None
                time.sleep(max(options.fetch_offset_retry_interval_ms, 100) / 1000)
                continue
            # One reading of the clock for both checks below, so a range that ends past
            # the log's end is reported as data loss, never as a timeout by a hair.
            now = time.monotonic()
            progressed = False
            for data in fetched:
                if data.topic != topic or data.partition != partition:
                    continue
                if data.log_start_offset > position:
                    report_data_loss(
                        options.fail_on_data_loss,
                        f"Cannot fetch offset {position} of {topic}-{partition}: the log "
                        f"starts at {data.log_start_offset}",
                    )
                    position = min(data.log_start_offset, until)
                    consumer.seek(clients.TopicPartition(topic, partition, position))
                    progressed = True
                    continue
                columns = decode_columns(
                    data.records,
                    position,
                    until,
                    include_headers=options.include_headers,
                )
                if columns.count:
                    yield to_record_batch(columns, topic, partition, schema)
                # The fetched batches' end, those a read_committed consumer dropped (aborted
                # transactions) included: the next offset to read.
                next_offset = columns.next_offset if data.next_offset is None else \
                    data.next_offset
                if next_offset is not None and next_offset > position:
                    position = next_offset
                    progressed = True
                elif data.high_watermark <= position < until and (
                    now - last_progress > poll_timeout
                ):
                    report_data_loss(
                        options.fail_on_data_loss,
                        f"{topic}-{partition} ends at offset {data.high_watermark}, before "
                        f"the end of the range to read ({until})",
                    )
                    return
            if progressed:
                failures = 0
                last_progress = time.monotonic()
            elif now - last_progress > poll_timeout:
                raise TimeoutError(
                    f"Cannot fetch records in [{position}, {until}) of {topic}-{partition} "
                    f"within kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}"
                )
    finally:
        if consumer is not None:
            consumer.close()


# -- writing ------------------------------------------------------------------------------


class KafkaWriteError(RuntimeError):
    """A record could not be written to the cluster."""


WRITER_BATCH_SIZE: Final = 512 * 1024
"""The writer's ``batch.size`` unless ``kafka.batch.size`` says otherwise: a Spark task
hands the producer thousands of rows at once, and larger batches cost fewer requests."""


WRITER_CHUNK_RECORDS: Final = CHUNK_RECORDS
"""Rows of one partition gathered (over Spark's Arrow batches, which hold 10,000 rows of
every partition mixed) before one ``send_batch`` call: the encoder's cost is mostly per
call, so a few thousand rows a call cost twice as much per row as 16k."""
WRITER_CHUNK_BYTES: Final = 8 * 1024 * 1024
"""... or this many value and key bytes, whichever comes first (large values)."""


def write_batches(options: Any, batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of ``batches`` (columns ``value`` and optional ``key``, ``topic``,
    ``partition``, ``headers``, as Spark's Kafka sink takes them; strings are written as
    UTF-8) and wait for every acknowledgement. Returns the number of records written;
    the first delivery error is raised once all were tried.

    Rows go to the producer as columns (``Producer.send_batch``: Arrow's buffers encoded
    into record batches without a Python call per row) when every row of an Arrow batch
    has the same topic, no headers, and either a partition or no key; they are gathered
    per partition over Arrow batches (:class:`ColumnGatherer`). Other rows (a key without
    a partition: the producer's partitioner hashes each key) are sent one by one, after
    the rows gathered before them, so each partition keeps the rows' order."""
    clients = _clients()
    conf = options.producer_config()
    conf.setdefault("batch.size", str(WRITER_BATCH_SIZE))
    producer = clients.Producer(conf)
    gatherer = ColumnGatherer(producer)
    errors: list[str] = []
    written = 0

    def on_delivery(err: Any, _msg: Any = None) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    try:
        for batch in batches:
            if gatherer.add(options, batch):
                written += batch.num_rows
                continue
            gatherer.flush()
            columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            values = columns["value"]
            keys = columns.get("key") or [None] * len(values)
            partitions = columns.get("partition") or [None] * len(values)
            topics = [options.topic] * len(values) if options.topic else columns.get("topic")
            headers_column = columns.get("headers") if options.include_headers else None
            for row, value in enumerate(values):
                topic = topics[row] if topics is not None else None
                if topic is None:
                    raise KafkaWriteError(
                        "Null topic present in the data. Use the topic option for setting "
                        "a default topic."
                    )
                headers = None
                if headers_column is not None and headers_column[row]:
                    headers = [(h["key"], _to_bytes(h["value"])) for h in headers_column[row]]
                producer.send(
                    topic,
                    _to_bytes(value),
                    key=_to_bytes(keys[row]),
                    partition=partitions[row],
                    headers=headers,
                    on_delivery=on_delivery,
                )
                written += 1
        gatherer.flush()
        producer.flush()
    finally:
        producer.close()
    for future in gatherer.futures:
        error = future.exception(0)
        if error is not None and len(errors) < 10:
            errors.append(str(error))
    if errors:
        raise KafkaWriteError(f"{len(errors)} or more records were not written: {errors[0]}")
    return written


class _Pending:
    """One partition's gathered rows, not yet sent: per Arrow batch its value (and key)
    array and the rows of it that belong here (None: every row)."""

    __slots__ = ("keyed", "keys", "nbytes", "rows", "values", "which")

    def __init__(self) -> None:
        self.values: list[pa.Array] = []
        self.keys: list[pa.Array | None] = []
        self.which: list[npt.NDArray[np.int64] | None] = []
        self.keyed = False
        self.rows = 0
        self.nbytes = 0


class ColumnGatherer:
    """Rows of Arrow batches gathered per (topic, partition) and handed to
    ``producer.send_batch`` WRITER_CHUNK_RECORDS rows (or WRITER_CHUNK_BYTES) at a time.
    A batch's rows are split by partition as row numbers (no copy); when a partition's
    rows are sent they are copied once into one buffer (values of one width, the usual
    case, as rows of 2-D views; others with Arrow's ``take`` and ``concat_arrays``).
    Every record of a call gets the call's time as its timestamp."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self.pending: dict[tuple[str, int], _Pending] = {}
        self.futures: list[Any] = []

    def add(self, options: Any, batch: pa.RecordBatch) -> bool:
        """Gather ``batch`` if its rows allow the columnar path (see
        :func:`write_batches`); False (nothing taken) if they do not."""
        import pyarrow.compute as pc

        names = batch.schema.names
        if batch.num_rows == 0:
            return True
        if options.include_headers and "headers" in names and \
                batch.column("headers").null_count < batch.num_rows:
            return False
        topic = options.topic
        if not topic:
            topics = pc.unique(batch.column("topic")) if "topic" in names else None
            if topics is None or len(topics) != 1 or not topics[0].is_valid:
                return False
            topic = topics[0].as_py()
        key = batch.column("key") if "key" in names else None
        if key is not None and key.null_count == batch.num_rows:
            key = None
        value = batch.column("value")
        if not _binary_like(value.type) or (key is not None and not _binary_like(key.type)):
            return False
        partition = batch.column("partition") if "partition" in names else None
        if partition is not None and partition.null_count == batch.num_rows:
            partition = None
        if partition is None:
            if key is not None:
                return False  # each key hashed by the producer's partitioner
            # No key, no partition: the whole Arrow batch to one partition, chosen by the
            # producer's partitioner as for its first record (the sticky partitioner moves
            # on when a batch fills).
            self._gather(topic, self.producer.choose_partition(topic), value, None)
            return True
        if partition.null_count:
            return False
        numbers = partition.to_numpy(zero_copy_only=False)
        first_number = numbers[0]
        if (numbers == first_number).all():
            self._gather(topic, int(first_number), value, key)
            return True
        order = np.argsort(numbers, kind="stable")
        sorted_numbers = numbers[order]
        cuts = np.flatnonzero(np.diff(sorted_numbers)) + 1
        firsts = np.concatenate(([0], cuts)).tolist()
        ends = np.concatenate((cuts, [len(order)])).tolist()
        share = (value.nbytes + (0 if key is None else key.nbytes)) / len(order)
        for first, end in zip(firsts, ends, strict=True):
            self._gather(topic, int(sorted_numbers[first]), value, key, order[first:end],
                         int(share * (end - first)))
        return True

    def _gather(self, topic: str, partition: int, value: pa.Array, key: pa.Array | None,
                which: npt.NDArray[np.int64] | None = None, nbytes: int | None = None,
                ) -> None:
        pending = self.pending.get((topic, partition))
        if pending is None:
            pending = self.pending[(topic, partition)] = _Pending()
        pending.values.append(value)
        pending.keys.append(key)
        pending.which.append(which)
        pending.keyed = pending.keyed or key is not None
        pending.rows += len(value) if which is None else len(which)
        pending.nbytes += nbytes if nbytes is not None else \
            value.nbytes + (0 if key is None else key.nbytes)
        if pending.rows >= WRITER_CHUNK_RECORDS or pending.nbytes >= WRITER_CHUNK_BYTES:
            self._send(topic, partition, self.pending.pop((topic, partition)))

    def flush(self) -> None:
        """Send every gathered row."""
        pending, self.pending = self.pending, {}
        for (topic, partition), rows in pending.items():
            self._send(topic, partition, rows)

    def _send(self, topic: str, partition: int, pending: _Pending) -> None:
        import pyarrow as pa

        values = _gathered(pending.values, pending.which)
        keys = None
        if pending.keyed:
            key_type = next(k.type for k in pending.keys if k is not None)
            keys = _gathered([pa.nulls(len(v), key_type) if k is None else k
                              for v, k in zip(pending.values, pending.keys, strict=True)],
                             pending.which)
        timestamps = np.full(len(values), time.time_ns() // 1_000_000, dtype=np.int64)
        self.futures += self.producer.send_batch(topic, partition, values, keys, timestamps)


def _gathered(arrays: list[pa.Array],
              which: list[npt.NDArray[np.int64] | None]) -> BinaryColumn:
    """The rows ``which[i]`` (every row if None) of each of ``arrays``, in order, as one
    column: copied once into one buffer when every value has one width and none is null,
    else through Arrow (``take`` each, then ``concat_arrays``)."""
    import pyarrow as pa

    columns = [_binary_column(a) for a in arrays]
    width = _fixed_width(columns)
    if width is None:
        taken = [a if rows is None else a.take(pa.array(rows))
                 for a, rows in zip(arrays, which, strict=True)]
        return _binary_column(_joined(taken))
    counts = [len(c) if rows is None else len(rows)
              for c, rows in zip(columns, which, strict=True)]
    total = sum(counts)
    data = np.empty(total * width, dtype=np.uint8)
    into = data.reshape(total, width)
    at = 0
    for column, rows, count in zip(columns, which, counts, strict=True):
        start = int(column.offsets[0])
        source = column.data[start:start + len(column) * width].reshape(len(column), width)
        if rows is None:
            into[at:at + count] = source
        else:
            # mode="clip" (the rows are in range): numpy buffers ``out`` for "raise"
            np.take(source, rows, axis=0, out=into[at:at + count], mode="clip")
        at += count
    return BinaryColumn(np.arange(total + 1, dtype=np.int64) * width, data)


def _fixed_width(columns: list[BinaryColumn]) -> int | None:
    """The one width (above 0) of every value of ``columns`` if there is one and no value
    is null."""
    width: int | None = None
    for column in columns:
        if column.valid is not None or len(column) == 0:
            return None
        offsets = column.offsets
        first = int(offsets[1] - offsets[0])
        if width is None:
            width = first
        if first != width or width == 0 or \
                int(offsets[-1] - offsets[0]) != width * len(column) or \
                not (np.diff(offsets) == width).all():
            return None
    return width


def _joined(arrays: list[pa.Array]) -> pa.Array:
    """One array of the arrays' values (strings as their UTF-8 bytes), joined in order."""
    import pyarrow as pa

    if len(arrays) == 1:
        return arrays[0]
    if len({a.type for a in arrays}) > 1:
        arrays = [a.cast(pa.large_binary()) for a in arrays]
    return pa.concat_arrays(arrays)


def _binary_like(arrow_type: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_binary(arrow_type) or pa.types.is_string(arrow_type)
                or pa.types.is_large_binary(arrow_type) or pa.types.is_large_string(arrow_type))


def _binary_column(array: pa.Array) -> BinaryColumn:
    """The Arrow array's own buffers as a BinaryColumn (no copy)."""
    import pyarrow as pa

    large = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
    _validity, offsets_buffer, data_buffer = array.buffers()
    window = slice(array.offset, array.offset + len(array) + 1)
    offsets: npt.NDArray[np.int64] | npt.NDArray[np.int32] = (
        np.frombuffer(offsets_buffer, dtype=np.int64)[window] if large
        else np.frombuffer(offsets_buffer, dtype=np.int32)[window])
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else \
        np.zeros(0, dtype=np.uint8)
    valid = None if array.null_count == 0 else \
        array.is_valid().to_numpy(zero_copy_only=False)
    return BinaryColumn(offsets, data, valid)


def _to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)
