"""The project's AdminClient (and BrokerConnection) against the admin handlers served over
real TCP, with real ZooKeeper and a simulated controller; and interop: confluent-kafka's and
kafka-python's admin clients against the same served dispatcher."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from kafkaclone.clients.admin import (
    APPEND,
    BROKER,
    TOPIC,
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import (
    InvalidReplicationFactorError,
    NetworkExceptionError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.zk.client import KafkaZkClient
from tests.clients.cluster_double import AdminCluster, admin_cluster, serve


@pytest.fixture
def cluster(zk_client: KafkaZkClient, zk_connect: str) -> Iterator[AdminCluster]:
    yield from admin_cluster(zk_client, zk_connect)


def test_topic_lifecycle(cluster, zk):
    def client(port):
        with AdminClient(f"127.0.0.1:{port}", request_timeout_ms=10000) as admin:
            created = admin.create_topics([NewTopic("t1", 3, 2, configs={"retention.ms": "5"}),
                                           NewTopic("t2", replica_assignment={0: [2, 3]})])
            again = admin.create_topics([NewTopic("t1", 1, 1), NewTopic("big", 1, 9)])
            listed = admin.list_topics()
            described = admin.describe_topics(["t1", "nope"])
            grown = admin.create_partitions({"t2": NewPartitions(2)})
            configs = admin.describe_configs([ConfigResource(TOPIC, "t1")],
                                             include_synonyms=True)
            altered = admin.incremental_alter_configs({ConfigResource(TOPIC, "t1"): [
                AlterConfigOp("cleanup.policy", "compact", APPEND)]})
            stored = json.loads(zk.get("/config/topics/t1")[0])["config"]
            broker = admin.describe_configs([ConfigResource(BROKER, "1")])
            cluster_info = admin.describe_cluster()
            versions = admin.api_versions()
            deleted = admin.delete_topics(["t1", "ghost"])
            after = admin.list_topics()
            return (created, again, listed, described, grown, configs, altered, stored,
                    broker, cluster_info, versions, deleted, after)

    (created, again, listed, described, grown, configs, altered, stored, broker, cluster_info,
     versions, deleted, after) = serve(cluster, client)
    assert created == {"t1": None, "t2": None}
    assert isinstance(again["t1"], TopicAlreadyExistsError)
    assert isinstance(again["big"], InvalidReplicationFactorError)
    assert listed == ["t1", "t2"]
    assert [p.partition for p in described["t1"].partitions] == [0, 1, 2]
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0]
               for p in described["t1"].partitions)
    assert isinstance(described["nope"], UnknownTopicOrPartitionError)
    assert grown == {"t2": None}
    entries = configs[ConfigResource(TOPIC, "t1")]
    assert entries["retention.ms"].value == "5" and entries["retention.ms"].source == 1
    assert altered == {ConfigResource(TOPIC, "t1"): None}
    assert stored == {
        "retention.ms": "5", "cleanup.policy": "delete,compact"}
    assert broker[ConfigResource(BROKER, "1")]["log.retention.hours"].value == "72"
    assert cluster_info.cluster_id == "kc-admin-test-cluster1"
    assert cluster_info.controller.id == 1
    assert [n.id for n in cluster_info.nodes] == [1, 2, 3]
    assert all(ApiKey.CREATE_TOPICS in v for v in versions.values())
    assert deleted["t1"] is None
    assert isinstance(deleted["ghost"], UnknownTopicOrPartitionError)
    assert after == ["t2"]


def test_connection_errors_carry_kafka_codes(cluster):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(NetworkExceptionError, match="failed"):
        BrokerConnection("127.0.0.1", port, request_timeout_ms=2000).connect()
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        conn = BrokerConnection("127.0.0.1", silent.getsockname()[1], request_timeout_ms=300)
        with pytest.raises(RequestTimedOutError) as info:
            conn.connect()
        assert info.value.code == 7
        assert not conn.connected


def test_version_negotiation_picks_highest_common(cluster):
    def client(port):
        with BrokerConnection("127.0.0.1", port) as conn:
            return (conn.api_versions[ApiKey.CREATE_TOPICS], conn.version_for(ApiKey.METADATA),
                    conn.version_for(ApiKey.METADATA, max_version=4))

    create_range, metadata_version, capped = serve(cluster, client)
    assert create_range == (0, 7)
    assert metadata_version == 11 and capped == 4


def test_confluent_kafka_admin(cluster):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import ConfigResource as CkResource
    from confluent_kafka.admin import NewTopic as CkNewTopic

    def client(port):
        admin = ConfluentAdmin({"bootstrap.servers": f"127.0.0.1:{port}",
                                "socket.timeout.ms": 5000})
        futures = admin.create_topics([CkNewTopic("ck", 3, 2)], operation_timeout=10)
        futures["ck"].result(timeout=15)
        topics = admin.list_topics(timeout=10).topics
        partitions = sorted(topics["ck"].partitions)
        configs = admin.describe_configs([CkResource("topic", "ck")])
        entries = next(iter(configs.values())).result(timeout=15)
        deleted = admin.delete_topics(["ck"], operation_timeout=10)
        deleted["ck"].result(timeout=15)
        remaining = set(admin.list_topics(timeout=10).topics)
        return partitions, entries["cleanup.policy"].value, remaining

    partitions, policy, remaining = serve(cluster, client)
    assert partitions == [0, 1, 2]
    assert policy == "delete"
    assert "ck" not in remaining


def test_kafka_python_admin(cluster):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    def client(port):
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}",
                                 request_timeout_ms=10000)
        try:
            admin.create_topics([KpNewTopic("kp", 2, 1)], timeout_ms=10000)
            listed = admin.list_topics()
            described = admin.describe_topics(["kp"])
            configs = admin.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp")],
                                            config_filter="all")
            admin.delete_topics(["kp"], timeout_ms=10000)
            return listed, described, configs, admin.list_topics()
        finally:
            admin.close()

    listed, described, configs, after = serve(cluster, client)
    assert "kp" in listed
    assert len(described[0]["partitions"]) == 2
    assert "cleanup.policy" in configs["topic"]["kp"]
    assert "kp" not in after
