"""Standalone worker against a local 1-broker cluster: file -> topic -> file line for line,
across a worker killed with SIGKILL and started again; the REST API driven as curl would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaclone.clients.admin import AdminClient
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.zookeeper import free_port

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1) as local:
        yield local


class Worker:
    def __init__(self, tmp: Path, bootstrap: str, connectors: list[Path]) -> None:
        self.port = free_port()
        self.worker_props = tmp / "worker.properties"
        self.worker_props.write_text(
            f"bootstrap.servers={bootstrap}\n"
            "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
            "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
            f"offset.storage.file.filename={tmp / 'connect.offsets'}\n"
            "offset.flush.interval.ms=300\n"
            f"listeners=http://127.0.0.1:{self.port}\n")
        self.connectors = connectors
        self.log = tmp / "worker.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kafkaclone.connect.standalone", str(self.worker_props),
                 *map(str, self.connectors)], stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.call("GET", "/")
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(self.log.read_text()[-3000:])

    def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def wait_for_lines(path: Path, expected: list[str], timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if set(expected) <= set(lines):
            return lines
        time.sleep(0.3)
    raise AssertionError(f"{len(set(expected) - set(lines))} lines missing of {len(expected)}")


def test_file_to_topic_to_file_across_a_worker_kill(cluster: LocalCluster, tmp_path: Path
                                                    ) -> None:
    source_file = tmp_path / "in.txt"
    sink_file = tmp_path / "out.txt"
    source = tmp_path / "source.properties"
    source.write_text("name=local-file-source\nconnector.class=FileStreamSource\n"
                      f"tasks.max=1\nfile={source_file}\ntopic=connect-test\n")
    sink = tmp_path / "sink.properties"
    sink.write_text("name=local-file-sink\n"
                    "connector.class=org.apache.kafka.connect.file.FileStreamSinkConnector\n"
                    f"tasks.max=1\nfile={sink_file}\ntopics=connect-test\n")
    first = [f"line {i}" for i in range(500)]
    source_file.write_text("".join(line + "\n" for line in first))
    worker = Worker(tmp_path, cluster.bootstrap_servers, [source, sink])
    try:
        worker.start()
        wait_for_lines(sink_file, first)
        with open(source_file, "a") as growing:
            growing.write("".join(f"line {i}\n" for i in range(500, 1000)))
        time.sleep(0.5)
        worker.kill()
        with open(source_file, "a") as growing:
            growing.write("".join(f"line {i}\n" for i in range(1000, 1500)))
        worker.start()
        expected = [f"line {i}" for i in range(1500)]
        lines = wait_for_lines(sink_file, expected)
        # At-least-once: every line arrived; duplicates only of lines sent again after the
        # kill, and in order within the file's single partition.
        assert set(lines) == set(expected)
        firsts = [lines.index(line) for line in expected]
        assert firsts == sorted(firsts)
        deadline = time.monotonic() + 30
        while True:  # the sink commits to its group connect-<name> every flush interval
            with AdminClient(cluster.bootstrap_servers) as admin:
                committed = admin.list_consumer_group_offsets("connect-local-file-sink")
            if committed.get(("connect-test", 0)) is not None and \
                    committed[("connect-test", 0)].offset >= len(lines):
                break
            assert time.monotonic() < deadline, committed
            time.sleep(0.3)
        status, body = worker.call("GET", "/connectors/local-file-source/status")
        assert status == 200
        assert isinstance(body, dict)
        assert body["connector"]["state"] == "RUNNING"
        assert body["tasks"][0]["state"] == "RUNNING"
    finally:
        worker.stop()


def test_rest_create_status_pause_resume_delete(cluster: LocalCluster, tmp_path: Path) -> None:
    worker = Worker(tmp_path, cluster.bootstrap_servers, [])
    source_file = tmp_path / "in.txt"
    source_file.write_text("a\nb\n")
    try:
        worker.start()
        status, root = worker.call("GET", "/")
        assert status == 200
        assert isinstance(root, dict)
        assert root["version"] == "2.8.0"
        assert root["kafka_cluster_id"]
        config = {"connector.class": "FileStreamSource", "file": str(source_file),
                  "topic": "rest-test"}
        status, created = worker.call("POST", "/connectors",
                                      {"name": "rest-source", "config": config})
        assert status == 201
        assert created == {"name": "rest-source", "config": {**config, "name": "rest-source"},
                           "tasks": [{"connector": "rest-source", "task": 0}],
                           "type": "source"}
        status, again = worker.call("POST", "/connectors",
                                    {"name": "rest-source", "config": config})
        assert (status, again) == (409, {"error_code": 409,
                                         "message": "Connector rest-source already exists"})
        assert worker.call("GET", "/connectors") == (200, ["rest-source"])
        assert worker.call("PUT", "/connectors/rest-source/pause") == (202, None)
        deadline = time.monotonic() + 10
        while worker.call("GET", "/connectors/rest-source/tasks/0/status")[1] != {
                "id": 0, "state": "PAUSED", "worker_id": f"127.0.0.1:{worker.port}"}:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert worker.call("PUT", "/connectors/rest-source/resume") == (202, None)
        status, body = worker.call("GET", "/connectors/rest-source/status")
        assert isinstance(body, dict)
        assert body["connector"]["state"] == "RUNNING"
        assert worker.call("DELETE", "/connectors/rest-source") == (204, None)
        assert worker.call("GET", "/connectors/rest-source") == (
            404, {"error_code": 404, "message": "Connector rest-source not found"})
        status, refused = worker.call("POST", "/connectors", {
            "name": "bad", "config": {"connector.class": "FileStreamSource", "tasks.max": "0"}})
        assert status == 400
        assert isinstance(refused, dict)
        assert refused["error_code"] == 400
        assert "contains the following 2 error(s)" in str(refused["message"])
        assert worker.call("GET", "/connectors") == (200, [])
    finally:
        worker.stop()
