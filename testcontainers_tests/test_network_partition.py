"""Scenario 2: the leader of a partition cut off from the rest of the cluster while an
acks=all writer (``min.insync.replicas=2``) keeps sending.

Two ways to cut it off:

- ``isolate``: iptables inside the leader's container drop every packet to and from the other
  brokers and ZooKeeper, but the test process still reaches it: a zombie leader that clients
  keep writing to. Its followers are gone, so no acks=all write can be acknowledged there:
  those producers see errors; the controller elects a new leader once its session expires.
- ``disconnect``: ``docker network disconnect`` of the leader's container; nobody reaches it.

After healing, the old leader registers again, truncates what only it had written, and
rejoins the ISR as a follower; every replica ends byte-identical, and the checker finds no
acknowledged write lost and nothing out of order.
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
TOPIC = "partitioned"
PARTITIONS = 3


@pytest.mark.timeout(420)
@pytest.mark.parametrize("fault", ["isolate", "disconnect"])
def test_a_partitioned_leader_loses_no_acknowledged_write(
        fault: str, start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    controller = wait_until(cluster.controller, 30, "a controller")
    # A partition led by a broker that is not the controller.
    partition = next(p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) != controller)
    old_leader = cluster.leader(TOPIC, partition)
    old_epoch = cluster.partition_state(TOPIC, partition)["leader_epoch"]
    victim = cluster.brokers[old_leader]
    progress(f"{TOPIC}-{partition} is led by broker {old_leader} (controller: {controller})")

    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=100_000, seconds=240,
                    rate=300, config={"retries": 0}).start()
    writer.wait_for_acks(1000, 60)
    errors_before = len(writer.errors)

    peers = cluster.peer_addresses(victim)
    if fault == "isolate":
        victim.isolate_from(peers)
    else:
        victim.disconnect()
    cut_at = time.monotonic()
    try:
        def new_leader() -> int:
            state = cluster.partition_state(TOPIC, partition)
            return int(state["leader"]) if state["leader"] not in (-1, old_leader) else 0
        leader = wait_until(new_leader, SESSION_TIMEOUT_MS / 1000 + 30,
                            f"a new leader of {TOPIC}-{partition}")
        progress(f"broker {leader} leads {TOPIC}-{partition} "
                 f"{time.monotonic() - cut_at:.1f}s after the cut")
        # Writes go on through the new leaders while the old one is still cut off.
        writer.wait_for_acks(writer.acked() + 1000, 60)
        time.sleep(max(0.0, 15 - (time.monotonic() - cut_at)))
    finally:
        if fault == "isolate":
            victim.heal(peers)
        else:
            victim.reconnect()

    if fault == "isolate":
        # Clients kept reaching the zombie leader: its acks=all writes could not complete.
        assert len(writer.errors) > errors_before, "no producer error while the leader was cut off"

    cluster.wait_for_brokers([1, 2, 3], timeout=60)
    for p in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, p, 3, timeout=90)
    state = cluster.partition_state(TOPIC, partition)
    assert state["leader"] != old_leader and state["leader_epoch"] > old_epoch
    assert old_leader in state["isr"]

    writer.wait_for_acks(writer.acked() + 1000, 60)
    writer.stop()
    writer.join()
    check_controller_history(cluster)
    drain(cluster, TOPIC, PARTITIONS, history)
    check_history(history, min_acked=3000)
    for p in range(PARTITIONS):
        cluster.wait_for_identical_replicas(TOPIC, p)
    truncations = [line for line in victim.logs(tail=5000).splitlines()
                   if "Truncat" in line and f"{TOPIC}-{partition}" in line]
    progress(f"produce errors: {sorted(set(writer.errors))}; broker {old_leader} logged "
             f"{len(truncations)} truncations of {TOPIC}-{partition}: {truncations[:2]}")
