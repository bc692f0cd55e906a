"""kafka-reassign-partitions.sh with log dirs (Kafka's ``log_dirs`` in the reassignment file,
``--replica-alter-log-dirs-throttle``) on a real 2-broker cluster whose brokers have two log
directories each: a replica moved to another broker *and* into a chosen directory there
(the tool retries AlterReplicaLogDirs until the new replica exists), a replica moved between
the directories of its broker, --verify reporting each replica's move and clearing the
throttles at the end, and --cancel of a throttled move leaving the replica where it was;
every record is read back with confluent-kafka."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.wait import wait_until

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("logdirs")
    dirs = {b: {"log.dirs": f"{base / f'b{b}-disk1'},{base / f'b{b}-disk2'}"} for b in (1, 2)}
    with LocalCluster(2, base_dir=base, broker_overrides=dirs) as local:
        yield local


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / "kafka-reassign-partitions.sh"), *args],
                          capture_output=True, text=True, timeout=90, cwd="/")


def where(cluster: LocalCluster, topic: str) -> dict[int, dict[str, bool]]:
    """Broker -> the dirs holding ``topic``-0 there -> whether that log is a future one."""
    with AdminClient(cluster.bootstrap_servers) as admin:
        described = admin.describe_log_dirs([1, 2])
    return {broker: {path: d.replica_infos[(topic, 0)].is_future
                     for path, d in dirs.items() if (topic, 0) in d.replica_infos}
            for broker, dirs in described.items()}


def all_dirs(cluster: LocalCluster, broker: int) -> list[str]:
    with AdminClient(cluster.bootstrap_servers) as admin:
        return sorted(admin.describe_log_dirs([broker])[broker])


def produce(cluster: LocalCluster, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 20, "compression.type": "none"})
    for i in range(count):
        producer.produce(topic, value=f"{i}-".encode() + os.urandom(size), partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def read_indexes(cluster: LocalCluster, topic: str, count: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    indexes: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(indexes) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    indexes.append(int(message.value().split(b"-", 1)[0]))
    finally:
        consumer.close()
    return indexes


def broker_config(cluster: LocalCluster, broker: int) -> dict[str, str]:
    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=10)
    try:
        if zk.exists(f"/config/brokers/{broker}") is None:
            return {}
        config: dict[str, str] = json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"]
        return config
    finally:
        zk.stop()
        zk.close()


def test_replicas_land_in_the_log_dirs_of_the_file(cluster: LocalCluster,
                                                  tmp_path: Path) -> None:
    with AdminClient(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("placed", replica_assignment={0: [1]})])
    produce(cluster, "placed", 200, 4096)
    [(source, _)] = where(cluster, "placed")[1].items()
    [target1] = [d for d in all_dirs(cluster, 1) if d != source]
    target2 = all_dirs(cluster, 2)[1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "placed", "partition": 0, "replicas": [1, 2],
         "log_dirs": [target1, target2]}]}))
    b = ["--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan)]
    run = tool(*b, "--execute", "--replica-alter-log-dirs-throttle", "50000000")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in lines
    assert "Successfully started partition reassignment for placed-0" in lines
    started = [line for line in lines if line.startswith("Successfully started log directory")]
    # One line when broker 2 already had its replica at the first try, two otherwise.
    assert sorted(",".join(line.split(": ")[1] for line in started).split(",")) == [
        "placed-0-1", "placed-0-2"]
    for broker in (1, 2):
        assert broker_config(cluster, broker)[
            "replica.alter.log.dirs.io.max.bytes.per.second"] == "50000000"
    wait_until(lambda: where(cluster, "placed") == {1: {target1: False}, 2: {target2: False}},
               90, "both replicas in their directories")
    verify = tool(*b, "--verify")
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout == ("Status of partition reassignment:\n"
                             "Reassignment of partition placed-0 is complete.\n"
                             "Reassignment of replica placed-0-1 completed successfully.\n"
                             "Reassignment of replica placed-0-2 completed successfully.\n"
                             "Clearing broker-level throttles on brokers 1,2\n"
                             "Clearing topic-level throttles on topic placed\n")
    assert "replica.alter.log.dirs.io.max.bytes.per.second" not in broker_config(cluster, 1)
    assert sorted(read_indexes(cluster, "placed", 200)) == list(range(200))


def test_a_throttled_move_is_verified_in_progress_then_cancelled(cluster: LocalCluster,
                                                                 tmp_path: Path) -> None:
    with AdminClient(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("slow", replica_assignment={0: [2]})])
    produce(cluster, "slow", 256, 8192)  # 2 MiB: ~100 s at the throttle below
    [(source, _)] = where(cluster, "slow")[2].items()
    [target] = [d for d in all_dirs(cluster, 2) if d != source]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "slow", "partition": 0, "replicas": [2], "log_dirs": [target]}]}))
    b = ["--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file", str(plan)]
    run = tool(*b, "--execute", "--replica-alter-log-dirs-throttle", "20000")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Successfully started log directory move for: slow-0-2\n" in run.stdout
    wait_until(lambda: where(cluster, "slow")[2] == {source: False, target: True}, 30,
               "the future log")
    verify = tool(*b, "--verify")
    assert "Reassignment of replica slow-0-2 is still in progress." in verify.stdout
    assert "Clearing" not in verify.stdout
    cancel = tool(*b, "--cancel")
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert cancel.stdout.splitlines()[:2] == [
        "None of the specified partition reassignments are active.",
        "Successfully started log directory move for: slow-0-2"]
    assert "Clearing broker-level throttles on brokers 1,2" in cancel.stdout
    wait_until(lambda: where(cluster, "slow")[2] == {source: False}, 30,
               "the future log dropped")
    after = tool(*b, "--verify")
    assert (f"Partition slow-0 on broker 2 is not being moved from log dir {source} to "
            f"{target}.") in after.stdout
    assert sorted(read_indexes(cluster, "slow", 256)) == list(range(256))
