"""Controller failover and fencing with real broker processes (issue 4's acceptance).

A LocalCluster of three brokers with a 6 s ZooKeeper session:

- kill -9 the controller: another broker is controller within the session timeout plus a
  few seconds, ``/controller_epoch`` went up, every partition the dead broker led has a new
  leader from its ISR and an ISR without the dead broker; restarted, the broker rejoins.
- SIGSTOP the controller until its session expires, let another broker take over, SIGCONT
  it: no ZooKeeper write the old controller attempts after that lands (every znode the
  controller writes and that changed after the takeover carries the new epoch).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.wait import wait_until

SESSION_TIMEOUT_S = 6.0
TOPIC = "failover"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(3, base_dir=tmp_path / "cluster",
                      overrides={"zookeeper.session.timeout.ms": "6000"}) as local:
        yield local


@pytest.fixture
def zk(cluster: LocalCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def wait_for(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, interval=0.1)


def controller_id(zk: KazooClient) -> int | None:
    # One read, not exists-then-get: the ephemeral znode may vanish in between.
    try:
        data, _ = zk.get("/controller")
    except NoNodeError:
        return None
    return int(json.loads(data)["brokerid"])


def controller_epoch(zk: KazooClient) -> int:
    data, _ = zk.get("/controller_epoch")
    return int(data)


def partition_states(zk: KazooClient) -> dict[int, dict]:
    states = {}
    for p in range(PARTITIONS):
        data, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
        states[p] = json.loads(data)
    return states


def create_topic(cluster: LocalCluster, zk: KazooClient) -> dict[int, dict]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], request_timeout=30)
    futures[TOPIC].result(timeout=40)

    def full() -> dict[int, dict] | None:
        if zk.exists(f"/brokers/topics/{TOPIC}/partitions/{PARTITIONS - 1}/state") is None:
            return None
        states = partition_states(zk)
        ok = all(s["leader"] != -1 and sorted(s["isr"]) == [1, 2, 3] for s in states.values())
        return states if ok else None

    return wait_for(full, 30, "every partition with a leader and a full ISR")


def test_kill_9_the_controller_moves_controller_and_leaders(cluster: LocalCluster,
                                                           zk: KazooClient) -> None:
    before = create_topic(cluster, zk)
    old_controller = wait_for(lambda: controller_id(zk), 10, "a controller")
    old_epoch = controller_epoch(zk)
    led_by_victim = [p for p, s in before.items() if s["leader"] == old_controller]
    assert led_by_victim, f"the controller leads none of {before}"

    cluster.broker(old_controller).kill()
    killed_at = time.monotonic()
    new_controller = wait_for(
        lambda: (c := controller_id(zk)) is not None and c != old_controller and c,
        SESSION_TIMEOUT_S + 10, "a new controller")
    took = time.monotonic() - killed_at
    assert took <= SESSION_TIMEOUT_S + 10
    assert new_controller in (1, 2, 3)
    assert controller_epoch(zk) > old_epoch

    def moved() -> dict[int, dict] | None:
        states = partition_states(zk)
        done = all(old_controller not in s["isr"] and s["leader"] not in (-1, old_controller)
                   for s in states.values())
        return states if done else None

    after = wait_for(moved, 20, "leaders and ISRs without the dead broker")
    for p, state in after.items():
        # The new leader comes from the old ISR; the ISR only lost the dead broker.
        assert state["leader"] in before[p]["isr"]
        assert sorted(state["isr"]) == sorted(set(before[p]["isr"]) - {old_controller})
        # Every state was rewritten (the dead broker left every ISR) by the new controller.
        assert state["controller_epoch"] == controller_epoch(zk)
        if p in led_by_victim:
            assert state["leader_epoch"] > before[p]["leader_epoch"]

    cluster.restart_broker(old_controller)
    assert cluster.registered_broker_ids() == [1, 2, 3]
    # It rejoins as a plain broker: the controller stays where it moved.
    assert controller_id(zk) == new_controller
    # And the cluster's metadata lists it again (the controller sent UpdateMetadata).
    admin = AdminClient({"bootstrap.servers": cluster.broker(new_controller).bootstrap_server})
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3, 20,
             "three brokers in the metadata")


def znode_writes_since(zk: KazooClient, zxid: int) -> dict[str, bytes]:
    """Every controller-written znode modified after ``zxid`` (/brokers/ids is the brokers'
    own registration, not a controller write)."""
    changed: dict[str, bytes] = {}

    def visit(path: str) -> None:
        data, stat = zk.get(path)
        if stat.mzxid > zxid or stat.czxid > zxid:
            changed[path] = data
        for child in zk.get_children(path):
            child_path = f"{path.rstrip('/')}/{child}"
            if child_path in ("/zookeeper", "/brokers/ids", "/fencing-marker"):
                continue
            visit(child_path)

    visit("/")
    return changed


def test_a_frozen_controller_is_fenced_after_it_resumes(cluster: LocalCluster,
                                                        zk: KazooClient) -> None:
    create_topic(cluster, zk)
    old_controller = wait_for(lambda: controller_id(zk), 10, "a controller")
    old_epoch = controller_epoch(zk)
    victim = cluster.broker(old_controller)

    victim.suspend()
    try:
        new_controller = wait_for(
            lambda: (c := controller_id(zk)) is not None and c != old_controller and c,
            SESSION_TIMEOUT_S + 15, "a new controller while the old one is frozen")
        new_epoch = wait_for(lambda: (e := controller_epoch(zk)) > old_epoch and e, 10,
                             "a higher controller epoch")
        # Let the new controller finish its failover writes, then mark the moment.
        wait_for(lambda: all(old_controller not in s["isr"]
                             for s in partition_states(zk).values()),
                 20, "ISRs without the frozen broker")
        time.sleep(1.0)
        zk.create("/fencing-marker", b"")
        marker_zxid = zk.exists("/fencing-marker").czxid
    finally:
        victim.resume()

    # The resumed broker finds its session expired, resigns and registers again as a
    # plain broker; give it time to try whatever it had queued as controller.
    cluster.wait_for_brokers([1, 2, 3], timeout=30)
    time.sleep(3.0)

    assert controller_id(zk) == new_controller
    assert controller_epoch(zk) == new_epoch
    for path, data in znode_writes_since(zk, marker_zxid).items():
        if path.endswith("/state") and "/partitions/" in path:
            # Any partition state written after the takeover is the new controller's
            # (or a leader's ISR update stamped with the controller epoch it knows).
            assert json.loads(data)["controller_epoch"] == new_epoch, (path, data)
        elif path == "/controller":
            assert json.loads(data)["brokerid"] == new_controller
        elif path == "/controller_epoch":
            raise AssertionError("/controller_epoch changed after the takeover")
    assert victim.running
