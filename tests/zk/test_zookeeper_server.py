"""kafkaclone.testing.zookeeper: the real ZooKeeper server launcher."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkaclone.testing.zookeeper import (
    ZooKeeperServer,
    ZooKeeperStartError,
    four_letter_word,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_restart_stop(zk_server: ZooKeeperServer) -> None:
    with ZooKeeperServer() as server:
        assert server.running
        pid, port = server.pid, server.port
        assert pid is not None and _alive(pid)
        assert server.connect_string == f"127.0.0.1:{port}"
        assert four_letter_word(server.host, port, "ruok") == "imok"
        assert server.config_path.read_text().count("4lw.commands.whitelist=*") == 1

        client = KazooClient(hosts=server.connect_string, timeout=5.0)
        client.start(timeout=10)
        client.create("/kept", b"data")
        client.stop()
        client.close()
        server.restart()
        assert server.port == port
        assert server.pid != pid
        assert not _alive(pid)
        client = KazooClient(hosts=server.connect_string, timeout=5.0)
        client.start(timeout=10)
        try:
            assert client.get("/kept")[0] == b"data"  # same data
        finally:
            client.stop()
            client.close()

        second_pid = server.pid
        base_dir = server.base_dir
        assert second_pid is not None and base_dir is not None
        server.stop()
        assert not server.running
        assert not _alive(second_pid)
        server.stop()  # idempotent
        # stopping it left the session's server alone
        assert zk_server.running
        assert four_letter_word(zk_server.host, zk_server.port, "ruok") == "imok"
    assert not base_dir.exists()


def test_a_server_that_cannot_start_is_reported_and_reaped(tmp_path: Path) -> None:
    server = ZooKeeperServer(extra_config={"tickTime": "not-a-number"}, data_dir=tmp_path / "d")
    with pytest.raises(ZooKeeperStartError, match="exited"):
        server.start()
    assert server.pid is None
    server.close()


def test_missing_java_leaves_nothing_open(tmp_path: Path) -> None:
    server = ZooKeeperServer(java=str(tmp_path / "no-java"))
    with pytest.raises(FileNotFoundError):
        server.start()
    assert not server.running
    server.close()


def test_connect_string_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = ZooKeeperServer().connect_string
