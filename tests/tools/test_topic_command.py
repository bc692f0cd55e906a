"""kafka-topics.sh, kafka-configs.sh and kafka-broker-api-versions.sh against the admin
handlers served over TCP (``--bootstrap-server``) and against ZooKeeper directly
(``--zookeeper``), with a simulated controller; Kafka's exact output."""

from __future__ import annotations

import io
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaclone.clients.admin import Node
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.tools import broker_api_versions, configs_command, topic_command
from kafkaclone.zk.client import KafkaZkClient
from tests.clients.cluster_double import AdminCluster, admin_cluster, serve

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(zk_client: KafkaZkClient, zk_connect: str) -> Iterator[AdminCluster]:
    yield from admin_cluster(zk_client, zk_connect)


def topics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = topic_command.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def configs(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = configs_command.main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_topics_over_bootstrap_server(cluster):
    def client(port):
        b = ["--bootstrap-server", f"127.0.0.1:{port}"]
        return [
            topics(*b, "--create", "--topic", "alpha", "--partitions", "3",
                   "--replication-factor", "2", "--config", "retention.ms=1000"),
            topics(*b, "--create", "--topic", "beta", "--replica-assignment", "1:2,2:3"),
            topics(*b, "--create", "--topic", "alpha", "--partitions", "1"),
            topics(*b, "--create", "--topic", "alpha", "--partitions", "1", "--if-not-exists"),
            topics(*b, "--create", "--topic", "bad/name", "--partitions", "1"),
            topics(*b, "--create", "--topic", "huge", "--partitions", "1",
                   "--replication-factor", "4"),
            topics(*b, "--list"),
            topics(*b, "--list", "--topic", "al.*"),
            topics(*b, "--describe", "--topic", "alpha"),
            topics(*b, "--describe", "--topic", "beta"),
            topics(*b, "--describe", "--topics-with-overrides"),
            topics(*b, "--describe", "--under-replicated-partitions"),
            topics(*b, "--describe", "--topic", "ghost"),
            topics(*b, "--describe", "--topic", "ghost", "--if-exists"),
            topics(*b, "--alter", "--topic", "beta", "--partitions", "3"),
            topics(*b, "--alter", "--topic", "beta", "--partitions", "1"),
            topics(*b, "--describe", "--topic", "beta"),
            topics(*b, "--delete", "--topic", "alpha"),
            topics(*b, "--list"),
        ]

    results = serve(cluster, client)
    (created, manual, duplicate, if_not_exists, bad_name, huge, listed, regex, alpha, beta,
     overrides, under_replicated, ghost, ghost_if_exists, altered, shrink, beta_after,
     deleted, after) = results
    assert created == (0, "Created topic alpha.\n", "")
    assert manual == (0, "Created topic beta.\n", "")
    assert duplicate == (1, "Error while executing topic command : Topic 'alpha' already "
                            "exists.\n", "")
    assert if_not_exists == (0, "", "")
    assert bad_name[0] == 1 and "contains a character other than" in bad_name[1]
    assert huge == (1, "Error while executing topic command : Replication factor: 4 larger "
                       "than available brokers: 3.\n", "")
    assert listed == (0, "alpha\nbeta\n", "")
    assert regex == (0, "alpha\n", "")
    code, text, _ = alpha
    lines = text.splitlines()
    assert code == 0 and len(lines) == 4
    assert re.fullmatch(r"Topic: alpha\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\t"
                        r"ReplicationFactor: 2\tConfigs: segment.bytes=536870912,"
                        r"retention.ms=1000", lines[0]), lines[0]
    for p, line in enumerate(lines[1:]):
        m = re.fullmatch(rf"\tTopic: alpha\tPartition: {p}\tLeader: (\d)\tReplicas: (\d),(\d)"
                         r"\tIsr: (\d),(\d)", line)
        assert m, line
        assert m.group(1) == m.group(2) and m.groups()[1:3] == m.groups()[3:5]
    assert beta[1].splitlines()[1:] == [
        "\tTopic: beta\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: beta\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3"]
    # segment.bytes is set in server.properties (STATIC_BROKER_CONFIG): not a default
    assert [line.split("\t")[0] for line in overrides[1].splitlines()] == [
        "Topic: alpha", "Topic: beta"]
    assert under_replicated == (0, "", "")
    assert ghost == (1, "Error while executing topic command : Topic 'ghost' does not exist "
                        "as expected\n", "")
    assert ghost_if_exists == (0, "", "")
    assert altered == (0, "", "")
    assert shrink[0] == 1 and "Topic currently has 3 partitions" in shrink[1]
    assert beta_after[1].splitlines()[0].split("\t")[2] == "PartitionCount: 3"
    assert deleted == (0, "", "")
    assert after == (0, "beta\n", "")


def test_topics_usage_errors():
    assert topics("--list")[0] == 1
    assert "exactly one action" in topics("--bootstrap-server", "x:1", "--list",
                                          "--describe")[2]
    assert "Only one of --bootstrap-server or --zookeeper" in topics("--list")[2]
    assert topics("--bootstrap-server", "x:1", "--create", "--partitions", "1")[2] == (
        'Missing required argument "[topic]"\n')


def test_unreachable_broker_is_one_line(cluster):
    code, out, _ = topics("--bootstrap-server", "127.0.0.1:1", "--list")
    assert code == 1
    assert out.startswith("Error while executing topic command : No broker is reachable")
    assert out.count("\n") == 1


def test_topics_over_zookeeper(cluster, zk_connect, zk):
    z = ["--zookeeper", zk_connect]
    assert topics(*z, "--create", "--topic", "zt", "--partitions", "2",
                  "--replication-factor", "3", "--config", "cleanup.policy=compact") == (
        0, "Created topic zt.\n", "")
    assignment = json.loads(zk.get("/brokers/topics/zt")[0])
    assert sorted(assignment["partitions"]) == ["0", "1"]
    assert json.loads(zk.get("/config/topics/zt")[0]) == {
        "version": 1, "config": {"cleanup.policy": "compact"}}
    assert topics(*z, "--create", "--topic", "zt", "--partitions", "1")[0] == 1
    assert topics(*z, "--create", "--topic", "zt", "--partitions", "1",
                  "--replication-factor", "1")[1] == (
        "Error while executing topic command : Topic 'zt' already exists.\n")
    assert topics(*z, "--list") == (0, "zt\n", "")
    code, text, _ = topics(*z, "--describe", "--topic", "zt")
    assert code == 0
    lines = text.splitlines()
    assert re.fullmatch(r"Topic: zt\tTopicId: \S{22}\tPartitionCount: 2\tReplicationFactor: 3"
                        r"\tConfigs: cleanup.policy=compact", lines[0]), lines[0]
    assert len(lines) == 3 and lines[1].startswith("\tTopic: zt\tPartition: 0\tLeader: ")
    code, text, _ = topics(*z, "--alter", "--topic", "zt", "--partitions", "3")
    assert code == 0 and text.endswith("Adding partitions succeeded!\n")
    assert len(json.loads(zk.get("/brokers/topics/zt")[0])["partitions"]) == 3
    assert topics(*z, "--delete", "--topic", "zt") == (
        0, "Topic zt is marked for deletion.\nNote: This will have no impact if "
           "delete.topic.enable is not set to true.\n", "")


def test_configs_over_bootstrap_server(cluster):
    def client(port):
        b = ["--bootstrap-server", f"127.0.0.1:{port}"]
        topics(*b, "--create", "--topic", "c1", "--partitions", "1", "--config",
               "retention.ms=1000")
        return [
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--alter",
                    "--add-config", "cleanup.policy=[compact,delete],max.message.bytes=2000"),
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--describe"),
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--alter",
                    "--delete-config", "retention.ms"),
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--alter",
                    "--delete-config", "no.such"),
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--alter",
                    "--add-config", "segment.bytes=tiny"),
            configs(*b, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                    "--add-config", "log.cleaner.threads=2"),
            configs(*b, "--entity-type", "brokers", "--entity-default", "--alter",
                    "--add-config", "log.retention.ms=5000"),
            configs(*b, "--entity-type", "brokers", "--entity-name", "1", "--describe"),
            configs(*b, "--entity-type", "brokers", "--entity-default", "--describe"),
            configs(*b, "--entity-type", "topics", "--entity-name", "c1", "--describe",
                    "--all"),
        ]

    (added, described, deleted, missing, bad_value, broker, default, broker_described,
     default_described, everything) = serve(cluster, client)
    assert added == (0, "Completed updating config for topic c1.\n", "")
    assert described == (0, "Dynamic configs for topic c1 are:\n"
                            "  cleanup.policy=compact,delete sensitive=false "
                            "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
                            "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
                            "  max.message.bytes=2000 sensitive=false "
                            "synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2000, "
                            "DEFAULT_CONFIG:message.max.bytes=1048588}\n"
                            "  retention.ms=1000 sensitive=false "
                            "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n", "")
    assert deleted == (0, "Completed updating config for topic c1.\n", "")
    assert missing == (1, "", "Invalid config(s): no.such\n")
    assert bad_value[0] == 1 and "INVALID_REQUEST" in bad_value[2]
    assert broker == (0, "Completed updating config for broker 1.\n", "")
    assert default == (0, "Completed updating default config for brokers in the cluster.\n",
                       "")
    assert broker_described == (
        0, "Dynamic configs for broker 1 are:\n  log.cleaner.threads=2 sensitive=false "
           "synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, "
           "DEFAULT_CONFIG:log.cleaner.threads=1}\n", "")
    assert default_described == (
        0, "Default configs for brokers in the cluster are:\n  log.retention.ms=5000 "
           "sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000}\n",
        "")
    assert everything[1].startswith("All configs for topic c1 are:\n")
    assert "  segment.bytes=536870912 sensitive=false synonyms={STATIC_BROKER_CONFIG:" \
           "log.segment.bytes=536870912, DEFAULT_CONFIG:log.segment.bytes=1073741824}\n" \
           in everything[1]


def test_configs_over_zookeeper(cluster, zk_connect, zk):
    z = ["--zookeeper", zk_connect]
    topics(*z, "--create", "--topic", "zc", "--partitions", "1", "--replication-factor", "1")
    assert configs(*z, "--entity-type", "topics", "--entity-name", "zc", "--alter",
                   "--add-config", "retention.ms=7,segment.bytes=1048576") == (
        0, "Completed updating config for entity: topic 'zc'.\n", "")
    assert json.loads(zk.get("/config/topics/zc")[0])["config"] == {
        "retention.ms": "7", "segment.bytes": "1048576"}
    assert configs(*z, "--entity-type", "topics", "--entity-name", "zc", "--describe") == (
        0, "Configs for topic 'zc' are retention.ms=7,segment.bytes=1048576\n", "")
    assert configs(*z, "--entity-type", "topics", "--entity-name", "zc", "--alter",
                   "--add-config", "no.such=1")[2] == "Unknown topic config name: no.such\n"


def test_scripts_run_from_anywhere(cluster, tmp_path):
    def client(port):
        def script(name, *args):
            return subprocess.run([str(REPO / "scripts" / name), *args], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=60)

        b = ["--bootstrap-server", f"127.0.0.1:{port}"]
        return (script("kafka-topics.sh", *b, "--create", "--topic", "s", "--partitions", "1"),
                script("kafka-topics.sh", *b, "--list"),
                script("kafka-configs.sh", *b, "--entity-type", "topics", "--entity-name", "s",
                       "--describe"),
                script("kafka-broker-api-versions.sh", *b))

    created, listed, described, versions = serve(cluster, client, timeout=90)
    assert (created.returncode, created.stdout) == (0, "Created topic s.\n")
    assert listed.stdout == "s\n"
    assert described.stdout == "Dynamic configs for topic s are:\n"
    assert versions.returncode == 0
    assert re.search(r"^127\.0\.0\.1:\d+ \(id: 1 rack: null\) -> \($", versions.stdout, re.M)
    assert "\tCreateTopics(19): 0 to 7 [usable: 7],\n" in versions.stdout
    # Produce is served at every Kafka 2.8 version (v0-2 up-converted to magic 2).
    assert "\tProduce(0): 0 to 9 [usable: 9],\n" in versions.stdout


def test_broker_api_versions_format(cluster):
    def client(port):
        out = io.StringIO()
        code = broker_api_versions.main(["--bootstrap-server", f"127.0.0.1:{port}"], out=out)
        return code, out.getvalue()

    code, text = serve(cluster, client)
    assert code == 0
    assert text.count(" -> (\n") == 3 and text.count("\n)\n") == 3
    assert "\tApiVersions(18): 0 to 3 [usable: 3]" in text
    assert "\tDescribeCluster(60): 0 [usable: 0]" in text
    # Every Kafka 2.8 API key is listed, the ones not served as UNSUPPORTED (Kafka's format).
    assert text.count("\tVote(52): UNSUPPORTED,\n") == 3
    assert text.count("\tDescribeProducers(61): UNSUPPORTED\n)\n") == 3
    first = text.split(" -> (\n")[1].split("\n)\n")[0]
    assert len(first.splitlines()) == len(ApiKey)


def test_broker_api_versions_lists_every_kafka_api_key() -> None:
    node = Node(id=7, host="h", port=9092, rack=None)
    text = broker_api_versions.format_node(node, {0: (0, 9), 18: (0, 3), 99: (0, 1)})
    lines = text.splitlines()
    assert lines[0] == "h:9092 (id: 7 rack: null) -> ("
    assert lines[1] == "\tProduce(0): 0 to 9 [usable: 9],"
    assert lines[2] == "\tFetch(1): UNSUPPORTED,"
    assert "\tApiVersions(18): 0 to 3 [usable: 3]," in lines
    assert "\tAddPartitionsToTxn(24): UNSUPPORTED," in lines
    assert "\tAlterIsr(56): UNSUPPORTED," in lines
    assert lines[-2:] == ["\tUNKNOWN(99): 0 to 1", ")"]
    assert len(lines) == len(ApiKey) + 3
