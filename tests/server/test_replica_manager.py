"""ReplicaManager through the dispatcher: LeaderAndIsr, StopReplica, ControlledShutdown
requests encoded as the controller sends them, answered by the handlers.

Topic config overrides come from ZooKeeper (/config/topics/<t>) in the test's chroot.
"""

from __future__ import annotations

import gc
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from kafkaclone.common.errors import NotControllerError, StaleBrokerEpochError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogIoThreads, LogManager, _NewLog
from kafkaclone.network.socket_server import KafkaServerFactory
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server import heap
from kafkaclone.server import replica_manager as replica_manager_module
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.replica_manager import (
    EPOCH_DURING_DELETE,
    STATE_CHANGE_SLICE,
    ReplicaManager,
    StopReplicaState,
)
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.zk.client import KafkaZkClient

LEADER_AND_ISR = api.APIS[ApiKey.LEADER_AND_ISR].request
STOP_REPLICA = api.APIS[ApiKey.STOP_REPLICA].request
CONTROLLED_SHUTDOWN = api.APIS[ApiKey.CONTROLLED_SHUTDOWN].request
TOPIC_ID = uuid.UUID("0b9f8f49-a1c2-4d36-9b0b-0e3f4a5b6c7d")

NONE, UNKNOWN_TOPIC_OR_PARTITION, STALE_CONTROLLER_EPOCH = 0, 3, 11
NOT_CONTROLLER, FENCED_LEADER_EPOCH, STALE_BROKER_EPOCH = 41, 74, 77


class Controller:
    def __init__(self, active: bool) -> None:
        self.is_active = active
        self.epoch = 3
        self.calls: list[tuple[int, int]] = []

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        if not self.is_active:
            raise NotControllerError("moved")
        if broker_epoch != -1 and broker_epoch < 10:  # -1: v0-1 carry no epoch
            raise StaleBrokerEpochError("old")
        self.calls.append((broker_id, broker_epoch))
        return {TopicPartition("demo", 1)}


@dataclass
class Broker:
    replica_manager: ReplicaManager
    controller: Controller
    broker_id: int = 1
    broker_epoch: int = 100
    metadata_cache: MetadataCache = field(default_factory=lambda: MetadataCache(1))
    authorizer: Any = None


@pytest.fixture
def log_manager(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": str(tmp_path / "logs"),
                                                      "broker.id": "1"}), clock=Clock())
    manager.startup()
    yield manager
    manager.shutdown()


@pytest.fixture
def broker(log_manager: LogManager, zk_client: KafkaZkClient) -> Broker:
    return Broker(ReplicaManager(1, log_manager, zk_client, clock=reactor),
                  Controller(active=True))


@pytest.fixture
def dispatcher(broker: Broker) -> RequestHandler:
    return RequestHandler(broker=broker)


def call(dispatcher: RequestHandler, key: ApiKey, version: int, body: Any) -> Any:
    payload = api.encode_request(key, version, 7, "controller", body)
    conn = KafkaServerFactory(dispatcher).buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(struct.pack(">i", len(payload)) + payload)
    run_until(lambda: bool(transport.value()), timeout=10)  # topic configs come from ZooKeeper
    data = transport.value()
    return api.decode_response(key, version, data[4:])[1]


def leader_and_isr(version: int = 5, *, controller_epoch: int = 1, leader_epoch: int = 0,
                   leaders: tuple[int, ...] = (1, 2, 1), replicas: tuple[int, ...] = (1, 2, 3),
                   broker_epoch: int = 100, topic: str = "demo") -> Any:
    s = LEADER_AND_ISR.structs
    states = [
        s["LeaderAndIsrPartitionState"](
            topic_name=topic, partition_index=p, controller_epoch=controller_epoch,
            leader=leader, leader_epoch=leader_epoch, isr=list(replicas), zk_version=4,
            replicas=list(replicas), is_new=True)
        for p, leader in enumerate(leaders)
    ]
    return LEADER_AND_ISR(
        controller_id=2, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
        ungrouped_partition_states=states,
        topic_states=[s["LeaderAndIsrTopicState"](topic_name=topic, topic_id=TOPIC_ID,
                                                  partition_states=states)],
        live_leaders=[s["LeaderAndIsrLiveLeader"](broker_id=b, host_name="127.0.0.1",
                                                  port=9091 + b) for b in (1, 2)])


def errors_of(response: Any, version: int) -> dict[tuple[str, int], int]:
    if version < 5:
        return {(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
    assert [t.topic_id for t in response.topics] == [TOPIC_ID]
    return {("demo", e.partition_index): e.error_code
            for t in response.topics for e in t.partition_errors}


@pytest.mark.parametrize("version", range(6))
def test_leader_and_isr_makes_leaders_and_followers_with_logs(
        broker: Broker, dispatcher: RequestHandler, log_manager: LogManager,
        zk_client: KafkaZkClient, version: int) -> None:
    run(zk_client.set_or_create_entity_configs("topics", "demo", {"retention.ms": "1234"}))
    response = call(dispatcher, ApiKey.LEADER_AND_ISR, version, leader_and_isr(version))
    assert response.error_code == NONE
    assert errors_of(response, version) == {("demo", 0): 0, ("demo", 1): 0, ("demo", 2): 0}
    rm = broker.replica_manager
    assert rm.controller_epoch == 1
    leaders = sorted(p.partition_id for p in rm.leader_partitions())
    assert leaders == [0, 2]
    follower = rm.get_partition(TopicPartition("demo", 1))
    assert follower is not None and follower.leader_id == 2 and follower.isr == (1, 2, 3)
    assert follower.zk_version == 4 and follower.replicas == (1, 2, 3)
    for p in range(3):
        log = log_manager.get_log(TopicPartition("demo", p))
        assert log is not None and log.config.retention_ms == 1234
    leader_log = log_manager.get_log(TopicPartition("demo", 0))
    assert leader_log is not None
    assert [(e.epoch, e.start_offset) for e in leader_log.leader_epoch_cache.epoch_entries] == [
        (0, 0)]
    assert (leader_log.dir / "leader-epoch-checkpoint").read_text().splitlines()[-1] == "0 0"


def test_many_new_partitions_are_applied_in_slices_between_reactor_turns(
        broker: Broker, dispatcher: RequestHandler, log_manager: LogManager) -> None:
    count = 3 * STATE_CHANGE_SLICE
    seen: list[int] = []

    def probe() -> None:  # runs once per reactor turn while the request is applied
        seen.append(len(log_manager.all_logs()))
        if seen[-1] < count:
            reactor.callLater(0, probe)

    reactor.callLater(0, probe)
    response = call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leaders=(1,) * count))
    assert set(errors_of(response, 5).values()) == {NONE}
    assert len(broker.replica_manager.leader_partitions()) == count
    assert any(0 < n < count for n in seen)  # the reactor ran between slices


@pytest.mark.parametrize("turn_s, takes_turns", [(0.0, True), (60.0, False)])
def test_partitions_with_logs_take_a_reactor_turn_per_stretch_of_work(
        broker: Broker, dispatcher: RequestHandler, log_manager: LogManager,
        turn_s: float, takes_turns: bool) -> None:
    """Partitions whose logs exist cost microseconds each: the reactor takes a turn once
    STATE_CHANGE_TURN_S has gone on slices, not after every slice."""
    count = 3 * STATE_CHANGE_SLICE
    first = call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leaders=(1,) * count))
    assert set(errors_of(first, 5).values()) == {NONE}
    partitions = broker.replica_manager.leader_partitions()
    seen: list[int] = []

    def probe() -> None:  # once per reactor turn while the request is applied
        seen.append(sum(1 for p in partitions if p.leader_epoch == 1))
        if seen[-1] < count:
            reactor.callLater(0, probe)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replica_manager_module, "STATE_CHANGE_TURN_S", turn_s)
        reactor.callLater(0, probe)
        response = call(dispatcher, ApiKey.LEADER_AND_ISR, 5,
                        leader_and_isr(leaders=(1,) * count, leader_epoch=1))
    assert set(errors_of(response, 5).values()) == {NONE}
    assert all(p.leader_epoch == 1 for p in partitions)
    assert any(0 < n < count for n in seen) is takes_turns


@pytest.mark.timeout(60)
def test_new_logs_and_leader_epochs_are_written_on_the_io_threads(
        tmp_path: Path, zk_client: KafkaZkClient) -> None:
    """With the broker's I/O threads: logs opened off the reactor thread, every new
    leader's epoch checkpoint on disk by the time the LeaderAndIsr is answered."""
    io_threads = LogIoThreads(4, reactor.callFromThread, "test-io")
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": str(tmp_path / "logs"),
                                                      "broker.id": "1"}), clock=reactor,
                         io_threads=io_threads)
    manager.startup()
    try:
        opened_on: set[str] = set()
        original = _NewLog.open

        def open_and_note(new_log: _NewLog) -> None:
            opened_on.add(threading.current_thread().name)
            original(new_log)

        count = 2 * STATE_CHANGE_SLICE + 7
        broker = Broker(ReplicaManager(1, manager, zk_client, clock=reactor),
                        Controller(active=True))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_NewLog, "open", open_and_note)
            response = call(RequestHandler(broker=broker), ApiKey.LEADER_AND_ISR, 5,
                            leader_and_isr(leaders=(1, 2) * (count // 2) + (1,)))
        assert set(errors_of(response, 5).values()) == {NONE}
        assert opened_on and all(name.startswith("test-io") for name in opened_on)
        assert len(manager.all_logs()) == count
        leaders = broker.replica_manager.leader_partitions()
        assert len(leaders) == count // 2 + 1
        # The answer does not wait for the epochs' writes; they follow on the I/O threads.
        run_until(lambda: not any(p.log is None or p.log.leader_epoch_cache_unflushed
                                  for p in leaders), timeout=30)
        for partition in leaders:
            assert partition.log is not None
            checkpoint = partition.log.dir / "leader-epoch-checkpoint"
            assert checkpoint.read_text() == "0\n1\n0 0\n"
    finally:
        io_threads.shutdown()
        manager.shutdown()


@pytest.mark.timeout(60)
def test_new_leader_epochs_are_written_while_the_reactor_serves(
        tmp_path: Path, zk_client: KafkaZkClient) -> None:
    """The new leaders' epoch checkpoints are written on the I/O threads while the reactor
    goes on (a write waits here until the reactor has taken a turn): the partitions lead
    and the LeaderAndIsr is answered meanwhile (an epoch not on disk is recoverable from
    the log, tests/log/test_recovery.py), and every checkpoint is written after."""
    io_threads = LogIoThreads(4, reactor.callFromThread, "test-io")
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": str(tmp_path / "logs"),
                                                      "broker.id": "1"}), clock=reactor,
                         io_threads=io_threads)
    manager.startup()
    turns = [0]
    writes_saw_a_turn: list[bool] = []
    leading_before_written: set[TopicPartition] = set()
    original = Log.flush_leader_epoch_cache

    def flush_after_a_turn(log: Log) -> None:  # on an I/O thread
        start = turns[0]
        deadline = time.monotonic() + 5
        while turns[0] == start and time.monotonic() < deadline:
            time.sleep(0.005)
        saw_a_turn = turns[0] != start
        original(log)
        # Counted once written: the test reads every log's state when all are counted.
        writes_saw_a_turn.append(saw_a_turn)

    count = STATE_CHANGE_SLICE + 5
    broker = Broker(ReplicaManager(1, manager, zk_client, clock=reactor),
                    Controller(active=True))
    done = [False]

    def probe() -> None:  # once per reactor turn while the request is applied
        turns[0] += 1
        for partition in broker.replica_manager.leader_partitions():
            assert partition.log is not None
            if partition.log.leader_epoch_cache_unflushed:
                leading_before_written.add(partition.topic_partition)
        if not done[0]:
            reactor.callLater(0.001, probe)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Log, "flush_leader_epoch_cache", flush_after_a_turn)
            reactor.callLater(0, probe)
            response = call(RequestHandler(broker=broker), ApiKey.LEADER_AND_ISR, 5,
                            leader_and_isr(leaders=(1,) * count))
            answered_before_written = len(writes_saw_a_turn) < count
            run_until(lambda: len(writes_saw_a_turn) == count, timeout=30)
            done[0] = True
        assert set(errors_of(response, 5).values()) == {NONE}
        leaders = broker.replica_manager.leader_partitions()
        assert len(leaders) == count
        assert leading_before_written  # they did not wait for their writes
        assert answered_before_written  # nor did the answer
        assert all(writes_saw_a_turn)
        for partition in leaders:
            assert partition.log is not None
            assert not partition.log.leader_epoch_cache_unflushed
            checkpoint = partition.log.dir / "leader-epoch-checkpoint"
            assert checkpoint.read_text() == "0\n1\n0 0\n"
    finally:
        io_threads.shutdown()
        manager.shutdown()


def test_stale_controller_epoch_refuses_the_whole_request(broker: Broker,
                                                          dispatcher: RequestHandler) -> None:
    call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(controller_epoch=3))
    response = call(dispatcher, ApiKey.LEADER_AND_ISR, 5,
                    leader_and_isr(controller_epoch=2, leader_epoch=9, leaders=(2, 2, 2)))
    assert response.error_code == STALE_CONTROLLER_EPOCH
    assert set(errors_of(response, 5).values()) == {STALE_CONTROLLER_EPOCH}
    partition = broker.replica_manager.get_partition(TopicPartition("demo", 0))
    assert partition is not None and partition.is_leader and partition.leader_epoch == 0


def test_leader_epoch_not_newer_is_refused_per_partition(broker: Broker,
                                                         dispatcher: RequestHandler) -> None:
    call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leader_epoch=4))
    same = call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leader_epoch=4))
    older = call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leader_epoch=3))
    assert set(errors_of(same, 5).values()) == {STALE_CONTROLLER_EPOCH}
    assert set(errors_of(older, 5).values()) == {STALE_CONTROLLER_EPOCH}
    newer = call(dispatcher, ApiKey.LEADER_AND_ISR, 5,
                 leader_and_isr(leader_epoch=5, leaders=(2, 2, 2)))
    assert set(errors_of(newer, 5).values()) == {NONE}
    assert broker.replica_manager.leader_partitions() == []


def test_not_a_replica_is_unknown_topic_or_partition(broker: Broker,
                                                     dispatcher: RequestHandler) -> None:
    response = call(dispatcher, ApiKey.LEADER_AND_ISR, 5,
                    leader_and_isr(leaders=(2, 2, 2), replicas=(2, 3)))
    assert set(errors_of(response, 5).values()) == {UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.replica_manager.all_partitions == {}


def test_stale_broker_epoch_is_refused(broker: Broker, dispatcher: RequestHandler) -> None:
    response = call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(broker_epoch=99))
    assert response.error_code == STALE_BROKER_EPOCH
    assert broker.replica_manager.all_partitions == {}


@pytest.mark.parametrize("version", range(4))
def test_stop_replica_deletes_logs_when_asked(broker: Broker, dispatcher: RequestHandler,
                                              log_manager: LogManager, version: int) -> None:
    call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leader_epoch=2))
    s = STOP_REPLICA.structs
    body = STOP_REPLICA(
        controller_id=2, controller_epoch=1, broker_epoch=100, delete_partitions=True,
        ungrouped_partitions=[s["StopReplicaPartitionV0"](topic_name="demo", partition_index=0)],
        topics=[s["StopReplicaTopicV1"](name="demo", partition_indexes=[0])],
        topic_states=[s["StopReplicaTopicState"](topic_name="demo", partition_states=[
            s["StopReplicaPartitionState"](partition_index=0, leader_epoch=3,
                                           delete_partition=True)])])
    response = call(dispatcher, ApiKey.STOP_REPLICA, version, body)
    assert response.error_code == NONE
    assert [(e.topic_name, e.partition_index, e.error_code)
            for e in response.partition_errors] == [("demo", 0, NONE)]
    assert log_manager.get_log(TopicPartition("demo", 0)) is None
    assert broker.replica_manager.get_partition(TopicPartition("demo", 0)) is None
    assert log_manager.get_log(TopicPartition("demo", 1)) is not None


def test_stop_replica_fenced_leader_epoch_and_stale_controller(
        broker: Broker, dispatcher: RequestHandler, log_manager: LogManager) -> None:
    call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(leader_epoch=2,
                                                              controller_epoch=2))
    s = STOP_REPLICA.structs

    def stop(controller_epoch: int, leader_epoch: int) -> Any:
        return call(dispatcher, ApiKey.STOP_REPLICA, 3, STOP_REPLICA(
            controller_id=2, controller_epoch=controller_epoch, broker_epoch=100,
            topic_states=[s["StopReplicaTopicState"](topic_name="demo", partition_states=[
                s["StopReplicaPartitionState"](partition_index=0, leader_epoch=leader_epoch,
                                               delete_partition=True)])]))

    assert stop(1, 5).error_code == STALE_CONTROLLER_EPOCH
    fenced = stop(2, 2)
    assert [e.error_code for e in fenced.partition_errors] == [FENCED_LEADER_EPOCH]
    assert log_manager.get_log(TopicPartition("demo", 0)) is not None
    during_delete = stop(2, -2)
    assert [e.error_code for e in during_delete.partition_errors] == [NONE]
    assert log_manager.get_log(TopicPartition("demo", 0)) is None


@pytest.mark.parametrize("version", range(4))
def test_controlled_shutdown_on_the_controller(broker: Broker, dispatcher: RequestHandler,
                                               version: int) -> None:
    response = call(dispatcher, ApiKey.CONTROLLED_SHUTDOWN, version,
                    CONTROLLED_SHUTDOWN(broker_id=3, broker_epoch=55))
    assert response.error_code == NONE
    assert [(p.topic_name, p.partition_index) for p in response.remaining_partitions] == [
        ("demo", 1)]
    assert broker.controller.calls == [(3, 55 if version >= 2 else -1)]


def test_controlled_shutdown_elsewhere_is_not_controller(broker: Broker,
                                                         dispatcher: RequestHandler) -> None:
    broker.controller.is_active = False
    response = call(dispatcher, ApiKey.CONTROLLED_SHUTDOWN, 3,
                    CONTROLLED_SHUTDOWN(broker_id=3, broker_epoch=55))
    assert response.error_code == NOT_CONTROLLER
    broker.controller.is_active = True
    stale = call(dispatcher, ApiKey.CONTROLLED_SHUTDOWN, 3,
                 CONTROLLED_SHUTDOWN(broker_id=3, broker_epoch=5))
    assert stale.error_code == STALE_BROKER_EPOCH


def test_heap_freezes_after_new_partitions_and_thaws_after_deletions(
        broker: Broker, dispatcher: RequestHandler) -> None:
    """With kafkaclone.server.heap enabled (the broker process), the objects alive after
    a LeaderAndIsr that added partitions leave the collector's generations; a StopReplica
    that deletes partitions gives them back. Off (the default), nothing is frozen."""
    gc.unfreeze()
    call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr(topic="plain"))
    assert gc.get_freeze_count() == 0
    heap.enable()
    try:
        call(dispatcher, ApiKey.LEADER_AND_ISR, 5, leader_and_isr())
        assert gc.get_freeze_count() > 0
        rm = broker.replica_manager
        result = run(rm.stop_replicas(2, 1, {
            TopicPartition("demo", 0): StopReplicaState(leader_epoch=EPOCH_DURING_DELETE,
                                                        delete_partition=True)}))
        assert result.partition_errors == {TopicPartition("demo", 0): NONE}
        assert gc.get_freeze_count() == 0
    finally:
        heap.disable()
