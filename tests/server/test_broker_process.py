"""The broker as a process, through scripts/kafka-server-start.sh: refusals are one line on
stderr and a non-zero exit; SIGTERM is a clean exit 0 that deregisters the broker."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from kazoo.client import KazooClient

from kafkaclone.testing.cluster import START_SCRIPT
from kafkaclone.testing.zookeeper import free_port


def write_config(path: Path, zk_connect: str, broker_id: int, port: int) -> Path:
    path.write_text(
        f"broker.id={broker_id}\nzookeeper.connect={zk_connect}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={path.parent / 'data'}\n"
        "controlled.shutdown.max.retries=1\nzookeeper.session.timeout.ms=6000\n")
    return path


def run_script(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(START_SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_bad_config_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = write_config(tmp_path / "server.properties", "127.0.0.1:1", 1, 0)
    result = run_script(str(config), "--override", "num.partitions=many")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "many" in line and "num.partitions" in line
    missing = run_script(str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1


def test_duplicate_broker_id_is_one_line_and_exit_1(tmp_path: Path, zk: KazooClient,
                                                    zk_connect: str) -> None:
    zk.create("/brokers/ids/7", b'{"version":5}', ephemeral=True, makepath=True)
    config = write_config(tmp_path / "server.properties", zk_connect, 7, free_port())
    # The id stays registered (a live session): after zookeeper.session.timeout.ms plus a
    # margin the broker gives up.
    result = run_script(str(config), "--override", "zookeeper.session.timeout.ms=1000")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["broker.id 7 already registered"]


def test_sigterm_shuts_down_cleanly(tmp_path: Path, zk: KazooClient, zk_connect: str) -> None:
    config = write_config(tmp_path / "server.properties", zk_connect, 3, free_port())
    with open(tmp_path / "out.log", "wb") as out:
        process = subprocess.Popen([str(START_SCRIPT), str(config)], stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while zk.exists("/brokers/ids/3") is None and time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "out.log").read_text()
            time.sleep(0.1)
        assert zk.exists("/brokers/ids/3") is not None
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert zk.exists("/brokers/ids/3") is None
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
