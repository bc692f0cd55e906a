"""A failed log directory on a live cluster (Kafka 2.8's LogDirFailureTest, with a real
full disk): broker 1 has two log directories, one a 16 MiB tmpfs. Producing (confluent-kafka,
acks=all, idempotent) to partitions led by broker 1 on the tmpfs fills it: the first ENOSPC
takes that directory offline, the controller moves those leaders to brokers 2 and 3, every
acknowledged record is read back, new replicas go to the live directory only, and
DescribeLogDirs / kafka-log-dirs.sh show the offline directory with KAFKA_STORAGE_ERROR.

The tmpfs is mounted by the test (it runs as root, as CI does); where ``mount`` is not
permitted the fixture falls back to a directory made read-only (a failed roll, EACCES, which
root would bypass), the same path through the broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.clients.admin import AdminClient, NewTopic, TopicDescription
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

KAFKA_STORAGE_ERROR = 56
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
FILL_PARTITIONS = 4
VALUE_SIZE = 8 * 1024


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A directory on a 16 MiB tmpfs ("tmpfs"), or a plain one to make read-only
    ("readonly") where mounting is not permitted."""
    path = tmp_path_factory.mktemp("small-disk")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path)],
                             capture_output=True, timeout=30).returncode == 0
    try:
        yield path, "tmpfs" if mounted else "readonly"
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)
        else:
            os.chmod(path, 0o755)


@pytest.fixture(scope="module")
def cluster(small_dir: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[LocalCluster]:
    disk = tmp_path_factory.mktemp("big-disk")
    small, _ = small_dir
    with LocalCluster(3, overrides={
            "offsets.topic.replication.factor": "3",
            "log.segment.bytes": str(1024 * 1024),
            "zookeeper.session.timeout.ms": "30000",
    }, broker_overrides={1: {"log.dirs": f"{small / 'data'},{disk / 'data'}"}}) as local:
        yield local


def describe(cluster: LocalCluster, broker_id: int = 1) -> dict[str, Any]:
    with AdminClient(cluster.bootstrap_servers) as admin:
        return admin.describe_log_dirs([broker_id])[broker_id]


def partitions_in(cluster: LocalCluster, log_dir: Path, topic: str) -> set[int]:
    description = describe(cluster)[str(log_dir)]
    return {p for (t, p) in description.replica_infos if t == topic}


def leaders(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    with AdminClient(cluster.bootstrap_servers) as admin:
        description = admin.describe_topics([topic])[topic]
    if not isinstance(description, TopicDescription):
        return {}
    return {p.partition: (p.leader, p.isr) for p in description.partitions}


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_full_log_dir_goes_offline_and_nothing_acknowledged_is_lost(
        cluster: LocalCluster, small_dir: tuple[Path, str]) -> None:
    small, mode = small_dir
    small_data = small / "data"
    # As root the tmpfs is mounted (a read-only directory would not stop root's writes).
    assert mode == "tmpfs" or os.geteuid() != 0
    with AdminClient(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("fill", replica_assignment={
            p: [1, 2, 3] for p in range(FILL_PARTITIONS)})])
    wait_for(lambda: all(leader == 1 for leader, _ in leaders(cluster, "fill").values())
             and len(leaders(cluster, "fill")) == FILL_PARTITIONS, 60, "leaders of fill")
    dirs = describe(cluster)
    assert all(d.error is None for d in dirs.values())
    big_data = next(Path(d) for d in dirs if Path(d) != small_data)
    on_small = partitions_in(cluster, small_data, "fill")
    assert on_small and len(on_small) < FILL_PARTITIONS  # both directories hold some
    if mode == "readonly":
        os.chmod(small_data, 0o555)

    acked: dict[int, set[bytes]] = {p: set() for p in range(FILL_PARTITIONS)}
    failed: list[str] = []

    def delivered(err: Any, message: Any) -> None:
        if err is None:
            acked[message.partition()].add(message.value())
        else:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120_000})
    # 16 MiB of values into the small directory's partitions (and as much elsewhere),
    # until broker 1 reports the directory offline; bounded by count and time.
    sent = 0
    deadline = time.monotonic() + 180
    offline = False
    while sent < 6000 and time.monotonic() < deadline and not offline:
        for p in range(FILL_PARTITIONS):
            value = f"{p}-{sent}-".encode() + b"x" * VALUE_SIZE
            producer.produce("fill", value=value, partition=p, on_delivery=delivered)
        sent += 1
        producer.poll(0)
        if sent % 100 == 0:
            producer.flush(60)
            offline = describe(cluster)[str(small_data)].error is not None
    assert offline or wait_for(
        lambda: describe(cluster)[str(small_data)].error is not None, 60,
        "the small directory to go offline"), "the directory never went offline"
    assert producer.flush(150) == 0
    assert failed == []

    # The controller moved the leaders of the offline replicas and dropped them from the ISR.
    def moved() -> bool:
        state = leaders(cluster, "fill")
        return all(state[p][0] in (2, 3) and 1 not in state[p][1] for p in on_small)

    offline_at = time.monotonic()
    wait_for(moved, 90, "leaders to move off the offline replicas")
    print(f"{mode}: {sent} rounds sent, {sum(map(len, acked.values()))} acknowledged, "
          f"leaders moved {time.monotonic() - offline_at:.1f}s after the flush")
    state = leaders(cluster, "fill")
    for p in set(range(FILL_PARTITIONS)) - on_small:
        assert state[p][0] == 1, f"partition {p} on the live directory lost its leader"

    # Every acknowledged value is there.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CkTopicPartition("fill", p, 0) for p in range(FILL_PARTITIONS)])
    read: dict[int, set[bytes]] = {p: set() for p in range(FILL_PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < FILL_PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            read[message.partition()].add(message.value())
    finally:
        consumer.close()
    assert at_end == set(range(FILL_PARTITIONS))
    for p in range(FILL_PARTITIONS):
        missing = acked[p] - read[p]
        assert not missing, f"partition {p}: {len(missing)} acknowledged values lost"
    assert sum(len(values) for values in acked.values()) >= 100 * FILL_PARTITIONS

    # New replicas on broker 1 go to the live directory only.
    with AdminClient(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("after", replica_assignment={
            p: [1, 2] for p in range(4)})])
    wait_for(lambda: partitions_in(cluster, big_data, "after") == set(range(4)), 60,
             "the new topic's logs on the live directory")
    assert partitions_in(cluster, small_data, "after") == set()
    # The logs are listed once open; the metadata answering describe_topics may come later.
    after = wait_for(lambda: leaders(cluster, "after"), 60, "the new topic's metadata")
    assert after[0][0] == 1
    producer.produce("after", value=b"still works", partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert failed == [] and b"still works" in acked[0]

    # DescribeLogDirs and kafka-log-dirs.sh show the offline directory with its error.
    dirs = describe(cluster)
    assert dirs[str(small_data)].error is not None
    assert dirs[str(small_data)].error.code == KAFKA_STORAGE_ERROR
    assert dirs[str(small_data)].replica_infos == {}
    assert dirs[str(big_data)].error is None
    done = subprocess.run([str(SCRIPTS / "kafka-log-dirs.sh"), "--bootstrap-server",
                           cluster.bootstrap_servers, "--describe", "--broker-list", "1",
                           "--topic-list", "after"],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1"]
    output = json.loads(lines[2])
    assert output["version"] == 1
    [broker] = output["brokers"]
    by_dir = {d["logDir"]: d for d in broker["logDirs"]}
    assert by_dir[str(small_data)] == {
        "logDir": str(small_data),
        "error": "org.apache.kafka.common.errors.KafkaStorageException", "partitions": []}
    assert by_dir[str(big_data)]["error"] is None
    assert sorted(p["partition"] for p in by_dir[str(big_data)]["partitions"]) == [
        f"after-{p}" for p in range(4)]
    # Broker 1 stays up with its live directory.
    assert cluster.broker(1).running


def test_alter_replica_log_dirs_moves_a_replica_under_produce(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A replica moves to the broker's other directory (a -future log copied, then swapped
    in) while an acks=all producer keeps writing to it: every acknowledged record is in the
    moved log, in order."""
    base = tmp_path_factory.mktemp("move")
    first, second = base / "first", base / "second"
    with LocalCluster(1, broker_overrides={1: {"log.dirs": f"{first},{second}"}}) as local:
        with AdminClient(local.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("moving", replica_assignment={0: [1]})])
            wait_for(lambda: leaders(local, "moving").get(0, (-1, []))[0] == 1, 60,
                     "a leader for moving-0")
            assert partitions_in(local, first, "moving") == {0}
            acked: list[bytes] = []
            failed: list[str] = []

            def delivered(err: Any, message: Any) -> None:
                if err is None:
                    acked.append(message.value())
                else:
                    failed.append(str(err))

            producer = Producer({"bootstrap.servers": local.bootstrap_servers, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5})
            for i in range(2000):
                producer.produce("moving", value=f"before-{i}-".encode() + b"y" * 1000,
                                 partition=0, on_delivery=delivered)
                producer.poll(0)
            assert producer.flush(60) == 0
            assert admin.alter_replica_log_dirs({("moving", 0, 1): str(second)}) == {
                ("moving", 0, 1): None}
            sent = 0
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and sent < 20_000:
                producer.produce("moving", value=f"during-{sent}".encode(), partition=0,
                                 on_delivery=delivered)
                producer.poll(0.001)
                sent += 1
                if sent % 200 == 0 and partitions_in(local, second, "moving") == {0}:
                    dirs = describe(local)
                    if not any(info.is_future for d in dirs.values()
                               for info in d.replica_infos.values()):
                        break
            assert producer.flush(60) == 0
            assert failed == []
        dirs = describe(local)
        assert {p for (t, p), info in dirs[str(second)].replica_infos.items()
                if t == "moving" and not info.is_future} == {0}
        assert dirs[str(first)].replica_infos == {}
        consumer = Consumer({"bootstrap.servers": local.bootstrap_servers, "group.id": "m",
                             "enable.auto.commit": False, "enable.partition.eof": True})
        consumer.assign([CkTopicPartition("moving", 0, 0)])
        read: list[bytes] = []
        offsets: list[int] = []
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    assert message.error().code() == KafkaError._PARTITION_EOF
                    break
                read.append(message.value())
                offsets.append(message.offset())
        finally:
            consumer.close()
        assert offsets == list(range(len(offsets)))
        assert read == acked  # one partition, one producer: the same order
        print(f"moved under produce: {len(acked)} records, {sent} sent during the move")
