"""A one-process stand-in for a ZooKeeper-mode cluster, for admin handler, client and tool
tests: one dispatcher (``RequestHandler``) over a broker double whose ZooKeeper clients are
real (the test's chroot), and a simulated controller that mirrors ZooKeeper into the
metadata cache the way the real controller's UpdateMetadata requests would: new topics and
partitions get their first replica as leader, topics marked for deletion are removed from
ZooKeeper and from the cache. Every broker id of the simulated cluster is served by the
same listener.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from twisted.internet import reactor
from twisted.internet.task import LoopingCall

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.network.socket_server import ConnectionInfo, KafkaServerFactory
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.delayed.admin import DelayedElectLeader
from kafkaclone.server.delayed.purgatory import DelayedOperation, DelayedOperationPurgatory
from kafkaclone.server.metadata_cache import LEADER_DURING_DELETE, MetadataCache
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.testing.reactor import run
from kafkaclone.zk.admin import AdminZkClient
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import BrokerId, BrokerIdZNode, BrokerInfo

UPDATE = api.APIS[ApiKey.UPDATE_METADATA].request
_CONTROLLER_CONNECTION = ConnectionInfo("PLAINTEXT-controller", "127.0.0.1", 50001)
_S = UPDATE.structs
CLUSTER_ID = "kc-admin-test-cluster1"
T = TypeVar("T")


@dataclass
class FakeController:
    is_active: bool = True
    epoch: int = 1

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[Any]:
        return set()


@dataclass
class AdminBroker:
    """The BrokerServices the admin handlers use, with real ZooKeeper clients."""

    config: KafkaConfig
    zk_client: KafkaZkClient
    admin_zk: AdminZkClient
    broker_id: int = 1
    cluster_id: str | None = CLUSTER_ID
    metadata_cache: MetadataCache = field(default_factory=lambda: MetadataCache(1))
    controller_epoch: int = 0
    broker_epoch: int = -1
    auto_create_topics_enable: bool = False
    authorizer: Any = None
    log_cleaner: Any = None
    log_manager: Any = None
    replica_manager: Any = None
    controller: FakeController = field(default_factory=FakeController)
    reactor: Any = reactor
    topic_purgatory: DelayedOperationPurgatory[DelayedOperation] = field(
        default_factory=lambda: DelayedOperationPurgatory("topic", reactor))
    elect_leader_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = field(
        default_factory=lambda: DelayedOperationPurgatory("ElectLeader", reactor))

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        return dict.fromkeys(names, 5)


class SimulatedController:
    """Mirrors ZooKeeper's topics into the broker's metadata cache every 20 ms, with
    UpdateMetadata requests through the broker's own handler (so that admin requests
    waiting in its purgatories are completed as by the real controller's)."""

    def __init__(self, broker: AdminBroker, live: tuple[int, ...] = (1, 2, 3),
                 port: int = 9092) -> None:
        self.broker = broker
        self._dispatcher = RequestHandler(broker=broker)
        self.live = live
        self.port = port
        self.paused = False
        self._loop = LoopingCall(self._tick)

    def start(self) -> None:
        self.publish([])
        self._loop.start(0.02, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def publish(self, topic_states: list[Any]) -> None:
        brokers = [_S["UpdateMetadataBroker"](id=b, rack=None, endpoints=[
            _S["UpdateMetadataEndpoint"](port=self.port, host="127.0.0.1", listener="PLAINTEXT",
                                         security_protocol=0)]) for b in self.live]
        request = UPDATE(controller_id=1, controller_epoch=1, broker_epoch=-1,
                         topic_states=topic_states, live_brokers=brokers)
        frame = api.encode_request(ApiKey.UPDATE_METADATA, 7, 0, "controller", request)
        answered = self._dispatcher.dispatch(_CONTROLLER_CONNECTION, frame)
        replies: list[bytes | None] = []
        answered.addCallback(replies.append)
        assert replies and replies[0] is not None, "UpdateMetadata was not answered at once"
        _, response = api.decode_response(ApiKey.UPDATE_METADATA, 7, replies[0])
        assert response.error_code == 0, response

    async def _tick(self) -> None:
        if self.paused:
            return
        try:
            await self.sync()
        except Exception:
            if self._loop.running:
                raise  # a stopped controller's last sync may meet a closed ZooKeeper client

    async def sync(self) -> None:
        zk = self.broker.zk_client
        cache = self.broker.metadata_cache
        states: list[Any] = []
        deleting = set(await zk.get_topic_deletions())
        for topic in sorted(deleting):
            count = cache.partition_count(topic) or 0
            states.append(_topic_state(topic, None, {p: () for p in range(count)}, delete=True))
            await zk.delete_recursive(f"/brokers/topics/{topic}")
            await zk.delete_recursive(f"/config/topics/{topic}")
            await zk.delete_recursive(f"/admin/delete_topics/{topic}")
        for topic in sorted(await zk.get_all_topics_in_cluster() - deleting):
            found = await zk.get_topic_assignment(topic)
            if found is None:
                continue
            new = {p: a.replicas for p, a in found.value.partitions.items()
                   if cache.partition_state(topic, p) is None}
            if new:
                states.append(_topic_state(topic, found.value.topic_id, new))
        if states:
            self.publish(states)


def _topic_state(topic: str, topic_id: Any, partitions: dict[int, tuple[int, ...]], *,
                 delete: bool = False) -> Any:
    return _S["UpdateMetadataTopicState"](
        topic_name=topic, topic_id=topic_id or uuid.UUID(int=0), partition_states=[
        _S["UpdateMetadataPartitionState"](
            partition_index=p, controller_epoch=1,
            leader=LEADER_DURING_DELETE if delete else replicas[0], leader_epoch=0,
            isr=list(replicas), zk_version=0, replicas=list(replicas), offline_replicas=[])
        for p, replicas in sorted(partitions.items())])


def make_config(zk_connect: str, **overrides: str) -> KafkaConfig:
    props = {"broker.id": "1", "zookeeper.connect": zk_connect, "log.retention.hours": "72",
             "log.segment.bytes": "536870912", "num.partitions": "2"}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return KafkaConfig(props)


@dataclass
class AdminCluster:
    broker: AdminBroker
    controller: SimulatedController
    dispatcher: RequestHandler


def admin_cluster(zk_client: KafkaZkClient, zk_connect: str,
                  **config: str) -> Iterator[AdminCluster]:
    """The body of a fixture: a started simulated cluster, stopped afterwards."""
    broker = AdminBroker(make_config(zk_connect, **config), zk_client, AdminZkClient(zk_client))
    controller = SimulatedController(broker)
    for broker_id in controller.live:  # what AdminZkClient places replicas on
        endpoint = EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
        run(zk_client.create_recursive(
            BrokerIdZNode.path(broker_id),
            BrokerIdZNode.encode(BrokerInfo(BrokerId(broker_id), (endpoint,)))))
    controller.start()
    try:
        yield AdminCluster(broker, controller, RequestHandler(broker=broker))
    finally:
        controller.stop()


def serve(cluster: AdminCluster, client: Callable[[int], T], timeout: float = 30.0) -> T:
    """Listen on 127.0.0.1, advertise that port for every broker, run ``client(port)`` in a
    thread and turn the reactor meanwhile; the client's result (or its exception)."""
    factory = KafkaServerFactory(cluster.dispatcher)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    cluster.controller.port = port.getHost().port
    cluster.controller.publish([])
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = client(port.getHost().port)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        reactor.iterate(0.005)
    stopping = port.stopListening()
    for conn in list(factory.connections):
        conn.transport.loseConnection()
    for _ in range(200):
        if stopping.called and not factory.connections:
            break
        reactor.iterate(0.01)
    thread.join(timeout=5)
    assert not thread.is_alive(), "client thread did not finish"
    if "error" in result:
        raise result["error"]
    return result["value"]  # type: ignore[no-any-return]
