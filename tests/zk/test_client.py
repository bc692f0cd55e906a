"""KafkaZkClient against a real ZooKeeper, driven by the real Twisted reactor: Kafka's
operations and their znodes (the session layer below it: test_zookeeper_client.py)."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.testing.zookeeper import expire_session
from kafkaclone.zk.client import PARTITIONS_PER_MULTI, KafkaZkClient
from kafkaclone.zk.errors import (
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    ZooKeeperClientClosedError,
)
from kafkaclone.zk.znodes import (
    MATCH_ANY_VERSION,
    PERSISTENT_ZK_PATHS,
    BrokerId,
    BrokerInfo,
    ConsumerRegistration,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    ReplicaAssignment,
    TopicPartition,
)
from kafkaclone.zk.zookeeper_client import (
    CreateOp,
    SetDataOp,
    StateChangeHandler,
    ZNodeChangeHandler,
    ZNodeChildChangeHandler,
)
from tests.zk.conftest import MAIN_THREAD, ClientFactory, run, run_until


def broker(broker_id: int, port: int = 9092) -> BrokerInfo:
    return BrokerInfo(
        BrokerId(broker_id),
        (EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", port + broker_id),),
        timestamp_ms=1_700_000_000_000,
    )


# -- session --------------------------------------------------------------------------------------


def test_start_and_close(make_client: ClientFactory, zk: KazooClient) -> None:
    client = make_client()
    assert client.connected
    assert client.session_id is not None
    run(client.create_top_level_paths())
    for path in PERSISTENT_ZK_PATHS:
        assert zk.exists(path), path
    run(client.close())
    assert not client.connected
    with pytest.raises(ZooKeeperClientClosedError):
        run(client.get_cluster_id())
    run(client.close())  # idempotent


def test_create_chroot_if_necessary(zk_server: Any, zk_root: KazooClient) -> None:
    chroot = f"/chroot-{uuid.uuid4().hex}/kafka"
    run(KafkaZkClient.create_chroot_if_necessary(f"{zk_server.connect_string}{chroot}", reactor))
    try:
        assert zk_root.exists(chroot)
        run(KafkaZkClient.create_chroot_if_necessary(zk_server.connect_string, reactor))
    finally:
        zk_root.delete(chroot.rsplit("/", 1)[0], recursive=True)


# -- cluster id and brokers -----------------------------------------------------------------------


def test_create_or_get_cluster_id(make_client: ClientFactory, zk: KazooClient) -> None:
    first, second = make_client(), make_client()
    assert run(first.get_cluster_id()) is None
    cluster_id = "eQzK4lYlQ9y8P21IScOl_g"
    assert run(first.create_or_get_cluster_id(cluster_id)) == cluster_id
    assert run(second.create_or_get_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")) == cluster_id
    assert zk.get("/cluster/id")[0] == b'{"version":"1","id":"eQzK4lYlQ9y8P21IScOl_g"}'


def test_register_broker_writes_kafkas_json_and_returns_the_broker_epoch(
    zk_client: KafkaZkClient, zk: KazooClient
) -> None:
    run(zk_client.create_top_level_paths())
    epoch = run(zk_client.register_broker(broker(1)))
    data, stat = zk.get("/brokers/ids/1")
    assert epoch == stat.czxid
    assert stat.ephemeralOwner == zk_client.session_id
    assert data == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:9093"],"jmx_port":-1,"port":9093,'
        b'"host":"127.0.0.1","version":5,"timestamp":"1700000000000"}'
    )
    assert run(zk_client.get_broker(1)) == broker(1)
    assert run(zk_client.get_broker(2)) is None
    # registering again from the same session (a retried request) is fine
    assert run(zk_client.register_broker(broker(1))) == epoch


def test_duplicate_broker_id_is_rejected(make_client: ClientFactory) -> None:
    first, second = make_client(), make_client()
    run(first.register_broker(broker(1)))
    with pytest.raises(BrokerIdAlreadyRegisteredError, match=r"broker\.id 1 already registered"):
        run(second.register_broker(broker(1)))
    assert run(second.get_broker(1)) == broker(1)


def test_broker_registration_disappears_with_its_session(
    make_client: ClientFactory, zk: KazooClient
) -> None:
    first, second = make_client(), make_client()
    run(first.register_broker(broker(1)))
    run(second.register_broker(broker(2)))
    assert run(second.get_all_broker_ids()) == [1, 2]
    run(first.close())
    assert not zk.exists("/brokers/ids/1")
    assert run(second.get_all_broker_ids()) == [2]
    assert [b.broker_id for b in run(second.get_all_brokers_in_cluster())] == [2]
    epochs = run(second.get_all_broker_and_epochs_in_cluster())
    assert epochs[BrokerId(2)][1] == zk.exists("/brokers/ids/2").czxid


def test_broker_child_watch_fires_on_the_reactor(make_client: ClientFactory) -> None:
    watcher, other = make_client(), make_client()
    run(watcher.create_top_level_paths())
    changes: list[threading.Thread] = []

    class BrokerChange(ZNodeChildChangeHandler):
        def handle_child_change(self) -> None:
            changes.append(threading.current_thread())

    watcher.register_znode_child_change_handler(BrokerChange("/brokers/ids"))
    assert run(watcher.get_all_broker_ids(register_watch=True)) == []
    run(other.register_broker(broker(3)))
    run_until(lambda: len(changes) == 1)
    assert changes == [MAIN_THREAD]
    # a watch fires once: without re-reading, the next change is not seen
    run(other.register_broker(broker(4)))
    assert run(watcher.get_all_broker_ids(register_watch=True)) == [3, 4]
    run(other.close())
    run_until(lambda: len(changes) == 2)


def test_data_watch_handler(make_client: ClientFactory) -> None:
    client, other = make_client(), make_client()
    events: list[str] = []

    class ControllerChange(ZNodeChangeHandler):
        def handle_creation(self) -> None:
            events.append("created")

        def handle_deletion(self) -> None:
            events.append("deleted")

        def handle_data_change(self) -> None:
            events.append("changed")

    handler = ControllerChange("/controller")
    assert run(client.register_znode_change_handler_and_check_existence(handler)) is False
    run(other.register_controller_and_increment_controller_epoch(7))
    run_until(lambda: events == ["created"])
    assert run(client.get_controller_id()) == 7  # re-arms the watch
    run(other.close())
    run_until(lambda: events == ["created", "deleted"])
    client.unregister_znode_change_handler("/controller")


def test_generate_broker_sequence_id(zk_client: KafkaZkClient) -> None:
    assert run(zk_client.generate_broker_sequence_id()) == 1
    assert run(zk_client.generate_broker_sequence_id()) == 2


# -- controller election and fencing --------------------------------------------------------------


def test_controller_election_bumps_the_epoch(make_client: ClientFactory, zk: KazooClient) -> None:
    first, second = make_client(), make_client()
    assert run(first.get_controller_id()) is None
    epoch, zk_version = run(first.register_controller_and_increment_controller_epoch(1))
    assert (epoch, zk_version) == (1, 1)
    assert zk.get("/controller_epoch")[0] == b"1"
    controller, stat = zk.get("/controller")
    assert json.loads(controller)["brokerid"] == 1
    assert list(json.loads(controller)) == ["version", "brokerid", "timestamp"]
    assert stat.ephemeralOwner == first.session_id
    with pytest.raises(ControllerMovedError):
        run(second.register_controller_and_increment_controller_epoch(2))
    assert run(second.get_controller_id()) == 1
    assert zk.get("/controller_epoch")[0] == b"1"  # the loser bumped nothing

    run(first.close())
    assert run(second.register_controller_and_increment_controller_epoch(2)) == (2, 2)
    assert run(second.get_controller_epoch()).value == 2  # type: ignore[union-attr]


def test_a_deposed_controller_cannot_write(make_client: ClientFactory, zk: KazooClient) -> None:
    """Fencing: the old controller's session expires, another broker becomes controller,
    and every write the old one still attempts with its epoch zkVersion fails."""
    old, new = make_client(), make_client()
    run(old.create_top_level_paths())
    run(old.create_topic_assignment("t", None, {0: [1, 2], 1: [1, 2]}))
    _, old_epoch_zk_version = run(old.register_controller_and_increment_controller_epoch(1))
    tp = TopicPartition("t", 0)
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), 1)
    assert run(old.create_topic_partition_states({tp: state}, old_epoch_zk_version)) == {tp: None}

    lost = threading.Event()

    class Expiry(StateChangeHandler):
        def before_initializing_session(self) -> None:
            lost.set()

    old.register_state_change_handler(Expiry("controller"))
    expire_session(old.kazoo_client)
    run_until(lambda: lost.is_set() and old.connected)
    assert not zk.exists("/controller")

    new_epoch, new_epoch_zk_version = run(new.register_controller_and_increment_controller_epoch(2))
    assert new_epoch == 2
    assert new_epoch_zk_version > old_epoch_zk_version

    before = zk.get("/brokers/topics/t/partitions/0/state")
    moved = LeaderAndIsr(2, 1, (2,), before[1].version)
    with pytest.raises(ControllerMovedError):
        run(old.update_leader_and_isr({tp: moved}, 1, old_epoch_zk_version))
    with pytest.raises(ControllerMovedError):
        run(
            old.create_topic_partition_states({TopicPartition("t", 1): state}, old_epoch_zk_version)
        )
    with pytest.raises(ControllerMovedError):
        run(old.delete_isr_change_notifications(["0000000000"], old_epoch_zk_version))
    with pytest.raises(ControllerMovedError):
        run(old.delete_controller(old_epoch_zk_version))
    assert zk.get("/brokers/topics/t/partitions/0/state") == before
    assert not zk.exists("/brokers/topics/t/partitions/1")
    assert json.loads(zk.get("/controller")[0])["brokerid"] == 2

    # the new controller's writes go through
    result = run(new.update_leader_and_isr({tp: moved}, new_epoch, new_epoch_zk_version))
    assert result.finished_partitions == {tp: moved.with_zk_version(before[1].version + 1)}


def test_update_leader_and_isr_retries_on_a_stale_partition_epoch(
    zk_client: KafkaZkClient, zk: KazooClient
) -> None:
    _, epoch_zk_version = run(zk_client.register_controller_and_increment_controller_epoch(1))
    run(zk_client.create_topic_assignment("t", None, {0: [1, 2], 1: [1, 2]}))
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), 1)
    created = run(
        zk_client.create_topic_partition_states({tp0: initial, tp1: initial}, epoch_zk_version)
    )
    assert created == {tp0: None, tp1: None}
    again = run(zk_client.create_topic_partition_states({tp0: initial}, epoch_zk_version))
    assert isinstance(again[tp0], NodeExistsError)

    state_path = "/brokers/topics/t/partitions/1/state"
    zk.set(state_path, zk.get(state_path)[0])
    update = {
        tp0: LeaderAndIsr(1, 0, (1,), 0),
        tp1: LeaderAndIsr(1, 0, (1,), 0),  # the znode is at version 1 now
    }
    result = run(zk_client.update_leader_and_isr(update, 1, epoch_zk_version))
    assert result.finished_partitions == {tp0: LeaderAndIsr(1, 0, (1,), 1)}
    assert result.partitions_to_retry == [tp1]
    states = run(zk_client.get_topic_partition_states([tp0, tp1, TopicPartition("t", 9)]))
    assert states[tp0] == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 1), 1)
    assert states[tp1].leader_and_isr.zk_version == 1
    assert set(states) == {tp0, tp1}
    assert run(zk_client.get_all_partitions()) == {tp0, tp1}


def test_new_partition_states_are_created_in_a_few_pipelined_multi_ops(
    zk_client: KafkaZkClient, zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, epoch_zk_version = run(zk_client.register_controller_and_increment_controller_epoch(1))
    count = 2 * PARTITIONS_PER_MULTI + 1
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), 1)
    states = {TopicPartition("t", p): initial for p in range(count)}
    run(zk_client.create_topic_assignment("t", None, {p: [1, 2] for p in range(count)}))
    multis: list[int] = []
    original = zk_client.zookeeper_client.multi

    async def counted(ops: Any) -> list[Any]:
        multis.append(len(ops))
        return await original(ops)

    monkeypatch.setattr(zk_client.zookeeper_client, "multi", counted)
    created = run(zk_client.create_topic_partition_states(states, epoch_zk_version))
    assert created == dict.fromkeys(states)
    # the topic's partitions znode, then three multi-ops of a check and two creates each
    assert multis == [2, 1 + 2 * PARTITIONS_PER_MULTI, 1 + 2 * PARTITIONS_PER_MULTI, 3]
    assert len(zk.get_children("/brokers/topics/t/partitions")) == count
    assert json.loads(zk.get(f"/brokers/topics/t/partitions/{count - 1}/state")[0])["isr"] == [1, 2]

    # one existing state makes its multi-op fail as a whole: redone one znode at a time
    zk.delete("/brokers/topics/t/partitions/0", recursive=True)
    again = run(zk_client.create_topic_partition_states(
        {TopicPartition("t", 0): initial, TopicPartition("t", 1): initial}, epoch_zk_version))
    assert again[TopicPartition("t", 0)] is None
    assert isinstance(again[TopicPartition("t", 1)], NodeExistsError)


def test_partition_states_are_updated_in_a_few_pipelined_multi_ops(
    zk_client: KafkaZkClient, zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, epoch_zk_version = run(zk_client.register_controller_and_increment_controller_epoch(1))
    count = 2 * PARTITIONS_PER_MULTI + 1
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), 1)
    run(zk_client.create_topic_assignment("t", None, {p: [1, 2] for p in range(count)}))
    run(zk_client.create_topic_partition_states(
        {TopicPartition("t", p): initial for p in range(count)}, epoch_zk_version))
    stale = PARTITIONS_PER_MULTI + 3  # changed under us: its whole multi-op fails
    state_path = f"/brokers/topics/t/partitions/{stale}/state"
    zk.set(state_path, zk.get(state_path)[0])
    multis: list[int] = []
    original = zk_client.zookeeper_client.multi

    async def counted(ops: Any) -> list[Any]:
        multis.append(len(ops))
        return await original(ops)

    monkeypatch.setattr(zk_client.zookeeper_client, "multi", counted)
    update = {TopicPartition("t", p): LeaderAndIsr(2, 1, (2,), 0) for p in range(count)}
    result = run(zk_client.update_leader_and_isr(update, 1, epoch_zk_version))
    assert result.partitions_to_retry == [TopicPartition("t", stale)]
    assert result.finished_partitions == {
        tp: LeaderAndIsr(2, 1, (2,), 1) for tp in update if tp.partition != stale}
    # three multi-ops of a check and the writes, then the failed one redone a write at a time
    assert multis[:3] == [1 + PARTITIONS_PER_MULTI, 1 + PARTITIONS_PER_MULTI, 2]
    assert multis[3:] == [2] * PARTITIONS_PER_MULTI
    assert json.loads(zk.get(state_path)[0])["leader"] == 1
    assert json.loads(zk.get("/brokers/topics/t/partitions/0/state")[0])["leader"] == 2


def test_partition_leader_conditional_isr_update(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    run(zk_client.create_topic_assignment("t", None, {0: [1, 2, 3]}))
    tp = TopicPartition("t", 0)
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2, 3]), 1)
    run(zk_client.create_topic_partition_states({tp: initial}, MATCH_ANY_VERSION))
    shrunk = LeaderAndIsr(1, 0, (1, 2), 0)
    assert run(zk_client.conditional_update_partition_state(tp, shrunk, 1)) == (True, 1)
    # a retried write that already went through counts as done
    assert run(zk_client.conditional_update_partition_state(tp, shrunk, 1)) == (True, 1)
    # a stale one does not
    stale = LeaderAndIsr(1, 0, (1,), 0)
    assert run(zk_client.conditional_update_partition_state(tp, stale, 1)) == (False, -2)
    assert json.loads(zk.get("/brokers/topics/t/partitions/0/state")[0])["isr"] == [1, 2]
    path = run(zk_client.propagate_isr_changes([tp]))
    assert path == "/isr_change_notification/isr_change_0000000000"


def test_guarded_writes_with_a_valid_epoch(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    _, epoch_zk_version = run(zk_client.register_controller_and_increment_controller_epoch(1))
    run(zk_client.guarded(CreateOp("/x", b"1"), epoch_zk_version))
    with pytest.raises(NodeExistsError):
        run(zk_client.guarded(CreateOp("/x", b"1"), epoch_zk_version))
    with pytest.raises(BadVersionError):
        run(zk_client.guarded(SetDataOp("/x", b"2", 5), epoch_zk_version))
    with pytest.raises(ValueError, match="must be >= 0"):
        run(zk_client.guarded(SetDataOp("/x", b"2"), -7))
    assert zk.get("/x")[0] == b"1"


# -- session expiry -------------------------------------------------------------------------------


def test_session_expiry_hooks_let_the_broker_re_register(
    make_client: ClientFactory, zk: KazooClient
) -> None:
    client = make_client()
    run(client.create_top_level_paths())
    run(client.register_broker(broker(5)))
    old_session = client.session_id
    calls: list[str] = []
    re_registered: list[int] = []

    class BrokerRegistration(StateChangeHandler):
        def before_initializing_session(self) -> None:
            calls.append(f"before:{threading.current_thread().name}")

        def after_initializing_session(self) -> None:
            calls.append(f"after:{threading.current_thread().name}")
            Deferred.fromCoroutine(client.register_broker(broker(5))).addCallback(
                re_registered.append
            )

    client.register_state_change_handler(BrokerRegistration("broker-info"))
    expire_session(client.kazoo_client)
    run_until(lambda: len(re_registered) == 1)
    main = MAIN_THREAD.name
    assert calls == [f"before:{main}", f"after:{main}"]
    assert client.session_id != old_session
    stat = zk.exists("/brokers/ids/5")
    assert stat.ephemeralOwner == client.session_id
    assert re_registered == [stat.czxid]
    client.unregister_state_change_handler("broker-info")


# -- topics, deletion, configs, notifications -----------------------------------------------------


def test_topic_assignment(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    topic_id = uuid.uuid4()
    run(zk_client.create_topic_assignment("t", topic_id, {0: [1, 2], 1: [2, 1]}))
    with pytest.raises(NodeExistsError):
        run(zk_client.create_topic_assignment("t", topic_id, {0: [1]}))
    assert run(zk_client.topic_exists("t"))
    assert not run(zk_client.topic_exists("u"))
    assert run(zk_client.get_all_topics_in_cluster()) == {"t"}
    found = run(zk_client.get_topic_assignment("t"))
    assert found is not None
    assert found.value.topic_id == topic_id
    assert found.value.replicas() == {0: (1, 2), 1: (2, 1)}
    assert run(zk_client.get_topic_ids_for_topics(["t", "u"])) == {"t": topic_id}
    assert run(zk_client.get_topic_partition_count("t")) == 2
    assert run(zk_client.get_topic_partition_count("u")) is None

    grown = {p: ReplicaAssignment(r) for p, r in {0: (1, 2), 1: (2, 1), 2: (1, 2)}.items()}
    assert run(zk_client.set_topic_assignment("t", topic_id, grown)) == 1
    assert run(zk_client.get_partition_assignment_for_topics(["t"])) == {"t": grown}

    run(zk_client.delete_topic_znode("t", MATCH_ANY_VERSION))
    assert not zk.exists("/brokers/topics/t")


def test_topic_deletion_flags(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    run(zk_client.create_delete_topic_path("t"))
    assert zk.get("/admin/delete_topics/t")[0] == b""
    with pytest.raises(NodeExistsError):
        run(zk_client.create_delete_topic_path("t"))
    run(zk_client.create_delete_topic_path("u"))
    assert run(zk_client.get_topic_deletions()) == ["t", "u"]
    assert run(zk_client.is_topic_marked_for_deletion("t"))
    run(zk_client.delete_topic_deletions(["t"], MATCH_ANY_VERSION))
    assert run(zk_client.get_topic_deletions()) == ["u"]


def test_isr_change_notifications(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    run(zk_client.create_top_level_paths())
    a, b = TopicPartition("a", 0), TopicPartition("b", 1)
    first = run(zk_client.propagate_isr_changes([a]))
    second = run(zk_client.propagate_isr_changes([a, b]))
    assert zk.get(first)[0] == b'{"version":1,"partitions":[{"topic":"a","partition":0}]}'
    sequence_numbers = run(zk_client.get_all_isr_change_notifications())
    assert sequence_numbers == [first[-10:], second[-10:]]
    assert run(zk_client.get_partitions_from_isr_change_notifications(sequence_numbers)) == {a, b}
    run(zk_client.delete_isr_change_notifications(sequence_numbers[:1], MATCH_ANY_VERSION))
    assert run(zk_client.get_all_isr_change_notifications()) == sequence_numbers[1:]
    run(zk_client.delete_isr_change_notifications(None, MATCH_ANY_VERSION))
    assert zk.get_children("/isr_change_notification") == []


def test_entity_configs_and_change_notifications(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    assert run(zk_client.get_entity_configs("topics", "t")) == {}
    run(zk_client.set_or_create_entity_configs("topics", "t", {"cleanup.policy": "compact"}))
    run(zk_client.set_or_create_entity_configs("topics", "t", {"retention.ms": "1000"}))
    assert run(zk_client.get_entity_configs("topics", "t")) == {"retention.ms": "1000"}
    assert zk.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert run(zk_client.get_topic_configs(["t", "u"])) == {"t": {"retention.ms": "1000"}, "u": {}}
    path = run(zk_client.create_config_change_notification("topics/t"))
    assert path.startswith("/config/changes/config_change_")
    assert zk.get(path)[0] == b'{"version":2,"entity_path":"topics/t"}'
    assert run(zk_client.get_all_entities_with_config("topics")) == ["t"]
    run(zk_client.delete_topic_configs(["t", "gone"], MATCH_ANY_VERSION))
    assert not zk.exists("/config/topics/t")


def test_reassignment_and_preferred_replica_election(zk_client: KafkaZkClient) -> None:
    tp = TopicPartition("t", 0)
    assert not run(zk_client.reassign_partitions_in_progress())
    run(zk_client.create_partition_reassignment({tp: [2, 3]}))
    assert run(zk_client.reassign_partitions_in_progress())
    assert run(zk_client.get_partition_reassignment()) == {tp: (2, 3)}
    run(zk_client.delete_partition_reassignment(MATCH_ANY_VERSION))
    run(zk_client.delete_partition_reassignment(MATCH_ANY_VERSION))
    assert run(zk_client.get_partition_reassignment()) == {}
    run(zk_client.create_preferred_replica_election([tp]))
    assert run(zk_client.get_preferred_replica_election()) == {tp}
    run(zk_client.delete_preferred_replica_election(MATCH_ANY_VERSION))
    assert run(zk_client.get_preferred_replica_election()) == set()


def test_producer_id_blocks(make_client: ClientFactory, zk: KazooClient) -> None:
    first, second = make_client(), make_client()
    assert run(first.allocate_producer_id_block(1)) == ProducerIdBlock(1, 0, 999)
    assert run(second.allocate_producer_id_block(2)) == ProducerIdBlock(2, 1000, 1999)
    assert zk.get("/latest_producer_id_block")[0] == (
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    )


def test_consumer_offsets_and_group_mirrors(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    tp = TopicPartition("t", 3)
    assert run(zk_client.get_consumer_offset("g", tp)) is None
    run(zk_client.set_or_create_consumer_offset("g", tp, 42))
    run(zk_client.set_or_create_consumer_offset("g", tp, 43))
    run(zk_client.set_or_create_consumer_offset("g", TopicPartition("u", 0), 7))
    assert zk.get("/consumers/g/offsets/t/3")[0] == b"43"
    assert run(zk_client.get_consumer_offset("g", tp)) == 43
    assert run(zk_client.get_consumer_offsets("g")) == {tp: 43, TopicPartition("u", 0): 7}
    assert run(zk_client.get_consumer_groups()) == ["g"]

    run(zk_client.register_consumer("g", "m-1", ConsumerRegistration({"t": 1}, timestamp_ms=1)))
    data, stat = zk.get("/consumers/g/ids/m-1")
    assert data == b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}'
    assert stat.ephemeralOwner == zk_client.session_id
    run(zk_client.set_partition_owner("g", tp, "m-1-0"))
    run(zk_client.set_partition_owner("g", tp, "m-1-1"))
    assert zk.get("/consumers/g/owners/t/3")[0] == b"m-1-1"
    assert run(zk_client.delete_path("/consumers/g/owners/t/3"))
    assert not run(zk_client.delete_path("/consumers/g/owners/t/3"))


def test_generic_operations(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    run(zk_client.create_recursive("/a/b/c", b"x"))
    with pytest.raises(NodeExistsError):
        run(zk_client.create_recursive("/a/b/c"))
    run(zk_client.create_recursive("/a/b/c", throw_if_path_exists=False))
    assert run(zk_client.get_data_and_version("/a/b/c")) == (b"x", 0)
    assert run(zk_client.get_data_and_version("/nope")) == (None, -2)
    assert run(zk_client.set_data("/a/b/c", b"y", 0)) == 1
    with pytest.raises(BadVersionError):
        run(zk_client.set_data("/a/b/c", b"z", 0))
    with pytest.raises(NoNodeError):
        run(zk_client.set_data("/nope", b"z"))
    assert run(zk_client.conditional_update_path("/a/b/c", b"z", 1)) == (True, 2)
    assert run(zk_client.conditional_update_path("/a/b/c", b"w", 1)) == (False, -2)
    assert run(zk_client.conditional_update_path("/nope", b"w", 1)) == (False, -2)
    seq = run(zk_client.create_sequential_persistent_path("/a/s_", b""))
    assert seq == "/a/s_0000000001"
    assert run(zk_client.delete_recursive("/a"))
    assert not run(zk_client.delete_recursive("/a"))
    assert not zk.exists("/a")
