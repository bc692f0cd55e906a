"""Producer: Kafka's producer design in Python, synchronous API, a background sender.

``send`` (any thread) picks the partition, reserves room in ``buffer.memory`` (blocking up
to ``max.block.ms`` when it is full: back-pressure) and appends the record to its
partition's open batch in the accumulator; it returns a future. The sender thread drains
batches that are full (``batch.size``), old enough (``linger.ms``) or flushed, builds one v2
record batch per partition (``compression.type``), groups them per leader into Produce
requests of at most ``max.request.size`` and pipelines up to
``max.in.flight.requests.per.connection`` of them per broker. Answers complete the futures,
call ``on_delivery(err, metadata)`` and the interceptors' ``on_acknowledgement`` on the
sender thread (as the Java client does); retriable errors put the batch back at the head of
its partition (after ``retry.backoff.ms``, refreshing metadata when the leader moved) until
``retries`` or ``delivery.timeout.ms`` runs out.

With ``enable.idempotence`` (on by default, as in Kafka 3.x) the sender first gets a
producer id, and each batch carries it with its epoch and a sequence number assigned when
the batch is drained; :mod:`kafkaclone.clients.transaction_manager` keeps that state and
decides what a sequence error means. With ``transactional.id`` it also runs the
transactions (``init_transactions``, ``begin_transaction``, ``send_offsets_to_transaction``,
``commit_transaction``, ``abort_transaction``): the sender thread sends their requests one
at a time before Produce, and drains a partition only once it is in the transaction.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kafkaclone.clients.config import ConfigException, ProducerConfig
from kafkaclone.clients.network import Metadata, NetworkClient
from kafkaclone.clients.partitioner import DefaultPartitioner, Partitioner, make_partitioner
from kafkaclone.clients.records import (
    NULL,
    VARINTS,
    VARINTS_LIMIT,
    ZERO,
    encode_headers,
    finish_batch,
    varint,
)
from kafkaclone.clients.transaction_manager import (
    ProducerIdAndEpoch,
    State,
    TransactionAbortedError,
    TransactionalRequestResult,
    TransactionalState,
    TransactionManager,
    increment_sequence,
    insert_in_sequence_order,
    resolve_idempotence,
    unsupported_init_producer_id,
)
from kafkaclone.common.errors import (
    NONE,
    DuplicateSequenceNumberError,
    InvalidTopicExceptionError,
    InvalidTxnStateError,
    KafkaError,
    MessageTooLargeError,
    NetworkExceptionError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnsupportedVersionError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec
from kafkaclone.protocol.records.batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
)
from kafkaclone.protocol.records.columnar_builder import (
    CHUNK_RECORDS,
    BinaryColumn,
    EncodedRecords,
    encode_records,
)

logger = logging.getLogger(__name__)
_monotonic = time.monotonic
_time_ns = time.time_ns

RECORD_OVERHEAD: Final = 22
"""A v2 record's varint fields at most (Kafka's DefaultRecord.MAX_RECORD_OVERHEAD is 21)."""
REQUEST_OVERHEAD: Final = 100
CODECS: Final = {"none": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY,
                 "lz4": Codec.LZ4, "zstd": Codec.ZSTD}
_LEADER_ERRORS: Final = (6, 3, 5, 9, 74, 76)
"""NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
REPLICA_NOT_AVAILABLE, FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR: refresh metadata."""


class RecordMetadata:
    """A delivered (or failed) record: where it went."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 key: bytes | None, value: bytes | None, headers: Any = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")


class ColumnRecords:
    """The records of a ``send_batch`` batch, kept as the columns they came from (a
    record's key and value are built only when its metadata is asked for)."""

    __slots__ = ("first", "keys", "length", "timestamps", "values")

    def __init__(self, values: BinaryColumn, keys: BinaryColumn | None,
                 timestamps: npt.NDArray[np.int64], first: int, length: int) -> None:
        self.values = values
        self.keys = keys
        self.timestamps = timestamps
        self.first = first
        self.length = length

    def __len__(self) -> int:
        return self.length

    def record(self, index: int) -> tuple[bytes | None, bytes | None, None, int]:
        i = self.first + index
        key = self.keys.value(i) if self.keys is not None else None
        return key, self.values.value(i), None, int(self.timestamps[i])


class ProducerBatch:
    """The records of one partition sent together."""

    __slots__ = (
        "_done_callbacks",
        "_event",
        "_waiters_lock",
        "attempts",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "buf",
        "callbacks",
        "columns",
        "created",
        "done",
        "drained_at",
        "encoded",
        "error",
        "log_append_time",
        "max_timestamp",
        "partition",
        "producer_epoch",
        "producer_id",
        "records",
        "retry_at",
        "sealed",
        "sequence_has_been_reset",
        "size",
        "topic",
    )

    def __init__(self, topic: str, partition: int, now: float, timestamp: int) -> None:
        self.topic = topic
        self.partition = partition
        self.records: list[tuple[bytes | None, bytes | None, Any, int]] = []
        self.buf = bytearray()
        """The records encoded so far (kafkaclone.clients.records)."""
        self.encoded: memoryview | None = None
        """The records of a batch from ``send_batch``: a view of the encoder's buffer, not
        a copy (the buffer lives until the last of its batches is done)."""
        self.columns: ColumnRecords | None = None
        """The records of a batch from ``send_batch`` (then ``records`` stays empty)."""
        self.sealed = False
        """Encoded whole by ``send_batch``: ``send`` appends nothing to it."""
        self.base_timestamp = timestamp
        self.max_timestamp = timestamp
        self.callbacks: dict[int, Any] = {}
        """``on_delivery`` by record index, for the records sent with one."""
        self.size = RECORD_BATCH_OVERHEAD
        """Bytes counted for ``batch.size``; all but RECORD_BATCH_OVERHEAD are reserved in
        ``buffer.memory``."""
        self.created = now
        self.drained_at = 0.0
        self.attempts = 0
        self.retry_at = 0.0
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: KafkaError | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        """Set when the idempotent producer drains the batch; kept across retries."""
        self.sequence_has_been_reset = False
        """Re-sequenced after an epoch bump while in flight (Kafka's ``reopened``)."""
        self._event: threading.Event | None = None
        self._waiters_lock = threading.Lock()
        self._done_callbacks: list[tuple[int, Callable[[FutureRecordMetadata], None]]] = []

    def set_producer_state(self, producer_id_and_epoch: ProducerIdAndEpoch,
                           base_sequence: int) -> None:
        self.producer_id = producer_id_and_epoch.producer_id
        self.producer_epoch = producer_id_and_epoch.epoch
        self.base_sequence = base_sequence

    def reset_producer_state(self, producer_id_and_epoch: ProducerIdAndEpoch,
                             base_sequence: int) -> None:
        self.set_producer_state(producer_id_and_epoch, base_sequence)
        self.sequence_has_been_reset = True

    @property
    def record_count(self) -> int:
        return len(self.records) if self.columns is None else len(self.columns)

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.record_count - 1)

    def last_key_is_null(self) -> bool:
        if self.columns is not None:
            return self.columns.keys is None
        return bool(self.records) and self.records[-1][0] is None

    def event(self) -> threading.Event:
        with self._waiters_lock:
            if self._event is None:
                self._event = threading.Event()
                if self.done:
                    self._event.set()
            return self._event

    def metadata(self, index: int) -> RecordMetadata:
        if self.columns is not None:
            key, value, headers, timestamp = self.columns.record(index)
        else:
            key, value, headers, timestamp = self.records[index]
        if headers is None:
            headers = []
        offset = -1 if self.base_offset < 0 else self.base_offset + index
        if self.log_append_time >= 0:
            timestamp = self.log_append_time
        return RecordMetadata(self.topic, self.partition, offset, timestamp, key, value, headers)


class FutureRecordMetadata:
    """The result of ``send``: ``get``/``result(timeout)`` -> RecordMetadata, or raises
    the delivery error."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    @property
    def batch_records(self) -> int:
        """The records of its batch up to and including this one: all of the batch's for
        each future ``send_batch`` returns (one per batch, for its last record)."""
        return self._index + 1

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done and not batch.event().wait(timeout):
            raise RequestTimedOutError(f"The record was not acknowledged within {timeout} s")
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    get = result

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        batch = self._batch
        if not batch.done and not batch.event().wait(timeout):
            raise RequestTimedOutError(f"The record was not acknowledged within {timeout} s")
        return batch.error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], None]) -> None:
        batch = self._batch
        with batch._waiters_lock:
            if not batch.done:
                batch._done_callbacks.append((self._index, fn))
                return
        fn(self)


class _BufferPool:
    """``buffer.memory``: bytes of records not yet acknowledged. ``reserve`` (called with
    the accumulator's lock held) blocks while the pool is full."""

    def __init__(self, total: int, lock: threading.Lock) -> None:
        self.total = total
        self.used = 0
        self._cond = threading.Condition(lock)

    def reserve(self, size: int, deadline: float) -> None:
        while self.used + size > self.total and self.used > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"Failed to allocate memory within the configured max blocking time "
                    f"(buffer.memory={self.total} bytes are in use)")
            self._cond.wait(remaining)
        self.used += size

    def release_locked(self, size: int) -> None:
        """Give ``size`` bytes back (the caller holds the accumulator's lock)."""
        if size:
            self.used -= size
            self._cond.notify_all()


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"The {what} must be bytes or str (or set {what}.serializer), "
                    f"not {type(value).__name__}")


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError("Header keys must be str")
        out.append((key, _to_bytes(value, "header value")))
    return out


class Producer:
    """Kafka's producer (see the module docstring). ``conf`` holds Kafka's producer
    config keys, dotted, as a dict."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(conf or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.config = c = ProducerConfig(merged)
        acks = c.get_str("acks")
        self.acks = -1 if acks in ("all", "-1") else int(acks)
        self.codec = CODECS[c.get_str("compression.type")]
        self.enable_idempotence = resolve_idempotence(c)
        """``enable.idempotence`` after Kafka 3.x's rules (off when left at its default
        with a conflicting setting)."""
        self._transaction_manager: TransactionManager | None = None
        """Kafka's TransactionManager when idempotent (None otherwise)."""
        self.transactional_id = c.get_optional_str("transactional.id") or None
        if self.enable_idempotence:
            self._transaction_manager = TransactionManager(
                retry_backoff_s=c.get_int("retry.backoff.ms") / 1000.0,
                transactional_id=self.transactional_id,
                transaction_timeout_ms=c.get_int("transaction.timeout.ms"))
        self._txn: TransactionalState | None = (
            None if self._transaction_manager is None
            else self._transaction_manager.transactional)
        """The transaction state with a ``transactional.id`` (None otherwise)."""
        if c.get_int("delivery.timeout.ms") < c.get_int("linger.ms") + \
                c.get_int("request.timeout.ms"):
            raise ConfigException(
                "delivery.timeout.ms should be equal to or larger than linger.ms + "
                "request.timeout.ms")
        self.batch_size = c.get_int("batch.size")
        self.linger_s = c.get_int("linger.ms") / 1000.0
        self.max_block_s = c.get_int("max.block.ms") / 1000.0
        self.max_request_size = c.get_int("max.request.size")
        self.retries = c.get_int("retries")
        self.delivery_timeout_s = c.get_int("delivery.timeout.ms") / 1000.0
        self.retry_backoff_s = c.get_int("retry.backoff.ms") / 1000.0
        self.max_in_flight = c.get_int("max.in.flight.requests.per.connection")
        self.request_timeout_ms = c.get_int("request.timeout.ms")
        self.partitioner: Partitioner = make_partitioner(
            (c.get_classes("partitioner.class") or c.get_classes("partitioner") or [None])[0])
        self.key_serializer = c.get_callable("key.serializer")
        self.value_serializer = c.get_callable("value.serializer")
        self.interceptors = c.get_configured_instances("interceptor.classes")
        self.client_id = c.get_str("client.id") or f"producer-{id(self) & 0xFFFF}"
        self.metadata = Metadata(c, client_id=self.client_id)
        self._network = NetworkClient(self.metadata, c, client_id=self.client_id,
                                      max_in_flight=self.max_in_flight)
        self._lock = threading.Lock()
        self._pool = _BufferPool(c.get_int("buffer.memory"), self._lock)
        self._max_record_size = min(
            self.max_request_size - RECORD_BATCH_OVERHEAD - REQUEST_OVERHEAD, self._pool.total)
        """A record up to this size (RECORD_OVERHEAD included) fits both limits."""
        partitioner = self.partitioner
        self._sticky: dict[str, int] | None = (
            partitioner.sticky._sticky if type(partitioner) is DefaultPartitioner
            and partitioner.null_key == "sticky" else None)
        """The sticky partitioner's current partition per topic (read without a call)."""
        self._batches: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self._muted: set[tuple[str, int]] = set()
        self._incomplete = 0
        self._incomplete_cond = threading.Condition(self._lock)
        self._flushing = 0
        self._closing = False
        self._force_close = False
        self._started = time.monotonic()
        self._stats = {"record-send-total": 0, "record-error-total": 0,
                       "record-retry-total": 0, "batch-total": 0, "request-total": 0,
                       "outgoing-byte-total": 0}
        self._sender = threading.Thread(target=self._run, name=f"kafkaclone-producer-"
                                        f"network-thread | {self.client_id}", daemon=True)
        self._sender.start()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the caller's side ---------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None,
             partition: int | None = None, headers: Any = None,
             timestamp: int | None = None,
             on_delivery: Callable[[KafkaError | None, RecordMetadata], None] | None = None,
             ) -> FutureRecordMetadata:
        """Queue one record; returns its future. Blocks at most ``max.block.ms`` (for the
        topic's metadata, or for room in ``buffer.memory``).

        This is the per-record hot path: one lock acquisition, the record encoded straight
        into its partition's open batch (varints from a table), no call for the usual case
        (bytes value, no headers, sticky partition already chosen, room in the buffer)."""
        if self._closing:
            raise RuntimeError("Cannot send after the producer is closed")
        if self._txn is not None:
            self._txn.fail_if_not_ready_for_send()
        elif self._transaction_manager is not None and \
                self._transaction_manager.last_error is not None:
            self._transaction_manager.maybe_fail_with_error()
        if type(topic) is not str or not topic:
            if not isinstance(topic, str) or not topic:
                raise InvalidTopicExceptionError(f"Invalid topic {topic!r}")
        if self.interceptors:
            topic, value, key, partition, headers, timestamp = self._on_send(
                topic, value, key, partition, headers, timestamp)
        deadline = 0.0
        """``max.block.ms`` from now, computed only when something has to wait."""
        if key is not None:
            if self.key_serializer is not None:
                key = self.key_serializer(key)
            if type(key) is not bytes:
                key = _to_bytes(key, "key")
        if value is not None:
            if self.value_serializer is not None:
                value = self.value_serializer(value)
            if type(value) is not bytes:
                value = _to_bytes(value, "value")
        key_bytes: bytes | None = key
        value_bytes: bytes | None = value
        header_list: list[tuple[str, bytes | None]] | None = None
        encoded_headers = ZERO
        if headers:
            header_list = _headers(headers) or None
            if header_list:
                encoded_headers = encode_headers(header_list)
        if timestamp is None or timestamp <= 0:
            timestamp = _time_ns() // 1_000_000
        meta = self.metadata.topics.get(topic)
        partitions = len(meta.partitions) if meta is not None and meta.error is None else 0
        if not partitions or (partition is not None and partition >= partitions):
            deadline = _monotonic() + self.max_block_s
            partitions = self._wait_for_metadata(topic, partition, deadline)
        small = VARINTS
        if key_bytes is None:
            key_head = NULL
            key_body = b""
        else:
            key_body = key_bytes
            n = len(key_body)
            key_head = small[n + 1] if n < VARINTS_LIMIT else varint(n)
        if value_bytes is None:
            value_head = NULL
            value_body = b""
        else:
            value_body = value_bytes
            n = len(value_body)
            value_head = small[n + 1] if n < VARINTS_LIMIT else varint(n)
        data_size = len(key_body) + len(value_body) + len(encoded_headers)
        size = RECORD_OVERHEAD + data_size
        if size > self._max_record_size:
            self._check_record_size(size)
        body_size = 1 + len(key_head) + len(value_head) + data_size
        if partition is None or partition < 0:
            sticky = self._sticky
            if key_bytes is None and sticky is not None:
                partition = sticky.get(topic)
                if partition is None or partition >= partitions:
                    partition = self._choose_partition(topic, key_bytes, partitions)
            else:
                partition = self._choose_partition(topic, key_bytes, partitions)
        wake = False
        lock = self._lock
        lock.acquire()  # not `with`: this costs half as much, and send() is hot
        try:
            pool = self._pool
            if pool.used + size > pool.total and pool.used > 0:
                pool.reserve(size, deadline or _monotonic() + self.max_block_s)
            else:
                pool.used += size
            tp = (topic, partition)
            queue = self._batches.get(tp)
            if queue is None:
                queue = self._batches[tp] = deque()
            batch = queue[-1] if queue else None
            if batch is None or (batch.size + size > self.batch_size and batch.records) or \
                    batch.attempts or batch.sealed:
                if batch is not None and key_bytes is None:
                    # KIP-480: the sticky partition's batch is full; the next goes elsewhere.
                    self.partitioner.on_new_batch(topic, partition)
                batch = ProducerBatch(topic, partition, _monotonic(), timestamp)
                queue.append(batch)
                wake = True
            records = batch.records
            index = len(records)
            delta = timestamp - batch.base_timestamp
            delta_part = small[delta + 1] if -1 <= delta < VARINTS_LIMIT else varint(delta)
            index_part = small[index + 1] if index < VARINTS_LIMIT else varint(index)
            n = body_size + len(delta_part) + len(index_part)
            batch.buf += b"".join((small[n + 1] if n < VARINTS_LIMIT else varint(n), b"\x00",
                                   delta_part, index_part, key_head, key_body, value_head,
                                   value_body, encoded_headers))
            if timestamp > batch.max_timestamp:
                batch.max_timestamp = timestamp
            records.append((key_bytes, value_bytes, header_list, timestamp))
            if on_delivery is not None:
                batch.callbacks[index] = on_delivery
            batch.size += size
            self._incomplete += 1
            if batch.size >= self.batch_size:
                wake = True
        finally:
            lock.release()
        if self._txn is not None:
            self._txn.maybe_add_partition(tp)
        if wake:
            self._network.wakeup()
        return FutureRecordMetadata(batch, index)

    def send_batch(self, topic: str, partition: int, values: BinaryColumn,
                   keys: BinaryColumn | None = None,
                   timestamps: npt.NDArray[np.int64] | None = None,
                   ) -> list[FutureRecordMetadata]:
        """Queue ``len(values)`` records (no headers) for one partition, given as columns:
        they are encoded together (kafkaclone.protocol.records.columnar_builder, no Python
        call per record; CHUNK_RECORDS at a time) into batches of about ``batch.size``
        bytes (and at most CHUNK_RECORDS records), queued behind the
        partition's open batch. The idempotent producer sequences them like any batch
        when they are drained. ``timestamps`` defaults to now for every record. Returns
        the future of each batch's last record (a batch succeeds or fails as a whole).
        Interceptors' ``on_send`` is not called (it takes one record at a time)."""
        if self._closing:
            raise RuntimeError("Cannot send after the producer is closed")
        if self._txn is not None:
            self._txn.fail_if_not_ready_for_send()
        elif self._transaction_manager is not None and \
                self._transaction_manager.last_error is not None:
            self._transaction_manager.maybe_fail_with_error()
        if not isinstance(topic, str) or not topic:
            raise InvalidTopicExceptionError(f"Invalid topic {topic!r}")
        count = len(values)
        if keys is not None and len(keys) != count:
            raise ValueError(f"{len(keys)} keys for {count} values")
        if count == 0:
            return []
        if timestamps is None:
            timestamps = np.full(count, _time_ns() // 1_000_000, dtype=np.int64)
        elif len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} values")
        meta = self.metadata.topics.get(topic)
        partitions = len(meta.partitions) if meta is not None and meta.error is None else 0
        if partition >= partitions:
            partitions = self._wait_for_metadata(
                topic, partition, _monotonic() + self.max_block_s)
        if not 0 <= partition < partitions:
            raise ValueError(f"{topic} has no partition {partition}")
        futures: list[FutureRecordMetadata] = []
        for chunk in range(0, count, CHUNK_RECORDS):
            stop = min(chunk + CHUNK_RECORDS, count)
            chunk_values = values.slice(chunk, stop)
            chunk_keys = None if keys is None else keys.slice(chunk, stop)
            chunk_timestamps = timestamps[chunk:stop]
            encoded = encode_records(chunk_values, chunk_keys, chunk_timestamps,
                                     self.batch_size)
            largest = int(encoded.record_sizes.max())
            if largest > self._max_record_size:
                self._check_record_size(largest)
            futures += self._queue_encoded(topic, partition, encoded, chunk_values,
                                           chunk_keys, chunk_timestamps)
        if keys is None:
            # KIP-480: the batches just queued are full; the next keyless records (and the
            # next choose_partition) go to another partition.
            self.partitioner.on_new_batch(topic, partition)
        return futures

    def _queue_encoded(self, topic: str, partition: int, encoded: EncodedRecords,
                       values: BinaryColumn, keys: BinaryColumn | None,
                       timestamps: npt.NDArray[np.int64]) -> list[FutureRecordMetadata]:
        futures: list[FutureRecordMetadata] = []
        now = _monotonic()
        for first, end in itertools.pairwise(encoded.starts.tolist()):
            batch = ProducerBatch(topic, partition, now, int(timestamps[first]))
            records = encoded.buffer.data[
                int(encoded.positions[first]):int(encoded.positions[end])]
            batch.encoded = records
            batch.max_timestamp = int(timestamps[first:end].max())
            batch.columns = ColumnRecords(values, keys, timestamps, first, end - first)
            batch.sealed = True
            batch.size = RECORD_BATCH_OVERHEAD + len(records)
            with self._lock:
                pool = self._pool
                if pool.used + len(records) > pool.total and pool.used > 0:
                    self._network.wakeup()  # the sender frees the room
                    pool.reserve(len(records), _monotonic() + self.max_block_s)
                else:
                    pool.used += len(records)
                self._batches.setdefault((topic, partition), deque()).append(batch)
                self._incomplete += end - first
            if self._txn is not None:
                self._txn.maybe_add_partition((topic, partition))
            futures.append(FutureRecordMetadata(batch, end - first - 1))
        self._network.wakeup()  # once for the call's batches (a write to a socket each)
        return futures

    def choose_partition(self, topic: str) -> int:
        """The partition the partitioner gives a record without a key now (the sticky
        partition): where ``send_batch`` callers put keyless rows."""
        meta = self.metadata.topics.get(topic)
        partitions = len(meta.partitions) if meta is not None and meta.error is None else 0
        if not partitions:
            partitions = self._wait_for_metadata(topic, None, _monotonic() + self.max_block_s)
        if self._sticky is not None:
            partition = self._sticky.get(topic)
            if partition is not None and partition < partitions:
                return partition
        return self._choose_partition(topic, None, partitions)

    def _on_send(self, topic: str, value: Any, key: Any, partition: int | None,
                 headers: Any, timestamp: int | None) -> tuple[Any, Any, Any, Any, Any, Any]:
        """The interceptors' ``on_send``: each may return the six fields changed."""
        for interceptor in self.interceptors:
            hook = getattr(interceptor, "on_send", None)
            if hook is None:
                continue
            try:
                changed = hook(topic, value, key, partition, headers, timestamp)
            except Exception:
                logger.warning("on_send of %r failed", interceptor, exc_info=True)
                continue
            if isinstance(changed, tuple) and len(changed) == 6:
                topic, value, key, partition, headers, timestamp = changed
        return topic, value, key, partition, headers, timestamp

    def _check_record_size(self, size: int) -> None:
        if size + RECORD_BATCH_OVERHEAD + REQUEST_OVERHEAD > self.max_request_size:
            raise MessageTooLargeError(
                f"The message is {size + RECORD_BATCH_OVERHEAD} bytes when serialized which is "
                f"larger than {self.max_request_size}, which is the value of the "
                f"max.request.size configuration.")
        if size > self._pool.total:
            raise MessageTooLargeError(
                f"The message is {size} bytes when serialized which is larger than the total "
                f"memory buffer you have configured with the buffer.memory configuration.")

    def _choose_partition(self, topic: str, key: bytes | None, partitions: int) -> int:
        partition = self.partitioner.partition(
            topic, key, partitions, lambda: self.metadata.available_partitions(topic))
        if not 0 <= partition < partitions:
            raise ValueError(f"The partitioner chose partition {partition} of {topic}, "
                             f"which has {partitions} partitions")
        return partition

    produce = send

    def _wait_for_metadata(self, topic: str, partition: int | None, deadline: float) -> int:
        count = self.metadata.partition_count(topic)
        if count is not None and (partition is None or partition < count):
            return count
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                meta = self.metadata.topics.get(topic)
                if meta is not None and meta.error is not None and not meta.error.retriable:
                    raise meta.error
                count = self.metadata.partition_count(topic)
                if count and partition is not None:
                    raise RequestTimedOutError(
                        f"Partition {partition} of topic {topic} with partition count {count} "
                        f"is not present in metadata after {self.max_block_s * 1000:.0f} ms.")
                raise RequestTimedOutError(
                    f"Topic {topic} not present in metadata after "
                    f"{self.max_block_s * 1000:.0f} ms.")
            try:
                self.metadata.update([topic], timeout_s=remaining)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
            meta = self.metadata.topics.get(topic)
            if meta is not None and meta.error is not None and not meta.error.retriable:
                raise meta.error
            count = self.metadata.partition_count(topic)
            if count and (partition is None or partition < count):
                return count
            time.sleep(min(self.retry_backoff_s, max(0.0, deadline - time.monotonic())))

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now and wait for the answers; returns how many records
        are still unacknowledged (0 unless ``timeout`` ran out)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing += 1
        self._network.wakeup()
        try:
            with self._incomplete_cond:
                while self._incomplete:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    if not self._sender.is_alive():
                        break
                    self._incomplete_cond.wait(0.5 if remaining is None else
                                               min(0.5, remaining))
                return self._incomplete
        finally:
            with self._lock:
                self._flushing -= 1

    def poll(self, timeout: float = 0) -> int:
        """confluent-kafka compatibility: callbacks run on the sender thread here."""
        if timeout:
            time.sleep(timeout)
        return 0

    def __len__(self) -> int:
        return self._incomplete

    def metrics(self) -> dict[str, float]:
        """A few of Kafka's producer-metrics, by their names (totals and rates since the
        producer started)."""
        elapsed = max(1e-9, time.monotonic() - self._started)
        out: dict[str, float] = {k: float(v) for k, v in self._stats.items()}
        out["record-send-rate"] = out["record-send-total"] / elapsed
        out["outgoing-byte-rate"] = out["outgoing-byte-total"] / elapsed
        out["request-rate"] = out["request-total"] / elapsed
        out["batch-size-avg"] = out["outgoing-byte-total"] / max(1.0, out["batch-total"])
        out["records-per-request-avg"] = out["record-send-total"] / max(1.0,
                                                                         out["request-total"])
        out["buffer-total-bytes"] = float(self._pool.total)
        out["buffer-available-bytes"] = float(self._pool.total - self._pool.used)
        return out

    def partitions_for(self, topic: str) -> list[int]:
        self._wait_for_metadata(topic, None, time.monotonic() + self.max_block_s)
        return sorted(self.metadata.topics[topic].partitions)

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop (waiting at most ``timeout``; then what is left
        fails with an error)."""
        if self._closing and not self._sender.is_alive():
            return
        if timeout is None or timeout > 0:
            self.flush(timeout)
        with self._lock:
            self._closing = True
        if self._incomplete:
            self._force_close = True
        self._network.wakeup()
        self._sender.join(None if timeout is None else max(timeout, 5.0))
        self.metadata.close()

    # --- the sender thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                if self._force_close:
                    self._fail_all(NetworkExceptionError("The producer was closed forcefully"))
                    break
                if self._closing and not self._incomplete:
                    break
                self._run_once()
            except Exception:
                logger.exception("Uncaught error in the producer's sender thread")
                time.sleep(0.1)
        self._network.close()

    def _run_once(self) -> None:
        now = time.monotonic()
        if self.metadata.stale() and self.metadata.wanted:
            try:
                self.metadata.update(timeout_s=self.request_timeout_ms / 1000.0)
            except KafkaError as exc:
                logger.debug("metadata refresh failed: %s", exc)
        next_wake = now + 0.5
        tm = self._transaction_manager
        txn = self._txn
        if tm is not None:
            tm.maybe_resolve_sequences()
            if tm.last_error is not None and tm.has_fatal_error:
                self._abort_batches(tm.last_error)
                if txn is not None:
                    txn.fail_pending()
                self._network.poll(self.retry_backoff_s)
                return
            if txn is not None:
                if self._maybe_send_transactional_request(txn):
                    return
            elif tm.bump_idempotent_epoch_and_reset_id_if_needed(now):
                self._send_init_producer_id(tm, now)
            if tm.state is State.UNINITIALIZED and tm.init_producer_id_retry_at > now:
                next_wake = min(next_wake, tm.init_producer_id_retry_at)
        ready: dict[int, list[tuple[str, int]]] = {}
        expired: list[ProducerBatch] = []
        with self._lock:
            # A transaction being committed or aborted sends what it has (Kafka's Sender
            # begins a flush): EndTxn waits for every batch's answer.
            flushing = self._flushing > 0 or self._closing or (
                txn is not None and txn.is_completing)
            for tp, queue in self._batches.items():
                while queue and now - queue[0].created > self.delivery_timeout_s \
                        and not queue[0].drained_at:
                    expired.append(queue.popleft())
                if not queue or tp in self._muted:
                    continue
                head = queue[0]
                if head.retry_at > now:
                    next_wake = min(next_wake, head.retry_at)
                    continue
                sendable = flushing or len(queue) > 1 or head.size >= self.batch_size or \
                    now - head.created >= self.linger_s
                if not sendable:
                    next_wake = min(next_wake, head.created + self.linger_s)
                    continue
                leader = self.metadata.leader(*tp)
                if leader < 0:
                    self.metadata.request_update()
                    next_wake = min(next_wake, now + self.retry_backoff_s)
                    continue
                ready.setdefault(leader, []).append(tp)
        for batch in expired:
            error = RequestTimedOutError(
                f"Expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}:"
                f" {(now - batch.created) * 1000:.0f} ms has passed since batch creation")
            if tm is not None:
                tm.handle_failed_batch(batch, error, adjust_sequence_numbers=False)
                if batch.attempts:
                    # Sent before: no new batch goes out until the in-flight ones resolve.
                    tm.mark_sequence_unresolved(batch)
            self._complete(batch, error)
        for node_id, tps in ready.items():
            if not self._network.ready(node_id):
                continue
            batches = self._drain(tps)
            if batches:
                self._send_produce(node_id, batches)
                with self._lock:
                    if any(self._batches.get((b.topic, b.partition)) for b in batches):
                        # More queued behind what went out: pipeline it now (Kafka's Sender
                        # polls with no timeout while a ready node has data).
                        next_wake = now
        self._network.poll(max(0.0, next_wake - time.monotonic()))

    def _drain(self, tps: list[tuple[str, int]]) -> list[ProducerBatch]:
        out: list[ProducerBatch] = []
        size = REQUEST_OVERHEAD
        now = time.monotonic()
        tm = self._transaction_manager
        with self._lock:
            for tp in tps:
                queue = self._batches.get(tp)
                if not queue:
                    continue
                head = queue[0]
                if out and size + head.size > self.max_request_size:
                    break
                if tm is not None:
                    if self._txn is not None and \
                            not self._txn.is_send_to_partition_allowed(tp):
                        continue  # not in the transaction yet (AddPartitionsToTxn first)
                    if tm.should_stop_drain(head, tp):
                        continue
                    if head.base_sequence == NO_SEQUENCE:
                        tm.set_producer_state(head)
                queue.popleft()
                head.drained_at = now
                size += head.size
                out.append(head)
                if not queue:
                    del self._batches[tp]
                if self.max_in_flight == 1:
                    self._muted.add(tp)
        for batch in out:
            if batch.last_key_is_null():
                self.partitioner.on_new_batch(batch.topic, batch.partition)
        return out

    def _send_produce(self, node_id: int, batches: list[ProducerBatch]) -> None:
        request_cls = api.APIS[ApiKey.PRODUCE].request
        s = request_cls.structs
        by_topic: dict[str, list[Any]] = {}
        stats = self._stats
        for batch in batches:
            batch.attempts += 1
            records = finish_batch(batch.buf if batch.encoded is None else batch.encoded,
                                   batch.record_count, batch.base_timestamp,
                                   batch.max_timestamp, self.codec,
                                   producer_id=batch.producer_id,
                                   producer_epoch=batch.producer_epoch,
                                   base_sequence=batch.base_sequence,
                                   is_transactional=self.transactional_id is not None)
            stats["batch-total"] += 1
            stats["outgoing-byte-total"] += len(records)
            by_topic.setdefault(batch.topic, []).append(
                s["PartitionProduceData"](index=batch.partition, records=records))
        body = request_cls(transactional_id=self.transactional_id, acks=self.acks,
                           timeout_ms=self.request_timeout_ms,
                           topic_data=[s["TopicProduceData"](name=t, partition_data=p)
                                       for t, p in by_topic.items()])

        def on_response(response: Any, error: KafkaError | None) -> None:
            self._handle_produce_response(batches, response, error)

        stats["request-total"] += 1
        self._network.send(node_id, ApiKey.PRODUCE, body, on_response,
                           expect_response=self.acks != 0)

    def _handle_produce_response(self, batches: list[ProducerBatch], response: Any,
                                 error: KafkaError | None) -> None:
        if error is not None:
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        if response is None:  # acks=0
            for batch in batches:
                self._complete(batch, None)
            return
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for p in topic.partition_responses:
                results[(topic.name, p.index)] = p
        for batch in batches:
            p = results.get((batch.topic, batch.partition))
            if p is None:
                self._retry_or_fail(batch, NetworkExceptionError(
                    f"The answer has no result for {batch.topic}-{batch.partition}"))
                continue
            if p.error_code == NONE or (p.error_code == DuplicateSequenceNumberError.code
                                        and self._transaction_manager is not None):
                # A duplicate sequence: the broker has the batch already (Kafka's Sender
                # completes it as a success).
                batch.base_offset = p.base_offset
                batch.log_append_time = getattr(p, "log_append_time_ms", -1)
                self._complete_batch(batch)
                continue
            message = getattr(p, "error_message", None)
            exc = error_for_code(p.error_code)(message)
            if p.error_code in _LEADER_ERRORS:
                self.metadata.request_update()
            if p.error_code == MessageTooLargeError.code or \
                    p.error_code == RecordListTooLargeError.code:
                self._fail_batch(batch, exc, adjust_sequence_numbers=True)
                continue
            self._retry_or_fail(batch, exc, p.log_start_offset)

    def _complete_batch(self, batch: ProducerBatch) -> None:
        if self._transaction_manager is not None:
            self._transaction_manager.handle_completed_batch(batch)
        self._complete(batch, None)

    def _fail_batch(self, batch: ProducerBatch, error: KafkaError, *,
                    adjust_sequence_numbers: bool) -> None:
        if self._transaction_manager is not None:
            self._transaction_manager.handle_failed_batch(batch, error, adjust_sequence_numbers)
        self._complete(batch, error)

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError,
                       log_start_offset: int = -1) -> None:
        now = time.monotonic()
        tm = self._transaction_manager
        may_retry = batch.attempts <= self.retries and not self._force_close and \
            now - batch.created + self.retry_backoff_s < self.delivery_timeout_s
        if may_retry and tm is not None:
            # Asked only for a batch that may be retried: it may request an epoch bump.
            retriable = not batch.done and tm.can_retry(batch, error, log_start_offset)
        else:
            retriable = error.retriable or isinstance(
                error, NotEnoughReplicasError | NotEnoughReplicasAfterAppendError)
        if may_retry and retriable:
            logger.debug("retrying %s-%d (attempt %d): %s", batch.topic, batch.partition,
                         batch.attempts, error)
            if isinstance(error, NetworkExceptionError | RequestTimedOutError):
                self.metadata.request_update()
            batch.retry_at = now + self.retry_backoff_s
            batch.drained_at = 0.0
            self._stats["record-retry-total"] += batch.record_count
            with self._lock:
                tp = (batch.topic, batch.partition)
                queue = self._batches.setdefault(tp, deque())
                if tm is None:
                    queue.appendleft(batch)
                else:
                    insert_in_sequence_order(queue, batch)
                self._muted.discard(tp)
            return
        # Kafka adjusts sequences only for a batch that did not exhaust its retries: after
        # the last attempt nobody knows whether the broker has it.
        self._fail_batch(batch, error, adjust_sequence_numbers=batch.attempts <= self.retries)

    def _complete(self, batch: ProducerBatch, error: KafkaError | None) -> None:
        with batch._waiters_lock:
            batch.error = error
            batch.done = True
            if batch._event is not None:
                batch._event.set()
            done_callbacks = batch._done_callbacks
            batch._done_callbacks = []
        self._stats["record-error-total" if error is not None else "record-send-total"] += \
            batch.record_count
        with self._lock:  # one acquisition: the send() path contends for this lock
            self._pool.release_locked(batch.size - RECORD_BATCH_OVERHEAD)
            self._muted.discard((batch.topic, batch.partition))
        callbacks = batch.callbacks
        if callbacks or self.interceptors:
            indices: Iterable[int] = range(batch.record_count) if self.interceptors \
                else list(callbacks)  # records in index order either way
            for index in indices:
                callback = callbacks.get(index)
                metadata = batch.metadata(index)
                for interceptor in self.interceptors:
                    hook = getattr(interceptor, "on_acknowledgement", None)
                    if hook is not None:
                        try:
                            hook(metadata, error)
                        except Exception:
                            logger.warning("on_acknowledgement of %r failed", interceptor,
                                           exc_info=True)
                if callback is not None:
                    try:
                        callback(error, metadata)
                    except Exception:
                        logger.exception("A delivery callback failed")
        for index, fn in done_callbacks:
            try:
                fn(FutureRecordMetadata(batch, index))
            except Exception:
                logger.exception("A future's done callback failed")
        with self._incomplete_cond:
            self._incomplete -= batch.record_count
            if self._incomplete <= 0:
                self._incomplete_cond.notify_all()

    def _send_init_producer_id(self, tm: TransactionManager, now: float) -> None:
        """InitProducerId (no transactional id) to the least loaded broker; the answer
        arrives in a later ``poll``. Without known brokers it waits for the first ``send``
        (which fetches metadata)."""
        node_id = self._network.least_loaded_node()
        if node_id is None:
            return
        if not self._network.ready(node_id):
            tm.retry_init_producer_id_at(now + self.retry_backoff_s)
            return

        def on_response(response: Any, error: KafkaError | None) -> None:
            tm.handle_init_producer_id_response(response, error, time.monotonic())

        tm.init_producer_id_started()
        try:
            self._network.send(node_id, ApiKey.INIT_PRODUCER_ID,
                               tm.init_producer_id_request(), on_response)
        except UnsupportedVersionError as exc:
            tm.transition_to_fatal_error(unsupported_init_producer_id(str(exc)))

    def _maybe_send_transactional_request(self, txn: TransactionalState) -> bool:
        """Send the next queued transactional request, one at a time (Kafka's
        Sender.maybeSendAndPollTransactionalRequest); True when this round is spent on it
        (no Produce goes out meanwhile)."""
        if txn.in_flight is not None:
            self._network.poll(self.retry_backoff_s)
            return True
        if txn.has_abortable_error or txn.is_aborting:
            error = self._transaction_manager.last_error if \
                self._transaction_manager is not None else None
            self._abort_undrained_batches(error or TransactionAbortedError())
        handler = txn.next_request(has_incomplete_batches=self._incomplete > 0)
        if handler is None:
            return False
        if handler.coordinator_type is not None:
            node_id = txn.coordinators[handler.coordinator_type]
            if node_id is None or not self._network.ready(node_id):
                # Unknown or unreachable coordinator: look it up (again), then retry.
                if node_id is not None:
                    self.metadata.request_update()
                txn.lookup_coordinator(handler.coordinator_type, txn.coordinator_key(handler))
                txn.reenqueue(handler)
                return True
        else:
            least_loaded = self._network.least_loaded_node()
            if least_loaded is None or not self._network.ready(least_loaded):
                if least_loaded is None and not self.metadata.brokers:
                    try:
                        self.metadata.update(timeout_s=self.request_timeout_ms / 1000.0)
                    except KafkaError as exc:
                        logger.debug("metadata refresh failed: %s", exc)
                else:
                    self.metadata.request_update()
                txn.reenqueue(handler)
                self._network.poll(self.retry_backoff_s)
                return True
            node_id = least_loaded
        if handler.is_retry:
            time.sleep(self.retry_backoff_s)  # as Kafka's Sender, on its own thread

        def on_response(response: Any, error: KafkaError | None) -> None:
            txn.handle_response(handler, response, error)

        with txn.lock:
            txn.in_flight = handler
        try:
            self._network.send(node_id, handler.api_key, handler.body(), on_response)
        except UnsupportedVersionError as exc:
            with txn.lock:
                txn.in_flight = None
            txn.transition_to_fatal(exc)
            handler.result.fail(exc)
            return True
        self._network.poll(self.retry_backoff_s)
        return True

    def _abort_undrained_batches(self, error: KafkaError) -> None:
        """Fail the queued batches never sent (Kafka's abortUndrainedBatches): the
        transaction they belong to is being aborted."""
        with self._lock:
            batches = []
            for tp, queue in list(self._batches.items()):
                kept = deque(b for b in queue if b.base_sequence != NO_SEQUENCE)
                batches += [b for b in queue if b.base_sequence == NO_SEQUENCE]
                if kept:
                    self._batches[tp] = kept
                else:
                    del self._batches[tp]
        for batch in batches:
            self._complete(batch, error)

    # --- transactions (the caller's side) ------------------------------------------------------

    def _transactional(self) -> TransactionalState:
        if self._txn is None:
            raise InvalidTxnStateError(
                "Cannot use transactional methods without enabling transactions by setting "
                "the transactional.id configuration property")
        if self._closing:
            raise RuntimeError("Cannot use transactional methods after the producer is closed")
        return self._txn

    def _await(self, txn: TransactionalState, result: TransactionalRequestResult,
               timeout: float | None) -> None:
        self._network.wakeup()
        try:
            result.wait(self.max_block_s if timeout is None or timeout < 0 else timeout)
        except RequestTimedOutError:
            raise  # the result stays pending: the same call may be made again
        except KafkaError:
            txn.completed(result)
            raise
        txn.completed(result)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of ``transactional.id`` from its transaction
        coordinator (InitProducerId), fencing any older producer with the same id and
        finishing its open transaction. Call once, before any other transactional
        method. ``timeout``: seconds, ``max.block.ms`` by default."""
        txn = self._transactional()
        self._await(txn, txn.initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until ``commit_transaction`` /
        ``abort_transaction`` become visible to read_committed consumers together, or not
        at all."""
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit the consumer group's ``offsets`` (the next offsets to read) with the
        transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator).
        ``offsets``: a list of TopicPartition, or a dict from TopicPartition or (topic,
        partition) to an offset (an int or anything with ``.offset``).
        ``group_metadata``: the consumer's ``consumer_group_metadata()`` (its generation and
        member id fence a zombie consumer) or a group id."""
        txn = self._transactional()
        by_tp: dict[tuple[str, int], int] = {}
        items = offsets.items() if isinstance(offsets, Mapping) else \
            ((tp, tp.offset) for tp in offsets)
        for tp, offset in items:
            key = (tp[0], tp[1]) if isinstance(tp, tuple) else (tp.topic, tp.partition)
            by_tp[key] = offset if isinstance(offset, int) else int(offset.offset)
        if isinstance(group_metadata, str):
            group_id, generation_id, member_id, instance_id = group_metadata, -1, "", None
        else:
            group_id = group_metadata.group_id
            generation_id = group_metadata.generation_id
            member_id = group_metadata.member_id
            instance_id = group_metadata.group_instance_id
        if not by_tp:
            return
        result = txn.send_offsets_to_transaction(by_tp, group_id, generation_id, member_id,
                                                 instance_id)
        self._network.wakeup()
        result.wait(self.max_block_s if timeout is None or timeout < 0 else timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is queued, wait for every answer, then commit (EndTxn). An error in
        the transaction raises TransactionAbortableError (abort it), a fenced producer
        ProducerFencedError (close it). May be called again after a timeout."""
        txn = self._transactional()
        self._await(txn, txn.begin_commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with TransactionAbortedError,
        the rest are marked aborted (EndTxn); read_committed consumers never see them."""
        txn = self._transactional()
        self._await(txn, txn.begin_abort(), timeout)

    def _abort_batches(self, error: KafkaError) -> None:
        """Fail every queued batch (Sender.maybeAbortBatches, after a fatal error); the ones
        in flight complete with their answers."""
        with self._lock:
            batches = [b for q in self._batches.values() for b in q]
            self._batches.clear()
        for batch in batches:
            self._complete(batch, error)

    def _fail_all(self, error: KafkaError) -> None:
        with self._lock:
            batches = [b for q in self._batches.values() for b in q]
            self._batches.clear()
        for batch in batches:
            self._complete(batch, error)
        self._network.close()
