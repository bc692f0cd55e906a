"""KafkaBroker in this process against the test ZooKeeper (a chroot per test).

The broker runs on the global reactor driven by ``kafkaclone.testing.reactor``; real
clients run in a thread while the test turns the reactor. The controller is a stand-in
(the real one is kafkaclone.controller's), so these tests check the broker alone.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.common.errors import NotControllerError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.broker import (
    REGISTRATION_WAIT_MARGIN_MS,
    BrokerStartupError,
    KafkaBroker,
)
from kafkaclone.server.config import KafkaConfig
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.testing.zookeeper import expire_session


class StandInController:
    """A controller that never wins the election (or, with ``active``, always has)."""

    def __init__(self, broker_id: int, broker_epoch: int, active: bool = False) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.is_active = active
        self.epoch = 1 if active else -1
        self.started = False
        self.stopped = False
        self.shutdown_requests: list[tuple[int, int]] = []

    async def startup(self) -> None:
        self.started = True

    async def shutdown(self) -> None:
        self.stopped = True

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        if not self.is_active:
            raise NotControllerError("not the controller")
        self.shutdown_requests.append((broker_id, broker_epoch))
        return set()


BrokerFactory = Callable[..., KafkaBroker]


@pytest.fixture
def make_broker(zk_connect: str, tmp_path: Path) -> Iterator[BrokerFactory]:
    brokers: list[KafkaBroker] = []
    controllers: list[StandInController] = []

    def make(broker_id: int = 1, *, log_dir: Path | None = None, active: bool = False,
             **overrides: Any) -> KafkaBroker:
        props = {
            "broker.id": str(broker_id),
            "zookeeper.connect": zk_connect,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir or tmp_path / f"broker-{broker_id}"),
            "controlled.shutdown.max.retries": "1",
            "controlled.shutdown.retry.backoff.ms": "10",
            "zookeeper.session.timeout.ms": "6000",
            **{k.replace("_", "."): str(v) for k, v in overrides.items()},
        }

        def controller_factory(config: Any, zk: Any, bid: int, epoch: int,
                               the_reactor: Any) -> StandInController:
            controller = StandInController(bid, epoch, active)
            controllers.append(controller)
            return controller

        broker = KafkaBroker(KafkaConfig(props), reactor, controller_factory=controller_factory)
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        run(broker.shutdown(), timeout=30)


def started(broker: KafkaBroker) -> KafkaBroker:
    run(broker.startup(), timeout=30)
    return broker


def test_startup_registers_kafkas_json_and_creates_the_cluster_id_once(
        make_broker: BrokerFactory, zk: KazooClient) -> None:
    broker = started(make_broker(1))
    port = broker.bound_port()
    assert port > 0
    data, stat = zk.get("/brokers/ids/1")
    assert stat.ephemeralOwner == broker.zk_client.session_id
    assert broker.broker_epoch == stat.czxid
    registration = json.loads(data)
    assert list(registration) == ["features", "listener_security_protocol_map", "endpoints",
                                  "jmx_port", "port", "host", "version", "timestamp"]
    assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
    assert (registration["host"], registration["port"]) == ("127.0.0.1", port)
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert registration["version"] == 5 and registration["features"] == {}
    assert registration["jmx_port"] == -1
    cluster = json.loads(zk.get("/cluster/id")[0])
    assert cluster == {"version": "1", "id": broker.cluster_id}
    assert len(broker.cluster_id or "") == 22
    for path in ("/brokers/topics", "/admin/delete_topics", "/config/changes", "/brokers/seqid",
                 "/isr_change_notification", "/latest_producer_id_block"):
        assert zk.exists(path) is not None, path

    second = started(make_broker(2))
    assert second.cluster_id == broker.cluster_id
    assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
    meta = (Path(second.config.log_dirs[0]) / "meta.properties").read_text()
    assert f"cluster.id={broker.cluster_id}" in meta and "broker.id=2" in meta


def test_duplicate_broker_id_is_refused_with_one_line(make_broker: BrokerFactory,
                                                      tmp_path: Path) -> None:
    started(make_broker(1))
    # A live duplicate: the new broker waits for the session timeout plus the margin, then
    # gives up.
    duplicate = make_broker(1, log_dir=tmp_path / "other", zookeeper_session_timeout_ms=1000)
    begun = time.monotonic()
    with pytest.raises(BrokerStartupError) as info:
        run(duplicate.startup(), timeout=30)
    assert str(info.value) == "broker.id 1 already registered"
    assert time.monotonic() - begun >= (1000 + REGISTRATION_WAIT_MARGIN_MS) / 1000


def test_waits_for_the_registration_of_a_dead_session_to_go(
        make_broker: BrokerFactory, zk_connect: str, zk: KazooClient,
        caplog: pytest.LogCaptureFixture) -> None:
    # What a kill -9 leaves: /brokers/ids/1 owned by a session nobody will close for a while.
    old = KazooClient(hosts=zk_connect, timeout=10.0)
    old.start(timeout=10)
    old.create("/brokers/ids/1", b'{"version":5}', ephemeral=True, makepath=True)
    reactor.callLater(1.5, lambda: threading.Thread(target=old.stop).start())
    broker = make_broker(1)
    with caplog.at_level(logging.INFO, logger="kafkaclone.server.broker"):
        started(broker)
    old.close()
    assert zk.get("/brokers/ids/1")[1].ephemeralOwner == broker.zk_client.session_id
    assert any("still registered by another ZooKeeper session" in r.getMessage()
               for r in caplog.records)


def test_cluster_id_mismatch_is_refused(make_broker: BrokerFactory, tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    (log_dir / "meta.properties").write_text(
        "version=0\nbroker.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n")
    broker = make_broker(1, log_dir=log_dir)
    with pytest.raises(BrokerStartupError) as info:
        run(broker.startup(), timeout=30)
    reason = str(info.value)
    assert "\n" not in reason
    assert "doesn't match stored clusterId" in reason and "AAAAAAAAAAAAAAAAAAAAAA" in reason


def test_reregisters_after_session_expiry(make_broker: BrokerFactory, zk: KazooClient) -> None:
    broker = started(make_broker(1))
    first_epoch = broker.broker_epoch
    old_session = broker.zk_client.session_id
    done = threading.Event()
    thread = threading.Thread(target=lambda: (expire_session(broker.zk_client.kazoo_client),
                                              done.set()))
    thread.start()
    run_until(done.is_set, timeout=15)
    thread.join(5)
    run_until(lambda: broker.broker_epoch != first_epoch, timeout=20)
    assert broker.zk_client.session_id != old_session
    _, stat = zk.get("/brokers/ids/1")
    assert stat.czxid == broker.broker_epoch
    assert stat.ephemeralOwner == broker.zk_client.session_id


def test_clean_shutdown_deregisters_and_marks_logs_clean(make_broker: BrokerFactory,
                                                         zk: KazooClient, tmp_path: Path) -> None:
    broker = started(make_broker(1))
    controller = broker.controller
    assert isinstance(controller, StandInController) and controller.started
    run(broker.shutdown(), timeout=30)
    assert controller.stopped
    assert zk.exists("/brokers/ids/1") is None
    assert (tmp_path / "broker-1" / ".kafka_cleanshutdown").exists()
    assert not broker.zk_client.connected


def test_controlled_shutdown_goes_to_the_controller_over_the_wire(
        make_broker: BrokerFactory, zk: KazooClient) -> None:
    controller_broker = started(make_broker(1, active=True))
    zk.create("/controller", json.dumps({"version": 1, "brokerid": 1,
                                         "timestamp": "1"}).encode(), ephemeral=True)
    other = started(make_broker(2))
    assert run(other.controlled_shutdown(), timeout=20) is True
    controller = controller_broker.controller
    assert isinstance(controller, StandInController)
    assert controller.shutdown_requests == [(2, other.broker_epoch)]


def test_controlled_shutdown_without_controller_gives_up_after_the_retries(
        make_broker: BrokerFactory) -> None:
    broker = started(make_broker(1, controlled_shutdown_max_retries=2))
    start = time.monotonic()
    assert run(broker.controlled_shutdown(), timeout=20) is False
    assert time.monotonic() - start < 5


def serve_client(client: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run ``client()`` in a thread while turning the reactor."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = client()
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        reactor.iterate(0.005)
    thread.join(timeout=1)
    assert not thread.is_alive(), "client thread did not finish"
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_answers_api_versions_and_metadata_over_tcp(make_broker: BrokerFactory) -> None:
    from confluent_kafka.admin import AdminClient

    broker = started(make_broker(1))
    port = broker.bound_port()
    # What the controller sends once the broker is live (kafkaclone.controller's job).
    update = APIS[ApiKey.UPDATE_METADATA].request
    s = update.structs
    broker.metadata_cache.update_metadata(update(
        controller_id=1, controller_epoch=1, live_brokers=[s["UpdateMetadataBroker"](
            id=1, endpoints=[s["UpdateMetadataEndpoint"](
                port=port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0)])]), 7)

    def client() -> Any:
        from kafka.admin import KafkaAdminClient

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                             "socket.timeout.ms": 5000})
        metadata = admin.list_topics(timeout=10)
        kafka_admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}",
                                       request_timeout_ms=10000)
        try:
            versions = kafka_admin.api_versions()
        finally:
            kafka_admin.close()
        return metadata, versions

    metadata, versions = serve_client(client)
    assert metadata.cluster_id == broker.cluster_id
    assert metadata.controller_id == 1
    assert {b.id: b.port for b in metadata.brokers.values()} == {1: port}
    assert metadata.topics == {}
    assert versions[ApiKey.LEADER_AND_ISR] == (0, 5)
    assert versions[ApiKey.METADATA][1] >= 11


def test_auto_create_writes_the_topic_to_zookeeper(make_broker: BrokerFactory,
                                                   zk: KazooClient) -> None:
    broker = started(make_broker(1, num_partitions=3, auto_create_topics_enable="true"))
    errors = run(broker.auto_create_topics(["fresh", "wide"]))
    assert errors == {"fresh": 5, "wide": 5}  # LEADER_NOT_AVAILABLE
    assignment = json.loads(zk.get("/brokers/topics/fresh")[0])
    assert assignment["partitions"] == {"0": [1], "1": [1], "2": [1]}
    assert run(broker.auto_create_topics(["fresh"])) == {"fresh": 5}
    broker_rf3 = make_broker(2, default_replication_factor=3)
    started(broker_rf3)
    assert run(broker_rf3.auto_create_topics(["toowide"])) == {"toowide": 38}
    assert zk.exists("/brokers/topics/toowide") is None


def test_unreachable_zookeeper_is_refused_within_the_connection_timeout(
        make_broker: BrokerFactory) -> None:
    from kafkaclone.testing.zookeeper import free_port

    broker = make_broker(1, zookeeper_connect=f"127.0.0.1:{free_port()}",
                         zookeeper_connection_timeout_ms=1000)
    start = time.monotonic()
    with pytest.raises(BrokerStartupError) as info:
        run(broker.startup(), timeout=20)
    assert time.monotonic() - start < 10
    assert str(info.value).startswith("Timed out waiting for connection to ZooKeeper at 127.0.0.1:")
