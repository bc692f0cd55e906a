"""LocalCluster: a real ZooKeeper and broker processes started through the start script.

Few and bounded: each test brings a cluster up once. Brokers run with a 6 s ZooKeeper
session so a killed broker's registration goes within seconds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkaclone.testing.cluster import ClusterStartError, LocalCluster

SESSION_TIMEOUT_S = 6.0


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_three_brokers_come_up_and_a_killed_one_is_deregistered(tmp_path: Path) -> None:
    cluster = LocalCluster(3, base_dir=tmp_path / "cluster",
                           overrides={"zookeeper.session.timeout.ms": "6000"}, chroot="kc")
    with cluster:
        assert cluster.registered_broker_ids() == [1, 2, 3]
        assert cluster.zookeeper_connect.endswith("/kc")
        assert len(cluster.bootstrap_servers.split(",")) == 3
        pids = cluster.pids()
        assert len(pids) == 4 and all(alive(pid) for pid in pids)

        victim = cluster.broker(2)
        victim.kill()
        assert not victim.running
        zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
        zk.start(timeout=10)
        try:
            killed_at = time.monotonic()
            deadline = killed_at + SESSION_TIMEOUT_S + 5
            while zk.exists("/brokers/ids/2") is not None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert zk.exists("/brokers/ids/2") is None
            assert time.monotonic() - killed_at <= SESSION_TIMEOUT_S + 5
            assert sorted(zk.get_children("/brokers/ids")) == ["1", "3"]
        finally:
            zk.stop()
            zk.close()

        cluster.restart_broker(2)
        assert cluster.registered_broker_ids() == [1, 2, 3]
        pids = cluster.pids()
        cluster.broker(3).stop()
        assert cluster.broker(3).returncode == 0
        assert cluster.registered_broker_ids() == [1, 2]
    assert not any(alive(pid) for pid in pids)
    assert cluster.pids() == []


def test_a_broker_that_cannot_start_fails_the_cluster_with_its_reason(tmp_path: Path) -> None:
    cluster = LocalCluster(1, base_dir=tmp_path / "cluster",
                           overrides={"num.partitions": "zero"}, startup_timeout=30)
    with pytest.raises(ClusterStartError) as info:
        cluster.start()
    assert "for configuration num.partitions" in str(info.value)
    assert cluster.pids() == []
    assert not any(alive(p.pid) for p in cluster.brokers.values() if p.pid is not None)
    assert os.path.exists(tmp_path / "cluster" / "broker-1.log")
