"""Scenario 3: ZooKeeper trouble under a running acks=all writer.

- A three-node ensemble restarted, first one member at a time, then all at once: the brokers
  reconnect and are all registered again, one controller.
- The ZooKeeper server cut off the network (docker network disconnect) beyond the brokers'
  session timeout: it expires every session; reconnected, every broker registers again (a
  new broker epoch), a new controller is elected with a higher epoch.
- The controller alone losing its session: its ZooKeeper traffic dropped (iptables) until
  ZooKeeper expired the session; it registers again and another controller takes over.

All end with ZooKeeper's transaction log (``/controller_epoch`` only rose, never two
controllers writing, no election under a stale epoch, never two leaders of a partition in one
leader epoch), the History (nothing acknowledged lost, no reordering) and
byte-identical replicas.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kafkaclone.testing.history import History

from .checks import check_controller_history, check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import Writer, create_topic, drain

SESSION_TIMEOUT_MS = 6000
TOPIC = "zk-faults"
PARTITIONS = 6


def start_writer(cluster: ContainerCluster, history: History) -> Writer:
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=60_000, seconds=200,
                    rate=300, config={"retries": 0}).start()
    writer.wait_for_acks(600, 60)
    return writer


def finish(cluster: ContainerCluster, writer: Writer, history: History) -> None:
    writer.wait_for_acks(writer.acked() + 1500, 90)
    writer.stop()
    writer.join()
    check_controller_history(cluster)
    drain(cluster, TOPIC, PARTITIONS, history)
    check_history(history, min_acked=3000)
    for partition in range(PARTITIONS):
        cluster.wait_for_identical_replicas(TOPIC, partition)


@pytest.mark.timeout(480)
def test_the_ensemble_restarted_member_by_member_then_all_at_once(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, zk_nodes=3, session_timeout_ms=SESSION_TIMEOUT_MS)
    writer = start_writer(cluster, history)
    controller = wait_until(cluster.controller, 30, "a controller")

    for node in cluster.zookeepers:
        node.stop()
        node.restart()
        wait_until(node.serving, 60, f"{node.alias} to rejoin the ensemble")
        writer.wait_for_acks(writer.acked() + 300, 60)

    for node in cluster.zookeepers:
        node.stop(timeout=20)
    down_at = time.monotonic()
    time.sleep(3)
    for node in cluster.zookeepers:
        node.restart()
    for node in cluster.zookeepers:
        wait_until(node.serving, 90, f"{node.alias} to serve again")
    progress(f"the ensemble serves again {time.monotonic() - down_at:.1f}s after it stopped")

    cluster.wait_for_brokers([1, 2, 3], timeout=60)
    # One controller, as ZooKeeper knows it, and every broker reachable through the cluster.
    now = wait_until(cluster.controller, 30, "a controller")
    assert now in (1, 2, 3)
    progress(f"controller before: {controller}, after: {now}")
    finish(cluster, writer, history)


@pytest.mark.timeout(480)
def test_zookeeper_unreachable_beyond_the_session_timeout(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    writer = start_writer(cluster, history)
    wait_until(cluster.controller, 30, "a controller")
    epoch_before = cluster.controller_epoch()
    broker_epochs = {n: cluster.broker_registration(n)["czxid"] for n in cluster.brokers}

    zookeeper = cluster.zookeepers[0]
    zookeeper.disconnect()
    try:
        # The server keeps running alone and expires every broker's session.
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 6)
        writer.wait_for_acks(writer.acked() + 300, 30)  # the data path does not need ZooKeeper
    finally:
        zookeeper.reconnect()

    def registered_again() -> bool:
        return all(cluster.broker_registration(n)["czxid"] > broker_epochs[n]
                   for n in cluster.brokers)

    wait_until(registered_again, 60, "every broker registered again with a new session")
    assert cluster.registered_brokers() == [1, 2, 3]
    wait_until(lambda: cluster.controller_epoch() > epoch_before, 30,
               "a controller elected with a higher epoch")
    progress(f"controller {cluster.controller()} with epoch {cluster.controller_epoch()} "
             f"(was {epoch_before})")
    finish(cluster, writer, history)


@pytest.mark.timeout(480)
def test_the_controllers_zookeeper_session_expired(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    writer = start_writer(cluster, history)
    controller = wait_until(cluster.controller, 30, "a controller")
    epoch_before = cluster.controller_epoch()
    registered_at = cluster.broker_registration(controller)["czxid"]

    # Its ZooKeeper traffic dropped until ZooKeeper expired the session, then let through.
    cluster.brokers[controller].expire_zookeeper_session(SESSION_TIMEOUT_MS / 1000, cluster.zk)
    wait_until(lambda: cluster.broker_registration(controller)["czxid"] > registered_at, 60,
               f"broker {controller} registered again with a new session")
    assert cluster.registered_brokers() == [1, 2, 3]
    wait_until(lambda: cluster.controller_epoch() > epoch_before, 30,
               "a controller elected with a higher epoch")
    progress(f"controller {cluster.controller()} with epoch {cluster.controller_epoch()} "
             f"(was broker {controller} with epoch {epoch_before})")
    finish(cluster, writer, history)
