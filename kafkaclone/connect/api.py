"""The connector API, Kafka Connect's ``org.apache.kafka.connect.connector``,
``.source`` and ``.sink`` packages, for Python connectors.

A connector is a class registered under the entry point group
``kafkaclone.connect.plugins`` (see :mod:`kafkaclone.connect.plugins`). The worker calls,
as Kafka's does:

- ``Connector``: ``version()``, ``initialize(context)``, ``start(props)``,
  ``task_class()``, ``task_configs(max_tasks)``, ``config()`` (a ConfigDef),
  ``validate(props)``, ``stop()``;
- ``SourceTask``: ``initialize(context)``, ``start(props)``, then ``poll()`` in a loop on
  the task's own thread, ``commit_record(record, metadata)`` once a record is acknowledged,
  ``commit()`` after the worker has flushed the offsets, ``stop()`` (from another thread,
  as in Kafka: it only asks ``poll`` to return);
- ``SinkTask``: ``initialize(context)``, ``start(props)``, ``open(partitions)``,
  ``put(records)`` for each batch, ``pre_commit(offsets)`` (default: ``flush`` then the same
  offsets) before the worker commits the consumer group, ``close(partitions)``, ``stop()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from kafkaclone.clients import RecordMetadata, TopicPartition
from kafkaclone.common.config_def import ConfigDef, ConfigError
from kafkaclone.connect.data import ConnectValue, Schema

if TYPE_CHECKING:
    from typing import Self

SourcePartition = Mapping[str, object]
"""Where a source record came from (Kafka's ``sourcePartition``: a file name, a table)."""
SourceOffset = Mapping[str, object]
"""How far in that partition (Kafka's ``sourceOffset``: a position, a row id)."""


class ConnectException(Exception):
    """Kafka's ``ConnectException``: a connector or task failed."""


class RetriableException(ConnectException):
    """Kafka's ``RetriableException``: the call may succeed if tried again."""


class DataException(ConnectException):
    """Kafka's ``DataException``: a record could not be converted or transformed."""


@dataclass(frozen=True)
class Header:
    key: str
    schema: Schema | None
    value: ConnectValue


@dataclass(slots=True)
class ConnectRecord:
    """Kafka's ``ConnectRecord``: what converters and transforms see. Treat it as
    immutable, as Kafka's (a transform returns ``new_record``); not frozen, because a
    frozen dataclass costs a third of a FileStreamSource poll."""

    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: ConnectValue
    value_schema: Schema | None
    value: ConnectValue
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()

    def new_record(self, topic: str, kafka_partition: int | None, key_schema: Schema | None,
                   key: ConnectValue, value_schema: Schema | None, value: ConnectValue,
                   timestamp: int | None) -> Self:
        """Kafka's ``newRecord``: this record with other contents, of the same kind."""
        return replace(self, topic=topic, kafka_partition=kafka_partition,
                       key_schema=key_schema, key=key, value_schema=value_schema,
                       value=value, timestamp=timestamp)


@dataclass(slots=True)
class SourceRecord(ConnectRecord):
    """Kafka's ``SourceRecord``: a record read from outside, with where it was read."""

    source_partition: SourcePartition = field(default_factory=dict)
    source_offset: SourceOffset = field(default_factory=dict)


@dataclass(slots=True)
class SinkRecord(ConnectRecord):
    """Kafka's ``SinkRecord``: a consumed record, with its offset in the topic."""

    kafka_offset: int = -1
    timestamp_type: int = 0


class ConnectorContext(Protocol):
    """Kafka's ``ConnectorContext``."""

    def request_task_reconfiguration(self) -> None:
        """Ask the worker to call ``task_configs`` again (the source changed shape)."""

    def raise_error(self, error: Exception) -> None:
        """Fail the connector from a background thread of its own."""


class OffsetStorageReader(Protocol):
    """Kafka's ``OffsetStorageReader``: the last committed offset of a source partition."""

    def offset(self, partition: SourcePartition) -> SourceOffset | None: ...

    def offsets(self, partitions: Sequence[SourcePartition]
                ) -> dict[tuple[tuple[str, object], ...], SourceOffset]: ...


class SourceTaskContext(Protocol):
    """Kafka's ``SourceTaskContext``."""

    @property
    def configs(self) -> Mapping[str, str]: ...

    def offset_storage_reader(self) -> OffsetStorageReader: ...


class SinkTaskContext(Protocol):
    """Kafka's ``SinkTaskContext``."""

    @property
    def configs(self) -> Mapping[str, str]: ...

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Reset the consumer to these offsets (the sink keeps its own offsets)."""

    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableException from ``put``: wait this long before retrying."""

    def assignment(self) -> set[TopicPartition]: ...

    def pause(self, partitions: Sequence[TopicPartition]) -> None: ...

    def resume(self, partitions: Sequence[TopicPartition]) -> None: ...

    def request_commit(self) -> None: ...


class Task(ABC):
    """Kafka's ``Task``."""

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class SourceTask(Task):
    """Kafka's ``SourceTask``."""

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """New records, or None (nothing now: the worker calls again). May block briefly;
        must return soon after ``stop``."""

    def commit(self) -> None:
        """The offsets of the records polled so far are committed."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """``record`` was written to Kafka (``metadata``), or dropped by a transform
        (None)."""


class SinkTask(Task):
    """Kafka's ``SinkTask``."""

    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def open(self, partitions: Sequence[TopicPartition]) -> None:
        """The task now owns these partitions."""

    @abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None: ...

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]
                   ) -> Mapping[TopicPartition, int]:
        """The offsets safe to commit (Kafka's default: flush, then all of them)."""
        self.flush(current_offsets)
        return current_offsets

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        """The task no longer owns these partitions."""


@dataclass
class ConfigValue:
    """Kafka's ``ConfigValue``: one key's answer in a validation."""

    name: str
    value: object = None
    recommended_values: list[object] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True


@dataclass
class Config:
    """Kafka's ``Config``: the answer of ``Connector.validate``."""

    config_values: list[ConfigValue]


def validate_with(definition: ConfigDef, props: Mapping[str, str],
                  required: Sequence[str] = ()) -> Config:
    """Kafka's ``ConfigDef.validate``: each declared key parsed, with its errors.
    ``required``: keys without a default (Kafka's ``NO_DEFAULT_VALUE``)."""
    values: list[ConfigValue] = []
    for key in definition:
        raw = props.get(key.name)
        answer = ConfigValue(key.name, raw)
        if raw is None and key.name in required:
            answer.errors.append(f"Missing required configuration \"{key.name}\" which has "
                                 "no default value.")
        else:
            try:
                answer.value = key.parse(raw if raw is not None else key.default)
            except ConfigError as exc:
                answer.errors.append(str(exc))
        values.append(answer)
    return Config(values)


class Connector(ABC):
    """Kafka's ``Connector``."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    @abstractmethod
    def version(self) -> str: ...

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    @abstractmethod
    def stop(self) -> None: ...

    @abstractmethod
    def config(self) -> ConfigDef: ...

    def required_configs(self) -> Sequence[str]:
        """The keys of ``config()`` without a default (Kafka's ``NO_DEFAULT_VALUE``)."""
        return ()

    def validate(self, props: Mapping[str, str]) -> Config:
        return validate_with(self.config(), props, self.required_configs())


class SourceConnector(Connector):
    """Kafka's ``SourceConnector``."""

    @abstractmethod
    def task_class(self) -> type[SourceTask]: ...


class SinkConnector(Connector):
    """Kafka's ``SinkConnector``."""

    TOPICS_CONFIG = "topics"

    @abstractmethod
    def task_class(self) -> type[SinkTask]: ...
