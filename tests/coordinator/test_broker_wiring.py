"""The group coordinator inside a broker: started after the replica manager as its
leadership listener, stopped with the broker; an unsupported offsets.storage refuses to
start."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet import reactor

from kafkaclone.coordinator.group.coordinator import GroupCoordinator
from kafkaclone.server.broker import BrokerStartupError, KafkaBroker
from kafkaclone.server.config import KafkaConfig
from kafkaclone.testing.reactor import run

pytestmark = pytest.mark.timeout(60)


def broker(zk_connect: str, tmp_path: Path, **extra: str) -> KafkaBroker:
    props = {"broker.id": "1", "zookeeper.connect": zk_connect,
             "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
             "controlled.shutdown.enable": "false", "group.max.size": "7", **extra}
    return KafkaBroker(KafkaConfig(props), reactor,
                       controller_factory=lambda *args: _Passive())


class _Passive:
    is_active = False
    epoch = -1
    broker_epoch = -1

    async def startup(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[object]:
        return set()


def test_coordinator_follows_the_replica_manager(zk_connect: str, tmp_path: Path) -> None:
    kafka = broker(zk_connect, tmp_path)
    try:
        run(kafka.startup(), timeout=30)
        coordinator = kafka.group_coordinator
        assert isinstance(coordinator, GroupCoordinator) and coordinator.is_active
        assert coordinator.config.group_max_size == 7
        assert kafka.replica_manager is not None
        assert coordinator.on_leadership_change in kafka.replica_manager.leadership_listeners
    finally:
        run(kafka.shutdown(), timeout=30)
    assert not coordinator.is_active


def test_offsets_storage_kafka_is_refused(zk_connect: str, tmp_path: Path) -> None:
    kafka = broker(zk_connect, tmp_path, **{"offsets.storage": "kafka"})
    try:
        with pytest.raises(BrokerStartupError) as info:
            run(kafka.startup(), timeout=30)
        assert "offsets.storage=kafka is not supported" in str(info.value)
    finally:
        run(kafka.shutdown(), timeout=30)
