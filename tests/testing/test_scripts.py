"""The ZooKeeper and broker scripts in daemon mode, with LOG_DIR in a temporary directory
(so nothing of a developer's own cluster is touched), on free ports."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kafkaclone.testing.cluster import REPO_ROOT
from kafkaclone.testing.zookeeper import four_letter_word, free_port

SCRIPTS = REPO_ROOT / "scripts"


def script(name: str, *args: str, env: dict[str, str],
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPTS / name), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def test_zookeeper_and_a_broker_in_daemon_mode(tmp_path: Path) -> None:
    env = {**os.environ, "LOG_DIR": str(tmp_path / "logs")}
    zk_port = free_port()
    zk_config = tmp_path / "zookeeper.properties"
    zk_config.write_text(f"dataDir={tmp_path / 'zk-data'}\nclientPort={zk_port}\n"
                         "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                         "4lw.commands.whitelist=*\n")
    broker_port = free_port()
    broker_config = tmp_path / "server.properties"
    broker_config.write_text(f"broker.id=4\nzookeeper.connect=127.0.0.1:{zk_port}\n"
                             f"listeners=PLAINTEXT://127.0.0.1:{broker_port}\n"
                             f"log.dirs={tmp_path / 'data'}\ncontrolled.shutdown.max.retries=1\n")
    zk_pid_file = tmp_path / "logs" / "zookeeper.pid"
    broker_pid_file = tmp_path / "logs" / "kafka-server-4.pid"
    pids: list[int] = []
    try:
        started = script("zookeeper-server-start.sh", "-daemon", str(zk_config), env=env)
        assert started.returncode == 0, started.stderr
        pids.append(int(zk_pid_file.read_text()))

        def serving() -> bool:
            try:
                return four_letter_word("127.0.0.1", zk_port, "ruok") == "imok"
            except OSError:
                return False

        assert wait_until(serving)
        again = script("zookeeper-server-start.sh", "-daemon", str(zk_config), env=env)
        assert "already running" in again.stdout

        started = script("kafka-server-start.sh", "-daemon", str(broker_config), env=env)
        assert started.returncode == 0, started.stderr
        pids.append(int(broker_pid_file.read_text()))
        assert wait_until(lambda: "[4]" in script(
            "zookeeper-shell.sh", f"127.0.0.1:{zk_port}", "ls", "/brokers/ids",
            env=env).stdout), (tmp_path / "logs" / "kafkaServer-4.out").read_text()
        registration = script("zookeeper-shell.sh", f"127.0.0.1:{zk_port}", "get",
                              "/brokers/ids/4", env=env).stdout
        assert f'"endpoints":["PLAINTEXT://127.0.0.1:{broker_port}"]' in registration

        stopped = script("kafka-server-stop.sh", "--wait", env=env)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not pid_alive(pids[1])
        assert not broker_pid_file.exists()
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
        assert script("kafka-server-stop.sh", env=env).stdout.strip() == "No kafka server to stop"

        assert script("zookeeper-server-stop.sh", env=env).returncode == 0
        assert not pid_alive(pids[0])
        assert not zk_pid_file.exists()
    finally:
        for pid in pids:  # only what this test started
            if pid_alive(pid):
                os.kill(pid, 9)
