"""ElectLeaders on a real cluster: confluent-kafka's AdminClient.elect_leaders and
kafka-leader-election.sh (preferred and unclean elections, Kafka's per-partition errors)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import KafkaError as CkError
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"auto.leader.rebalance.enable": "false"}) as local:
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


def script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / "kafka-leader-election.sh"), *args],
                          capture_output=True, text=True, timeout=90, cwd="/")


def state(zk: KazooClient, topic: str, partition: int) -> dict:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def create(cluster: LocalCluster, zk: KazooClient, topic: str,
           assignment: dict[int, list[int]]) -> None:
    replicas = ",".join(":".join(map(str, assignment[p])) for p in sorted(assignment))
    created = subprocess.run(
        [str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server",
         cluster.bootstrap_servers, "--create", "--topic", topic, "--replica-assignment",
         replicas], capture_output=True, text=True, timeout=90, cwd="/")
    assert created.returncode == 0, created.stdout + created.stderr
    wait_for(lambda: all(
        zk.exists(f"/brokers/topics/{topic}/partitions/{p}/state") is not None
        and state(zk, topic, p)["leader"] == replicas[0]
        for p, replicas in assignment.items()), 30, f"{topic}'s leaders")


def test_preferred_election_that_is_not_needed_or_impossible(cluster: LocalCluster,
                                                             zk: KazooClient) -> None:
    create(cluster, zk, "pref", {0: [1, 2, 3], 1: [2, 3, 1]})
    b = ["--bootstrap-server", cluster.bootstrap_servers]
    noop = script(*b, "--election-type", "preferred", "--topic", "pref", "--partition", "0")
    assert (noop.returncode, noop.stdout) == (
        0, "Valid replica already elected for partitions pref-0\n"), noop.stderr

    missing = script(*b, "--election-type", "PREFERRED", "--topic", "nope", "--partition", "3")
    assert missing.returncode == 1
    assert missing.stdout.startswith("Error completing leader election (PREFERRED) for "
                                     "partition: nope-3: UnknownTopicOrPartitionError")

    everything = script(*b, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert everything.returncode == 0, everything.stdout + everything.stderr
    assert "pref-0, pref-1" in everything.stdout

    usage = script(*b, "--election-type", "PREFERRED", "--topic", "pref")
    assert usage.returncode == 1 and "Missing required option(s): partition" in usage.stderr

    # (confluent-kafka 2.16's binding rejects elect_leaders' timeout keywords: defaults.)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    both = [CkTopicPartition("pref", 0), CkTopicPartition("pref", 1)]
    result = admin.elect_leaders(ElectionType.PREFERRED, both).result(40)
    assert {tp.partition: err.code() for tp, err in result.items()} == {
        0: CkError.ELECTION_NOT_NEEDED, 1: CkError.ELECTION_NOT_NEEDED}


def test_unclean_election_brings_an_offline_partition_back(cluster: LocalCluster,
                                                           zk: KazooClient) -> None:
    create(cluster, zk, "unclean", {0: [2, 3]})
    # 3 goes down (the ISR shrinks to [2]), then 2 goes down, then 3 comes back: out of
    # sync (no leader to catch up from), so with unclean election disabled the partition
    # stays offline.
    cluster.broker(3).kill()
    wait_for(lambda: state(zk, "unclean", 0)["isr"] == [2], 30, "ISR [2]")
    cluster.broker(2).kill()
    wait_for(lambda: state(zk, "unclean", 0)["leader"] == -1, 30, "the partition offline")
    cluster.restart_broker(3)
    assert state(zk, "unclean", 0)["leader"] == -1
    assert state(zk, "unclean", 0)["isr"] == [2]

    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap_server})
    tp = [CkTopicPartition("unclean", 0)]
    preferred = admin.elect_leaders(ElectionType.PREFERRED, tp).result(40)
    (error,) = preferred.values()
    assert error is not None
    assert error.code() == CkError.PREFERRED_LEADER_NOT_AVAILABLE
    assert state(zk, "unclean", 0)["leader"] == -1

    result = admin.elect_leaders(ElectionType.UNCLEAN, tp).result(40)
    assert list(result.values()) == [None]
    assert state(zk, "unclean", 0)["leader"] == 3 and state(zk, "unclean", 0)["isr"] == [3]
    again = script("--bootstrap-server", cluster.broker(1).bootstrap_server,
                   "--election-type", "UNCLEAN", "--topic", "unclean", "--partition", "0")
    assert (again.returncode, again.stdout) == (
        0, "Valid replica already elected for partitions unclean-0\n")
    cluster.restart_broker(2)
