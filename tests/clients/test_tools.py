"""The client tools through their scripts/ wrappers against a real cluster: console
producer and consumer round trip, get-offsets, delete-records, and the perf tests' output
lines."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from kafkaclone.clients import Consumer, Producer
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.testing.cluster import LocalCluster

pytestmark = pytest.mark.timeout(180)
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides={"auto.create.topics.enable": "false"}) as local:
        yield local


def new_topic(cluster: LocalCluster, partitions: int = 2) -> str:
    name = f"tool-{uuid.uuid4().hex[:8]}"
    with AdminClient(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(name, partitions, 1)]) == {name: None}
    probe = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = probe.list_topics(name, timeout=10).topics[name]
            if meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
                return name
            time.sleep(0.1)
    finally:
        probe.close()
    raise AssertionError("no leaders")


def run(script: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPTS / script), *args], input=None if stdin is None
                          else stdin.decode(), capture_output=True, text=True, timeout=90,
                          cwd="/")


def test_console_producer_to_console_consumer_and_confluent_kafka(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    servers = cluster.bootstrap_servers
    lines = b"".join(b"key%d:value %d\n" % (i, i) for i in range(20))
    done = run("kafka-console-producer.sh", "--bootstrap-server", servers, "--topic", topic,
               "--property", "parse.key=true", "--property", "key.separator=:",
               "--compression-codec", "lz4", stdin=lines)
    assert done.returncode == 0, done.stderr

    reference = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": "x",
                                          "enable.auto.commit": False})
    reference.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(2)])
    got = {}
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        message = reference.poll(0.5)
        if message is not None and message.error() is None:
            got[message.key()] = message.value()
    reference.close()
    assert got == {b"key%d" % i: b"value %d" % i for i in range(20)}

    done = run("kafka-console-consumer.sh", "--bootstrap-server", servers, "--topic", topic,
               "--from-beginning", "--max-messages", "20", "--property", "print.key=true",
               "--property", "print.partition=true", "--property", "print.offset=true",
               "--property", "print.timestamp=true", "--property", "key.separator=|")
    assert done.returncode == 0, done.stderr
    assert "Processed a total of 20 messages" in done.stderr
    printed = done.stdout.splitlines()
    assert len(printed) == 20
    pattern = re.compile(r"CreateTime:\d+\|Partition:(\d)\|Offset:(\d+)\|key(\d+)\|value (\d+)")
    for line in printed:
        match = pattern.fullmatch(line)
        assert match, line
        assert match.group(3) == match.group(4)

    # One partition from an offset, ended by --timeout-ms.
    done = run("kafka-console-consumer.sh", "--bootstrap-server", servers, "--topic", topic,
               "--partition", "0", "--offset", "1", "--timeout-ms", "1500")
    assert done.returncode == 0
    in_partition_0 = sum(1 for line in printed if "Partition:0" in line)
    assert len(done.stdout.splitlines()) == in_partition_0 - 1
    assert f"Processed a total of {in_partition_0 - 1} messages" in done.stderr
    assert "TimeoutException" in done.stderr


def test_console_tools_reject_bad_input(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, 1)
    done = run("kafka-console-producer.sh", "--bootstrap-server", cluster.bootstrap_servers,
               "--topic", topic, "--property", "parse.key=true", stdin=b"no separator\n")
    assert done.returncode == 1 and "No key found on line 1" in done.stderr
    done = run("kafka-console-consumer.sh", "--bootstrap-server", cluster.bootstrap_servers,
               "--offset", "3", "--topic", topic)
    assert done.returncode == 1 and "partition is required" in done.stderr
    done = run("kafka-console-producer.sh", "--bootstrap-server", cluster.bootstrap_servers,
               "--topic", topic, "--producer-property", "acks=most", stdin=b"x\n")
    assert done.returncode == 1 and "acks" in done.stderr


def test_get_offsets_and_delete_records(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = new_topic(cluster)
    servers = cluster.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": servers})
    for i in range(10):
        producer.produce(topic, b"%d" % i, partition=i % 2, timestamp=1_600_000_000_000 + i)
    assert producer.flush(30) == 0

    done = run("kafka-get-offsets.sh", "--bootstrap-server", servers, "--topic", topic)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{topic}:0:5\n{topic}:1:5\n"
    done = run("kafka-get-offsets.sh", "--broker-list", servers, "--topic", topic,
               "--partitions", "1", "--time", str(1_600_000_000_000 + 4))
    assert done.stdout == f"{topic}:1:2\n"

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0,
                                                   "offset": 3}], "version": 1}))
    done = run("kafka-delete-records.sh", "--bootstrap-server", servers,
               "--offset-json-file", str(offsets))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("Executing records delete operation\n"
                           "Records delete operation completed:\n"
                           f"partition: {topic}-0\tlow_watermark: 3\n")
    done = run("kafka-get-offsets.sh", "--bootstrap-server", servers, "--topic", topic,
               "--time", "-2")
    assert done.stdout == f"{topic}:0:3\n{topic}:1:0\n"


def test_perf_tools_print_kafkas_lines(cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    servers = cluster.bootstrap_servers
    done = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "3000",
               "--record-size", "100", "--throughput", "2000", "--producer-props",
               f"bootstrap.servers={servers}", "linger.ms=5")
    assert done.returncode == 0, done.stderr
    final = done.stdout.splitlines()[-1]
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms "
                        r"avg latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ "
                        r"ms 99th, \d+ ms 99.9th\.", final), final
    rate = float(final.split()[3])
    assert rate < 2600  # --throughput held it near 2000 records/s

    done = run("kafka-consumer-perf-test.sh", "--bootstrap-server", servers, "--topic", topic,
               "--messages", "3000", "--timeout", "10000")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, "
                      "data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
                      "fetch.MB.sec, fetch.nMsg.sec")
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "3000"
    assert float(fields[2]) == pytest.approx(3000 * 100 / 1024 / 1024, abs=1e-4)


def test_perf_producer_in_transactions_and_console_consumer_isolation_levels(
        cluster: LocalCluster) -> None:
    topic = new_topic(cluster)
    servers = cluster.bootstrap_servers
    done = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "2000",
               "--record-size", "50", "--throughput", "4000", "--producer-props",
               f"bootstrap.servers={servers}", "linger.ms=5", "--transactional-id",
               "perf-tx", "--transaction-duration-ms", "100")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("2000 records sent, ")
    # One more transaction, aborted: invisible to read_committed only.
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "perf-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.close()
    counts = {}
    for level in ("read_committed", "read_uncommitted"):
        done = run("kafka-console-consumer.sh", "--bootstrap-server", servers, "--topic",
                   topic, "--from-beginning", "--isolation-level", level, "--timeout-ms",
                   "3000")
        assert done.returncode == 0, done.stderr
        counts[level] = done.stdout.splitlines()
    assert len(counts["read_committed"]) == 2000
    assert not any(line.startswith("aborted") for line in counts["read_committed"])
    assert len(counts["read_uncommitted"]) == 2005


def test_console_consumer_group_resumes_where_it_left_off(cluster: LocalCluster,
                                                          tmp_path: Path) -> None:
    topic = new_topic(cluster)
    servers = cluster.bootstrap_servers
    config = tmp_path / "producer.properties"
    config.write_text("acks=all\nlinger.ms=1\n")
    done = run("kafka-console-producer.sh", "--broker-list", servers, "--topic", topic,
               "--producer.config", str(config),
               stdin=b"".join(b"line %d\n" % i for i in range(10)))
    assert done.returncode == 0, done.stderr
    group = f"console-{uuid.uuid4().hex[:6]}"
    first = run("kafka-console-consumer.sh", "--bootstrap-server", servers, "--include",
                f"{topic}|no-such-topic", "--group", group, "--from-beginning",
                "--max-messages", "10")
    assert first.returncode == 0, first.stderr
    assert "Processed a total of 10 messages" in first.stderr
    assert sorted(first.stdout.splitlines()) == sorted(f"line {i}" for i in range(10))
    done = run("kafka-console-producer.sh", "--bootstrap-server", servers, "--topic", topic,
               stdin=b"".join(b"more %d\n" % i for i in range(5)))
    assert done.returncode == 0, done.stderr
    # The group committed what it read when the first consumer closed: the second one
    # starts there (--from-beginning only applies without a committed offset).
    second = run("kafka-console-consumer.sh", "--bootstrap-server", servers, "--topic", topic,
                 "--group", group, "--from-beginning", "--timeout-ms", "3000")
    assert "Processed a total of 5 messages" in second.stderr, second.stderr
    assert sorted(second.stdout.splitlines()) == sorted(f"more {i}" for i in range(5))


def test_progress_line_on_a_terminal() -> None:
    import io

    from kafkaclone.tools.client_options import Progress

    err = io.StringIO()
    progress = Progress("records", err, enabled=True)
    progress._last -= 2  # as if a second had passed
    progress.add(500)
    progress.done()
    assert re.fullmatch(r"\r500 records \([\d,]+ records/s\)   \n", err.getvalue())
    quiet = io.StringIO()
    Progress("records", quiet, enabled=False).add(10)
    assert quiet.getvalue() == ""


def test_perf_tools_payload_file_metrics_and_detailed_stats(cluster: LocalCluster,
                                                            tmp_path: Path) -> None:
    topic = new_topic(cluster, 1)
    servers = cluster.bootstrap_servers
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha|beta|gamma")
    done = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "2000",
               "--payload-file", str(payloads), "--payload-delimiter", "|",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={servers}",
               "--print-metrics")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Reading payloads from: {payloads}"
    assert lines[1] == "Number of messages read: 3"
    assert any(line.startswith("2000 records sent, ") for line in lines)
    metric = re.compile(r"producer-metrics:record-send-total:\{client-id=perf-producer-client\}"
                        r" +: 2000\.000")
    assert any(metric.fullmatch(line) for line in lines), done.stdout

    done = run("kafka-consumer-perf-test.sh", "--bootstrap-server", servers, "--topic", topic,
               "--messages", "2000", "--show-detailed-stats", "--reporting-interval", "1",
               "--timeout", "10000")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.startswith("time, threadId, data.consumed.in.MB, MB.sec, ")
    assert rows and all(len(row.split(", ")) == 10 and row.split(", ")[1] == "0"
                        for row in rows)
    consumed = {payload.encode() for payload in ("alpha", "beta", "gamma")}
    reader = Consumer({"bootstrap.servers": servers})
    from kafkaclone.clients import TopicPartition

    reader.assign([TopicPartition(topic, 0, 0)])
    values: set[bytes] = set()
    deadline = time.monotonic() + 10
    while len(values) < 3 and time.monotonic() < deadline:
        values |= {r.value for r in reader.poll(0.5)}
    reader.close()
    assert values == consumed


def test_perf_producer_unthrottled_sends_columns_to_every_partition(
        cluster: LocalCluster) -> None:
    """Without a throughput limit the perf producer hands records over as columns
    (``send_batch``); the sticky partitioner still moves on, and every record arrives once."""
    topic = new_topic(cluster, 4)
    servers = cluster.bootstrap_servers
    done = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "20000",
               "--record-size", "100", "--throughput", "-1", "--producer-props",
               f"bootstrap.servers={servers}", "acks=all")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("20000 records sent, "), done.stdout
    done = run("kafka-get-offsets.sh", "--bootstrap-server", servers, "--topic", topic)
    ends = [int(line.rsplit(":", 1)[1]) for line in done.stdout.split()]
    assert sum(ends) == 20000 and len(ends) == 4, done.stdout
    assert sum(1 for end in ends if end) > 1, done.stdout


def test_perf_stats_count_records_acknowledged_together() -> None:
    import io

    from kafkaclone.tools.producer_perf import Stats

    stats = Stats(2_000_000, 5000, io.StringIO())  # samples every 4th record
    assert stats.sampling == 4
    stats.record_many(0, 10, 7, 1000, stats.start)  # iterations 0, 4, 8
    stats.record_many(10, 3, 9, 300, stats.start)  # iteration 12
    stats.record(13, 5, 100, stats.start)  # not sampled
    assert (stats.count, stats.bytes, stats.total_latency) == (14, 1400, 70 + 27 + 5)
    assert stats.latencies == [7, 7, 7, 9] and stats.max_latency == 9
    assert stats.fail(3) == 1 and stats.fail(2) == 4 and stats.failures == 5


def test_console_producer_groups_lines_as_the_reads_complete_them() -> None:
    from kafkaclone.tools.console_producer import line_groups

    class Reads:
        """An input whose reads return these chunks, then the end."""

        def __init__(self, *chunks: bytes) -> None:
            self.chunks = list(chunks)

        def read1(self, _size: int) -> bytes:
            return self.chunks.pop(0) if self.chunks else b""

    source = Reads(b"a\nb", b"c\r\nd\n", b"", b"never read\n")
    assert list(line_groups(source)) == [[b"a"], [b"bc\r", b"d"]]  # type: ignore[arg-type]
    source = Reads(b"lo", b"ng", b" line\nlast")
    assert list(line_groups(source)) == [[b"long line"], [b"last"]]  # type: ignore[arg-type]
    source = Reads(b"\n\nx\n")
    assert list(line_groups(source)) == [[b"", b"", b"x"]]  # type: ignore[arg-type]


def test_console_producer_piped_file_arrives_whole_and_in_order(cluster: LocalCluster) -> None:
    """50,000 keyless lines piped in (many 64 KiB reads, lines cut between them) are 50,000
    records of one partition, in the input's order."""
    topic = new_topic(cluster, 1)
    servers = cluster.bootstrap_servers
    lines = [b"line %d %s" % (i, b"x" * (i % 37)) for i in range(50_000)]
    done = run("kafka-console-producer.sh", "--bootstrap-server", servers, "--topic", topic,
               stdin=b"\n".join(lines) + b"\n")
    assert done.returncode == 0, done.stderr
    consumer = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.subscribe([topic])
        read: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(read) < len(lines) and time.monotonic() < deadline:
            read += [r.value for r in consumer.poll(1.0) if r.value is not None]
    finally:
        consumer.close()
    assert read == lines
