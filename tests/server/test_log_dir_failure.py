"""The ReplicaManager's side of a failed log directory, through the handlers: replicas there
answer KAFKA_STORAGE_ERROR to produce, fetch, LeaderAndIsr and StopReplica, the controller
is told through /log_dir_event_notification, DescribeLogDirs shows the directory offline,
AlterReplicaLogDirs refuses it, and a broker whose last directory fails halts."""

from __future__ import annotations

import errno
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from kafkaclone.cluster.partition import FetchIsolation
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.log.segment import LogSegment
from kafkaclone.network.socket_server import KafkaServerFactory
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.delayed.fetch import FetchParams, PartitionFetchInfo
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.replica_manager import ReplicaManager
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.testing.reactor import run, run_until
from tests.log.conftest import make_batch, values_of
from tests.server.test_replica_manager import errors_of, leader_and_isr

pytestmark = pytest.mark.timeout(60)

NONE, REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND = 0, 9, 56, 57
DESCRIBE_LOG_DIRS = api.APIS[ApiKey.DESCRIBE_LOG_DIRS].request
ALTER_REPLICA_LOG_DIRS = api.APIS[ApiKey.ALTER_REPLICA_LOG_DIRS].request
STOP_REPLICA = api.APIS[ApiKey.STOP_REPLICA].request


class LogDirEvents:
    def __init__(self) -> None:
        self.brokers: list[int] = []

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        self.brokers.append(broker_id)
        return f"/log_dir_event_notification/log_dir_event_{len(self.brokers):010d}"


@dataclass
class Broker:
    replica_manager: ReplicaManager
    events: LogDirEvents
    halts: list[bool] = field(default_factory=list)
    broker_id: int = 1
    broker_epoch: int = 100
    metadata_cache: MetadataCache = field(default_factory=lambda: MetadataCache(1))
    authorizer: Any = None


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def broker(dirs: list[Path]) -> Iterator[Broker]:
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": ",".join(map(str, dirs)),
                                                      "broker.id": "1"}), clock=Clock())
    manager.startup()
    events = LogDirEvents()
    halts: list[bool] = []
    replica_manager = ReplicaManager(1, manager, None, clock=reactor,
                                     log_dir_event_zk_client=events,
                                     halt=lambda: halts.append(True))
    manager.log_dir_failure_channel.set_listener(replica_manager.handle_log_dir_failure)
    yield Broker(replica_manager, events, halts)
    manager.shutdown()


def call(broker: Broker, key: ApiKey, version: int, body: Any) -> Any:
    payload = api.encode_request(key, version, 7, "admin", body)
    conn = KafkaServerFactory(RequestHandler(broker=broker)).buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(struct.pack(">i", len(payload)) + payload)
    run_until(lambda: bool(transport.value()), timeout=10)
    return api.decode_response(key, version, transport.value()[4:])[1]


def lead_three_partitions(broker: Broker, dirs: list[Path]) -> dict[int, Path]:
    """demo-0..2 led here (replicas 1,2,3); each partition's directory."""
    response = call(broker, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leaders=(1, 1, 1)))
    assert set(errors_of(response, 5).values()) == {NONE}
    placed = {}
    for p in range(3):
        log = broker.replica_manager.log_manager.get_log(TopicPartition("demo", p))
        assert log is not None
        placed[p] = log.dir.parent
    assert placed == {0: dirs[0], 1: dirs[1], 2: dirs[0]}
    return placed


def fill_disk(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = LogSegment.append

    def append(self: LogSegment, *args: Any, **kwargs: Any) -> None:
        if directory in Path(self.log.path).parents:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "append", append)


def produce(broker: Broker, partitions: list[int]) -> dict[int, int]:
    results = run(broker.replica_manager.append_records(
        1000, 1, {TopicPartition("demo", p): make_batch([b"v"]) for p in partitions}))
    return {tp.partition: result.error_code for tp, result in results.items()}


def test_an_io_error_takes_the_directory_and_its_replicas_offline(
        broker: Broker, dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    lead_three_partitions(broker, dirs)
    assert produce(broker, [0, 1, 2]) == {0: NONE, 1: NONE, 2: NONE}
    fill_disk(dirs[0], monkeypatch)
    assert produce(broker, [0, 1]) == {0: KAFKA_STORAGE_ERROR, 1: NONE}
    rm = broker.replica_manager
    assert rm.offline_partitions == {TopicPartition("demo", 0), TopicPartition("demo", 2)}
    assert rm.log_manager.offline_log_dirs == [dirs[0]]
    assert broker.events.brokers == [1]  # /log_dir_event_notification, once
    assert broker.halts == []
    # Every request for an offline replica answers KAFKA_STORAGE_ERROR.
    assert produce(broker, [0, 1, 2]) == {0: KAFKA_STORAGE_ERROR, 1: NONE,
                                          2: KAFKA_STORAGE_ERROR}
    params = FetchParams(-1, 0, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    fetched = run(rm.fetch_messages(params, [(TopicPartition("demo", p),
                                              PartitionFetchInfo(0, -1, 1 << 20))
                                             for p in (0, 1)]))
    assert [result.error_code for _, result in fetched] == [KAFKA_STORAGE_ERROR, NONE]
    again = call(broker, ApiKey.LEADER_AND_ISR, 5,
                 leader_and_isr(leader_epoch=1, leaders=(1, 1, 1)))
    assert errors_of(again, 5) == {("demo", 0): KAFKA_STORAGE_ERROR, ("demo", 1): NONE,
                                   ("demo", 2): KAFKA_STORAGE_ERROR}
    s = STOP_REPLICA.structs
    stopped = call(broker, ApiKey.STOP_REPLICA, 3, STOP_REPLICA(
        controller_id=2, controller_epoch=1, broker_epoch=100, delete_partitions=False,
        ungrouped_partitions=[], topics=[], topic_states=[s["StopReplicaTopicState"](
            topic_name="demo", partition_states=[s["StopReplicaPartitionState"](
                partition_index=0, leader_epoch=2, delete_partition=False)])]))
    assert [(e.partition_index, e.error_code) for e in stopped.partition_errors] == [
        (0, KAFKA_STORAGE_ERROR)]


def test_new_partitions_go_to_the_live_directory_only(
        broker: Broker, dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    lead_three_partitions(broker, dirs)
    fill_disk(dirs[0], monkeypatch)
    produce(broker, [0])
    response = call(broker, ApiKey.LEADER_AND_ISR, 5,
                    leader_and_isr(leaders=(1, 1, 1, 1), topic="later"))
    assert set(errors_of(response, 5).values()) == {NONE}
    manager = broker.replica_manager.log_manager
    placed = {p: manager.get_log(TopicPartition("later", p)) for p in range(4)}
    assert all(log is not None and log.dir.parent == dirs[1] for log in placed.values())


@pytest.mark.parametrize("version", range(3))
def test_describe_log_dirs_shows_the_offline_directory(
        broker: Broker, dirs: list[Path], monkeypatch: pytest.MonkeyPatch,
        version: int) -> None:
    lead_three_partitions(broker, dirs)
    produce(broker, [1])
    fill_disk(dirs[0], monkeypatch)
    produce(broker, [0])
    response = call(broker, ApiKey.DESCRIBE_LOG_DIRS, version, DESCRIBE_LOG_DIRS(topics=None))
    by_dir = {r.log_dir: r for r in response.results}
    assert set(by_dir) == {str(dirs[0]), str(dirs[1])}
    assert by_dir[str(dirs[0])].error_code == KAFKA_STORAGE_ERROR
    assert by_dir[str(dirs[0])].topics == []
    live = by_dir[str(dirs[1])]
    assert live.error_code == NONE
    [topic] = live.topics
    [partition] = topic.partitions
    log = broker.replica_manager.log_manager.get_log(TopicPartition("demo", 1))
    assert log is not None and log.size > 0
    assert (topic.name, partition.partition_index, partition.partition_size,
            partition.is_future_key) == ("demo", 1, log.size, False)
    assert partition.offset_lag == 0
    s = DESCRIBE_LOG_DIRS.structs
    only = call(broker, ApiKey.DESCRIBE_LOG_DIRS, version, DESCRIBE_LOG_DIRS(topics=[
        s["DescribableLogDirTopic"](topic="other", partitions=[0])]))
    assert [(r.log_dir, r.topics) for r in only.results if r.error_code == NONE] == [
        (str(dirs[1]), [])]


def test_alter_replica_log_dirs_answers_as_kafka(
        broker: Broker, dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    placed = lead_three_partitions(broker, dirs)

    def alter(version: int, moves: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
        s = ALTER_REPLICA_LOG_DIRS.structs
        by_dir: dict[str, dict[str, list[int]]] = {}
        for (topic, partition), path in moves.items():
            by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
        response = call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, version, ALTER_REPLICA_LOG_DIRS(
            dirs=[s["AlterReplicaLogDir"](path=path, topics=[
                s["AlterReplicaLogDirTopic"](name=t, partitions=ps) for t, ps in topics.items()])
                for path, topics in by_dir.items()]))
        return {(r.topic_name, p.partition_index): p.error_code
                for r in response.results for p in r.partitions}

    assert alter(0, {("demo", 0): str(placed[0]), ("demo", 1): "/nowhere",
                     ("new", 0): str(dirs[1])}) == {
        ("demo", 0): NONE, ("demo", 1): LOG_DIR_NOT_FOUND, ("new", 0): REPLICA_NOT_AVAILABLE}
    # The replica not hosted yet is created where it was asked to go.
    call(broker, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leaders=(1,), topic="new"))
    log = broker.replica_manager.log_manager.get_log(TopicPartition("new", 0))
    assert log is not None and log.dir.parent == dirs[1]
    fill_disk(dirs[0], monkeypatch)
    produce(broker, [0])
    # An offline destination, an offline replica; and no move at all while a directory is
    # offline (Kafka creates no future log then).
    assert alter(1, {("demo", 1): str(dirs[0]), ("demo", 0): str(dirs[1])}) == {
        ("demo", 1): KAFKA_STORAGE_ERROR, ("demo", 0): KAFKA_STORAGE_ERROR}


def test_a_replica_moves_to_another_directory_through_a_future_log(
        broker: Broker, dirs: list[Path]) -> None:
    rm = broker.replica_manager
    manager = rm.log_manager
    lead_three_partitions(broker, dirs)
    tp = TopicPartition("demo", 0)
    for _ in range(30):
        assert produce(broker, [0]) == {0: NONE}
    rm.get_partition(tp).log.update_high_watermark(30)  # type: ignore[union-attr]
    old = manager.get_log(tp)
    assert old is not None and old.dir.parent == dirs[0]
    s = ALTER_REPLICA_LOG_DIRS.structs
    response = call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, 1, ALTER_REPLICA_LOG_DIRS(dirs=[
        s["AlterReplicaLogDir"](path=str(dirs[1]), topics=[
            s["AlterReplicaLogDirTopic"](name="demo", partitions=[0])])]))
    assert [(p.partition_index, p.error_code) for r in response.results
            for p in r.partitions] == [(0, NONE)]
    future = manager.future_logs[tp]
    assert future.dir.parent == dirs[1] and future.dir.name.endswith("-future")
    described = {d.path: d for d in rm.describe_log_dirs({tp})}
    assert [(r.topic_partition, r.is_future, r.offset_lag)
            for r in described[str(dirs[1])].replicas] == [(tp, True, 30)]
    for _ in range(100):  # bounded: 30 small records move in one step
        if not manager.future_logs:
            break
        rm.move_future_logs()
    moved = manager.get_log(tp)
    assert moved is future and moved.dir == dirs[1] / "demo-0"
    assert rm.get_partition(tp).log is moved  # type: ignore[union-attr]
    assert moved.log_end_offset == 30 and moved.high_watermark == 30
    assert old.closed and old.dir.name.endswith("-delete")
    assert not (dirs[0] / "demo-0").exists()
    assert produce(broker, [0]) == {0: NONE}
    assert moved.log_end_offset == 31
    assert len(values_of(moved.read(0, 1 << 20).records)) == 31
    described = {d.path: d for d in rm.describe_log_dirs({tp})}
    assert [(r.topic_partition, r.is_future) for r in described[str(dirs[1])].replicas] == [
        (tp, False)]
    assert described[str(dirs[0])].replicas == []


def test_the_broker_halts_when_its_last_directory_fails(
        broker: Broker, dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    lead_three_partitions(broker, dirs)
    fill_disk(dirs[0], monkeypatch)
    produce(broker, [0])
    assert broker.halts == []
    monkeypatch.undo()
    fill_disk(dirs[1], monkeypatch)
    produce(broker, [1])
    assert broker.halts == [True]
