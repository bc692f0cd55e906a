"""Coordinator placement and failover: kill -9 (or stop with a controlled shutdown) the broker
coordinating a consuming group. The ``__consumer_offsets`` partition's leadership moves
(RF 3), the new leader loads the group (its metadata from the partition, its offsets from
ZooKeeper), the consumers find it and go on in their generation from the committed offsets;
no committed offset is lost and every message is consumed."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import NONE
from kafkaclone.coordinator.group.coordinator import partition_for
from kafkaclone.coordinator.group.metadata_log import (
    decode_group_metadata_value,
    read_message_key,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
PARTITIONS, PER_PARTITION = 3, 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"offsets.topic.replication.factor": "3",
                                    "offsets.topic.num.partitions": "3",
                                    "zookeeper.session.timeout.ms": "6000"}) as local:
        yield local


def find_coordinator(cluster: LocalCluster, group: str, exclude: int | None = None) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for broker_id in (1, 2, 3):
            if broker_id == exclude:
                continue
            try:
                with BrokerConnection("127.0.0.1", cluster.broker(broker_id).port) as c:
                    _, found = c.request(ApiKey.FIND_COORDINATOR,
                                         api.APIS[ApiKey.FIND_COORDINATOR].request(
                                             key=group, key_type=0), version=2)
            except Exception:
                continue
            if found.error_code == 0 and found.node_id != exclude:
                return int(found.node_id)
        time.sleep(0.3)
    raise AssertionError("no coordinator")


def committed_in_zookeeper(zk: KazooClient, group: str, topic: str) -> dict[int, int]:
    result = {}
    for p in range(PARTITIONS):
        path = f"/consumers/{group}/offsets/{topic}/{p}"
        if zk.exists(path):
            result[p] = int(zk.get(path)[0])
    return result


def consume_across(cluster: LocalCluster, topic: str, group: str,
                   disrupt: Callable[[int], None]) -> None:
    """Consume ``topic`` in ``group`` committing after each batch; a third of the way,
    ``disrupt(coordinator id)``; then check the group finishes on another coordinator with
    no committed offset lost or gone back, every message read, and few read twice."""
    done = subprocess.run(
        [str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server", cluster.bootstrap_servers,
         "--create", "--topic", topic, "--partitions", str(PARTITIONS),
         "--replication-factor", "3"], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
    assert producer.flush(60) == 0

    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=10)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "enable.partition.eof": False})
    seen: list[str] = []
    pending: dict[int, int] = {}
    commit_failures = 0

    def consume_batch() -> None:
        nonlocal commit_failures
        for message in consumer.consume(100, 0.2):
            if message.error() is None:
                seen.append(message.value().decode())
                pending[message.partition()] = message.offset() + 1
        if pending:
            try:
                consumer.commit(offsets=[CkTopicPartition(topic, p, o)
                                         for p, o in pending.items()], asynchronous=False)
                pending.clear()
            except KafkaException:
                commit_failures += 1  # the coordinator is moving: commit again next round

    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < PARTITIONS * PER_PARTITION // 3:
            assert time.monotonic() < deadline, "the group does not consume"
            consume_batch()
        coordinator = find_coordinator(cluster, group)
        before = committed_in_zookeeper(zk, group, topic)
        assert sum(before.values()) > 0
        disrupt(coordinator)
        new_coordinator = find_coordinator(cluster, group, exclude=coordinator)
        assert new_coordinator != coordinator
        deadline = time.monotonic() + 120
        end = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
        while committed_in_zookeeper(zk, group, topic) != end:
            assert time.monotonic() < deadline, (
                f"stuck at {committed_in_zookeeper(zk, group, topic)} after {len(seen)}")
            consume_batch()
            after = committed_in_zookeeper(zk, group, topic)
            # No committed offset is lost or goes back.
            assert all(after.get(p, 0) >= offset for p, offset in before.items())
    finally:
        consumer.close()
        zk.stop()
        zk.close()
    expected = {f"{p}:{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    assert set(seen) == expected
    # Consumption resumed from the committed offsets: at most the messages processed but not
    # yet committed when the coordinator went away are read again.
    duplicates = len(seen) - len(expected)
    assert duplicates <= 100 * (commit_failures + 1) * PARTITIONS, duplicates


def test_kill_coordinator_during_consumption(cluster: LocalCluster) -> None:
    killed: list[int] = []

    def kill(coordinator: int) -> None:
        cluster.broker(coordinator).kill()  # SIGKILL: no controlled shutdown
        killed.append(coordinator)

    try:
        consume_across(cluster, "failover", "failover-group", kill)
    finally:
        for broker_id in killed:
            cluster.broker(broker_id).start()
        cluster.wait_for_brokers([1, 2, 3])


def test_coordinator_moves_on_controlled_shutdown(cluster: LocalCluster) -> None:
    stopped: list[int] = []

    def stop(coordinator: int) -> None:
        cluster.broker(coordinator).stop()  # SIGTERM: leadership moves away first
        stopped.append(coordinator)

    try:
        consume_across(cluster, "graceful", "graceful-group", stop)
    finally:
        for broker_id in stopped:
            cluster.broker(broker_id).start()
        cluster.wait_for_brokers([1, 2, 3])


def test_too_few_brokers_for_the_offsets_topic() -> None:
    """offsets.topic.replication.factor 3 on one broker: as Kafka, __consumer_offsets is not
    created and FindCoordinator answers COORDINATOR_NOT_AVAILABLE (clients keep retrying)."""
    with LocalCluster(1, overrides={"offsets.topic.replication.factor": "3"}) as single:
        with BrokerConnection("127.0.0.1", single.broker(1).port) as connection:
            for _ in range(3):
                _, found = connection.request(ApiKey.FIND_COORDINATOR,
                                              api.APIS[ApiKey.FIND_COORDINATOR].request(
                                                  key="any", key_type=0), version=3)
                assert (found.error_code, found.node_id) == (15, -1)  # COORDINATOR_NOT_AVAILABLE
                time.sleep(0.2)
        zk = KazooClient(hosts=single.zookeeper_connect, timeout=10.0)
        zk.start(timeout=10)
        try:
            assert zk.exists("/brokers/topics/__consumer_offsets") is None
        finally:
            zk.stop()
            zk.close()


def describe_group(cluster: LocalCluster, broker_id: int, group: str) -> tuple[str, set[str]]:
    """(state, member ids) as the broker coordinating ``group`` describes it."""
    with BrokerConnection("127.0.0.1", cluster.broker(broker_id).port) as c:
        _, described = c.request(ApiKey.DESCRIBE_GROUPS, api.APIS[ApiKey.DESCRIBE_GROUPS].request(
            groups=[group]), version=4)
    (found,) = described.groups
    assert found.error_code == NONE, found.error_code
    return str(found.group_state), {str(m.member_id) for m in found.members}


def heartbeat(cluster: LocalCluster, broker_id: int, group: str, member_id: str,
              generation: int) -> int:
    with BrokerConnection("127.0.0.1", cluster.broker(broker_id).port) as c:
        _, answer = c.request(ApiKey.HEARTBEAT, api.APIS[ApiKey.HEARTBEAT].request(
            group_id=group, generation_id=generation, member_id=member_id), version=3)
    return int(answer.error_code)


def stored_group(cluster: LocalCluster, group: str) -> tuple[int, set[str]]:
    """(generation, member ids) of the last group metadata record of ``group`` in its
    ``__consumer_offsets`` partition, read with librdkafka as any consumer would."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                       "group.id": "reader-of-offsets", "enable.auto.commit": False,
                       "enable.partition.eof": True})
    try:
        reader.assign([CkTopicPartition("__consumer_offsets", partition_for(group, 3),
                                        OFFSET_BEGINNING)])
        latest: bytes | None = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                break  # end of partition
            key = message.key()
            if key is not None and read_message_key(key).group_id == group:
                latest = message.value()
    finally:
        reader.close()
    assert latest is not None, f"no group metadata record of {group}"
    _, value = decode_group_metadata_value(latest)
    return int(value.generation), {str(m.member_id) for m in value.members}


class GroupMember(threading.Thread):
    """A confluent-kafka consumer polling in its own thread, counting its rebalances."""

    def __init__(self, cluster: LocalCluster, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 500, "enable.partition.eof": False})
        self.topic = topic
        self.assignments = 0
        self.revocations = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        def assigned(_consumer: Consumer, _partitions: list[CkTopicPartition]) -> None:
            self.assignments += 1

        def revoked(_consumer: Consumer, _partitions: list[CkTopicPartition]) -> None:
            self.revocations += 1

        self.consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked,
                                on_lost=revoked)
        while not self.stopping.is_set():
            self.consumer.poll(0.2)
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def test_group_keeps_generation_and_members_across_coordinator_kill(
        cluster: LocalCluster) -> None:
    """The coordinator of a stable group of two is killed -9: its successor loads the group
    from ``__consumer_offsets`` and the members carry on in their generation, with their
    member ids (nobody is told UNKNOWN_MEMBER_ID and rejoins from scratch); a third member
    then makes the next generation, old generation + 1, with the first two still in it."""
    topic, group = "resume", "resume-group"
    done = subprocess.run(
        [str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server", cluster.bootstrap_servers,
         "--create", "--topic", topic, "--partitions", "4", "--replication-factor", "3"],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    members = [GroupMember(cluster, topic, group) for _ in range(2)]
    killed: list[int] = []
    try:
        for member in members:
            member.start()
        coordinator = find_coordinator(cluster, group)
        deadline = time.monotonic() + 90
        while True:
            state, before = describe_group(cluster, coordinator, group)
            if state == "Stable" and len(before) == 2 and all(m.assignments for m in members):
                break
            assert time.monotonic() < deadline, (state, before)
            time.sleep(0.5)
        generation, stored_members = stored_group(cluster, group)
        assert generation >= 1 and stored_members == before
        # The topic is compacted as Kafka's (offsetsTopicConfigs): the latest record per
        # group is what compaction keeps.
        zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
        zk.start(timeout=10)
        try:
            config = json.loads(zk.get("/config/topics/__consumer_offsets")[0])["config"]
        finally:
            zk.stop()
            zk.close()
        assert config == {"cleanup.policy": "compact", "compression.type": "producer",
                          "segment.bytes": str(100 * 1024 * 1024)}
        rebalances = [(m.assignments, m.revocations) for m in members]

        cluster.broker(coordinator).kill()  # SIGKILL: no controlled shutdown
        killed.append(coordinator)
        successor = find_coordinator(cluster, group, exclude=coordinator)
        assert successor != coordinator
        deadline = time.monotonic() + 60
        while True:
            try:
                state, after = describe_group(cluster, successor, group)
            except AssertionError:  # COORDINATOR_LOAD_IN_PROGRESS
                state, after = "", set()
            if state == "Stable":
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
        assert after == before
        # The members go on heartbeating the new coordinator in their generation.
        time.sleep(5)
        state, after = describe_group(cluster, successor, group)
        assert (state, after) == ("Stable", before)
        for member_id in before:
            assert heartbeat(cluster, successor, group, member_id, generation) == NONE
        assert [(m.assignments, m.revocations) for m in members] == rebalances

        # A newcomer: the next generation follows the old one, with the first two members.
        newcomer = GroupMember(cluster, topic, group)
        members.append(newcomer)
        newcomer.start()
        deadline = time.monotonic() + 90
        while True:
            state, now = describe_group(cluster, successor, group)
            if state == "Stable" and len(now) == 3:
                break
            assert time.monotonic() < deadline, (state, now)
            time.sleep(0.5)
        assert before < now
        next_generation, stored_members = stored_group(cluster, group)
        assert (next_generation, stored_members) == (generation + 1, now)
    finally:
        for member in members:
            member.stop()
        for broker_id in killed:
            cluster.broker(broker_id).start()
        cluster.wait_for_brokers([1, 2, 3])
