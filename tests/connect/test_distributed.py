"""Two distributed workers in one group on a local 1-broker cluster: a connector created
through a follower (forwarded to the leader), file -> topic -> file, one worker killed
with SIGKILL, its connectors resumed by the other from the stored offsets. The second
worker runs ``connect.protocol=eager``, so the group falls back to Kafka's eager protocol
(``default``) as a group with one eager worker does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkaclone.testing.cluster import LocalCluster
from tests.connect.test_standalone import REPO, Worker, wait_for_lines

pytestmark = pytest.mark.timeout(240)


class DistributedWorker(Worker):
    def __init__(self, tmp: Path, bootstrap: str, index: int, extra: str = "") -> None:
        tmp = tmp / f"worker{index}"
        tmp.mkdir()
        super().__init__(tmp, bootstrap, [])
        self.worker_props.write_text(
            f"bootstrap.servers={bootstrap}\n"
            "group.id=connect-cluster\n"
            "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
            "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
            "config.storage.topic=connect-configs\n"
            "offset.storage.topic=connect-offsets\n"
            "status.storage.topic=connect-status\n"
            "config.storage.replication.factor=1\n"
            "offset.storage.replication.factor=1\n"
            "status.storage.replication.factor=1\n"
            "offset.storage.partitions=3\n"
            "session.timeout.ms=6000\nheartbeat.interval.ms=500\n"
            "offset.flush.interval.ms=300\n"
            "scheduled.rebalance.max.delay.ms=3000\n"
            f"listeners=http://127.0.0.1:{self.port}\n" + extra)

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kafkaclone.connect.distributed", str(self.worker_props)],
                stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.call("GET", "/")
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(self.log.read_text()[-3000:])


def wait_for_state(worker: Worker, name: str, state: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        _, body = worker.call("GET", f"/connectors/{name}/status")
        if isinstance(body, dict) and body["connector"]["state"] == state and \
                all(t["state"] == state for t in body["tasks"]):
            return
        assert time.monotonic() < deadline, body
        time.sleep(0.3)


def owner_of(worker: Worker, name: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = worker.call("GET", f"/connectors/{name}/status")
        if status == 200 and isinstance(body, dict) and body["tasks"] and \
                body["tasks"][0]["state"] == "RUNNING":
            return str(body["tasks"][0]["worker_id"])
        time.sleep(0.3)
    raise AssertionError(f"{name} not running: {body}")


def test_two_workers_failover(tmp_path: Path) -> None:
    source_file = tmp_path / "in.txt"
    sink_file = tmp_path / "out.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(300)))
    with LocalCluster(1, overrides={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        workers = [DistributedWorker(tmp_path, cluster.bootstrap_servers, 1),
                   DistributedWorker(tmp_path, cluster.bootstrap_servers, 2,
                                     "connect.protocol=eager\n")]
        try:
            for worker in workers:
                worker.start()
            first, second = workers
            assert first.call("POST", "/connectors", {"name": "source", "config": {
                "connector.class": "FileStreamSource", "file": str(source_file),
                "topic": "dist"}})[0] == 201
            created = second.call("POST", "/connectors", {"name": "sink", "config": {
                "connector.class": "FileStreamSink", "file": str(sink_file),
                "topics": "dist"}})
            assert created[0] == 201, created
            assert second.call("GET", "/connectors") == (200, ["sink", "source"])
            wait_for_lines(sink_file, [f"line {i}" for i in range(300)])
            assert second.call("PUT", "/connectors/source/pause") == (202, None)
            wait_for_state(first, "source", "PAUSED")
            assert first.call("PUT", "/connectors/source/resume") == (202, None)
            wait_for_state(second, "source", "RUNNING")
            status, tasks = second.call("GET", "/connectors/source/tasks")
            assert status == 200
            assert tasks == [{"id": {"connector": "source", "task": 0}, "config": {
                "task.class": "kafkaclone.connect.file.FileStreamSourceTask",
                "file": str(source_file), "topic": "dist", "batch.size": "2000"}}]
            joins = [line for line in first.log.read_text().splitlines()
                     if "Joined group connect-cluster" in line]
            assert joins[-1].endswith("with protocol default (kafkaclone.connect.group_member)")
            # Kafka's EagerAssignor: round robin over sink, sink-0, source, source-0
            owners = {owner_of(first, "source"), owner_of(first, "sink")}
            for name in ("source", "sink"):
                owners.add(str(first.call("GET", f"/connectors/{name}/status")[1]["connector"]  # type: ignore[index]
                               ["worker_id"]))
            assert owners == {f"127.0.0.1:{w.port}" for w in workers}
            victim = next(w for w in workers if f"127.0.0.1:{w.port}" == owner_of(
                first, "source"))
            survivor = second if victim is first else first
            victim.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
            victim.process.wait(10)  # type: ignore[union-attr]
            with open(source_file, "a") as growing:
                growing.write("".join(f"line {i}\n" for i in range(300, 600)))
            lines = wait_for_lines(sink_file, [f"line {i}" for i in range(600)], timeout=90)
            assert set(lines) == {f"line {i}" for i in range(600)}
            assert owner_of(survivor, "source") == f"127.0.0.1:{survivor.port}"
            assert owner_of(survivor, "sink") == f"127.0.0.1:{survivor.port}"
        finally:
            for worker in workers:
                worker.stop()
