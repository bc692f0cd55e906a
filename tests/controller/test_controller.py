"""KafkaController against a real ZooKeeper, with a channel that records broker requests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.common.errors import NotControllerError, StaleBrokerEpochError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.controller import KafkaController
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.broker import controller_config
from kafkaclone.server.config import KafkaConfig
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.testing.zookeeper import expire_session
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import ControllerMovedError
from kafkaclone.zk.zookeeper_client import CreateOp
from tests.controller.helpers import FakeChannel, Sent, of_kind, partition_states, register

ClientFactory = Callable[..., KafkaZkClient]
TOPIC_ID = uuid.UUID("7c2d0e6b-2f3a-4b5c-9d8e-1f2a3b4c5d6e")
T0 = TopicPartition("t", 0)


class Cluster:
    def __init__(self, make_client: ClientFactory) -> None:
        self.make_client = make_client
        self.controllers: list[KafkaController] = []
        self.sent: list[Sent] = []
        self.brokers: dict[int, KafkaZkClient] = {}
        self.storage_errors: dict[int, set[TopicPartition]] = {}
        """Replicas the brokers answer KAFKA_STORAGE_ERROR for (failed log dirs)."""

    def controller(self, broker_id: int = 1, *, unclean: bool = False,
                   client: KafkaZkClient | None = None,
                   rebalance_interval_s: int | None = None) -> KafkaController:
        zk_client = client or self.make_client()
        config = controller_config(KafkaConfig({
            "zookeeper.connect": "unused:2181", "broker.id": str(broker_id),
            "unclean.leader.election.enable": str(unclean).lower(),
            "auto.leader.rebalance.enable": str(rebalance_interval_s is not None).lower(),
            "leader.imbalance.check.interval.seconds": str(rebalance_interval_s or 300)}))
        controller = KafkaController(
            config, zk_client, broker_id, -1, reactor,
            channel_factory=lambda _: FakeChannel(self.sent,
                                                  storage_errors=self.storage_errors))
        self.controllers.append(controller)
        run(controller.startup())
        return controller

    def start_brokers(self, *ids: int) -> None:
        for broker_id in ids:
            self.brokers[broker_id] = register(self.make_client, broker_id)

    def kill(self, broker_id: int) -> None:
        run(self.brokers.pop(broker_id).close())

    def shutdown(self) -> None:
        for controller in self.controllers:
            run(controller.shutdown())


@pytest.fixture
def cluster(make_client: ClientFactory) -> Iterator[Cluster]:
    c = Cluster(make_client)
    run(make_client().create_top_level_paths())  # as the broker does before its controller
    try:
        yield c
    finally:
        c.shutdown()


def state(zk: KazooClient, tp: TopicPartition = T0) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state")
    return dict(json.loads(data))


def has_state(zk: KazooClient, tp: TopicPartition = T0) -> bool:
    return zk.exists(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state") is not None


def create_topic(zk_client: KafkaZkClient, assignment: dict[int, list[int]],
                 topic: str = "t") -> None:
    run(zk_client.create_topic_assignment(topic, TOPIC_ID, assignment))


def settle(controller: KafkaController) -> None:
    run(controller.wait_idle())


def test_election_bumps_the_epoch(cluster: Cluster, zk: KazooClient) -> None:
    controller = cluster.controller(1)
    assert controller.is_active
    assert controller.epoch == 1
    assert json.loads(zk.get("/controller")[0])["brokerid"] == 1
    assert zk.get("/controller_epoch")[0] == b"1"
    assert controller.epoch_zk_version == zk.exists("/controller_epoch").version


def test_only_one_controller_and_session_expiry_fences_the_old_one(
        cluster: Cluster, zk: KazooClient) -> None:
    first_client = cluster.make_client()
    first = cluster.controller(1, client=first_client)
    second = cluster.controller(2)
    assert first.is_active and not second.is_active
    assert second.active_controller_id == 1
    old_epoch, old_zk_version = first.epoch, first.epoch_zk_version

    expire_session(first_client.kazoo_client)
    run_until(lambda: second.is_active, timeout=20)
    assert second.epoch == old_epoch + 1
    assert zk.get("/controller_epoch")[0] == str(old_epoch + 1).encode()
    run_until(lambda: first.active_controller_id == 2, timeout=20)
    assert not first.is_active
    with pytest.raises(ControllerMovedError):
        run(first_client.guarded(CreateOp("/written_by_a_deposed_controller"), old_zk_version))
    assert zk.exists("/written_by_a_deposed_controller") is None


def test_topic_creation_writes_states_and_tells_brokers(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    cluster.sent.clear()
    create_topic(zk_client, {0: [1, 2, 3], 1: [2, 3, 1]})
    run_until(lambda: has_state(zk, TopicPartition("t", 1)))
    settle(controller)
    raw, _ = zk.get("/brokers/topics/t/partitions/0/state")
    assert raw == (b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,'
                   b'"isr":[1,2,3]}')
    assert state(zk, TopicPartition("t", 1))["leader"] == 2
    for broker in (1, 2, 3):
        lai = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, broker)
        assert lai, broker
        states = {p.partition_index: p for req in lai for topic, p in partition_states(req)}
        assert states[0].leader == 1 and states[0].isr == [1, 2, 3] and states[0].is_new
        assert all(req.body.controller_id == 1 and req.body.controller_epoch == 1
                   and req.body.broker_epoch == zk.exists(f"/brokers/ids/{broker}").czxid
                   for req in lai)
        assert lai[0].body.topic_states[0].topic_id == TOPIC_ID
        updates = of_kind(cluster.sent, ApiKey.UPDATE_METADATA, broker)
        assert any({p.partition_index for _, p in partition_states(u)} == {0, 1}
                   for u in updates)
    assert controller.context.partition_states[T0].value == "OnlinePartition"


def test_broker_failure_elects_from_isr_and_shrinks_it(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [3, 1, 2]})
    run_until(lambda: has_state(zk))
    assert state(zk)["leader"] == 3
    settle(controller)
    cluster.sent.clear()
    cluster.kill(3)
    run_until(lambda: state(zk)["leader"] == 1)
    settle(controller)
    assert state(zk) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1,
                         "isr": [1, 2]}
    lai = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR)
    assert {s.broker_id for s in lai} == {1, 2}
    assert not of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, 3)


def test_a_log_dir_event_moves_leaders_off_the_offline_replicas(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    """Kafka's onBrokerLogDirFailure: LeaderAndIsr for all of the broker's replicas; those
    answered KAFKA_STORAGE_ERROR become offline replicas (leader elsewhere, out of the
    ISR, StopReplica without deletion); the others are untouched."""
    t1 = TopicPartition("t", 1)
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [3, 1, 2], 1: [3, 2, 1]})
    run_until(lambda: has_state(zk) and has_state(zk, t1))
    settle(controller)
    cluster.sent.clear()
    cluster.storage_errors[3] = {T0}
    run(cluster.brokers[3].propagate_log_dir_event(3))
    run_until(lambda: state(zk)["leader"] == 1)
    run_until(lambda: zk.get_children("/log_dir_event_notification") == [])
    settle(controller)
    assert state(zk) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1,
                         "isr": [1, 2]}
    assert state(zk, t1)["leader"] == 3 and state(zk, t1)["isr"] == [3, 2, 1]
    offline = controller.context.replicas_on_offline_dirs
    assert {broker: tps for broker, tps in offline.items() if tps} == {3: {T0}}
    assert not controller.context.is_replica_online(3, T0)
    assert controller.context.is_replica_online(3, t1)
    (asked,) = [s for s in of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, 3)
                if len(partition_states(s)) == 2]  # every replica of broker 3
    assert sorted(p.partition_index for _, p in partition_states(asked)) == [0, 1]
    stops = of_kind(cluster.sent, ApiKey.STOP_REPLICA, 3)
    assert [(t.topic_name, p.partition_index, p.delete_partition)
            for s in stops for t in s.body.topic_states for p in t.partition_states] == [
        ("t", 0, False)]
    update = of_kind(cluster.sent, ApiKey.UPDATE_METADATA, 1)[-1]
    (t0_state,) = [p for _, p in partition_states(update) if p.partition_index == 0]
    assert t0_state.offline_replicas == [3]


def test_one_request_per_broker_per_event_however_many_partitions(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    """Kafka's ControllerBrokerRequestBatch: an event's partitions go to each broker in one
    LeaderAndIsr and one UpdateMetadata."""
    count = 600
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    cluster.sent.clear()
    create_topic(zk_client, {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3]
                             for p in range(count)})
    run_until(lambda: controller.context.partition_states.get(TopicPartition("t", count - 1))
              is not None and controller.context.partition_states[
                  TopicPartition("t", count - 1)].value == "OnlinePartition", timeout=30)
    settle(controller)
    for broker in (1, 2, 3):
        (lai,) = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, broker)
        assert len(partition_states(lai)) == count
        (update,) = of_kind(cluster.sent, ApiKey.UPDATE_METADATA, broker)
        assert len(partition_states(update)) == count

    cluster.sent.clear()
    cluster.kill(3)  # one event: a third of the partitions elect a new leader
    run_until(lambda: 3 not in controller.context.live_brokers)
    settle(controller)
    for broker in (1, 2):
        (lai,) = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, broker)
        assert len(partition_states(lai)) == count  # elected or with a shrunk ISR
        assert all(3 not in p.isr for _, p in partition_states(lai))
        (update,) = of_kind(cluster.sent, ApiKey.UPDATE_METADATA, broker)
        assert len(partition_states(update)) == count
    assert all(state(zk, TopicPartition("t", p))["leader"] != 3 for p in range(0, count, 50))


def _out_of_sync_replica(cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient,
                         unclean: bool) -> KafkaController:
    """Partition [2, 3]: 3 dies (ISR [2]), comes back out of sync, then 2 dies."""
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1, unclean=unclean)
    create_topic(zk_client, {0: [2, 3]})
    run_until(lambda: has_state(zk))
    cluster.kill(3)
    run_until(lambda: state(zk)["isr"] == [2])
    cluster.start_brokers(3)
    run_until(lambda: 3 in controller.context.live_brokers)
    settle(controller)
    assert state(zk)["isr"] == [2]
    cluster.kill(2)
    run_until(lambda: 2 not in controller.context.live_brokers)
    settle(controller)
    return controller


def test_unclean_election_disabled_keeps_the_isr_with_no_leader(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    _out_of_sync_replica(cluster, zk, zk_client, unclean=False)
    assert state(zk)["leader"] == -1
    assert state(zk)["isr"] == [2]


def test_unclean_election_enabled_elects_an_out_of_sync_replica(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient,
        caplog: pytest.LogCaptureFixture) -> None:
    _out_of_sync_replica(cluster, zk, zk_client, unclean=True)
    assert state(zk)["leader"] == 3
    assert state(zk)["isr"] == [3]
    assert "data loss" in caplog.text


def test_topic_deletion(cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2)
    controller = cluster.controller(1)
    run(zk_client.set_or_create_entity_configs("topics", "t", {"retention.ms": "1000"}))
    create_topic(zk_client, {0: [1, 2], 1: [2, 1]})
    run_until(lambda: has_state(zk, TopicPartition("t", 1)))
    settle(controller)
    cluster.sent.clear()
    run(zk_client.create_delete_topic_path("t"))
    run_until(lambda: zk.exists("/brokers/topics/t") is None)
    settle(controller)
    assert zk.exists("/config/topics/t") is None
    assert zk.exists("/admin/delete_topics/t") is None
    for broker in (1, 2):
        stops = [p for s in of_kind(cluster.sent, ApiKey.STOP_REPLICA, broker)
                 for t in s.body.topic_states for p in t.partition_states]
        assert {p.partition_index for p in stops if p.delete_partition} == {0, 1}
        updates = of_kind(cluster.sent, ApiKey.UPDATE_METADATA, broker)
        assert any(p.leader == -2 for u in updates for _, p in partition_states(u))
    assert "t" not in controller.context.all_topics


def test_controlled_shutdown_moves_leadership(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [1, 2, 3], 1: [2, 3, 1], 2: [1]})
    run_until(lambda: has_state(zk, TopicPartition("t", 2)))
    settle(controller)
    cluster.sent.clear()
    epoch = zk.exists("/brokers/ids/1").czxid
    with pytest.raises(StaleBrokerEpochError):
        run(controller.controlled_shutdown(1, epoch - 1))
    still_led = run(controller.controlled_shutdown(1, epoch))
    assert still_led == set()  # partition 2 has one replica: not moved, not reported
    assert state(zk, T0)["leader"] == 2 and state(zk, T0)["isr"] == [2, 3]
    assert state(zk, TopicPartition("t", 1))["isr"] == [2, 3]
    stops = [(t.topic_name, p.partition_index, p.delete_partition)
             for s in of_kind(cluster.sent, ApiKey.STOP_REPLICA, 1)
             for t in s.body.topic_states for p in t.partition_states]
    assert stops == [("t", 1, False)]
    standby = cluster.controller(2)
    with pytest.raises(NotControllerError):
        run(standby.controlled_shutdown(1, epoch))


def test_new_partitions_and_isr_change_notifications(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [1, 2]})
    run_until(lambda: has_state(zk))
    run(zk_client.set_topic_assignment("t", TOPIC_ID, {0: [1, 2], 1: [2, 1]}))
    run_until(lambda: has_state(zk, TopicPartition("t", 1)))
    assert state(zk, TopicPartition("t", 1))["leader"] == 2
    settle(controller)
    cluster.sent.clear()
    run(zk_client.propagate_isr_changes([T0]))
    run_until(lambda: not zk.get_children("/isr_change_notification"))
    settle(controller)
    updates = of_kind(cluster.sent, ApiKey.UPDATE_METADATA)
    assert {u.broker_id for u in updates} == {1, 2}
    assert all([(t, p.partition_index) for t, p in partition_states(u)] == [("t", 0)]
               for u in updates)


def test_failover_sends_metadata_and_leader_and_isr_for_every_partition(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2)
    create_topic(zk_client, {0: [1, 2]})
    first_client = cluster.make_client()
    first = cluster.controller(1, client=first_client)
    run_until(lambda: has_state(zk))
    second = cluster.controller(2)
    cluster.sent.clear()
    run(first.shutdown())
    run(first_client.close())
    run_until(lambda: second.is_active)
    settle(second)
    assert second.epoch == 2
    for broker in (1, 2):
        lai = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR, broker)
        assert [p.partition_index for s in lai for _, p in partition_states(s)] == [0]
        assert all(s.body.controller_epoch == 2 and s.body.controller_id == 2 for s in lai)


def _rejoin_in_sync(cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient,
                    controller: KafkaController, broker_id: int) -> None:
    """The broker comes back and catches up: its leader adds it to the ISR (a conditional
    write of the state znode, announced under /isr_change_notification)."""
    cluster.start_brokers(broker_id)
    run_until(lambda: broker_id in controller.context.live_brokers)
    settle(controller)
    for tp in controller.context.all_partitions():
        path = f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"
        data, stat = zk.get(path)
        current = json.loads(data)
        if broker_id not in current["isr"]:
            current["isr"].append(broker_id)
            zk.set(path, json.dumps(current).encode(), version=stat.version)
    run(zk_client.propagate_isr_changes(controller.context.all_partitions()))
    run_until(lambda: all(
        broker_id in controller.context.partition_leadership_info[tp].leader_and_isr.isr
        for tp in controller.context.all_partitions()))
    settle(controller)


def test_preferred_replica_election_from_zookeeper(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [3, 1, 2], 1: [1, 2, 3]})
    t1 = TopicPartition("t", 1)
    run_until(lambda: has_state(zk) and has_state(zk, t1))
    cluster.kill(3)
    run_until(lambda: state(zk)["leader"] == 1)
    _rejoin_in_sync(cluster, zk, zk_client, controller, 3)
    assert state(zk)["leader"] == 1 and sorted(state(zk)["isr"]) == [1, 2, 3]
    epoch_before = state(zk)["leader_epoch"]
    t1_before = state(zk, t1)
    cluster.sent.clear()

    run(zk_client.create_preferred_replica_election([T0, t1, TopicPartition("nope", 0)]))
    run_until(lambda: state(zk)["leader"] == 3)
    run_until(lambda: zk.exists("/admin/preferred_replica_election") is None)
    settle(controller)
    assert state(zk)["leader_epoch"] == epoch_before + 1
    assert sorted(state(zk)["isr"]) == [1, 2, 3]
    # Already led by its preferred replica: untouched.
    assert state(zk, t1) == t1_before and t1_before["leader"] == 1
    lai = of_kind(cluster.sent, ApiKey.LEADER_AND_ISR)
    assert {s.broker_id for s in lai} == {1, 2, 3}
    assert all(p.partition_index == 0 for s in lai for _, p in partition_states(s))


def test_preferred_election_needs_the_preferred_replica_in_the_isr(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1)
    create_topic(zk_client, {0: [3, 1, 2]})
    run_until(lambda: has_state(zk))
    cluster.kill(3)
    run_until(lambda: state(zk)["leader"] == 1)
    cluster.start_brokers(3)  # back, but not caught up: not in the ISR
    run_until(lambda: 3 in controller.context.live_brokers)
    settle(controller)
    run(zk_client.create_preferred_replica_election([T0]))
    run_until(lambda: zk.exists("/admin/preferred_replica_election") is None)
    settle(controller)
    assert state(zk)["leader"] == 1 and state(zk)["isr"] == [1, 2]


def test_auto_leader_rebalance_restores_preferred_leaders(
        cluster: Cluster, zk: KazooClient, zk_client: KafkaZkClient) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.controller(1, rebalance_interval_s=1)
    assignment = {p: [[1, 2, 3], [2, 3, 1], [3, 1, 2]][p % 3] for p in range(6)}
    create_topic(zk_client, assignment)
    parts = [TopicPartition("t", p) for p in range(6)]
    run_until(lambda: all(has_state(zk, tp) for tp in parts))
    cluster.kill(2)
    run_until(lambda: all(state(zk, tp)["leader"] != 2 for tp in parts))
    _rejoin_in_sync(cluster, zk, zk_client, controller, 2)
    # Broker 2 is preferred for partitions 1 and 4 and leads neither: imbalance 100% > 10%.
    run_until(lambda: all(state(zk, tp)["leader"] == assignment[tp.partition][0]
                          for tp in parts), timeout=20)
    settle(controller)
    assert controller.leader_imbalance()[2] == ([], 2)
