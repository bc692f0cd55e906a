"""Log compaction end to end: a real broker process, confluent-kafka producing many updates
over few keys (and deletes) to a compacted topic with small segments; once the cleaner has
run, reading from offset 0 (confluent-kafka, then kafka-python 3) gives the latest value of
every live key and no deleted key. Keyless records to the compacted topic are refused with
INVALID_RECORD. Dynamic log.cleaner.* configs through kafka-configs.sh; aborted
transactions removed by the cleaner."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic

REPO = Path(__file__).resolve().parents[2]
TOPIC = "compacted"
KEYS = 40
DELETED = [b"key-1", b"key-2", b"key-3"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides={"log.cleaner.backoff.ms": "200",
                                    "default.replication.factor": "1"}) as local:
        yield local


def produce(producer: Producer, records: list[tuple[bytes, bytes | None]]) -> None:
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for key, value in records:
        producer.produce(TOPIC, key=key, value=value, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors


def read_from_start(cluster: LocalCluster) -> tuple[list[tuple[int, bytes, bytes | None]], int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": "compaction-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=10)
        consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if not out or out[-1][0] >= high - 1 or msg.offset() >= high:
                        break
                    continue
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        return out, high
    finally:
        consumer.close()


@pytest.mark.timeout(240)
def test_compacted_topic_keeps_the_latest_value_per_live_key(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, partitions=1, configs={
        "cleanup.policy": "compact", "segment.bytes": "20000",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
    })
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5,
                         "batch.size": 8000,
                         "compression.type": "lz4"})
    latest: dict[bytes, bytes] = {}
    updates = []
    for round_ in range(100):
        for k in range(KEYS):
            key = b"key-%d" % k
            value = b"value-%d-%d-" % (k, round_) + b"x" * 40
            updates.append((key, value))
            latest[key] = value
    produce(producer, updates)
    produce(producer, [(key, None) for key in DELETED])
    for key in DELETED:
        del latest[key]

    # Keyless records are refused and nothing is appended.
    errors: list[KafkaError] = []
    producer.produce(TOPIC, value=b"no key", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD

    # Keep writing (other keys) so segments roll and the tombstones' segment ages past
    # delete.retention.ms in the clean section; stop once a read from 0 shows the log
    # compacted: every live key once with its latest value, no deleted key.
    records: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 150
    n = 0
    while time.monotonic() < deadline:
        filler = [(b"filler-%d" % (n % 5), b"f" * 60) for _ in range(300)]
        n += 1
        produce(producer, filler)
        latest.update(filler)
        time.sleep(1.0)
        records, _ = read_from_start(cluster)
        keys = [key for _, key, _ in records]
        if (not set(DELETED) & set(keys) and len(records) < 20 * (KEYS + 5)
                and records[0][0] > 0):
            break
    else:
        raise AssertionError(f"not compacted in time: {len(records)} records read; broker "
                             f"log:\n{cluster.broker(1).log_tail(40)}")
    seen: dict[bytes, bytes | None] = {}
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(offsets)
    for _, key, value in records:
        seen[key] = value
    assert seen == latest
    assert not set(DELETED) & set(seen)
    log_text = (cluster.base_dir / "broker-1.log").read_text()
    assert "Log cleaner thread 0 cleaned log compacted-0" in log_text

    # kafka-python 3 reads the same table: latest value of every live key, no deleted key.
    seen_kp: dict[bytes, bytes | None] = {}
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             enable_auto_commit=False)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        high = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + 60
        while consumer.position(tp) < high and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:
                    seen_kp[record.key] = record.value
    finally:
        consumer.close()
    assert {k: v for k, v in seen_kp.items() if not k.startswith(b"filler-")} == {
        k: v for k, v in latest.items() if not k.startswith(b"filler-")}
    assert not set(DELETED) & set(seen_kp)


def configs_command(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts" / "kafka-configs.sh"),
                           "--bootstrap-server", cluster.bootstrap_servers, *args],
                          capture_output=True, text=True, timeout=60, cwd="/")


def wait_logged(cluster: LocalCluster, since: int, text: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        with cluster.broker(1).log_path.open(errors="replace") as log:
            log.seek(since)
            if text in log.read():
                return
        assert time.monotonic() < deadline, f"not logged: {text}"
        time.sleep(0.2)


@pytest.mark.timeout(120)
def test_dynamic_cleaner_configs_restart_the_cleaner_and_nonsense_is_refused(
        cluster: LocalCluster) -> None:
    since = cluster.broker(1).log_path.stat().st_size
    done = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                           "--alter", "--add-config",
                           "log.cleaner.threads=2,log.cleaner.io.max.bytes.per.second=1e9,"
                           "log.cleaner.backoff.ms=300")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_logged(cluster, since, "Reconfiguring the log cleaner")
    wait_logged(cluster, since, "Updating logCleanerIoMaxBytesPerSecond: 1000000000.0")
    # the cluster default, too (/config/brokers/<default>)
    done = configs_command(cluster, "--entity-type", "brokers", "--entity-default", "--alter",
                           "--add-config", "log.cleaner.dedupe.buffer.size=67108864")
    assert done.returncode == 0, done.stdout + done.stderr

    for config, message in [
        ("log.cleaner.threads=0", "Log cleaner threads should be at least 1"),
        ("log.cleaner.threads=5",
         "Log cleaner threads cannot be increased to more than double the current value 2"),
        ("log.cleaner.min.cleanable.ratio=2",
         "for configuration log.cleaner.min.cleanable.ratio"),
        ("log.cleaner.backoff.ms=soon", "log.cleaner.backoff.ms"),
    ]:
        done = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                               "--alter", "--add-config", config)
        assert done.returncode != 0, config
        assert message in done.stdout + done.stderr, done.stdout + done.stderr
    described = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                                "--describe")
    assert "log.cleaner.threads=2" in described.stdout, described.stdout


@pytest.mark.timeout(120)
def test_dynamic_num_io_threads_resizes_the_pool(cluster: LocalCluster) -> None:
    """kafka-configs.sh sets num.io.threads on a running broker: its I/O threads (which
    open new logs) are resized, and a topic created afterwards gets its logs."""
    since = cluster.broker(1).log_path.stat().st_size
    done = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                           "--alter", "--add-config", "num.io.threads=4")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_logged(cluster, since, "Resizing the I/O threads from 8 to 4")
    create_topic(cluster, "after-resize", partitions=4)
    data = cluster.base_dir / "broker-1" / "data"
    assert len(list(data.glob("after-resize-*"))) == 4


@pytest.mark.timeout(120)
def test_dynamic_recovery_threads_reach_the_log_manager(cluster: LocalCluster) -> None:
    """kafka-configs.sh sets num.recovery.threads.per.data.dir on a running broker: its
    log manager takes it for the next shutdown; Kafka's thread pool rule still refuses a
    value more than double the current one."""
    since = cluster.broker(1).log_path.stat().st_size
    done = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                           "--alter", "--add-config", "num.recovery.threads.per.data.dir=2")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_logged(cluster, since, "Log recovery and shutdown threads per data dir: 2")
    refused = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                              "--alter", "--add-config", "num.recovery.threads.per.data.dir=9")
    assert refused.returncode != 0, refused.stdout
    done = configs_command(cluster, "--entity-type", "brokers", "--entity-name", "1",
                           "--alter", "--delete-config", "num.recovery.threads.per.data.dir")
    assert done.returncode == 0, done.stdout + done.stderr
    wait_logged(cluster, since, "Log recovery and shutdown threads per data dir: 1")


def read_all(cluster: LocalCluster, topic: str, isolation: str
             ) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": f"txn-reader-{isolation}", "enable.auto.commit": False,
                         "isolation.level": isolation})
    try:
        _, high = consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=10)
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            position = consumer.position([CkTopicPartition(topic, 0)])[0].offset
            if position >= high:
                break
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


@pytest.mark.timeout(180)
def test_cleaning_removes_aborted_transactions(cluster: LocalCluster) -> None:
    topic = "compacted-txn"
    create_topic(cluster, topic, partitions=1, configs={
        "cleanup.policy": "compact", "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": "compacted-txn", "batch.size": 2000})
    producer.init_transactions(60)
    committed: dict[bytes, bytes] = {}
    for round_ in range(6):
        producer.begin_transaction()
        for k in range(10):
            value = b"committed-%d-%d" % (k, round_) + b"c" * 40
            producer.produce(topic, key=b"k%d" % k, value=value, partition=0)
            committed[b"k%d" % k] = value
        producer.commit_transaction(30)
        producer.begin_transaction()
        for k in range(10):
            producer.produce(topic, key=b"k%d" % k, value=b"aborted" + b"a" * 40, partition=0)
        producer.abort_transaction(30)
    # Later plain writes roll segments so the transactions' segments become cleanable.
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "batch.size": 2000})
    for i in range(200):
        plain.produce(topic, key=b"other-%d" % (i % 3), value=b"o" * 60, partition=0)
    assert plain.flush(30) == 0
    deadline = time.monotonic() + 90
    while True:
        uncommitted = read_all(cluster, topic, "read_uncommitted")
        if not [r for r in uncommitted if r[2] is not None and r[2].startswith(b"aborted")]:
            break
        assert time.monotonic() < deadline, "aborted records still there"
        time.sleep(1.0)
    for isolation in ("read_uncommitted", "read_committed"):
        records = read_all(cluster, topic, isolation)
        table = {key: value for _, key, value in records if key.startswith(b"k")}
        assert table == committed, isolation
        assert not [r for r in records if r[2] is not None and r[2].startswith(b"aborted")]
