"""The worker: runs connectors and their tasks, each task in a thread of its own (Kafka's
``Worker``, ``WorkerSourceTask``, ``WorkerSinkTask``).

A source task's thread loops ``poll`` -> transforms -> converters -> ``Producer.send``;
every ``offset.flush.interval.ms`` it flushes the producer and only then stores the
source offsets of what was sent (at-least-once: a record is in Kafka before its offset is
stored). A sink task's consumer is in the group ``connect-<connector>``; its thread loops
``poll`` -> converters -> transforms -> ``put``, and every ``offset.flush.interval.ms``
asks ``pre_commit`` (the task flushes) before committing the group's offsets.

Errors in conversion and transforms follow ``errors.tolerance``: ``none`` fails the task,
``all`` skips the record (logged with ``errors.log.enable``; a sink also sends the
consumed record, as it was, to ``errors.deadletterqueue.topic.name``).
"""

from __future__ import annotations

import enum
import functools
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from kafkaclone.clients import (
    Consumer,
    ConsumerRecord,
    FutureRecordMetadata,
    Producer,
    TopicPartition,
)
from kafkaclone.common.config_def import AbstractConfig
from kafkaclone.connect.api import (
    ConnectException,
    ConnectRecord,
    RetriableException,
    SinkRecord,
    SinkTask,
    SourceRecord,
    SourceTask,
)
from kafkaclone.connect.config import SINK_CONFIG
from kafkaclone.connect.converters import Converter
from kafkaclone.connect.offsets import (
    ConnectorOffsetReader,
    OffsetBackingStore,
    PartitionKey,
    partition_key,
)
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.transforms import Transformation

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=ConnectRecord)
POLL_TIMEOUT_S: Final = 0.2


class State(enum.Enum):
    """Kafka's ``AbstractStatus.State``."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    DESTROYED = "DESTROYED"


@dataclass
class Status:
    state: State
    trace: str | None = None


@dataclass(frozen=True)
class WorkerSettings:
    """What a task needs of the worker's config."""

    worker_id: str
    bootstrap_servers: str
    offset_flush_interval_s: float
    offset_flush_timeout_s: float
    key_converter: str
    value_converter: str
    worker_props: Mapping[str, str]


def prefixed(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def make_converter(plugins: Plugins, settings: WorkerSettings, connector_props: Mapping[str, str],
                   role: str) -> Converter:
    """``key.converter`` / ``value.converter``: the connector's, else the worker's, with the
    keys under the same prefix of whichever config named it."""
    name_key = f"{role}.converter"
    source = connector_props if connector_props.get(name_key) else settings.worker_props
    class_name = source.get(name_key) or (settings.key_converter if role == "key"
                                          else settings.value_converter)
    converter = plugins.converter_class(class_name)()
    converter.configure(prefixed(source, name_key + "."), role == "key")
    return converter


def make_transforms(plugins: Plugins, props: Mapping[str, str]) -> list[Transformation]:
    """``transforms=a,b`` with ``transforms.a.type`` and ``transforms.a.*``, in order."""
    chain: list[Transformation] = []
    for alias in [a.strip() for a in props.get("transforms", "").split(",") if a.strip()]:
        own = prefixed(props, f"transforms.{alias}.")
        class_name = own.pop("type", None)
        if not class_name:
            raise ConnectException(f"Missing required configuration \"transforms.{alias}.type\""
                                   " which has no default value.")
        transform = plugins.transformation_class(class_name)()
        transform.configure(own)
        chain.append(transform)
    return chain


def apply_transforms(chain: Sequence[Transformation], record: R) -> R | None:
    current: R | None = record
    for transform in chain:
        if current is None:
            return None
        current = transform.apply(current)
    return current


class ErrorPolicy:
    """Kafka's ``RetryWithToleranceOperator`` without retries: ``errors.tolerance``,
    ``errors.log.enable``."""

    def __init__(self, props: Mapping[str, str], name: str) -> None:
        self.tolerate_all = props.get("errors.tolerance", "none") == "all"
        self.log_enabled = props.get("errors.log.enable", "false") == "true"
        self.include_messages = props.get("errors.log.include.messages", "false") == "true"
        self.name = name
        self.skipped = 0

    def tolerate(self, stage: str, error: Exception, record: object) -> bool:
        """True if the record is to be skipped; False: the task fails."""
        if self.log_enabled:
            logger.error("Error encountered in task %s while executing stage %s%s", self.name,
                         stage, f" with record {record!r}" if self.include_messages else "",
                         exc_info=error)
        if self.tolerate_all:
            self.skipped += 1
            return True
        return False


class WorkerTask:
    """One task's thread and status."""

    def __init__(self, connector: str, task_id: int, settings: WorkerSettings) -> None:
        self.connector = connector
        self.task_id = task_id
        self.settings = settings
        self.status = Status(State.UNASSIGNED)
        self.stopping = threading.Event()
        self.paused = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return f"{self.connector}-{self.task_id}"

    def start(self, paused: bool) -> None:
        if paused:
            self.paused.set()
        self.thread = threading.Thread(target=self._run, name=f"task-thread-{self.name}",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.status = Status(State.PAUSED if self.paused.is_set() else State.RUNNING)
            self.execute()
        except Exception as exc:
            logger.error("%s Task threw an uncaught and unrecoverable exception", self.name,
                         exc_info=exc)
            self.status = Status(State.FAILED, "".join(traceback.format_exception(exc)))
        finally:
            self.close()

    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def pause(self) -> None:
        self.paused.set()
        if self.status.state is State.RUNNING:
            self.status = Status(State.PAUSED)

    def resume(self) -> None:
        self.paused.clear()
        if self.status.state is State.PAUSED:
            self.status = Status(State.RUNNING)

    def stop(self, timeout: float) -> None:
        self.stopping.set()
        self.request_stop()
        if self.thread is not None:
            self.thread.join(timeout)
        if self.status.state is not State.FAILED:
            self.status = Status(State.UNASSIGNED)

    def request_stop(self) -> None:
        pass


class _SourceTaskContext:
    def __init__(self, configs: Mapping[str, str], reader: ConnectorOffsetReader) -> None:
        self._configs = configs
        self._reader = reader

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    def offset_storage_reader(self) -> ConnectorOffsetReader:
        return self._reader


class WorkerSourceTask(WorkerTask):
    """Kafka's ``WorkerSourceTask``."""

    def __init__(self, connector: str, task_id: int, settings: WorkerSettings,
                 task: SourceTask, task_props: Mapping[str, str],
                 connector_props: Mapping[str, str], plugins: Plugins,
                 offsets: OffsetBackingStore) -> None:
        super().__init__(connector, task_id, settings)
        self.task = task
        self.task_props = task_props
        self.offsets = offsets
        self.key_converter = make_converter(plugins, settings, connector_props, "key")
        self.value_converter = make_converter(plugins, settings, connector_props, "value")
        self.transforms = make_transforms(plugins, connector_props)
        self.errors = ErrorPolicy(connector_props, self.name)
        self.producer: Producer | None = None
        self.pending: dict[PartitionKey, tuple[Mapping[str, object], Mapping[str, object]]] = {}
        self.in_flight: list[FutureRecordMetadata] = []
        self.sent = 0
        self.wants_acknowledgements = \
            type(task).commit_record is not SourceTask.commit_record
        """Whether the task overrides ``commit_record`` (else no per-record callback)."""

    def execute(self) -> None:
        self.producer = Producer({
            "bootstrap.servers": self.settings.bootstrap_servers,
            "client.id": f"connector-producer-{self.name}", "acks": "all",
            "max.in.flight.requests.per.connection": 1, "linger.ms": 5,
            "delivery.timeout.ms": 2147483647, "max.block.ms": 2147483647,
            **prefixed(self.settings.worker_props, "producer.")})
        self.task.initialize(_SourceTaskContext(
            self.task_props, ConnectorOffsetReader(self.offsets, self.connector)))
        self.task.start(self.task_props)
        last_commit = time.monotonic()
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.stopping.wait(POLL_TIMEOUT_S)
                continue
            records = self.task.poll()
            if records:
                self._send(records)
            if time.monotonic() - last_commit >= self.settings.offset_flush_interval_s:
                self.commit_offsets()
                last_commit = time.monotonic()
        self.commit_offsets()

    def _send(self, records: Sequence[SourceRecord]) -> None:
        assert self.producer is not None
        last_partition: object = None
        key: PartitionKey = ()
        for record in records:
            if record.source_partition is not last_partition:
                last_partition = record.source_partition
                key = partition_key(record.source_partition)
            try:
                transformed = apply_transforms(self.transforms, record)
                if transformed is None:
                    self.task.commit_record(record, None)
                    self.pending[key] = (record.source_partition, record.source_offset)
                    continue
                key_bytes = self.key_converter.from_connect_data(
                    transformed.topic, transformed.key_schema, transformed.key)
                value_bytes = self.value_converter.from_connect_data(
                    transformed.topic, transformed.value_schema, transformed.value)
            except Exception as exc:
                if not self.errors.tolerate("conversion/transformation", exc, record):
                    raise
                self.pending[key] = (record.source_partition, record.source_offset)
                continue
            future = self.producer.send(transformed.topic, value_bytes, key=key_bytes,
                                        partition=transformed.kafka_partition,
                                        timestamp=transformed.timestamp)
            if self.wants_acknowledgements:
                future.add_done_callback(functools.partial(self._acknowledged, record))
            self.in_flight.append(future)
            self.pending[key] = (record.source_partition, record.source_offset)
            self.sent += 1

    def _acknowledged(self, record: SourceRecord, future: FutureRecordMetadata) -> None:
        if future.exception(0) is None:
            self.task.commit_record(record, future.result(0))

    def commit_offsets(self) -> None:
        """Flush the producer, check every send, then store the offsets (Kafka's
        ``commitOffsets``)."""
        if self.producer is None:
            return
        if self.producer.flush(self.settings.offset_flush_timeout_s) > 0:
            logger.warning("%s Failed to flush, timed out while waiting for producer to "
                           "flush outstanding messages", self.name)
            return
        for future in self.in_flight:
            error = future.exception(0)
            if error is not None:
                raise ConnectException(f"Unrecoverable exception from producer send "
                                       f"callback: {error}") from error
        self.in_flight.clear()
        if self.pending:
            self.offsets.set(self.connector, self.pending)
            self.pending = {}
        self.task.commit()

    def request_stop(self) -> None:
        self.task.stop()

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(self.settings.offset_flush_timeout_s)
            self.producer = None


class _SinkTaskContext:
    def __init__(self, owner: WorkerSinkTask, configs: Mapping[str, str]) -> None:
        self.owner = owner
        self._configs = configs

    @property
    def configs(self) -> Mapping[str, str]:
        return self._configs

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.owner.rewinds.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self.owner.retry_timeout_s = timeout_ms / 1000.0

    def assignment(self) -> set[TopicPartition]:
        consumer = self.owner.consumer
        return set() if consumer is None else set(consumer.assignment())

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        if self.owner.consumer is not None:
            self.owner.consumer.pause(partitions)

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        if self.owner.consumer is not None:
            self.owner.consumer.resume(partitions)

    def request_commit(self) -> None:
        self.owner.commit_requested = True


class WorkerSinkTask(WorkerTask):
    """Kafka's ``WorkerSinkTask``."""

    def __init__(self, connector: str, task_id: int, settings: WorkerSettings,
                 task: SinkTask, task_props: Mapping[str, str],
                 connector_props: Mapping[str, str], plugins: Plugins) -> None:
        super().__init__(connector, task_id, settings)
        self.task = task
        self.task_props = task_props
        self.connector_config = AbstractConfig(SINK_CONFIG, {
            k: v for k, v in connector_props.items() if k in SINK_CONFIG})
        self.key_converter = make_converter(plugins, settings, connector_props, "key")
        self.value_converter = make_converter(plugins, settings, connector_props, "value")
        self.transforms = make_transforms(plugins, connector_props)
        self.errors = ErrorPolicy(connector_props, self.name)
        self.dlq_topic = self.connector_config.get_str("errors.deadletterqueue.topic.name")
        self.dlq: Producer | None = None
        self.consumer: Consumer | None = None
        self.current: dict[TopicPartition, int] = {}
        self.rewinds: dict[TopicPartition, int] = {}
        self.retry_timeout_s = 0.0
        self.commit_requested = False
        self.consumed = 0

    def execute(self) -> None:
        c = self.connector_config
        self.consumer = consumer = Consumer({
            "bootstrap.servers": self.settings.bootstrap_servers,
            "group.id": f"connect-{self.connector}",
            "client.id": f"connector-consumer-{self.name}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            **prefixed(self.settings.worker_props, "consumer.")})
        if self.dlq_topic:
            self.dlq = Producer({"bootstrap.servers": self.settings.bootstrap_servers,
                                 "client.id": f"connector-dlq-producer-{self.name}"})
        self.task.initialize(_SinkTaskContext(self, self.task_props))
        self.task.start(self.task_props)
        topics: list[str] | re.Pattern[str] = c.get_list("topics")
        if not topics:
            topics = re.compile(c.get_str("topics.regex"))
        consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        last_commit = time.monotonic()
        while not self.stopping.is_set():
            paused = self.paused.is_set()
            assignment = consumer.assignment()
            if paused != bool(consumer.paused()) and assignment:
                (consumer.pause if paused else consumer.resume)(assignment)
            self._rewind()
            batch = consumer.poll(POLL_TIMEOUT_S)
            if batch:
                self._deliver(batch)
            if self.commit_requested or \
                    time.monotonic() - last_commit >= self.settings.offset_flush_interval_s:
                self.commit_offsets()
                last_commit = time.monotonic()
                self.commit_requested = False
        self.commit_offsets()

    def _rewind(self) -> None:
        if self.rewinds and self.consumer is not None:
            for tp, offset in self.rewinds.items():
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                self.current[tp] = offset
            self.rewinds.clear()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.task.open(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.commit_offsets()
        self.task.close(partitions)
        for tp in partitions:
            self.current.pop(tp, None)

    def _convert(self, raw: ConsumerRecord) -> SinkRecord | None:
        key = self.key_converter.to_connect_data(raw.topic, _bytes(raw.key))
        value = self.value_converter.to_connect_data(raw.topic, _bytes(raw.value))
        record = SinkRecord(topic=raw.topic, kafka_partition=raw.partition,
                            key_schema=key.schema, key=key.value,
                            value_schema=value.schema, value=value.value,
                            timestamp=raw.timestamp if raw.timestamp >= 0 else None,
                            kafka_offset=raw.offset, timestamp_type=raw.timestamp_type)
        return apply_transforms(self.transforms, record)

    def _deliver(self, batch: Sequence[ConsumerRecord]) -> None:
        records: list[SinkRecord] = []
        for raw in batch:
            try:
                converted = self._convert(raw)
            except Exception as exc:
                if not self.errors.tolerate("conversion/transformation", exc, raw):
                    raise
                self._dead_letter(raw)
                continue
            if converted is not None:
                records.append(converted)
        while True:
            try:
                self.task.put(records)
                break
            except RetriableException:
                logger.info("%s put failed with a retriable error, retrying", self.name)
                if self.stopping.wait(self.retry_timeout_s or 1.0):
                    return
        self.consumed += len(batch)
        for raw in batch:
            self.current[TopicPartition(raw.topic, raw.partition)] = raw.offset + 1

    def _dead_letter(self, raw: ConsumerRecord) -> None:
        if self.dlq is None:
            return
        headers = None
        if self.connector_config.get_bool("errors.deadletterqueue.context.headers.enable"):
            headers = [("__connect.errors.topic", raw.topic.encode()),
                       ("__connect.errors.partition", str(raw.partition).encode()),
                       ("__connect.errors.offset", str(raw.offset).encode())]
        self.dlq.send(self.dlq_topic, _bytes(raw.value), key=_bytes(raw.key), headers=headers)

    def commit_offsets(self) -> None:
        consumer = self.consumer
        if consumer is None or not self.current:
            return
        if self.dlq is not None:
            self.dlq.flush(self.settings.offset_flush_timeout_s)
        to_commit = self.task.pre_commit(dict(self.current))
        if to_commit:
            consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, offset)
                                     for tp, offset in to_commit.items()])

    def close(self) -> None:
        if self.consumer is not None:
            # Leaving the group revokes the partitions: _on_revoke commits and closes them.
            self.consumer.close(autocommit=False)
            self.consumer = None
        self.task.stop()
        if self.dlq is not None:
            self.dlq.close(self.settings.offset_flush_timeout_s)
            self.dlq = None


def _bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ConnectException(f"expected bytes from the consumer, got {type(value).__name__}")


TaskFactory = Callable[[], WorkerTask]
