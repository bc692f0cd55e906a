"""Scenario 4: the controller frozen (docker pause) beyond its ZooKeeper session timeout.

Another broker becomes controller with a higher epoch; the frozen one, resumed, finds its
session expired and rejoins as a plain broker. Fencing is checked on ZooKeeper's own
transaction log, which holds every write and the session that made it: after the new
controller's election no session of the old controller writes anything but its own broker
registration, ``/controller_epoch`` only ever rises, and every leader election in a partition
state znode carries the controller epoch current at the time. A writer runs throughout and
the checker finds no lost or reordered value.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kafkaclone.testing.history import History

from . import zktxn
from .checks import check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import Writer, create_topic, drain

SESSION_TIMEOUT_MS = 6000
STATE_TOPIC = "fenced"
DATA_TOPIC = "writes"
PARTITIONS = 6


@pytest.mark.timeout(420)
def test_a_paused_controller_is_fenced_after_it_resumes(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    create_topic(cluster, STATE_TOPIC, PARTITIONS, replication_factor=3)
    create_topic(cluster, DATA_TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    old = wait_until(cluster.controller, 30, "a controller")
    old_epoch = cluster.controller_epoch()
    # No retries: a reordering could only come from the cluster (duplicates: see checks.py).
    writer = Writer(cluster, DATA_TOPIC, PARTITIONS, history, count=50_000, seconds=150,
                    rate=400, config={"retries": 0}).start()
    writer.wait_for_acks(1000, 60)

    victim = cluster.brokers[old]
    victim.pause()
    paused_at = time.monotonic()
    try:
        new = wait_until(lambda: (c := cluster.controller()) != old and c,
                         SESSION_TIMEOUT_MS / 1000 + 20, "a new controller")
        progress(f"broker {new} is controller {time.monotonic() - paused_at:.1f}s after the "
                 f"pause")
        new_epoch = cluster.controller_epoch()
        assert new_epoch > old_epoch
        # The new controller's failover: the frozen broker leaves every ISR.
        wait_until(lambda: all(old not in cluster.partition_state(STATE_TOPIC, p)["isr"]
                               for p in range(PARTITIONS)),
                   30, f"every ISR of {STATE_TOPIC} without broker {old}")
    finally:
        victim.unpause()

    # It finds its session expired, resigns, and registers again as a plain broker; give it
    # time to try whatever it still had queued as controller.
    cluster.wait_for_brokers([1, 2, 3], timeout=60)
    writer.wait_for_acks(writer.acked() + 2000, 60)
    writer.stop()
    writer.join()

    assert cluster.controller() == new
    assert cluster.controller_epoch() == new_epoch
    takeover_zxid = cluster.zk.exists("/controller").czxid

    txns = cluster.transactions()
    old_sessions = zktxn.sessions_registering(txns, old)
    assert len(old_sessions) >= 2, "its first session and the one it registered again with"
    stray = zktxn.writes_by(txns, old_sessions, takeover_zxid,
                            allowed_paths=frozenset({f"/brokers/ids/{old}"}))
    assert stray == [], f"broker {old} wrote to ZooKeeper after losing the controller: {stray}"
    # The log does show the new controller's failover writes (the check above can see).
    moved = zktxn.writes_by(txns, zktxn.sessions_registering(txns, new), takeover_zxid)
    assert any(path.startswith(f"/brokers/topics/{STATE_TOPIC}/") for _, _, path in moved)
    epochs = [value for _, value in zktxn.controller_epoch_writes(txns)]
    assert epochs == sorted(set(epochs)) and epochs[-1] == new_epoch, epochs
    assert zktxn.partition_state_anomalies(txns) == []
    assert zktxn.foreign_controller_writes(txns) == []

    drain(cluster, DATA_TOPIC, PARTITIONS, history)
    check_history(history, min_acked=3000)
