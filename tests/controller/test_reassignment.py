"""Partition reassignment on a real 4-broker cluster (Kafka 2.8's onPartitionReassignment):
replicas moved under continuous acks=all produce (confluent-kafka) with nothing lost, through
kafka-python's admin (AlterPartitionReassignments / ListPartitionReassignments) and the
legacy /admin/reassign_partitions znode; a cancel returns to the original replicas; a
controller killed mid-reassignment and the reassignment completes; Kafka's error codes for
bad input."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kazoo.client import KazooClient

from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.wait import wait_until
from kafkaclone.zk.znodes import ReplicaAssignment

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(4, base_dir=tmp_path_factory.mktemp("reassign"),
                      overrides={"auto.leader.rebalance.enable": "false",
                                 "zookeeper.session.timeout.ms": "6000",
                                 # Throttling is per fetch: small fetches, a finer throttle.
                                 "replica.fetch.max.bytes": "65536"}) as local:
        yield local


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    """Closed after each test: its connections must not outlive the brokers stopped later."""
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers,
                              request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / name), *args], capture_output=True,
                          text=True, timeout=90, cwd="/")


def topic_znode(zk: KazooClient, topic: str) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}")
    return json.loads(data)


def state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data)


def create(cluster: LocalCluster, zk: KazooClient, topic: str,
           assignment: dict[int, list[int]]) -> None:
    replicas = ",".join(":".join(map(str, assignment[p])) for p in sorted(assignment))
    created = script("kafka-topics.sh", "--bootstrap-server", cluster.bootstrap_servers,
                     "--create", "--topic", topic, "--replica-assignment", replicas)
    assert created.returncode == 0, created.stdout + created.stderr
    wait_until(lambda: all(
        zk.exists(f"/brokers/topics/{topic}/partitions/{p}/state") is not None
        and sorted(state(zk, topic, p)["isr"]) == sorted(replicas)
        for p, replicas in assignment.items()), 60, f"{topic}'s replicas in sync")


def reassigned(zk: KazooClient, topic: str, expected: dict[int, list[int]]) -> bool:
    """The topic znode shows ``expected`` with nothing being added or removed, and each
    partition's ISR is its replicas."""
    znode = topic_znode(zk, topic)
    return (znode["partitions"] == {str(p): r for p, r in expected.items()}
            and not znode["adding_replicas"] and not znode["removing_replicas"]
            and all(sorted(state(zk, topic, p)["isr"]) == sorted(r)
                    for p, r in expected.items()))


def partition_dir_exists(cluster: LocalCluster, broker_id: int, topic: str,
                         partition: int) -> bool:
    log_dirs = cluster.base_dir / f"broker-{broker_id}"
    return any(log_dirs.rglob(f"{topic}-{partition}"))


def controller_id(zk: KazooClient) -> int:
    data, _ = zk.get("/controller")
    return int(json.loads(data)["brokerid"])


class ContinuousProducer:
    """acks=all produce in a thread until stopped; every acknowledged value recorded."""

    def __init__(self, cluster: LocalCluster, topic: str, partitions: int) -> None:
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                   "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                                   "message.timeout.ms": 120000})
        self._topic = topic
        self._partitions = partitions
        self._stop = threading.Event()
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.add(msg.value())
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        deadline = time.monotonic() + 180
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._producer.produce(self._topic, value=b"value-%d" % i,
                                   partition=i % self._partitions, on_delivery=self._delivered)
            i += 1
            self._producer.poll(0.002)
        self._producer.flush(120)

    def __enter__(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)


def read_all(cluster: LocalCluster, topic: str, partitions: int) -> set[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    values: set[bytes] = set()
    try:
        ends = {p: consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
        positions = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            values.add(message.value())
            positions[message.partition()] = message.offset() + 1
        assert all(positions[p] >= ends[p] for p in ends), (positions, ends)
    finally:
        consumer.close()
    return values


def test_reassign_to_takes_original_then_target_replicas() -> None:
    ra = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert ra == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert (ra.origin_replicas, ra.target_replicas) == ((2, 3, 1), (2, 3, 4))
    assert ra.reassign_to(ra.origin_replicas) == ReplicaAssignment((2, 3, 1), (), ())


def test_move_under_acks_all_produce_loses_nothing(cluster: LocalCluster, zk: KazooClient,
                                                   admin: KafkaAdminClient) -> None:
    topic = "moving"
    create(cluster, zk, topic, {0: [1, 2, 3], 1: [1, 2, 3]})
    target = {0: [2, 3, 4], 1: [4, 3, 2]}
    with ContinuousProducer(cluster, topic, 2) as producer:
        wait_until(lambda: len(producer.acked) > 2000, 60, "records acked before the move")
        results = admin.alter_partition_reassignments(
            {KpTopicPartition(topic, p): r for p, r in target.items()})
        assert results == {KpTopicPartition(topic, 0): None, KpTopicPartition(topic, 1): None}
        wait_until(lambda: reassigned(zk, topic, target), 90, "the reassignment")
        acked_at_move = len(producer.acked)
        wait_until(lambda: len(producer.acked) > acked_at_move + 1000, 60,
                   "records acked after the move")
    assert not producer.failed, producer.failed[:5]
    assert admin.list_partition_reassignments([KpTopicPartition(topic, 0)]) == {}
    for p in (0, 1):
        assert state(zk, topic, p)["leader"] in target[p]
        wait_until(lambda p=p: not partition_dir_exists(cluster, 1, topic, p), 30,
                   "broker 1's replica deleted")
        assert partition_dir_exists(cluster, 4, topic, p)
    assert producer.acked <= read_all(cluster, topic, 2)


def test_script_execute_list_verify_and_legacy_znode(cluster: LocalCluster,
                                                     zk: KazooClient, tmp_path: Path) -> None:
    create(cluster, zk, "scripted", {0: [1, 2], 1: [2, 3]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "scripted", "partition": 0, "replicas": [3, 4], "log_dirs": ["any", "any"]},
        {"topic": "scripted", "partition": 1, "replicas": [4, 1]}]}))
    b = ["--bootstrap-server", cluster.bootstrap_servers]
    run = script("kafka-reassign-partitions.sh", *b, "--execute",
                 "--reassignment-json-file", str(plan))
    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"scripted","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"scripted","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignments for scripted-0,scripted-1\n")
    wait_until(lambda: reassigned(zk, "scripted", {0: [3, 4], 1: [4, 1]}), 60, "the moves")
    verify = script("kafka-reassign-partitions.sh", *b, "--verify",
                    "--reassignment-json-file", str(plan))
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.splitlines()[:3] == [
        "Status of partition reassignment:",
        "Reassignment of partition scripted-0 is complete.",
        "Reassignment of partition scripted-1 is complete."]
    listed = script("kafka-reassign-partitions.sh", *b, "--list")
    assert listed.stdout == "No partition reassignments found.\n"

    # The legacy znode: the controller moves the partition, then removes the znode.
    zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "scripted", "partition": 0, "replicas": [1, 2]}]}).encode())
    wait_until(lambda: reassigned(zk, "scripted", {0: [1, 2], 1: [4, 1]}), 60,
               "the znode's move")
    wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 30,
               "/admin/reassign_partitions deleted")


def test_generate_proposes_the_topic_placement_over_the_broker_list(
        cluster: LocalCluster, zk: KazooClient, tmp_path: Path) -> None:
    create(cluster, zk, "generated", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "generated"}]}))
    run = script("kafka-reassign-partitions.sh", "--bootstrap-server",
                 cluster.bootstrap_servers, "--generate", "--topics-to-move-json-file",
                 str(topics), "--broker-list", "3,4")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"][0] == {
        "topic": "generated", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [p["partition"] for p in proposed] == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [3, 4] for p in proposed)


def test_bad_input_gets_kafka_error_codes(cluster: LocalCluster, zk: KazooClient,
                                          admin: KafkaAdminClient) -> None:
    create(cluster, zk, "bad-input", {0: [1, 2]})
    results = admin.alter_partition_reassignments({
        KpTopicPartition("no-such-topic", 0): [1, 2],
        KpTopicPartition("bad-input", 7): [1, 2],
        KpTopicPartition("bad-input", 0): [1, 99],
    })
    assert results == {
        KpTopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
        KpTopicPartition("bad-input", 7): UnknownTopicOrPartitionError,
        KpTopicPartition("bad-input", 0): InvalidReplicationAssignmentError,
    }
    assert admin.alter_partition_reassignments({KpTopicPartition("bad-input", 0): [2, 2]}) == {
        KpTopicPartition("bad-input", 0): InvalidReplicationAssignmentError}
    assert admin.alter_partition_reassignments({KpTopicPartition("bad-input", 0): None}) == {
        KpTopicPartition("bad-input", 0): NoReassignmentInProgressError}
    assert topic_znode(zk, "bad-input")["partitions"] == {"0": [1, 2]}


def test_cancel_mid_way_returns_to_the_original_replicas(cluster: LocalCluster,
                                                         zk: KazooClient,
                                                         tmp_path: Path) -> None:
    create(cluster, zk, "cancelled", {0: [1, 2, 3]})
    # With broker 4 down the move cannot finish: it stays mid-way until cancelled. Only the
    # znode takes a reassignment to a broker that is not live (the API refuses it).
    cluster.broker(4).stop()
    try:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": "cancelled", "partition": 0, "replicas": [2, 3, 4]}]}).encode())
        wait_until(lambda: topic_znode(zk, "cancelled")["adding_replicas"] == {"0": [4]}, 30,
                   "the reassignment started")
        b = ["--bootstrap-server", cluster.bootstrap_servers]
        listed = script("kafka-reassign-partitions.sh", *b, "--list")
        assert listed.stdout == ("Current partition reassignments:\n"
                                 "cancelled-0: replicas: 2,3,4,1. adding: 4. removing: 1.\n")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "cancelled", "partition": 0, "replicas": [2, 3, 4]}]}))
        cancel = script("kafka-reassign-partitions.sh", *b, "--cancel",
                        "--reassignment-json-file", str(plan))
        assert cancel.returncode == 0, cancel.stderr
        assert cancel.stdout.splitlines()[0] == (
            "Successfully cancelled partition reassignment for: cancelled-0")
        wait_until(lambda: reassigned(zk, "cancelled", {0: [2, 3, 1]}), 30, "the revert")
        assert zk.exists("/admin/reassign_partitions") is None
    finally:
        cluster.restart_broker(4)
    assert topic_znode(zk, "cancelled")["partitions"] == {"0": [2, 3, 1]}


def test_controller_killed_mid_reassignment_and_it_completes(cluster: LocalCluster,
                                                             zk: KazooClient) -> None:
    controller = controller_id(zk)
    others = [b for b in (1, 2, 3, 4) if b != controller]
    new_replica = others[-1]
    original = [controller, *others[:2]]
    target = [*others[:2], new_replica]
    create(cluster, zk, "failover", {0: original})
    cluster.broker(new_replica).stop()
    try:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": "failover", "partition": 0, "replicas": target}]}).encode())
        wait_until(lambda: topic_znode(zk, "failover")["adding_replicas"] == {
            "0": [new_replica]}, 30, "the reassignment started")
        cluster.broker(controller).kill()
        wait_until(lambda: zk.exists("/controller") is not None
                   and controller_id(zk) != controller, 60, "a new controller")
        cluster.restart_broker(new_replica)
        wait_until(lambda: reassigned(zk, "failover", {0: target}), 60,
                   "the reassignment completed by the new controller")
        wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 30,
                   "/admin/reassign_partitions deleted")
    finally:
        if not cluster.broker(new_replica).running:
            cluster.restart_broker(new_replica)
        if not cluster.broker(controller).running:
            cluster.restart_broker(controller)


def logged_since(cluster: LocalCluster, broker_id: int, since: int, text: str) -> bool:
    with cluster.broker(broker_id).log_path.open(errors="replace") as log:
        log.seek(since)
        return text in log.read()


def test_throttled_move_is_slowed_and_verify_removes_the_throttles(
        cluster: LocalCluster, zk: KazooClient, tmp_path: Path) -> None:
    """A loose check only: the precise rate is measured by benchmarks/bench_reassign.py."""
    throttle = 50_000
    create(cluster, zk, "throttled", {0: [3]})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20,
                         "compression.type": "none"})
    for _ in range(96):  # 1.5 MiB: ~30 s at the rate (no burst allowance)
        producer.produce("throttled", value=os.urandom(16 * 1024), partition=0)
    assert producer.flush(60) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "throttled", "partition": 0, "replicas": [3, 4]}]}))
    b = ["--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan)]
    # The tool writes the throttles and starts the move at once; a broker applies config
    # changes as their notifications reach it, so on a loaded machine the new replica
    # could fetch before its leader is throttled. Set them first, and see them applied.
    since = {broker_id: cluster.broker(broker_id).log_path.stat().st_size for broker_id in (3, 4)}
    configs = ["--bootstrap-server", cluster.bootstrap_servers, "--alter", "--add-config"]
    assert script("kafka-configs.sh", *configs, "leader.replication.throttled.replicas=[0:3],"
                  "follower.replication.throttled.replicas=[0:4]", "--entity-type", "topics",
                  "--entity-name", "throttled").returncode == 0
    for broker_id in (3, 4):
        assert script("kafka-configs.sh", *configs,
                      f"leader.replication.throttled.rate={throttle},"
                      f"follower.replication.throttled.rate={throttle}",
                      "--entity-type", "brokers", "--entity-name", str(broker_id)
                      ).returncode == 0
    for broker_id in (3, 4):
        wait_until(lambda broker_id=broker_id: logged_since(
            cluster, broker_id, since[broker_id],
            f"Replication throttles: leader {float(throttle)} B/s, "
            f"follower {float(throttle)} B/s"),
            60, f"broker {broker_id} throttled")
    started = time.monotonic()
    run = script("kafka-reassign-partitions.sh", *b, "--execute", "--throttle", str(throttle))
    assert run.returncode == 0, run.stderr
    assert ("Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed.\n"
            "The inter-broker throttle limit was set to 50000 B/s\n") in run.stdout
    topic_config = json.loads(zk.get("/config/topics/throttled")[0])["config"]
    assert topic_config["leader.replication.throttled.replicas"] == "0:3"
    assert topic_config["follower.replication.throttled.replicas"] == "0:4"
    for broker_id in (3, 4):
        broker_config = json.loads(zk.get(f"/config/brokers/{broker_id}")[0])["config"]
        assert broker_config["leader.replication.throttled.rate"] == "50000"
        assert broker_config["follower.replication.throttled.rate"] == "50000"
    in_progress = script("kafka-reassign-partitions.sh", *b, "--verify")
    assert "Reassignment of partition throttled-0 is still in progress." in in_progress.stdout
    assert "Clearing" not in in_progress.stdout
    wait_until(lambda: reassigned(zk, "throttled", {0: [3, 4]}), 150, "the throttled move")
    assert time.monotonic() - started > 8, "1.5 MiB at 50 kB/s took under 8 s"
    done = script("kafka-reassign-partitions.sh", *b, "--verify")
    # Kafka prints the log-dir moves' status after the partitions': none, an empty line.
    assert done.stdout == ("Status of partition reassignment:\n"
                           "Reassignment of partition throttled-0 is complete.\n"
                           "\n"
                           "Clearing broker-level throttles on brokers 1,2,3,4\n"
                           "Clearing topic-level throttles on topic throttled\n")
    topic_config = json.loads(zk.get("/config/topics/throttled")[0])["config"]
    assert "leader.replication.throttled.replicas" not in topic_config
    broker_config = json.loads(zk.get("/config/brokers/3")[0])["config"]
    assert "leader.replication.throttled.rate" not in broker_config
