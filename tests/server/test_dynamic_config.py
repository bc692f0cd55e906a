"""DynamicConfigManager: config changes written to ZooKeeper reach the broker's logs.

A real KafkaZkClient against the test ZooKeeper, a real LogManager on a temporary dir;
changes are made the way kafka-configs.sh makes them (AdminZkClient: the entity's config
znode, then a /config/changes notification).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.server.dynamic_config import DynamicConfigManager
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.zk.admin import AdminZkClient
from kafkaclone.zk.change_notification_listener import CHANGE_EXPIRATION_MS
from kafkaclone.zk.client import KafkaZkClient

STATIC = {"broker.id": "1", "log.retention.hours": "168", "log.segment.bytes": "1073741824"}
WEEK_MS = 168 * 3600 * 1000


@pytest.fixture
def log_manager(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(LogManagerConfig.from_props({**STATIC, "log.dirs": str(tmp_path)}),
                         clock=reactor)
    manager.startup()
    yield manager
    manager.shutdown()


@pytest.fixture
def admin(zk_client: KafkaZkClient) -> AdminZkClient:
    admin = AdminZkClient(zk_client)
    run(zk_client.create_top_level_paths())
    for topic in ("plain", "tuned"):
        run(admin.create_topic_with_assignment(topic, {}, {0: [1]}, uuid.uuid4()))
    return admin


@pytest.fixture
def dynamic(zk_client: KafkaZkClient, log_manager: LogManager,
            admin: AdminZkClient) -> Iterator[DynamicConfigManager]:
    for topic in ("plain", "tuned"):
        log_manager.get_or_create_log(TopicPartition(topic, 0), is_new=True)
    manager = DynamicConfigManager(1, zk_client, log_manager, STATIC, reactor)
    run(manager.startup())
    yield manager
    manager.shutdown()


def config_of(manager: LogManager, topic: str) -> Any:
    log = manager.get_log(TopicPartition(topic, 0))
    assert log is not None
    return log.config


def test_a_topic_config_change_reaches_the_topics_logs(dynamic: DynamicConfigManager,
                                                       log_manager: LogManager,
                                                       admin: AdminZkClient) -> None:
    assert config_of(log_manager, "tuned").retention_ms == WEEK_MS
    run(admin.change_topic_config("tuned", {"retention.ms": "60000",
                                            "segment.bytes": "1048576"}))
    run_until(lambda: config_of(log_manager, "tuned").retention_ms == 60000, timeout=10)
    assert config_of(log_manager, "tuned").segment_bytes == 1048576
    assert config_of(log_manager, "plain").retention_ms == WEEK_MS
    # Removing the override brings the broker default back.
    run(admin.change_topic_config("tuned", {}))
    run_until(lambda: config_of(log_manager, "tuned").retention_ms == WEEK_MS, timeout=10)
    assert config_of(log_manager, "tuned").segment_bytes == 1073741824


def test_dynamic_broker_defaults_apply_under_topic_overrides(dynamic: DynamicConfigManager,
                                                             log_manager: LogManager,
                                                             admin: AdminZkClient) -> None:
    run(admin.change_topic_config("tuned", {"retention.ms": "60000"}))
    run_until(lambda: config_of(log_manager, "tuned").retention_ms == 60000, timeout=10)
    run(admin.change_broker_config(None, {"log.retention.ms": "3600000"}))
    run_until(lambda: config_of(log_manager, "plain").retention_ms == 3600000, timeout=10)
    assert log_manager.default_config.retention_ms == 3600000
    assert config_of(log_manager, "tuned").retention_ms == 60000
    # This broker's own dynamic config wins over the cluster default; another broker's
    # does not concern it.
    run(admin.change_broker_config(2, {"log.retention.ms": "1000"}))
    run(admin.change_broker_config(1, {"log.retention.ms": "7200000"}))
    run_until(lambda: config_of(log_manager, "plain").retention_ms == 7200000, timeout=10)
    assert dynamic.dynamic_broker_configs == {"log.retention.ms": "7200000"}


def test_startup_applies_what_changed_while_the_broker_was_down(
        zk_client: KafkaZkClient, log_manager: LogManager, admin: AdminZkClient) -> None:
    run(admin.change_broker_config(None, {"log.segment.bytes": "2097152"}))
    run(admin.change_topic_config("tuned", {"retention.ms": "120000"}))
    log_manager.get_or_create_log(TopicPartition("plain", 0), is_new=True)
    log_manager.get_or_create_log(TopicPartition("tuned", 0), is_new=True)
    manager = DynamicConfigManager(1, zk_client, log_manager, STATIC, reactor)
    run(manager.startup())
    try:
        assert config_of(log_manager, "plain").segment_bytes == 2097152
        assert config_of(log_manager, "tuned").retention_ms == 120000
        assert config_of(log_manager, "tuned").segment_bytes == 2097152
        assert manager.notifications.last_executed_change >= 1
    finally:
        manager.shutdown()


class LaterClock:
    """The reactor's time moved past the notifications' expiry."""

    def seconds(self) -> float:
        return float(reactor.seconds()) + CHANGE_EXPIRATION_MS / 1000 + 60  # type: ignore[attr-defined]


def test_expired_notifications_are_purged(zk_client: KafkaZkClient, log_manager: LogManager,
                                          admin: AdminZkClient, zk: KazooClient) -> None:
    run(admin.change_topic_config("tuned", {"retention.ms": "120000"}))
    assert zk.get_children("/config/changes")
    manager = DynamicConfigManager(1, zk_client, log_manager, STATIC, LaterClock())
    run(manager.startup())
    try:
        assert zk.get_children("/config/changes") == []
    finally:
        manager.shutdown()


def test_broker_config_changes_reach_the_broker_config_handler(
        zk_client: KafkaZkClient, log_manager: LogManager, admin: AdminZkClient) -> None:
    """The socket server's connection limits are dynamic (Kafka's DynamicConnectionQuota):
    the handler sees the effective props, this broker's over the cluster default."""
    seen: list[dict[str, Any]] = []
    manager = DynamicConfigManager(1, zk_client, log_manager, STATIC, reactor,
                                   broker_config_handler=lambda props: seen.append(dict(props)))
    run(manager.startup())
    try:
        run(admin.change_broker_config(None, {"max.connections.per.ip": "50"}))
        run_until(lambda: bool(seen) and seen[-1].get("max.connections.per.ip") == "50",
                  timeout=10)
        run(admin.change_broker_config(1, {"max.connections.per.ip.overrides": "10.0.0.1:5"}))
        run_until(lambda: seen[-1].get("max.connections.per.ip.overrides") == "10.0.0.1:5",
                  timeout=10)
        assert seen[-1]["max.connections.per.ip"] == "50"
        assert seen[-1]["broker.id"] == "1"
    finally:
        manager.shutdown()
