"""Moves between the log directories of a broker (AlterReplicaLogDirs) across a restart: the
``-future`` log is loaded at start-up, DescribeLogDirs shows it as future, its move resumes
once the partition's LeaderAndIsr arrives (Kafka's maybeAddLogDirFetchers), drops what the
current log no longer has (truncation by leader epoch), and is throttled by
``replica.alter.log.dirs.io.max.bytes.per.second``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet import reactor
from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import records_bytes
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server import replica_manager as replica_manager_module
from kafkaclone.server.replica_manager import ReplicaManager, future_truncation_offset
from tests.log.conftest import make_batch, values_of
from tests.server.test_log_dir_failure import (
    ALTER_REPLICA_LOG_DIRS,
    NONE,
    Broker,
    LogDirEvents,
    call,
    lead_three_partitions,
    produce,
)
from tests.server.test_replica_manager import errors_of, leader_and_isr

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("demo", 0)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def brokers(dirs: list[Path]) -> Iterator[list[Broker]]:
    """Starts brokers on ``dirs`` (one after the other: a restart); shuts them down."""
    started: list[Broker] = []
    yield started
    for broker in started:
        broker.replica_manager.log_manager.shutdown()


def start_broker(brokers: list[Broker], dirs: list[Path]) -> Broker:
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": ",".join(map(str, dirs)),
                                                      "broker.id": "1"}), clock=Clock())
    manager.startup()
    replica_manager = ReplicaManager(1, manager, None, clock=reactor,
                                     log_dir_event_zk_client=LogDirEvents())
    manager.log_dir_failure_channel.set_listener(replica_manager.handle_log_dir_failure)
    broker = Broker(replica_manager, LogDirEvents())
    brokers.append(broker)
    return broker


def alter(broker: Broker, tp: TopicPartition, destination: Path) -> None:
    s = ALTER_REPLICA_LOG_DIRS.structs
    response = call(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, 1, ALTER_REPLICA_LOG_DIRS(dirs=[
        s["AlterReplicaLogDir"](path=str(destination), topics=[
            s["AlterReplicaLogDirTopic"](name=tp.topic, partitions=[tp.partition])])]))
    assert [p.error_code for r in response.results for p in r.partitions] == [NONE]


def described(broker: Broker) -> dict[str, list[tuple[TopicPartition, bool, int]]]:
    return {d.path: [(r.topic_partition, r.is_future, r.offset_lag) for r in d.replicas]
            for d in broker.replica_manager.describe_log_dirs({TP})}


def all_values(log: Log) -> list[bytes | None]:
    values: list[tuple[int, bytes | None]] = []
    for _ in range(log.log_end_offset + 1):  # bounded: each read returns a batch or more
        if len(values) >= log.log_end_offset:
            break
        values += values_of(log.read(len(values), 1 << 20).records)
    return [value for _, value in values]


def test_a_move_cut_short_by_a_restart_resumes_after_leader_and_isr(
        brokers: list[Broker], dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager_module, "LOG_DIR_MOVE_BYTES", 300)
    broker = start_broker(brokers, dirs)
    lead_three_partitions(broker, dirs)
    for _ in range(30):
        assert produce(broker, [0]) == {0: NONE}
    log = broker.replica_manager.log_manager.get_log(TP)
    assert log is not None
    written = all_values(log)
    assert len(written) == 30
    log.update_high_watermark(30)
    alter(broker, TP, dirs[1])
    broker.replica_manager.move_future_logs()
    broker.replica_manager.move_future_logs()
    copied = broker.replica_manager.log_manager.future_logs[TP].log_end_offset
    assert 0 < copied < 30
    broker.replica_manager.log_manager.shutdown()
    brokers.remove(broker)

    again = start_broker(brokers, dirs)
    manager = again.replica_manager.log_manager
    future = manager.future_logs[TP]
    assert future.dir.parent == dirs[1] and future.log_end_offset == copied
    # Shown as future (isFuture) with its lag behind the current log, before and after.
    assert described(again)[str(dirs[1])] == [(TP, True, 30 - copied)]
    again.replica_manager.move_future_logs()  # not resumed before its LeaderAndIsr
    assert manager.future_logs[TP].log_end_offset == copied
    response = call(again, ApiKey.LEADER_AND_ISR, 5,
                    leader_and_isr(leader_epoch=1, leaders=(1, 1, 1)))
    assert set(errors_of(response, 5).values()) == {NONE}
    for _ in range(200):  # bounded: 300 bytes a step
        if not manager.future_logs:
            break
        again.replica_manager.move_future_logs()
    moved = manager.get_log(TP)
    assert moved is future and moved.dir == dirs[1] / "demo-0"
    assert again.replica_manager.get_partition(TP).log is moved  # type: ignore[union-attr]
    assert all_values(moved) == written
    assert produce(again, [0]) == {0: NONE}
    assert moved.log_end_offset == 31
    assert described(again) == {str(dirs[0]): [], str(dirs[1]): [(TP, False, 0)]}


def test_a_future_log_drops_what_the_current_log_no_longer_has(tmp_path: Path) -> None:
    config = LogConfig.from_props({})
    clock = Clock()
    current = Log(tmp_path / "demo-0", config, clock=clock)
    future = Log(tmp_path / "other" / "demo-0", config, clock=clock)
    try:
        for value in (b"a", b"b", b"c"):
            current.append(make_batch([value]), leader_epoch=0)
        for value in (b"d", b"e"):
            current.append(make_batch([value]), leader_epoch=2)
        future.append_as_follower(records_bytes(current.read(0, 1 << 20).records))
        assert future.log_end_offset == 5
        # The current log (a follower now) truncates to 4 and takes a new leader's record.
        current.truncate_to(4)
        current.append(make_batch([b"x"]), leader_epoch=3)
        assert future_truncation_offset(future, current) == 4
        future.truncate_to(4)
        # Agreeing logs are left alone.
        assert future_truncation_offset(future, current) == 4
        future.append_as_follower(records_bytes(current.read(4, 1 << 20).records))
        assert [v for _, v in values_of(future.read(0, 1 << 20).records)] == [
            b"a", b"b", b"c", b"d", b"x"]
    finally:
        current.close()
        future.close()


def test_moves_are_throttled_by_replica_alter_log_dirs_io_max_bytes_per_second(
        brokers: list[Broker], dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_manager_module, "LOG_DIR_MOVE_BYTES", 100)
    broker = start_broker(brokers, dirs)
    rm = broker.replica_manager
    lead_three_partitions(broker, dirs)
    for _ in range(30):
        assert produce(broker, [0]) == {0: NONE}
    rm.alter_log_dirs_quota.update_quota(100.0)  # 100 B/s: a step or two, then held
    alter(broker, TP, dirs[1])
    future = rm.log_manager.future_logs[TP]
    for _ in range(30):
        rm.move_future_logs()
    held = future.log_end_offset
    assert 0 < held < 30 and TP in rm.log_manager.future_logs
    assert rm.alter_log_dirs_quota.is_quota_exceeded()
    rm.move_future_logs()
    assert future.log_end_offset == held  # over quota: nothing copied
    rm.alter_log_dirs_quota.update_quota(None)
    for _ in range(100):
        if not rm.log_manager.future_logs:
            break
        rm.move_future_logs()
    assert rm.log_manager.get_log(TP) is future and future.log_end_offset == 30
