"""Client quotas in ZooKeeper: kafka-configs.sh --zookeeper writes Kafka's znodes and change
notifications, DescribeClientQuotas' filters select as Kafka's ZkAdminManager, and the
broker's DynamicConfigManager hands every quota entity to its quota managers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.common.errors import InvalidRequestError
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.server.dynamic_config import DynamicConfigManager
from kafkaclone.server.quota import DEFAULT_ENTITY, QuotaEntity, QuotaManagers, entity_from_path
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.tools import configs_command
from kafkaclone.zk import client_quotas
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.client_quotas import FilterComponent

pytestmark = pytest.mark.timeout(120)


def configs(zk_connect: str, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = configs_command.main(["--zookeeper", zk_connect, *args], out=out, err=err)
    assert code == 0, err.getvalue()
    return out.getvalue()


def test_kafka_configs_writes_kafkas_quota_znodes(zk_connect: str, zk: KazooClient) -> None:
    assert configs(zk_connect, "--alter", "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "producer_byte_rate=1048576,request_percentage=200") == (
        "Completed updating config for entity: client-id 'app'.\n")
    configs(zk_connect, "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--entity-type", "clients", "--entity-default",
            "--add-config", "consumer_byte_rate=2048")
    configs(zk_connect, "--alter", "--entity-type", "users", "--entity-default",
            "--add-config", "producer_byte_rate=4096")
    data, _ = zk.get("/config/clients/app")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1048576",
                                                         "request_percentage": "200.0"}}
    data, _ = zk.get("/config/users/alice/clients/<default>")
    assert json.loads(data)["config"] == {"consumer_byte_rate": "2048"}
    data, _ = zk.get("/config/users/<default>")
    assert json.loads(data)["config"] == {"producer_byte_rate": "4096"}
    changes = sorted(zk.get_children("/config/changes"))
    paths = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] for c in changes]
    assert paths == ["clients/app", "users/alice/clients/<default>", "users/<default>"]

    # In the znode's order (java.util.Properties' hash order, as Kafka writes and lists it).
    assert configs(zk_connect, "--describe", "--entity-type", "clients") == (
        "Configs for client-id 'app' are request_percentage=200.0,producer_byte_rate=1048576\n")
    assert configs(zk_connect, "--describe", "--entity-type", "users", "--entity-name", "alice",
                   "--entity-type", "clients") == (
        "Configs for user-principal 'alice', default client-id are consumer_byte_rate=2048\n")

    configs(zk_connect, "--alter", "--entity-type", "clients", "--entity-name", "app",
            "--delete-config", "request_percentage")
    data, _ = zk.get("/config/clients/app")
    assert json.loads(data)["config"] == {"producer_byte_rate": "1048576"}


def test_invalid_quota_values_are_refused(zk_client: KafkaZkClient) -> None:
    with pytest.raises(InvalidRequestError, match="must be a Long value"):
        run(client_quotas.alter_client_quotas(zk_client, {"client-id": "c"},
                                              [("producer_byte_rate", 1.5)]))
    with pytest.raises(InvalidRequestError, match="Invalid configuration key"):
        run(client_quotas.alter_client_quotas(zk_client, {"user": "u"}, [("retention.ms", 1)]))


def test_describe_filters_as_kafka(zk_client: KafkaZkClient) -> None:
    for entity in ({"user": "alice"}, {"user": None}, {"client-id": "app"},
                   {"user": "alice", "client-id": "app"}):
        run(client_quotas.alter_client_quotas(zk_client, entity,
                                              [("producer_byte_rate", 100.0)]))

    def described(components: list[FilterComponent], strict: bool) -> list[dict[str, str | None]]:
        found = run(client_quotas.describe_client_quotas(zk_client, components, strict))
        return sorted((entity for entity, _ in found), key=str)

    assert described([FilterComponent("user", "alice")], strict=True) == [{"user": "alice"}]
    assert described([FilterComponent("user", "alice")], strict=False) == sorted(
        [{"user": "alice"}, {"user": "alice", "client-id": "app"}], key=str)
    assert described([FilterComponent("user", None)], strict=True) == [{"user": None}]
    assert described([FilterComponent("user", any_name=True)], strict=True) == sorted(
        [{"user": "alice"}, {"user": None}], key=str)
    assert len(described([], strict=False)) == 4


def test_the_broker_loads_and_follows_quota_entities(zk_client: KafkaZkClient,
                                                     tmp_path: Path) -> None:
    run(zk_client.create_top_level_paths())
    run(client_quotas.alter_client_quotas(zk_client, {"client-id": "app"},
                                          [("producer_byte_rate", 1000.0)]))
    quotas = QuotaManagers()
    log_manager = LogManager(LogManagerConfig.from_props({"log.dirs": str(tmp_path)}),
                             clock=reactor)

    def update(entity_path: str, values: dict[str, str]) -> None:
        entity = entity_from_path(entity_path)
        assert entity is not None
        quotas.update(entity, values)

    manager = DynamicConfigManager(1, zk_client, log_manager, {"broker.id": "1"}, reactor,
                                   quota_config_handler=update)
    run(manager.startup())
    try:
        assert quotas.produce.quotas == {QuotaEntity(None, "app"): 1000.0}
        run(client_quotas.alter_client_quotas(zk_client, {"user": "alice", "client-id": None},
                                              [("consumer_byte_rate", 2000.0)]))
        run_until(lambda: quotas.fetch.enabled, timeout=30)
        assert quotas.fetch.quotas == {QuotaEntity("alice", DEFAULT_ENTITY): 2000.0}
        run(client_quotas.alter_client_quotas(zk_client, {"client-id": "app"},
                                              [("producer_byte_rate", None)]))
        run_until(lambda: not quotas.produce.enabled, timeout=30)
    finally:
        manager.shutdown()
