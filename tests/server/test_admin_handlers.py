"""The admin handlers (CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeCluster) through the dispatcher, against a
real ZooKeeper (the test's chroot), with a simulated controller feeding the metadata
cache. Znodes are checked byte for byte, and nothing is written on errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkaclone.network.socket_server import ConnectionInfo
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from tests.clients.cluster_double import AdminCluster, admin_cluster

CONNECTION = ConnectionInfo("PLAINTEXT-1", "127.0.0.1", 50000)


@pytest.fixture
def cluster(zk_client: KafkaZkClient, zk_connect: str) -> Iterator[AdminCluster]:
    yield from admin_cluster(zk_client, zk_connect)


def call(cluster: AdminCluster, key: ApiKey, version: int, body: Any) -> Any:
    frame = api.encode_request(key, version, 7, "test", body)
    reply = run(cluster.dispatcher.dispatch(CONNECTION, frame), timeout=20)
    assert reply is not None
    correlation_id, response = api.decode_response(key, version, reply)
    assert correlation_id == 7
    return response


def request(key: ApiKey, **fields: Any) -> Any:
    return api.APIS[key].request(**fields)


def struct(key: ApiKey, struct_name: str, **fields: Any) -> Any:
    return api.APIS[key].request.structs[struct_name](**fields)


def topic(name: str, partitions: int = 3, rf: int = 2, assignments: Any = (),
          **configs: str) -> Any:
    return struct(ApiKey.CREATE_TOPICS, "CreatableTopic", name=name, num_partitions=partitions,
                  replication_factor=rf, assignments=[
                      struct(ApiKey.CREATE_TOPICS, "CreatableReplicaAssignment",
                             partition_index=p, broker_ids=list(b))
                      for p, b in enumerate(assignments)],
                  configs=[struct(ApiKey.CREATE_TOPICS, "CreateableTopicConfig", name=k, value=v)
                           for k, v in configs.items()])


def create(cluster: AdminCluster, *topics: Any, version: int = 7, validate_only: bool = False,
           timeout_ms: int = 5000) -> Any:
    return call(cluster, ApiKey.CREATE_TOPICS, version, request(
        ApiKey.CREATE_TOPICS, topics=list(topics), timeout_ms=timeout_ms,
        validate_only=validate_only))


def znodes(zk: KazooClient, path: str = "/") -> dict[str, Any]:
    """Every znode under ``path`` with its JSON payload (or raw bytes)."""
    found: dict[str, Any] = {}

    def walk(p: str) -> None:
        for child in zk.get_children(p):
            full = f"{p.rstrip('/')}/{child}"
            data, _ = zk.get(full)
            try:
                found[full] = json.loads(data) if data else None
            except ValueError:
                found[full] = data
            walk(full)

    walk(path)
    return found


# --- CreateTopics -----------------------------------------------------------------------------


def test_create_topic_writes_kafkas_znodes_and_waits_for_leaders(cluster, zk):
    response = create(cluster, topic("orders", 3, 2, **{"cleanup.policy": "compact"}))
    (result,) = response.topics
    assert (result.name, result.error_code, result.error_message) == ("orders", 0, None)
    assert result.num_partitions == 3 and result.replication_factor == 2
    configs = {c.name: (c.value, c.config_source) for c in result.configs}
    assert configs["cleanup.policy"] == ("compact", 1)  # DYNAMIC_TOPIC_CONFIG
    # log.retention.hours=72 in server.properties; Kafka reports no synonym for it, so
    # retention.ms is DEFAULT_CONFIG with the value the hours give
    assert configs["retention.ms"] == ("259200000", 5)
    assert configs["segment.bytes"] == ("536870912", 4)  # STATIC_BROKER_CONFIG
    assert configs["max.message.bytes"] == ("1048588", 5)  # DEFAULT_CONFIG
    assignment = json.loads(zk.get("/brokers/topics/orders")[0])
    assert assignment["version"] == 3
    assert sorted(assignment["partitions"]) == ["0", "1", "2"]
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in assignment["partitions"].values())
    assert assignment["adding_replicas"] == {} and assignment["removing_replicas"] == {}
    assert str(result.topic_id) != "00000000-0000-0000-0000-000000000000"
    assert json.loads(zk.get("/config/topics/orders")[0]) == {
        "version": 1, "config": {"cleanup.policy": "compact"}}
    leaders = [cluster.broker.metadata_cache.partition_state("orders", p).leader
               for p in range(3)]
    assert leaders == [assignment["partitions"][str(p)][0] for p in range(3)]


def test_broker_defaults_manual_assignment_and_v0(cluster, zk):
    response = create(cluster, topic("defaults", -1, -1), version=4)
    assert response.topics[0].error_code == 0
    assert len(json.loads(zk.get("/brokers/topics/defaults")[0])["partitions"]) == 2
    response = create(cluster, topic("manual", -1, -1, assignments=[(3, 1), (1, 2)]),
                      version=0)
    assert response.topics[0].error_code == 0
    assert json.loads(zk.get("/brokers/topics/manual")[0])["partitions"] == {
        "0": [3, 1], "1": [1, 2]}


@pytest.mark.parametrize(("new_topic", "code"), [
    (topic("bad/name"), 17),  # INVALID_TOPIC_EXCEPTION
    (topic("."), 17),
    (topic("x" * 250), 17),
    (topic("zero", 0), 37),  # INVALID_PARTITIONS
    (topic("negative", -5), 37),
    (topic("too-many-replicas", 1, 4), 38),  # INVALID_REPLICATION_FACTOR
    (topic("no-replicas", 1, 0), 38),
    (topic("both", 2, 1, assignments=[(1,)]), 42),  # INVALID_REQUEST
    (topic("dup-replicas", -1, -1, assignments=[(1, 1)]), 39),  # INVALID_REPLICA_ASSIGNMENT
    (topic("gap", -1, -1, assignments=[(1,), (2,)]) , 0),
    (topic("unknown-config", **{"no.such.config": "1"}), 40),  # INVALID_CONFIG
    (topic("bad-value", **{"cleanup.policy": "sometimes"}), 40),
])
def test_create_errors_write_nothing(cluster, zk, new_topic, code):
    before = znodes(zk)
    response = create(cluster, new_topic, version=5)
    (result,) = response.topics
    assert result.error_code == code, result.error_message
    if code:
        assert result.error_message
        assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])
        assert znodes(zk) == before


def test_sparse_manual_assignment_is_invalid(cluster, zk):
    t = topic("sparse", -1, -1, assignments=[(1,), (2,)])
    t.assignments[1].partition_index = 5
    before = znodes(zk)
    assert create(cluster, t).topics[0].error_code == 39
    assert znodes(zk) == before


def test_duplicate_create_and_duplicate_entries(cluster, zk):
    assert create(cluster, topic("once")).topics[0].error_code == 0
    before = znodes(zk)
    again = create(cluster, topic("once")).topics[0]
    assert (again.error_code, again.error_message) == (36, "Topic 'once' already exists.")
    twice = create(cluster, topic("twice"), topic("twice"))
    assert [t.error_code for t in twice.topics] == [42, 42]
    assert znodes(zk) == before


def test_validate_only_writes_nothing(cluster, zk):
    before = znodes(zk)
    response = create(cluster, topic("dry", 4, 3), validate_only=True)
    (result,) = response.topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 3)
    assert znodes(zk) == before


def test_only_the_controller_creates(cluster, zk):
    cluster.broker.controller.is_active = False
    before = znodes(zk)
    response = create(cluster, topic("elsewhere"))
    assert response.topics[0].error_code == 41  # NOT_CONTROLLER
    assert znodes(zk) == before


def test_request_timed_out_when_no_leader_appears(cluster, zk):
    cluster.controller.paused = True
    response = create(cluster, topic("slow"), timeout_ms=200)
    assert response.topics[0].error_code == 7  # REQUEST_TIMED_OUT
    assert zk.exists("/brokers/topics/slow")  # created all the same, as in Kafka
    assert create(cluster, topic("instant"), timeout_ms=0).topics[0].error_code == 7


# --- DeleteTopics / CreatePartitions ----------------------------------------------------------


def test_delete_topics(cluster, zk):
    create(cluster, topic("doomed"))
    response = call(cluster, ApiKey.DELETE_TOPICS, 4, request(
        ApiKey.DELETE_TOPICS, topic_names=["doomed", "ghost"], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("doomed", 0), ("ghost", 3)]
    assert not zk.exists("/brokers/topics/doomed")
    assert not cluster.broker.metadata_cache.contains("doomed")


def test_delete_by_id_v6_and_not_controller(cluster, zk):
    created = create(cluster, topic("by-id")).topics[0]
    state = struct(ApiKey.DELETE_TOPICS, "DeleteTopicState", name=None,
                   topic_id=created.topic_id)
    response = call(cluster, ApiKey.DELETE_TOPICS, 6, request(
        ApiKey.DELETE_TOPICS, topics=[state], timeout_ms=5000))
    assert [(r.name, r.error_code) for r in response.responses] == [("by-id", 0)]
    response = call(cluster, ApiKey.DELETE_TOPICS, 6, request(
        ApiKey.DELETE_TOPICS, topics=[state], timeout_ms=5000))
    assert response.responses[0].error_code == 100  # UNKNOWN_TOPIC_ID
    cluster.broker.controller.is_active = False
    response = call(cluster, ApiKey.DELETE_TOPICS, 1, request(
        ApiKey.DELETE_TOPICS, topic_names=["x"], timeout_ms=5000))
    assert response.responses[0].error_code == 41


def test_delete_disabled(zk_client, zk_connect, zk):
    for cluster in admin_cluster(zk_client, zk_connect, delete_topic_enable="false"):
        create(cluster, topic("kept"))
        for version, code in ((2, 42), (3, 73)):
            response = call(cluster, ApiKey.DELETE_TOPICS, version, request(
                ApiKey.DELETE_TOPICS, topic_names=["kept"], timeout_ms=1000))
            assert response.responses[0].error_code == code
        assert not zk.exists("/admin/delete_topics/kept")


def create_partitions(cluster: AdminCluster, name: str, count: int,
                      assignments: Any = None, validate_only: bool = False) -> Any:
    t = struct(ApiKey.CREATE_PARTITIONS, "CreatePartitionsTopic", name=name, count=count,
               assignments=None if assignments is None else [
                   struct(ApiKey.CREATE_PARTITIONS, "CreatePartitionsAssignment",
                          broker_ids=list(a)) for a in assignments])
    response = call(cluster, ApiKey.CREATE_PARTITIONS, 3, request(
        ApiKey.CREATE_PARTITIONS, topics=[t], timeout_ms=5000, validate_only=validate_only))
    return response.results[0]


def test_create_partitions(cluster, zk, zk_client):
    create(cluster, topic("grow", -1, -1, assignments=[(1, 2)]))
    before = znodes(zk)
    assert create_partitions(cluster, "grow", 1).error_code == 37
    assert create_partitions(cluster, "grow", 0).error_code == 37
    assert create_partitions(cluster, "grow", 3, [(2, 3)]).error_code == 39
    assert create_partitions(cluster, "grow", 2, [(7, 3)]).error_code == 39
    assert create_partitions(cluster, "grow", 2, validate_only=True).error_code == 0
    assert create_partitions(cluster, "ghost", 2).error_code == 3
    assert znodes(zk) == before
    result = create_partitions(cluster, "grow", 3, [(2, 3), (3, 1)])
    assert (result.error_code, result.error_message) == (0, None)
    assert json.loads(zk.get("/brokers/topics/grow")[0])["partitions"] == {
        "0": [1, 2], "1": [2, 3], "2": [3, 1]}
    assert cluster.broker.metadata_cache.partition_count("grow") == 3


# --- configs ------------------------------------------------------------------------------------


def describe(cluster: AdminCluster, resource_type: int, name: str, keys: Any = None,
             version: int = 4, synonyms: bool = True, docs: bool = False) -> Any:
    resource = struct(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigsResource",
                      resource_type=resource_type, resource_name=name, configuration_keys=keys)
    response = call(cluster, ApiKey.DESCRIBE_CONFIGS, version, request(
        ApiKey.DESCRIBE_CONFIGS, resources=[resource], include_synonyms=synonyms,
        include_documentation=docs))
    return response.results[0]


def test_describe_topic_configs_sources_and_synonyms(cluster):
    create(cluster, topic("cfg", **{"retention.ms": "1000"}))
    result = describe(cluster, 2, "cfg", docs=True)
    assert result.error_code == 0
    entries = {c.name: c for c in result.configs}
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("1000", 1, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", 1)]
    segment = entries["segment.bytes"]
    assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
        ("log.segment.bytes", "536870912", 4), ("log.segment.bytes", "1073741824", 5)]
    assert retention.config_type == 5  # LONG
    assert retention.documentation
    compression = entries["compression.type"]
    assert (compression.value, compression.config_source) == ("producer", 5)
    assert [(s.name, s.source) for s in compression.synonyms] == [("compression.type", 5)]
    only = describe(cluster, 2, "cfg", keys=["segment.bytes", "max.message.bytes"], version=0)
    assert [(c.name, c.is_default) for c in only.configs] == [
        ("segment.bytes", False), ("max.message.bytes", True)]
    assert describe(cluster, 2, "ghost").error_code == 3
    assert describe(cluster, 2, "bad/name").error_code == 17


def test_describe_broker_configs(cluster):
    result = describe(cluster, 4, "1")
    entries = {c.name: c for c in result.configs}
    assert (entries["log.retention.hours"].value,
            entries["log.retention.hours"].config_source) == ("72", 4)
    assert entries["broker.id"].read_only is True
    assert entries["num.io.threads"].read_only is False
    assert entries["num.io.threads"].config_source == 5
    assert describe(cluster, 4, "2").error_code == 42
    assert describe(cluster, 4, "").configs == []


def alter(cluster: AdminCluster, resource_type: int, name: str, validate_only: bool = False,
          **configs: str | None) -> Any:
    resource = struct(ApiKey.ALTER_CONFIGS, "AlterConfigsResource", resource_type=resource_type,
                      resource_name=name, configs=[
                          struct(ApiKey.ALTER_CONFIGS, "AlterableConfig", name=k, value=v)
                          for k, v in configs.items()])
    response = call(cluster, ApiKey.ALTER_CONFIGS, 1, request(
        ApiKey.ALTER_CONFIGS, resources=[resource], validate_only=validate_only))
    return response.responses[0]


def notifications(zk: KazooClient) -> list[Any]:
    if not zk.exists("/config/changes"):
        return []
    return [json.loads(zk.get(f"/config/changes/{c}")[0])
            for c in sorted(zk.get_children("/config/changes"))]


def test_alter_topic_configs(cluster, zk):
    create(cluster, topic("alt", **{"retention.ms": "1000"}))
    assert alter(cluster, 2, "alt", **{"segment.bytes": "1048576"}).error_code == 0
    assert json.loads(zk.get("/config/topics/alt")[0]) == {
        "version": 1, "config": {"segment.bytes": "1048576"}}
    assert notifications(zk) == [{"version": 2, "entity_path": "topics/alt"}]
    entries = {c.name: c for c in describe(cluster, 2, "alt").configs}
    assert entries["segment.bytes"].config_source == 1
    assert entries["retention.ms"].config_source == 5
    before = znodes(zk)
    assert alter(cluster, 2, "alt", **{"no.such": "1"}).error_code == 40
    assert alter(cluster, 2, "alt", **{"segment.bytes": "tiny"}).error_code == 42
    assert alter(cluster, 2, "alt", **{"segment.bytes": None}).error_code == 42
    assert alter(cluster, 2, "ghost", **{"segment.bytes": "1048576"}).error_code == 3
    assert alter(cluster, 2, "alt", True, **{"segment.bytes": "2097152"}).error_code == 0
    assert znodes(zk) == before


def test_alter_broker_configs(cluster, zk):
    assert alter(cluster, 4, "1", **{"log.cleaner.threads": "2"}).error_code == 0
    assert json.loads(zk.get("/config/brokers/1")[0]) == {
        "version": 1, "config": {"log.cleaner.threads": "2"}}
    assert alter(cluster, 4, "", **{"log.retention.ms": "5000"}).error_code == 0
    assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {
        "log.retention.ms": "5000"}
    assert notifications(zk) == [{"version": 2, "entity_path": "brokers/1"},
                                 {"version": 2, "entity_path": "brokers/<default>"}]
    entries = {c.name: c for c in describe(cluster, 4, "1").configs}
    assert (entries["log.cleaner.threads"].value,
            entries["log.cleaner.threads"].config_source) == ("2", 2)
    assert entries["log.retention.ms"].config_source == 3
    default_entries = describe(cluster, 4, "").configs
    assert [(c.name, c.value, c.config_source) for c in default_entries] == [
        ("log.retention.ms", "5000", 3)]
    before = znodes(zk)
    rejected = alter(cluster, 4, "1", **{"broker.id": "7"})
    assert rejected.error_code == 42
    assert "Cannot update these configs dynamically" in rejected.error_message
    assert alter(cluster, 4, "2", **{"log.cleaner.threads": "2"}).error_code == 42
    assert alter(cluster, 4, "", **{"listeners": "PLAINTEXT://:1"}).error_code == 42
    # Kafka would start the new listener; kafkaclone refuses rather than store it unused.
    refused = alter(cluster, 4, "1", **{"advertised.listeners": "PLAINTEXT://h:1"})
    assert refused.error_code == 42
    assert ("listeners cannot be changed at runtime on kafkaclone; restart the broker with "
            "the new value (advertised.listeners)") in refused.error_message
    assert znodes(zk) == before


def incremental(cluster: AdminCluster, resource_type: int, name: str,
                *ops: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    resource = struct(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigsResource",
                      resource_type=resource_type, resource_name=name, configs=[
                          struct(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterableConfig", name=k,
                                 config_operation=op, value=v) for k, op, v in ops])
    response = call(cluster, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, resources=[resource], validate_only=validate_only))
    return response.responses[0]


def test_incremental_alter_configs(cluster, zk):
    create(cluster, topic("inc", **{"retention.ms": "1000", "segment.bytes": "1048576"}))
    result = incremental(cluster, 2, "inc", ("retention.ms", 1, None),
                         ("cleanup.policy", 2, "compact"), ("max.message.bytes", 0, "2000"))
    assert result.error_code == 0, result.error_message
    assert json.loads(zk.get("/config/topics/inc")[0])["config"] == {
        "segment.bytes": "1048576", "cleanup.policy": "delete,compact",
        "max.message.bytes": "2000"}
    assert incremental(cluster, 2, "inc", ("cleanup.policy", 3, "delete")).error_code == 0
    assert json.loads(zk.get("/config/topics/inc")[0])["config"]["cleanup.policy"] == "compact"
    before = znodes(zk)
    assert incremental(cluster, 2, "inc", ("segment.bytes", 2, "1")).error_code == 42
    assert incremental(cluster, 2, "inc", ("a.b", 0, "1"), ("a.b", 1, None)).error_code == 42
    assert incremental(cluster, 2, "inc", ("segment.bytes", 0, None)).error_code == 42
    assert incremental(cluster, 2, "inc", ("no.such", 0, "1")).error_code == 40
    assert incremental(cluster, 4, "1", ("broker.id", 0, "3")).error_code == 42
    refused = incremental(cluster, 4, "1", ("listeners", 0, "PLAINTEXT://127.0.0.1:1"))
    assert refused.error_code == 42
    assert "listeners cannot be changed at runtime" in refused.error_message
    assert znodes(zk) == before
    assert incremental(cluster, 4, "1", ("num.io.threads", 0, "4")).error_code == 0
    assert json.loads(zk.get("/config/brokers/1")[0])["config"] == {"num.io.threads": "4"}
    # Kafka's DynamicThreadPool rule: from 4, at least 2 and at most 8 threads.
    for value, rule in (("1", "be at least half the current value 4"),
                        ("9", "not be greater than double the current value 4")):
        refused = incremental(cluster, 4, "1", ("num.io.threads", 0, value))
        assert refused.error_code == 42, refused
        assert refused.error_message.endswith(
            "): Dynamic thread count update validation failed for "
            f"num.io.threads={value}, value should {rule}"), refused.error_message
    refused = incremental(cluster, 4, "", ("num.replica.fetchers", 0, "3"))
    assert refused.error_code == 42 and "double the current value 1" in refused.error_message
    assert incremental(cluster, 4, "1", ("num.io.threads", 0, "8")).error_code == 0
    assert json.loads(zk.get("/config/brokers/1")[0])["config"] == {"num.io.threads": "8"}


def test_describe_cluster(cluster):
    response = call(cluster, ApiKey.DESCRIBE_CLUSTER, 0, request(
        ApiKey.DESCRIBE_CLUSTER, include_cluster_authorized_operations=True))
    assert (response.error_code, response.cluster_id, response.controller_id) == (
        0, "kc-admin-test-cluster1", 1)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (1, "127.0.0.1", 9092), (2, "127.0.0.1", 9092), (3, "127.0.0.1", 9092)]
    assert response.cluster_authorized_operations > 0
