"""Broker data path benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_broker.py [--records 1000000] [--consume 2000000]
        [--latency-seconds 10] [--latency-rate 10000]
        [--only produce1,produce3,consume,latency,sendfile,rate] [--fetch-records 4000000]
        [--rate-requests 200000] [--rate-connections 8] [--profile DIR]

The issue's four benchmarks, each run against a local cluster (ZooKeeper + broker processes
through kafkaclone.testing.LocalCluster) and, in the same run, against librdkafka's built-in
mock cluster (``test.mock.num.brokers=3``), which has no broker cost at all, so the ratio
says how close the broker comes to the client's own ceiling:

1. ``produce1``: confluent-kafka producer, 100-byte records, linger.ms 5, batch.size 1 MiB,
   no compression, acks=1, to a 6-partition topic on 1 broker;
2. ``produce3``: the same with acks=all to a 6-partition RF 3 topic on 3 brokers with
   min.insync.replicas=2;
3. ``consume``: one confluent-kafka consumer reading ``--consume`` records (produced first)
   from the 6 partitions of the 1-broker topic;
4. ``latency``: end-to-end latency (producer send to consumer receive, in this process) at
   ``--latency-rate`` msg/s (the issue's 10,000) for ``--latency-seconds``, RF 3, acks=all;
   also the brokers' CPU per record over the sending, and as the floor, from the same run,
   benchmarks/reactor_floor.py's bare Twisted relay of the same hops at the same rate.
5. ``sendfile`` (not in the default set): broker CPU seconds per GB appended from a kcat
   producer (acks=1; the goal: at most 2) and per GB served to a kcat
   consumer (C, so the broker is what is measured), ``--fetch-records`` 100-byte records
   produced by kcat to the 6 partitions of a 1-broker topic, read back whole twice in each
   of three ways, in turn: zero-copy fetch (sendfile), the file ranges read and written as
   bytes (``copied``: what a TLS connection does), and the path before zero copy (``bytes``:
   records read as bytes, CRC-checked and copied into the frame); the same broker restarted
   through benchmarks/copied_fetch_broker.py for the last two, the page cache warm for all.
6. ``rate`` (not in the default set): request-rate capacity, the broker's CPU per request.
   ``--rate-connections`` connections to one broker, each pipelining (up to
   ``request_path.RATE_WINDOW`` unanswered) raw one-record Produce v8 requests with acks=1,
   encoded once with the project's protocol encoders, to the partitions of a 1-broker
   topic, in all ``--rate-requests`` (at most ``request_path.RATE_SECONDS`` s, through
   ``request_path.rate_load``); the broker's CPU time (user +
   system, from ``/proc/<pid>/stat``) over the run gives requests per broker CPU second,
   that is per core (the goal: >= 25,000). It also prints the same load against a bare
   Twisted answerer (benchmarks/reactor_floor.py: the floor) and the in-process figure of
   benchmarks/request_path.py (µs of CPU per request without sockets or reactor).

``--profile DIR`` runs py-spy on every broker during each broker run and writes each one's
raw collapsed stacks (``<run>.b<id>.txt``) plus a summary of its hottest functions to DIR.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

import kafkaclone.testing.cluster as local_cluster
from kafkaclone.testing.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reactor_floor  # benchmarks/ is not a package
import request_path
from proc_stat import cpu_seconds
from reactor_floor import percentiles

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 6
VALUE = b"x" * 100
PRODUCER_CONFIG = {"linger.ms": 5, "batch.size": 1 << 20, "compression.type": "none",
                   "queue.buffering.max.messages": 2_000_000,
                   "queue.buffering.max.kbytes": 2_000_000, "enable.idempotence": False}


def create_topic(cluster: LocalCluster, name: str, replication_factor: int,
                 configs: dict[str, str] | None = None) -> None:
    args = [str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server",
            cluster.bootstrap_servers, "--create", "--topic", name, "--partitions",
            str(PARTITIONS), "--replication-factor", str(replication_factor)]
    for key, value in (configs or {}).items():
        args += ["--config", f"{key}={value}"]
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    # Wait until the producer sees a leader for every partition.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = producer.list_topics(name, timeout=10)
        topic = metadata.topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == PARTITIONS \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"no leaders for {name}")


def produce(bootstrap: dict[str, Any], topic: str, records: int, acks: str,
            extra: dict[str, Any] | None = None) -> float:
    """records/s for ``records`` 100-byte records, from the first produce() to the last
    delivery report; ``extra`` overrides PRODUCER_CONFIG."""
    producer = Producer({**bootstrap, **PRODUCER_CONFIG, "acks": acks, **(extra or {})})
    failures = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failures
        if err is not None:
            failures += 1

    # Warm up: metadata and connections.
    producer.produce(topic, VALUE, on_delivery=delivered)
    producer.flush(30)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures or remaining:
        print(f"    ({failures} delivery failures, {remaining} undelivered)")
    return records / elapsed


def consume(bootstrap: dict[str, Any], topic: str, records: int,
            extra: dict[str, Any] | None = None, timeout_s: float = 120) -> float:
    """Records/s reading ``topic`` from offset 0 by assignment; ``extra`` adds consumer
    settings (an ``isolation.level``, say)."""
    consumer = Consumer({**bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20,
                         "queued.max.messages.kbytes": 1_000_000,
                         "auto.offset.reset": "earliest", **(extra or {})})
    consumer.assign([CkTopicPartition(topic, p, 0)
                     for p in range(_partition_count(consumer, topic))])
    count = 0
    start = None
    deadline = time.monotonic() + timeout_s
    while count < records and time.monotonic() < deadline:
        messages = consumer.consume(10_000, 1.0)
        if messages and start is None:
            start = time.perf_counter()
        count += sum(1 for m in messages if m.error() is None)
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    if count < records:
        print(f"    (only {count} of {records} records consumed)")
    return count / elapsed if elapsed > 0 else 0.0


def _partition_count(client: Any, topic: str) -> int:
    """The topic's partitions (the mock cluster auto-creates topics with 4)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = client.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} has no partitions")


class Latency(NamedTuple):
    """Milliseconds: send -> consumer receive (end to end) and send -> acks=all answer."""

    p50: float
    p99: float
    worst: float
    messages: int
    ack_p50: float
    ack_p99: float
    server_cpu_us: float = float("nan")
    """CPU (user + system) of the ``server_pids`` per record, from the first send until the
    last record was read."""


def latency(bootstrap: dict[str, Any], topic: str, seconds: float, rate: int = 10_000,
            server_pids: list[int] | None = None) -> Latency:
    """End-to-end and acknowledgement latency at ``rate`` messages/s for ``seconds``."""
    producer = Producer({**bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": False})
    producer.produce(topic, b"")  # creates the topic on the mock cluster
    producer.flush(30)
    if "test.mock.num.brokers" in bootstrap:  # the consumer joins the producer's mock cluster
        servers = producer.list_topics(timeout=10).orig_broker_name.split("/")[0]
        bootstrap = {"bootstrap.servers": servers}
    consumer = Consumer({**bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "fetch.error.backoff.ms": 10})
    consumer.assign([CkTopicPartition(topic, p, -1)  # from the end
                     for p in range(_partition_count(consumer, topic))])
    samples: list[float] = []
    acks: list[float] = []
    stop = threading.Event()

    def receive() -> None:
        # poll() hands over each message as soon as it is there (consume(n) would wait
        # for n of them).
        while not stop.is_set():
            message = consumer.poll(0.1)
            value = None if message is None or message.error() else message.value()
            if value:
                sent = int.from_bytes(value[:8], "big")
                samples.append((time.perf_counter_ns() - sent) / 1e6)

    def acked(sent_ns: int) -> Callable[[Any, Any], None]:
        def record(err: Any, _message: Any) -> None:
            if err is None:
                acks.append((time.perf_counter_ns() - sent_ns) / 1e6)
        return record

    thread = threading.Thread(target=receive)
    thread.start()
    time.sleep(3)  # the consumer's first fetches
    interval = 1.0 / rate
    cpu_before = cpu_seconds(server_pids or [])
    start = time.perf_counter()
    sent = 0
    total = int(seconds * rate)
    while sent < total:
        target = start + sent * interval
        now = time.perf_counter()
        if now < target:
            # Waiting in poll() serves delivery reports as they come: with a sleep, an
            # answer waited for the next send (20 ms at 50 msg/s) to be timed.
            producer.poll(min(target - now, 0.001))
            continue
        sent_ns = time.perf_counter_ns()
        producer.produce(topic, sent_ns.to_bytes(8, "big") + VALUE[8:],
                         on_delivery=acked(sent_ns))
        producer.poll(0)
        sent += 1
    producer.flush(60)
    deadline = time.monotonic() + 30
    while len(samples) < total and time.monotonic() < deadline:
        time.sleep(0.01)
    server_cpu = cpu_seconds(server_pids or []) - cpu_before
    stop.set()
    thread.join()
    consumer.close()
    p50, p99, worst = percentiles(samples)
    ack_p50, ack_p99, _ = percentiles(acks)
    return Latency(p50, p99, worst, len(samples), ack_p50, ack_p99,
                   server_cpu / sent * 1e6 if server_pids else float("nan"))


_ECHO = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
peer, _ = listener.accept()
peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while data := peer.recv(4096):
    peer.sendall(data)
"""


def loopback_round_trip(count: int = 2_000) -> tuple[float, float]:
    """p50 and p99, in µs, of a 100-byte message's round trip over loopback TCP to another
    process that echoes it: the machine's floor for one request and its answer. (Where the
    two processes wake each other across cores of a virtual machine this costs several
    times what it costs on one core: measured 30 µs on one, 160-275 µs across two here.)"""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None
        port = int(echo.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as peer:
            peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            samples = []
            for _ in range(count):
                started = time.perf_counter_ns()
                peer.sendall(VALUE)
                received = 0
                while received < len(VALUE):
                    received += len(peer.recv(4096))
                samples.append((time.perf_counter_ns() - started) / 1e3)
    finally:
        echo.kill()
        echo.wait()
    p50, p99, _ = percentiles(samples)
    return p50, p99


@contextmanager
def broker_cpu(cluster: LocalCluster, what: str) -> Iterator[None]:
    """Print the brokers' CPU use over the block (how busy the broker side was), and this
    process's, the clients' (librdkafka's threads are this process's): on a small machine
    the two share the cores."""
    pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
    before, started = cpu_seconds(pids), time.perf_counter()
    own = os.times()
    yield
    used, elapsed = cpu_seconds(pids) - before, time.perf_counter() - started
    now = os.times()
    clients = now.user + now.system - own.user - own.system
    print(f"    ({what}: brokers used {used:.1f} CPU s in {elapsed:.1f} s, "
          f"{100 * used / elapsed:.0f} % of one core; the clients {clients:.1f} CPU s, "
          f"{100 * clients / elapsed:.0f} %)", flush=True)


_PYSPY_EXTRA = os.environ.get("BENCH_PYSPY_ARGS", "--nonblocking").split()
"""py-spy's sampling arguments for ``--profile`` (``--native`` shows the C frames, the
garbage collector's among them, but pauses the broker at each sample)."""


@contextmanager
def profiled(cluster: LocalCluster, name: str, directory: Path | None) -> Iterator[None]:
    """py-spy record on every broker while the block runs (nothing without --profile):
    ``<name>.b<id>.txt`` and its summary per broker."""
    if directory is None:
        yield
        return
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    directory.mkdir(parents=True, exist_ok=True)
    recorders: list[tuple[Path, subprocess.Popen[bytes]]] = []
    for broker_id in sorted(cluster.brokers):
        raw = directory / f"{name}.b{broker_id}.txt"
        recorders.append((raw, subprocess.Popen(
            [pyspy, "record", "--pid", str(cluster.broker(broker_id).pid), "--format", "raw",
             "--output", str(raw), "--rate", "200", *_PYSPY_EXTRA],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    time.sleep(1)
    try:
        yield
    finally:
        for _, process in recorders:
            process.send_signal(signal.SIGINT)
        for raw, process in recorders:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if raw.exists():
                raw.with_suffix(".summary.txt").write_text(summarize(raw))


def summarize(raw: Path, top: int = 25) -> str:
    """Self time and total time per function from py-spy's collapsed stacks."""
    self_time: collections.Counter[str] = collections.Counter()
    total_time: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        frames = stack.split(";")
        self_time[_short(frames[-1])] += count
        for frame in set(map(_short, frames)):
            total_time[frame] += count
    lines = [f"{samples} samples", "", "self %   function"]
    lines += [f"{100 * c / samples:6.1f}   {f}" for f, c in self_time.most_common(top)]
    lines += ["", "total %  function"]
    lines += [f"{100 * c / samples:6.1f}   {f}" for f, c in total_time.most_common(top)]
    return "\n".join(lines) + "\n"


def _short(frame: str) -> str:
    # "function (path/to/module.py:123)" -> "function (module.py)"
    name, _, where = frame.partition(" (")
    file = where.split(":")[0].rsplit("/", 1)[-1]
    return f"{name} ({file})" if file else name


def mock(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"test.mock.num.brokers": 3, **(extra or {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--consume", type=int, default=2_000_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--latency-rate", type=int, default=10_000)
    parser.add_argument("--only", default="produce1,produce3,consume,latency")
    parser.add_argument("--fetch-records", type=int, default=4_000_000)
    parser.add_argument("--rate-requests", type=int, default=200_000)
    parser.add_argument("--rate-connections", type=int, default=8)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"records {args.records:,}, consume {args.consume:,}", flush=True)

    if only & {"produce1", "consume"}:
        with LocalCluster(1, overrides={"log.flush.interval.messages": "9223372036854775807"}
                          ) as cluster:
            create_topic(cluster, "bench1", 1)
            bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
            if "produce1" in only:
                with profiled(cluster, "produce1", args.profile), broker_cpu(cluster, "produce"):
                    ours = produce(bootstrap, "bench1", args.records, "1")
                theirs = produce(mock(), "bench1", args.records, "1")
                print(f"{'1 broker, acks=1':<46} {ours:>12,.0f} rec/s   mock {theirs:>12,.0f}"
                      f" rec/s   ratio {ours / theirs:5.2f}   goal >= 1,000,000", flush=True)
            if "consume" in only:
                have = args.records + 1 if "produce1" in only else 0
                if have < args.consume:
                    produce(bootstrap, "bench1", args.consume - have, "1")
                with profiled(cluster, "consume", args.profile), broker_cpu(cluster, "consume"):
                    ours = consume(bootstrap, "bench1", args.consume)
                theirs = _mock_consume(args.consume)
                print(f"{'1 consumer, 6 partitions':<46} {ours:>12,.0f} rec/s   mock "
                      f"{theirs:>12,.0f} rec/s   ratio {ours / theirs:5.2f}   "
                      f"goal >= 1,000,000", flush=True)

    if "sendfile" in only:
        sendfile_benchmark(args.fetch_records)

    if "rate" in only:
        rate_benchmark(args.rate_requests, args.rate_connections, args.profile)

    if only & {"produce3", "latency"}:
        with LocalCluster(3, overrides={"log.flush.interval.messages": "9223372036854775807"}
                          ) as cluster:
            create_topic(cluster, "bench3", 3, {"min.insync.replicas": "2"})
            bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
            if "produce3" in only:
                with profiled(cluster, "produce3", args.profile), broker_cpu(cluster, "produce"):
                    ours = produce(bootstrap, "bench3", args.records, "all")
                theirs = produce(mock(), "bench3", args.records, "all")
                print(f"{'3 brokers, RF 3, acks=all, min.insync 2':<46} {ours:>12,.0f} rec/s"
                      f"   mock {theirs:>12,.0f} rec/s   ratio {ours / theirs:5.2f}   "
                      f"goal >= 421,000", flush=True)
            if "latency" in only:
                create_topic(cluster, "latency", 3, {"min.insync.replicas": "2"})
                pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
                with profiled(cluster, "latency", args.profile), broker_cpu(cluster, "latency"):
                    measured = latency(bootstrap, "latency", args.latency_seconds,
                                       args.latency_rate, pids)
                reference = latency(mock(), "latency", args.latency_seconds, args.latency_rate)
                title = f"end-to-end latency, {args.latency_rate:,} msg/s, RF 3, acks=all"
                print(f"{title:<46} p50 "
                      f"{measured.p50:.2f} ms p99 {measured.p99:.2f} ms max "
                      f"{measured.worst:.1f} ms "
                      f"({measured.messages} msgs)   mock p50 {reference.p50:.2f} ms p99 "
                      f"{reference.p99:.2f} ms   goal p50 <= 2 ms, p99 <= 5 ms", flush=True)
                print(f"{'  produce -> acks=all answer, same run':<46} p50 "
                      f"{measured.ack_p50:.2f} ms p99 {measured.ack_p99:.2f} ms   mock p50 "
                      f"{reference.ack_p50:.2f} ms p99 {reference.ack_p99:.2f} ms", flush=True)
                floor_p50, floor_p99 = loopback_round_trip()
                print(f"{'  this machine: loopback TCP round trip':<46} p50 {floor_p50:.0f} µs "
                      f"p99 {floor_p99:.0f} µs   (an acks=all record crosses 4 such hops "
                      f"before its answer)", flush=True)
                floor = reactor_floor.relay(args.latency_rate, args.latency_seconds)
                print(f"{'  bare Twisted relay of the same hops':<46} answer p50 "
                      f"{floor.answer_p50:.2f} ms p99 {floor.answer_p99:.2f} ms, end to end "
                      f"p50 {floor.end_to_end_p50:.2f} ms p99 {floor.end_to_end_p99:.2f} ms; "
                      f"{floor.cpu_us_per_record:.0f} µs CPU per record "
                      f"(benchmarks/reactor_floor.py)", flush=True)
                print(f"{'  the brokers, sending to the last read':<46} "
                      f"{measured.server_cpu_us:.0f} µs CPU per record, "
                      f"{measured.server_cpu_us / floor.cpu_us_per_record:.1f}x the bare "
                      f"relay's   goal <= 250 µs", flush=True)
                print_request_timing(cluster)


def print_request_timing(cluster: LocalCluster) -> None:
    """Stop broker 1 and print the request timing it logs at shutdown (Kafka's
    RequestChannel names, per API, in ms)."""
    broker = cluster.brokers[1]
    broker.stop()
    text = broker.log_path.read_text(errors="replace")
    start = text.rfind("Request timing (ms) since start:")
    if start < 0:
        return
    print("  broker 1 request timing (ms):", flush=True)
    for line in text[start:].splitlines()[1:]:
        if " count:" not in line:
            break
        print(f"    {line}", flush=True)


def rate_benchmark(requests: int, connections: int, profile: Path | None) -> None:
    """Requests per broker CPU second: one broker, ``connections`` connections pipelining
    one-record acks=1 Produce v8 requests, ``requests`` in all."""
    print(f"    ({uptime()})", flush=True)
    with LocalCluster(1, overrides={"log.flush.interval.messages": "9223372036854775807"}
                      ) as cluster:
        create_topic(cluster, "rate", 1)
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        broker = cluster.brokers[1]
        assert broker.pid is not None
        answered, used, elapsed = request_path.rate_run(
            host, int(port), broker.pid, requests, connections, PARTITIONS,
            lambda: profiled(cluster, "rate", profile))
    print(f"    {answered:,} requests in {elapsed:.2f} s ({answered / elapsed:,.0f}/s over "
          f"{connections} connections): broker {used:.2f} CPU s, "
          f"{used / answered * 1e6:.1f} µs per request", flush=True)
    print(f"{'one-record Produce acks=1, 1 broker':<46} {answered / used:>12,.0f} requests "
          f"per broker CPU s   goal >= 25,000", flush=True)
    floor_answered, floor_used, _ = reactor_floor.answer_floor(requests, connections)
    print(f"{'  a bare Twisted answerer, the same load':<46} "
          f"{floor_answered / floor_used:>12,.0f} requests per CPU s   the broker at "
          f"{(used / answered) / (floor_used / floor_answered):.1f}x its CPU per request "
          f"(benchmarks/reactor_floor.py)", flush=True)
    in_process = request_path.produce_us_per_request()
    print(f"{'  in process (benchmarks/request_path.py)':<46} {in_process:>12.1f} µs CPU per "
          f"request", flush=True)
    print(f"    ({uptime()})", flush=True)


def uptime() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def kcat_produce(cluster: LocalCluster, topic: str, records: int) -> None:
    """``records`` 100-byte values, produced by kcat (acks=1, batches of up to 1 MiB)."""
    line = VALUE + b"\n"
    chunk = line * 100_000
    process = subprocess.Popen(
        ["kcat", "-b", cluster.bootstrap_servers, "-P", "-t", topic, "-z", "none",
         "-X", "acks=1", "-X", "linger.ms=5", "-X", "batch.size=1048576",
         "-X", "queue.buffering.max.kbytes=1000000"], stdin=subprocess.PIPE)
    assert process.stdin is not None
    for start in range(0, records, 100_000):
        process.stdin.write(chunk[:len(line) * min(100_000, records - start)])
    process.stdin.close()
    if process.wait(timeout=600) != 0:
        raise RuntimeError("kcat -P failed")


def kcat_consume(cluster: LocalCluster, topic: str) -> int:
    """Read ``topic`` whole with kcat (-e: until the end of every partition); the records."""
    process = subprocess.Popen(
        ["kcat", "-b", cluster.bootstrap_servers, "-C", "-t", topic, "-o", "beginning", "-e",
         "-q", "-f", "\n"], stdout=subprocess.PIPE)
    assert process.stdout is not None
    count = 0
    while chunk := process.stdout.read(1 << 20):
        count += chunk.count(b"\n")
    if process.wait(timeout=600) != 0:
        raise RuntimeError("kcat -C failed")
    return count


def sendfile_benchmark(records: int, rounds: int = 6) -> None:
    """Broker CPU per GB served to kcat, zero-copy and not, in turn in one run."""
    with LocalCluster(1, overrides={"log.flush.interval.messages": "9223372036854775807"}
                      ) as cluster:
        create_topic(cluster, "fetch", 1)
        producing = cluster.brokers[1].pid
        assert producing is not None
        before, started = cpu_seconds([producing]), time.perf_counter()
        kcat_produce(cluster, "fetch", records)
        used, elapsed = cpu_seconds([producing]) - before, time.perf_counter() - started
        served = sum(path.stat().st_size for path in
                     cluster.base_dir.glob("broker-1/data/fetch-*/*.log"))
        print(f"{'produce from kcat (acks=1), broker CPU s per GB':<46} "
              f"{used / (served / 1e9):.2f}   ({records:,} records, {served / 1e6:,.0f} MB "
              f"appended in {elapsed:.2f} s, broker {used:.2f} CPU s)   goal <= 2", flush=True)
        modes = ["sendfile", "copied", "bytes"]
        launchers = {"sendfile": REPO / "scripts" / "kafka-server-start.sh"}
        for mode in modes[1:]:
            launcher = launchers[mode] = cluster.base_dir / f"{mode}-fetch-broker.sh"
            launcher.write_text(
                f'#!/bin/sh\nexec "{sys.executable}" '
                f'"{REPO / "benchmarks" / "copied_fetch_broker.py"}" {mode} "$@"\n')
            launcher.chmod(0o755)
        kcat_consume(cluster, "fetch")  # the page cache warm for every round
        results: dict[str, list[float]] = {mode: [] for mode in modes}
        for round_ in range(rounds):
            mode = modes[round_ % len(modes)]
            broker = cluster.brokers[1]
            broker.stop()
            local_cluster.START_SCRIPT = launchers[mode]  # type: ignore[misc]
            cluster.restart_broker(1)
            assert broker.pid is not None
            before, started = cpu_seconds([broker.pid]), time.perf_counter()
            count = kcat_consume(cluster, "fetch")
            used, elapsed = cpu_seconds([broker.pid]) - before, time.perf_counter() - started
            per_gb = used / (served / 1e9)
            results[mode].append(per_gb)
            print(f"    {mode:<9} {count:,} records, {served / 1e6:,.0f} MB in {elapsed:.2f} s"
                  f" ({served / 1e6 / elapsed:,.0f} MB/s): broker {used:.2f} CPU s, "
                  f"{per_gb:.2f} CPU s per GB", flush=True)
            if count != records:
                print(f"    ({mode}: {count:,} of {records:,} records read)")
        best = {mode: min(values) for mode, values in results.items()}
        print(f"{'fetch to kcat, broker CPU s per GB (best)':<46} sendfile "
              f"{best['sendfile']:.2f}  copied {best['copied']:.2f}  bytes {best['bytes']:.2f}"
              f"   bytes/sendfile {best['bytes'] / best['sendfile']:.1f}x   goal >= 3x",
              flush=True)
        local_cluster.START_SCRIPT = launchers["sendfile"]  # type: ignore[misc]


def _mock_consume(records: int) -> float:
    """Produce ``records`` to a mock cluster, then consume what it kept. The mock cluster
    lives as long as the client that created it (here the consumer; a producer joins it
    through its bootstrap address), and it keeps only the newest segments of each partition
    (some 40-60k records of this size), so the rate is measured over what it kept."""
    consumer = Consumer({**mock(), "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20,
                         "queued.max.messages.kbytes": 1_000_000,
                         "auto.offset.reset": "earliest"})
    bootstrap = consumer.list_topics(timeout=10).orig_broker_name.split("/")[0]
    produce({"bootstrap.servers": bootstrap}, "mockbench", records, "1")
    assignment = []
    available = 0
    for p in range(_partition_count(consumer, "mockbench")):
        low, high = consumer.get_watermark_offsets(CkTopicPartition("mockbench", p), timeout=10)
        assignment.append(CkTopicPartition("mockbench", p, low))
        available += high - low
    consumer.assign(assignment)
    count = 0
    start = None
    deadline = time.monotonic() + 120
    while count < available and time.monotonic() < deadline:
        messages = consumer.consume(10_000, 1.0)
        if messages and start is None:
            start = time.perf_counter()
        count += sum(1 for m in messages if m.error() is None)
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    print(f"    (mock cluster: {count:,} records consumed of the {available:,} it kept)")
    return count / elapsed if elapsed > 0 else 0.0


if __name__ == "__main__":
    main()
