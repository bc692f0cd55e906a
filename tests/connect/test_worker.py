"""WorkerSinkTask's error handling without a broker: errors.tolerance, the dead letter
queue, converter and transform configuration from the connector's keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from kafkaclone.clients import ConsumerRecord
from kafkaclone.connect.api import SinkRecord, SinkTask
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.worker import WorkerSettings, WorkerSinkTask

pytestmark = pytest.mark.timeout(10)

SETTINGS = WorkerSettings(worker_id="w", bootstrap_servers="127.0.0.1:1",
                          offset_flush_interval_s=1, offset_flush_timeout_s=1,
                          key_converter="org.apache.kafka.connect.storage.StringConverter",
                          value_converter="org.apache.kafka.connect.json.JsonConverter",
                          worker_props={"value.converter.schemas.enable": "false"})


class CollectingTask(SinkTask):
    def __init__(self) -> None:
        self.records: list[SinkRecord] = []

    def version(self) -> str:
        return "1"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def put(self, records: Sequence[SinkRecord]) -> None:
        self.records.extend(records)

    def stop(self) -> None:
        pass


class FakeDlq:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, list[tuple[str, bytes]] | None]] = []

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             headers: list[tuple[str, bytes]] | None = None) -> None:
        self.sent.append((topic, value, headers))


def consumed(offset: int, value: bytes) -> ConsumerRecord:
    return ConsumerRecord("in", 0, offset, 1000, 0, b"k", value, [])


def sink(props: dict[str, str]) -> tuple[WorkerSinkTask, CollectingTask]:
    task = CollectingTask()
    worker = WorkerSinkTask("c", 0, SETTINGS, task, {}, {"topics": "in", **props}, Plugins())
    return worker, task


def test_tolerance_all_skips_bad_records_to_the_dead_letter_queue() -> None:
    worker, task = sink({
        "errors.tolerance": "all", "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": "dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
        "transforms": "insert",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.offset.field": "at"})
    dlq = FakeDlq()
    worker.dlq = dlq  # type: ignore[assignment]
    worker._deliver([consumed(0, b'{"a":1}'), consumed(1, b"not json"), consumed(2, b'"s"')])
    assert [r.value for r in task.records] == [{"a": 1, "at": 0}]
    assert [(topic, value) for topic, value, _ in dlq.sent] == [("dlq", b"not json"),
                                                                ("dlq", b'"s"')]
    assert dlq.sent[0][2] == [("__connect.errors.topic", b"in"),
                              ("__connect.errors.partition", b"0"),
                              ("__connect.errors.offset", b"1")]
    assert worker.errors.skipped == 2
    assert {tp.topic: offset for tp, offset in worker.current.items()} == {"in": 3}


def test_tolerance_none_fails_on_the_first_bad_record() -> None:
    worker, task = sink({"value.converter": "org.apache.kafka.connect.json.JsonConverter"})
    with pytest.raises(Exception, match="requires \"schema\" and \"payload\""):
        worker._deliver([consumed(0, b'{"a":1}')])
    assert task.records == []
