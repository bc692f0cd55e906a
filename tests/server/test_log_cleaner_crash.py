"""kill -9 of a real broker process at each step of a cleaning, and a changelog restore.

The broker runs with the test crash hook armed through ``KAFKACLONE_TEST_CRASH_POINT_FILE``
(``kafkaclone.log.common.crash_point``): writing a crash point's name into that file makes
the broker SIGKILL itself when its cleaner reaches the point, once. For each step (while
the cleaner process writes ``.log.cleaned``, after the ``.swap`` rename, after the first of
the replaced segments was renamed ``.deleted``) the test checks the files the crash left,
restarts the broker, and then: kafka-dump-log.sh reads every segment as valid, a full read
with confluent-kafka gives every key its latest acknowledged value, and the cleaner carries
on until the log is compacted again.

The changelog restore: a keyed table rebuilt by reading a compacted topic from the start
after a restart equals the table before it, and reads about as many records as keys."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.log.common import CRASH_POINT_ENV, CRASH_POINTS
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
KEYS = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    crash_file = tmp_path_factory.mktemp("crash") / "crash-point"
    previous = os.environ.get(CRASH_POINT_ENV)
    os.environ[CRASH_POINT_ENV] = str(crash_file)  # inherited by the broker processes
    try:
        with LocalCluster(1, overrides={"log.cleaner.backoff.ms": "200",
                                        "default.replication.factor": "1"}) as local:
            yield local
    finally:
        if previous is None:
            os.environ.pop(CRASH_POINT_ENV, None)
        else:
            os.environ[CRASH_POINT_ENV] = previous


def arm(step: str) -> None:
    Path(os.environ[CRASH_POINT_ENV]).write_text(step)


def partition_dir(cluster: LocalCluster, topic: str) -> Path:
    return cluster.base_dir / "broker-1" / "data" / f"{topic}-0"


class Writes:
    """What was sent per key: the latest acknowledged value, and the values sent after it
    whose delivery failed (a crash may have stored one without acknowledging it)."""

    def __init__(self) -> None:
        self.acked: dict[bytes, bytes] = {}
        self.unsure: dict[bytes, list[bytes]] = {}
        self.errors: list[KafkaError] = []

    def produce_round(self, cluster: LocalCluster, topic: str, round_: int, keys: int) -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                             "linger.ms": 5, "batch.size": 16384, "message.timeout.ms": 8000,
                             "max.in.flight.requests.per.connection": 1,
                             "enable.idempotence": False})

        def delivered(err: KafkaError | None, msg: object) -> None:
            key, value = msg.key(), msg.value()  # type: ignore[attr-defined]
            if err is None:
                self.acked[key] = value
                self.unsure.pop(key, None)
            else:
                self.unsure.setdefault(key, []).append(value)
                self.errors.append(err)

        for k in range(keys):
            producer.produce(topic, key=b"key-%d" % k, partition=0, on_delivery=delivered,
                             value=b"value-%d-%d-" % (k, round_) + b"x" * 200)
        producer.flush(20)

    def check(self, table: dict[bytes, bytes | None]) -> None:
        for key, value in self.acked.items():
            assert table.get(key) in [value, *self.unsure.get(key, [])], key
        assert set(table) <= set(self.acked) | set(self.unsure)


def high_watermark(consumer: Consumer, topic: str) -> int:
    """The partition's high watermark, asked until the broker's metadata has the partition
    with a leader: right after a restart the controller's UpdateMetadata may not have
    reached it yet (librdkafka then answers "Local: Unknown partition")."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return int(consumer.get_watermark_offsets(CkTopicPartition(topic, 0),
                                                      timeout=10)[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_table(cluster: LocalCluster, topic: str) -> tuple[dict[bytes, bytes | None], int]:
    """The topic read from offset 0 up to its end with confluent-kafka, as a table (the last
    value of each key), and how many records were read."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": f"reader-{topic}", "enable.auto.commit": False})
    try:
        high = high_watermark(consumer, topic)
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        table: dict[bytes, bytes | None] = {}
        count = 0
        last = -1
        deadline = time.monotonic() + 60
        while last < high - 1 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            assert msg.offset() > last
            last = msg.offset()
            table[msg.key()] = msg.value()
            count += 1
        # a compaction may remove the last offsets below the high watermark: the end of
        # the read is the position, not the last offset seen
        if last < high - 1:
            position = consumer.position([CkTopicPartition(topic, 0)])[0].offset
            assert position >= high, (last, position, high)
        return table, count
    finally:
        consumer.close()


def dump_log_is_valid(directory: Path) -> None:
    """kafka-dump-log.sh over every segment: all batches valid, offsets increasing. (The
    running cleaner may swap segments between the listing and the dump: then again.)"""
    for _ in range(10):
        files = sorted(directory.glob("*.log"))
        assert files
        done = subprocess.run(["bash", str(REPO / "scripts" / "kafka-dump-log.sh"), "--files",
                               ",".join(str(f) for f in files)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode == 0 or "No such file" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr
    batches = [line for line in done.stdout.splitlines() if line.startswith("baseOffset")]
    assert batches
    assert all("isvalid: true" in line for line in batches)
    offsets = [int(line.split()[1]) for line in batches]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def wait_dead(cluster: LocalCluster, timeout: float) -> int:
    process = cluster.broker(1)
    deadline = time.monotonic() + timeout
    while process.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process.running, "the broker did not reach its crash point"
    return process.wait(10)


def wait_compacted(cluster: LocalCluster, topic: str, writes: Writes, keys: int
                   ) -> dict[bytes, bytes | None]:
    """Wait for the cleaner to have compacted everything but the active segment: a read
    from 0 gives at most one record per key plus the active segment's round."""
    deadline = time.monotonic() + 90
    while True:
        table, count = read_table(cluster, topic)
        writes.check(table)
        if count <= 2 * keys:
            return table
        assert time.monotonic() < deadline, (
            f"{topic} not compacted: {count} records read\n{cluster.broker(1).log_tail(30)}")
        time.sleep(0.5)


def wait_logged(cluster: LocalCluster, since: int, text: str) -> None:
    """Wait for the broker to log ``text`` after byte ``since`` of its output."""
    deadline = time.monotonic() + 60
    while True:
        with cluster.broker(1).log_path.open(errors="replace") as log:
            log.seek(since)
            if text in log.read():
                return
        assert time.monotonic() < deadline, f"not logged: {text}"
        time.sleep(0.2)


@pytest.mark.timeout(400)
def test_kill_9_at_each_step_of_a_cleaning(cluster: LocalCluster) -> None:
    topic = "crash-compacted"
    # Big segments rolled by time: a few small segments per phase, cleaned as one group
    # (so a swap replaces several segments, and "mid-delete" is between two of them).
    create_topic(cluster, topic, partitions=1, configs={
        "cleanup.policy": "compact", "segment.bytes": str(1024 * 1024), "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000"})
    writes = Writes()
    directory = partition_dir(cluster, topic)
    round_ = 0
    for step in CRASH_POINTS:
        assert step in ("cleaner.writing-cleaned", "cleaner.after-swap-rename",
                        "cleaner.mid-delete")
        arm(step)
        for _ in range(60):  # the cleaner runs, and crashes, once a dirty segment rolled
            if not cluster.broker(1).running:
                break
            writes.produce_round(cluster, topic, round_, KEYS)
            round_ += 1
            time.sleep(0.15)  # past segment.ms: the next round rolls a segment
        assert wait_dead(cluster, 60) == -9
        names = sorted(p.name for p in directory.iterdir())
        if step == "cleaner.writing-cleaned":
            assert any(n.endswith(".log.cleaned") for n in names), names
            assert not any(n.endswith(".swap") for n in names), names
        elif step == "cleaner.after-swap-rename":
            assert any(n.endswith(".log.swap") for n in names), names
            assert not any(n.endswith(".cleaned") for n in names), names
        else:
            assert any(n.endswith(".log.swap") for n in names), names
            assert any(n.endswith(".log.deleted") for n in names), names
        log_size = cluster.broker(1).log_path.stat().st_size
        cluster.restart_broker(1)
        names = sorted(p.name for p in directory.iterdir())
        assert not any(n.endswith((".swap", ".cleaned")) for n in names), names
        dump_log_is_valid(directory)
        table, _ = read_table(cluster, topic)
        writes.check(table)
        wait_compacted(cluster, topic, writes, KEYS)
        wait_logged(cluster, log_size, "Log cleaner thread 0 cleaned log crash-compacted-0")
    dump_log_is_valid(directory)
    assert len(writes.acked) == KEYS


@pytest.mark.timeout(240)
def test_changelog_restore_after_a_restart_reads_about_one_record_per_key(
        cluster: LocalCluster) -> None:
    topic = "table-changelog"
    keys = 300
    create_topic(cluster, topic, partitions=1, configs={
        "cleanup.policy": "compact", "segment.bytes": "65536",
        "min.cleanable.dirty.ratio": "0.01"})
    writes = Writes()
    for round_ in range(20):
        writes.produce_round(cluster, topic, round_, keys)
    assert not writes.errors, writes.errors[:3]
    before = wait_compacted(cluster, topic, writes, keys)
    assert before == writes.acked

    cluster.broker(1).stop()
    cluster.restart_broker(1)
    restored, count = read_table(cluster, topic)
    assert restored == before
    # 20 updates per key were written: the restore reads the live keys plus at most the
    # active segment's records, not the history.
    assert keys <= count <= 2 * keys, count
