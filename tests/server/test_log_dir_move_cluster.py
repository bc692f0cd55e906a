"""A move between the log directories of a live broker killed -9 mid-copy (issue 17): a
broker with two log directories, a partition of 16 MiB moved to the other one
(AlterReplicaLogDirs) with the copy throttled by the dynamic
``replica.alter.log.dirs.io.max.bytes.per.second`` (set with kafka-configs.sh) so that it
is caught mid-way; the broker killed with SIGKILL and started again. DescribeLogDirs shows
the future replica again after the restart, the move completes, kafka-log-dirs.sh shows the
replica in the new directory only, and every record written is read back with
confluent-kafka (acknowledged ones too, while a producer keeps writing throughout)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.clients.admin import AdminClient, NewTopic, ReplicaInfo
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TOPIC_PARTITION = ("big", 0)
BULK_RECORDS = 2048
VALUE_SIZE = 8 * 1024
"""16 MiB of incompressible values."""
MOVE_RATE = 800_000
"""Bytes/s: ~20 s for the whole copy, ~10 s left after the restart."""
T = TypeVar("T")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    dirs = f"{tmp_path / 'disk1'},{tmp_path / 'disk2'}"
    with LocalCluster(1, overrides={"log.dirs": dirs, "log.segment.bytes": str(1 << 20)}
                      ) as local:
        yield local


def wait_for(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def replicas(cluster: LocalCluster) -> dict[str, ReplicaInfo]:
    """Log dir -> the big-0 replica there (current or future)."""
    try:
        with AdminClient(cluster.bootstrap_servers) as admin:
            dirs = admin.describe_log_dirs([1])[1]
    except Exception:  # the broker is restarting
        return {}
    return {path: d.replica_infos[TOPIC_PARTITION] for path, d in dirs.items()
            if TOPIC_PARTITION in d.replica_infos}


def log_dirs(cluster: LocalCluster) -> list[str]:
    with AdminClient(cluster.bootstrap_servers) as admin:
        return list(admin.describe_log_dirs([1])[1])


def script(name: str, *args: str) -> str:
    run = subprocess.run([str(SCRIPTS / name), *args], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


class ContinuousProducer:
    """acks=all, idempotent, one small record every 20 ms until stopped (bounded: 10
    minutes); remembers what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "message.timeout.ms": 120_000})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err: Any, message: Any) -> None:
        if err is None:
            self.acked.add(message.value())
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        deadline = time.monotonic() + 600
        sent = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._producer.produce("big", value=f"live-{sent}".encode(), partition=0,
                                   on_delivery=self._delivered)
            sent += 1
            self._producer.poll(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(150) == 0


def read_all(cluster: LocalCluster, end_offset: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([CkTopicPartition("big", 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while len(values) < end_offset and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None:
                    values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("producing", [False, True], ids=["idle", "producing"])
def test_a_log_dir_move_killed_mid_copy_resumes_after_the_restart(
        cluster: LocalCluster, producing: bool) -> None:
    bootstrap = cluster.bootstrap_servers
    with AdminClient(bootstrap) as admin:
        admin.create_topics([NewTopic("big", replica_assignment={0: [1]})])
    bulk = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                     "compression.type": "none", "message.timeout.ms": 120_000})
    for i in range(BULK_RECORDS):
        bulk.produce("big", value=f"bulk-{i}-".encode() + os.urandom(VALUE_SIZE), partition=0)
        bulk.poll(0)
    assert bulk.flush(120) == 0
    script("kafka-configs.sh", "--bootstrap-server", bootstrap, "--entity-type", "brokers",
           "--entity-name", "1", "--alter", "--add-config",
           f"replica.alter.log.dirs.io.max.bytes.per.second={MOVE_RATE}")
    [(source, current)] = replicas(cluster).items()
    total = current.size
    assert total > 16 * 1024 * 1024
    [destination] = [d for d in log_dirs(cluster) if d != source]
    live = ContinuousProducer(bootstrap) if producing else None
    try:
        with AdminClient(bootstrap) as admin:
            assert admin.alter_replica_log_dirs({("big", 0, 1): destination}) == {
                ("big", 0, 1): None}
        # Caught mid-copy: past the burst, well short of the end.
        wait_for(lambda: (future := replicas(cluster).get(destination)) is not None
                 and future.is_future and future.size > total * 0.4, 60, "half the copy")
        copied = replicas(cluster)[destination]
        assert copied.is_future and copied.size < total * 0.9
        cluster.broker(1).kill()
        cluster.restart_broker(1)
        # The future replica is back (loaded at start-up), then the move completes.
        after = wait_for(lambda: replicas(cluster) or None, 60, "the restarted broker")
        assert after[source].is_future is False
        assert after[destination].is_future
        assert after[destination].size >= copied.size * 0.9  # resumed, not started over
        wait_for(lambda: set(replicas(cluster)) == {destination}
                 and not replicas(cluster)[destination].is_future, 180, "the move's end")
    finally:
        if live is not None:
            live.stop()
    described = json.loads(script("kafka-log-dirs.sh", "--bootstrap-server", bootstrap,
                                  "--describe", "--broker-list", "1",
                                  "--topic-list", "big").splitlines()[-1])
    where = {d["logDir"]: [(p["partition"], p["isFuture"]) for p in d["partitions"]]
             for d in described["brokers"][0]["logDirs"]}
    assert where == {source: [], destination: [("big-0", False)]}
    with AdminClient(bootstrap) as admin:
        latest = admin.list_offsets({("big", 0): -1})[("big", 0)]
    assert isinstance(latest, tuple)
    end = latest[0]
    values = read_all(cluster, end)
    assert len(values) == end
    bulk_values = [v for v in values if v.startswith(b"bulk-")]
    assert [v.split(b"-")[1] for v in bulk_values] == [
        str(i).encode() for i in range(BULK_RECORDS)]
    if live is not None:
        assert live.acked and live.acked <= set(values)
    assert not (Path(source) / "big-0").exists()
