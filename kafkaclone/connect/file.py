"""Kafka's FileStream connectors (``org.apache.kafka.connect.file``).

FileStreamSource tails ``file`` (stdin when not set) and sends each complete line to
``topic`` as a string, ``batch.size`` lines at most per poll; its offset is the byte
position after the last line sent, under the source partition ``{"filename": file}``, as
Kafka's. FileStreamSink appends each record's value, as text, as one line of ``file``
(stdout when not set) and flushes it before the worker commits the offsets.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Final

from kafkaclone.clients import TopicPartition
from kafkaclone.common.config_def import ConfigDef, ConfigKey, ConfigType, Importance, at_least
from kafkaclone.connect.api import (
    ConnectException,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kafkaclone.connect.data import STRING_SCHEMA

logger = logging.getLogger(__name__)

VERSION: Final = "2.8.0"
FILENAME_FIELD: Final = "filename"
POSITION_FIELD: Final = "position"
POLL_WAIT_S: Final = 0.2
"""How long ``poll`` waits for the file to grow before answering None (Kafka: 1 s)."""

SOURCE_CONFIG: Final = ConfigDef([
    ConfigKey("file", ConfigType.STRING, None, Importance.HIGH,
              "Source filename. If not specified, the standard input will be used"),
    ConfigKey("topic", ConfigType.LIST, (), Importance.HIGH,
              "The topic to publish data to"),
    ConfigKey("batch.size", ConfigType.INT, 2000, Importance.LOW,
              "The maximum number of records the Source task can read from file one time",
              at_least(1)),
])

SINK_CONFIG: Final = ConfigDef([
    ConfigKey("file", ConfigType.STRING, None, Importance.HIGH,
              "Destination filename. If not specified, the standard output will be used"),
])


class FileStreamSourceConnector(SourceConnector):
    """Kafka's ``FileStreamSourceConnector``: one task."""

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG

    def required_configs(self) -> Sequence[str]:
        return ("topic",)

    def start(self, props: Mapping[str, str]) -> None:
        values, _ = SOURCE_CONFIG.parse(props)
        topics = values["topic"]
        if not isinstance(topics, tuple) or len(topics) != 1:
            raise ConnectException("'topic' in FileStreamSourceConnector configuration "
                                   "requires definition of a single topic")
        self.props = {"topic": topics[0], "batch.size": str(values["batch.size"])}
        if values["file"] is not None:
            self.props["file"] = str(values["file"])

    def task_class(self) -> type[SourceTask]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class FileStreamSourceTask(SourceTask):
    """Kafka's ``FileStreamSourceTask``."""

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get("file") or None
        self.topic = props["topic"]
        self.batch_size = int(props.get("batch.size", "2000"))
        self.stream: IO[bytes] | None = None
        self.position = 0
        self.stopping = threading.Event()

    def _open(self) -> IO[bytes] | None:
        if self.filename is None:
            return sys.stdin.buffer
        try:
            stream = open(self.filename, "rb")
        except FileNotFoundError:
            logger.warning("Couldn't find file %s for FileStreamSourceTask, sleeping to wait "
                           "for it to be created", self.filename)
            return None
        offset = self.context.offset_storage_reader().offset({FILENAME_FIELD: self.filename})
        if offset is not None:
            position = offset.get(POSITION_FIELD)
            if not isinstance(position, int):
                stream.close()
                raise ConnectException("Offset position is the incorrect type")
            logger.debug("Found previous offset, trying to skip to file offset %d", position)
            stream.seek(position)
            self.position = position
        return stream

    def poll(self) -> list[SourceRecord] | None:
        if self.stream is None:
            self.stream = self._open()
            if self.stream is None:
                self.stopping.wait(POLL_WAIT_S)
                return None
        records: list[SourceRecord] = []
        stream = self.stream
        now = int(time.time() * 1000)
        source_partition = {FILENAME_FIELD: self.filename or "stdin"}
        while len(records) < self.batch_size:
            line = stream.readline()
            if not line.endswith(b"\n"):
                if line:
                    stream.seek(self.position)  # a partial line: read it when complete
                break
            self.position += len(line)
            records.append(SourceRecord(
                topic=self.topic, kafka_partition=None, key_schema=None, key=None,
                value_schema=STRING_SCHEMA, value=line[:-1].decode("utf-8").rstrip("\r"),
                timestamp=now, source_partition=source_partition,
                source_offset={POSITION_FIELD: self.position}))
        if not records:
            self.stopping.wait(POLL_WAIT_S)
            return None
        return records

    def stop(self) -> None:
        self.stopping.set()
        if self.stream is not None and self.filename is not None:
            self.stream.close()


class FileStreamSinkConnector(SinkConnector):
    """Kafka's ``FileStreamSinkConnector``: one task."""

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return SINK_CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get("file")

    def task_class(self) -> type[SinkTask]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{} if self.filename is None else {"file": self.filename}]

    def stop(self) -> None:
        pass


class FileStreamSinkTask(SinkTask):
    """Kafka's ``FileStreamSinkTask``."""

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get("file")
        self.stream: IO[str] = sys.stdout if self.filename is None else \
            open(self.filename, "a", encoding="utf-8")

    def put(self, records: Sequence[SinkRecord]) -> None:
        write = self.stream.write
        for record in records:
            value = record.value
            write(("null" if value is None else
                   value.decode("utf-8") if isinstance(value, bytes) else str(value)) + "\n")

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        self.stream.flush()

    def stop(self) -> None:
        if self.filename is not None:
            self.stream.close()
