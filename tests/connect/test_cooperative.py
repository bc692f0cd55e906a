"""Incremental cooperative rebalancing with real distributed worker processes: three
workers (``connect.protocol`` left at its default, ``sessioned``); a worker killed with
SIGKILL and restarted within ``scheduled.rebalance.max.delay.ms`` gets its tasks back;
killed again and not restarted, its tasks move to the others once the delay is over;
throughout, the others' tasks keep running (never restarted). Also: the leader refuses
unsigned and wrongly signed task configs, and a bad protocol setting stops a worker at
start with one line."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kafkaclone.testing.cluster import LocalCluster
from tests.connect.test_distributed import DistributedWorker
from tests.connect.test_standalone import REPO

DELAY_MS = 15000
CONNECTORS = [f"file-{i}" for i in range(4)]


def worker_id(worker: DistributedWorker) -> str:
    return f"127.0.0.1:{worker.port}"


def task_owners(worker: DistributedWorker) -> dict[str, str]:
    """Each connector's task 0: its worker, if it is RUNNING."""
    owners: dict[str, str] = {}
    for name in CONNECTORS:
        status, body = worker.call("GET", f"/connectors/{name}/status")
        if status == 200 and isinstance(body, dict) and body["tasks"] and \
                body["tasks"][0]["state"] == "RUNNING":
            owners[name] = str(body["tasks"][0]["worker_id"])
    return owners


def starts(worker: DistributedWorker, name: str) -> int:
    return worker.log.read_text().count(f"Starting task {name}-0 (")


def leader_of(workers: list[DistributedWorker]) -> str:
    """The worker id in the last 'Joined group ... (leader <member id>)' line (member ids
    start with the client id, connect-<worker id>)."""
    found = re.findall(r"\(leader connect-([0-9.]+:[0-9]+)-", workers[0].log.read_text())
    assert found, workers[0].log.read_text()[-2000:]
    return found[-1]


def post_raw(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, {}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("line", "reason"), [
    ("connect.protocol=cooperative",
     "Invalid value 'cooperative' for configuration connect.protocol: must be one of eager, "
     "compatible, sessioned"),
    ("scheduled.rebalance.max.delay.ms=-1",
     "Invalid value '-1' for configuration scheduled.rebalance.max.delay.ms"),
    ("inter.worker.signature.algorithm=HmacSHA512",
     "Signature algorithm must be present in inter.worker.verification.algorithms list"),
    ("inter.worker.key.generation.algorithm=AES",
     "Invalid value 'AES' for configuration inter.worker.key.generation.algorithm"),
])
def test_bad_protocol_settings_stop_the_worker(tmp_path: Path, line: str, reason: str) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     f"offset.storage.topic=o\nstatus.storage.topic=s\n{line}\n")
    done = subprocess.run([sys.executable, "-m", "kafkaclone.connect.distributed", str(props)],
                          capture_output=True, text=True, timeout=25,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), check=False)
    assert done.returncode == 1
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("Invalid worker configuration: ")
    assert reason in errors[0]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_killed_workers_tasks_move_after_the_delay_others_keep_running(tmp_path: Path) -> None:
    with LocalCluster(1, overrides={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        workers = [DistributedWorker(tmp_path, cluster.bootstrap_servers, i,
                                     f"scheduled.rebalance.max.delay.ms={DELAY_MS}\n")
                   for i in (1, 2, 3)]
        try:
            for worker in workers:
                worker.start()
            first = workers[0]
            for name in CONNECTORS:
                source = tmp_path / f"{name}.txt"
                source.write_text("".join(f"{name} line {i}\n" for i in range(20)))
                created = first.call("POST", "/connectors", {"name": name, "config": {
                    "connector.class": "FileStreamSource", "file": str(source),
                    "topic": f"coop-{name}"}})
                assert created[0] == 201, created
            ids = {worker_id(w) for w in workers}
            deadline = time.monotonic() + 90
            owners: dict[str, str] = {}
            while time.monotonic() < deadline:
                owners = task_owners(first)
                if len(owners) == len(CONNECTORS) and set(owners.values()) == ids:
                    break
                time.sleep(0.3)
            assert len(owners) == len(CONNECTORS) and set(owners.values()) == ids, owners
            logs = "".join(w.log.read_text() for w in workers)
            assert "with protocol sessioned" in logs and "with protocol default" not in logs

            leader_id = leader_of(workers)
            leader = next(w for w in workers if worker_id(w) == leader_id)
            follower = next(w for w in workers if w is not leader)
            body = json.dumps([{"task.class": "x"}]).encode()
            url = f"http://{leader_id}/connectors/file-0/tasks"
            assert post_raw(url, body, {}) == (
                400, {"error_code": 400, "message": "Internal request missing required signature"})
            forged = {"X-Connect-Authorization": base64.b64encode(b"0" * 32).decode(),
                      "X-Connect-Request-Signature-Algorithm": "HmacSHA256"}
            assert post_raw(url, body, forged) == (
                403, {"error_code": 403, "message": "Internal request contained invalid signature"})
            assert post_raw(f"http://{worker_id(follower)}/connectors/file-0/tasks", body,
                            forged)[0] == 409
            assert first.call("GET", "/connectors/file-0/tasks")[1][0]["config"]["task.class"] \
                == "kafkaclone.connect.file.FileStreamSourceTask"  # the forgery was not written

            victim = next(w for w in workers if w is not leader)
            survivors = [w for w in workers if w is not victim]
            survivor_ids = {worker_id(w) for w in survivors}
            moved = sorted(n for n, owner in owners.items() if owner == worker_id(victim))
            kept = {n: owner for n, owner in owners.items() if owner != worker_id(victim)}
            started_before = {n: starts(next(w for w in survivors if worker_id(w) == owner), n)
                              for n, owner in kept.items()}
            assert moved and all(count >= 1 for count in started_before.values())
            # Starts so far (the group may have moved a task while the workers joined).
            victim_starts = {n: starts(victim, n) for n in moved}
            elsewhere = {(worker_id(w), n): starts(w, n) for w in survivors for n in moved}

            # 1. Killed and back within the delay: the work waits for it and returns to it.
            victim.kill()
            victim.start()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                owners = task_owners(leader)
                if all(owners.get(n) == worker_id(victim) for n in moved) and \
                        all(starts(victim, n) == victim_starts[n] + 1 for n in moved):
                    break
                time.sleep(0.3)
            assert all(owners.get(n) == worker_id(victim) for n in moved), owners
            assert all(starts(victim, n) == victim_starts[n] + 1 for n in moved)
            assert all(starts(w, n) == elsewhere[(worker_id(w), n)]  # not started elsewhere
                       for w in survivors for n in moved)
            assert re.search(r"delay [1-9][0-9]* ms", leader.log.read_text())

            # 2. Killed for good: after the delay its work moves to the others.
            killed_at = time.monotonic()
            victim.kill()
            deadline = killed_at + 120
            while time.monotonic() < deadline:
                owners = task_owners(leader)
                if all(owners.get(n) in survivor_ids for n in moved):
                    break
                time.sleep(0.3)
            took = time.monotonic() - killed_at
            assert all(owners.get(n) in survivor_ids for n in moved), owners
            # Held for the delay: the group notices after session.timeout.ms, then waits.
            assert took >= DELAY_MS / 1000, took
            for name in moved:
                runner = next(w for w in survivors if worker_id(w) == owners[name])
                assert starts(runner, name) == elsewhere[(owners[name], name)] + 1

            for name, owner in kept.items():
                assert owners[name] == owner  # never moved ...
                runner = next(w for w in survivors if worker_id(w) == owner)
                assert starts(runner, name) == started_before[name]  # ... nor restarted
        finally:
            for worker in workers:
                worker.stop()
