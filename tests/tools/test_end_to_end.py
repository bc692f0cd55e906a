"""kafka-topics.sh and kafka-configs.sh against a real local cluster (ZooKeeper and three
broker processes from kafkaclone.testing.cluster): what a user would type."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as local:
        yield local


def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / name), *args], capture_output=True,
                          text=True, timeout=90, cwd="/")


def test_topic_lifecycle_on_a_real_cluster(cluster):
    b = ["--bootstrap-server", cluster.bootstrap_servers]
    created = script("kafka-topics.sh", *b, "--create", "--topic", "demo", "--partitions", "6",
                     "--replication-factor", "3", "--config", "retention.ms=86400000")
    assert (created.returncode, created.stdout, created.stderr) == (0, "Created topic demo.\n", "")
    described = script("kafka-topics.sh", *b, "--describe", "--topic", "demo").stdout
    lines = described.splitlines()
    assert re.fullmatch(r"Topic: demo\tTopicId: \S{22}\tPartitionCount: 6\tReplicationFactor: 3"
                        r"\tConfigs: retention.ms=86400000", lines[0]), lines[0]
    assert len(lines) == 7
    for p, line in enumerate(lines[1:]):
        m = re.fullmatch(rf"\tTopic: demo\tPartition: {p}\tLeader: (\d)\tReplicas: ([\d,]+)"
                         r"\tIsr: ([\d,]+)", line)
        assert m, line
        assert sorted(m.group(2).split(",")) == ["1", "2", "3"]
        assert m.group(1) == m.group(2).split(",")[0]
    duplicate = script("kafka-topics.sh", *b, "--create", "--topic", "demo", "--partitions",
                       "1")
    assert duplicate.returncode == 1
    assert duplicate.stdout == ("Error while executing topic command : Topic 'demo' already "
                                "exists.\n")
    too_many = script("kafka-topics.sh", *b, "--create", "--topic", "wide", "--partitions",
                      "1", "--replication-factor", "4")
    assert too_many.returncode == 1

    zk_view = script("kafka-topics.sh", "--zookeeper", cluster.zookeeper_connect, "--describe",
                     "--topic", "demo").stdout
    assert zk_view.splitlines()[1:] == lines[1:]

    assert script("kafka-topics.sh", *b, "--alter", "--topic", "demo", "--partitions",
                  "8").returncode == 0
    altered = script("kafka-configs.sh", *b, "--entity-type", "topics", "--entity-name", "demo",
                     "--alter", "--add-config", "cleanup.policy=compact")
    assert altered.stdout == "Completed updating config for topic demo.\n"
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=10)
    try:
        assert json.loads(zk.get("/config/topics/demo")[0]) == {
            "version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact"}}
        assert len(json.loads(zk.get("/brokers/topics/demo")[0])["partitions"]) == 8
    finally:
        zk.stop()
        zk.close()
    deleted = script("kafka-topics.sh", *b, "--delete", "--topic", "demo")
    assert deleted.returncode == 0
    assert script("kafka-topics.sh", *b, "--list").stdout == "\n"


def test_confluent_kafka_and_kafka_python_admins_on_a_real_cluster(cluster):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import ConfigResource as CkResource
    from confluent_kafka.admin import NewTopic as CkNewTopic
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    ck = ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers,
                         "socket.timeout.ms": 10000})
    ck.create_topics([CkNewTopic("ck-topic", 4, 3)], operation_timeout=20)["ck-topic"].result(30)
    metadata = ck.list_topics(timeout=20)
    assert sorted(metadata.topics["ck-topic"].partitions) == [0, 1, 2, 3]
    assert all(len(p.isrs) == 3 for p in metadata.topics["ck-topic"].partitions.values())
    (future,) = ck.describe_configs([CkResource("topic", "ck-topic")]).values()
    assert future.result(30)["cleanup.policy"].value == "delete"
    ck.delete_topics(["ck-topic"], operation_timeout=20)["ck-topic"].result(30)
    assert "ck-topic" not in ck.list_topics(timeout=20).topics

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=20000)
    try:
        kp.create_topics([KpNewTopic("kp-topic", 2, 2)], timeout_ms=20000)
        # CreateTopics answers once the broker that took it has the topic's metadata (Kafka's
        # DelayedCreatePartitions); the others learn it from their own UpdateMetadata a
        # moment later, and kafka-python asks any broker, each call perhaps another one (a
        # broker that has not learnt it yet answers UNKNOWN_TOPIC_OR_PARTITION, which
        # describe_topics returns as the topic with no partitions).
        _eventually(lambda: "kp-topic" in kp.list_topics(), "kp-topic listed")
        _eventually(lambda: [(d["error_code"], len(d["partitions"]))
                             for d in kp.describe_topics(["kp-topic"])] == [(0, 2)],
                    "kp-topic described with its 2 partitions")
        configs = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp-topic")],
                                      config_filter="all")
        assert "retention.ms" in configs["topic"]["kp-topic"]
        kp.delete_topics(["kp-topic"], timeout_ms=20000)
        _eventually(lambda: "kp-topic" not in kp.list_topics(), "kp-topic gone")
    finally:
        kp.close()


def _eventually(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.1)


SCHEMAS = Path(__file__).resolve().parents[2] / "zk_schema"
KAFKA_ZNODES = {
    # Kafka 2.8's ZkData.PersistentZkPaths, plus what the controller and brokers write.
    "/admin", "/admin/delete_topics", "/brokers", "/brokers/ids", "/brokers/seqid",
    "/brokers/topics", "/cluster", "/cluster/id", "/config", "/config/brokers",
    "/config/changes", "/config/clients", "/config/topics", "/config/users", "/consumers",
    "/controller", "/controller_epoch", "/isr_change_notification",
    "/latest_producer_id_block", "/log_dir_event_notification",
}


def test_zookeeper_holds_kafkas_znodes_with_kafkas_json(cluster):
    from jsonschema import Draft202012Validator

    def check(schema: str, data: bytes) -> None:
        document = json.loads((SCHEMAS / f"{schema}.schema.json").read_text())
        Draft202012Validator(document).validate(json.loads(data))

    b = ["--bootstrap-server", cluster.bootstrap_servers]
    assert script("kafka-topics.sh", *b, "--create", "--topic", "zk-tree", "--partitions", "2",
                  "--replication-factor", "3").returncode == 0
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=10)
    try:
        paths: dict[str, bytes] = {}

        def walk(path: str) -> None:
            data, _ = zk.get(path)
            paths[path] = data
            for child in zk.get_children(path):
                walk(f"{path.rstrip('/')}/{child}")

        walk("/")
        topic_paths = {p for p in paths if p.startswith("/brokers/topics/")
                       or p.startswith("/config/topics/")}
        broker_paths = {p for p in paths if p.startswith("/brokers/ids/")}
        other = set(paths) - topic_paths - broker_paths - {"/"}
        other = {p for p in other if not p.startswith("/zookeeper")}
        # Topic config changes leave sequential notifications, as in Kafka.
        other = {p for p in other if not p.startswith("/config/changes/config_change_")}
        assert other == KAFKA_ZNODES
        assert broker_paths == {"/brokers/ids/1", "/brokers/ids/2", "/brokers/ids/3"}
        assert {p for p in topic_paths if "zk-tree" in p} == {
            "/brokers/topics/zk-tree", "/config/topics/zk-tree",
            "/brokers/topics/zk-tree/partitions",
            "/brokers/topics/zk-tree/partitions/0", "/brokers/topics/zk-tree/partitions/1",
            "/brokers/topics/zk-tree/partitions/0/state",
            "/brokers/topics/zk-tree/partitions/1/state"}
        for path in broker_paths:
            check("broker_id.v5", paths[path])
        check("topic.v3", paths["/brokers/topics/zk-tree"])
        check("config_entity.v1", paths["/config/topics/zk-tree"])
        for p in (0, 1):
            check("topic_partition_state.v1",
                  paths[f"/brokers/topics/zk-tree/partitions/{p}/state"])
        check("controller.v1", paths["/controller"])
        check("cluster_id.v1", paths["/cluster/id"])
        assert int(paths["/controller_epoch"]) >= 1
    finally:
        zk.stop()
        zk.close()

    # zookeeper-shell.sh reads them as Kafka's does.
    shell = subprocess.run([str(REPO / "scripts" / "zookeeper-shell.sh"),
                            cluster.zookeeper_connect, "get",
                            "/brokers/topics/zk-tree/partitions/0/state"],
                           capture_output=True, text=True, timeout=60, cwd="/")
    assert shell.returncode == 0, shell.stderr
    state = json.loads(shell.stdout.strip().splitlines()[-1])
    assert sorted(state["isr"]) == [1, 2, 3] and state["leader"] in (1, 2, 3)
