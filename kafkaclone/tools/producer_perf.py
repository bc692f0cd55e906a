"""kafka-producer-perf-test: Kafka 2.8's ProducerPerformance on the project's producer.

    kafka-producer-perf-test.sh --topic T --num-records N
        (--record-size B | --payload-file F [--payload-delimiter D]) --throughput R
        (--producer-props k=v ... | --producer.config F) [--print-metrics]
        [--transactional-id ID] [--transaction-duration-ms MS]

Sends N records (one payload of B random capital letters, or payloads picked at random
from the file) at most R records/s (-1: no limit). Every 5 s it prints
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.`` and at the
end ``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency, P50 ms
50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.``, latency being the time from ``send`` to
the acknowledgement.

With ``--transaction-duration-ms`` above 0 the records are sent in transactions (Kafka
2.8's rule) under ``--transactional-id`` (default
``performance-producer-default-transactional-id``): a transaction is committed once it is
that old, and the last one at the end. Giving ``--transactional-id`` alone also enables
them, with transactions of 3000 ms (Kafka 3.3's rule).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

from kafkaclone.clients import ConfigException, Producer
from kafkaclone.clients.producer import RecordMetadata
from kafkaclone.common.errors import KafkaError
from kafkaclone.tools.client_options import ToolParser, client_config, flatten

DEFAULT_TRANSACTIONAL_ID: Final = "performance-producer-default-transactional-id"
DEFAULT_TRANSACTION_DURATION_MS: Final = 3000


def build_parser() -> ToolParser:
    p = ToolParser(prog="producer-performance",
                   description="This tool is used to verify the producer performance.")
    p.add_argument("--topic", required=True, metavar="TOPIC")
    p.add_argument("--num-records", required=True, type=int, metavar="NUM-RECORDS")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE")
    payload.add_argument("--payload-file", metavar="PAYLOAD-FILE")
    p.add_argument("--payload-delimiter", default="\\n")
    p.add_argument("--throughput", required=True, type=float, metavar="THROUGHPUT")
    p.add_argument("--producer-props", nargs="+", action="append", metavar="PROP-NAME=VALUE")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE")
    p.add_argument("--print-metrics", action="store_true")
    p.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID")
    p.add_argument("--transaction-duration-ms", type=int, metavar="TRANSACTION-DURATION")
    return p


class Stats:
    """ProducerPerformance.Stats: totals, a window printed every ``reporting_interval``
    ms, and a sample of latencies (at most 500000) for the percentiles."""

    def __init__(self, num_records: int, reporting_interval_ms: int, out: TextIO) -> None:
        self.out = out
        self.start = time.time()
        self.window_start = self.start
        self.sampling = max(1, num_records // min(max(num_records, 1), 500000))
        self.latencies: list[int] = []
        self.reporting_interval = reporting_interval_ms / 1000.0
        self.iteration = 0
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.window_count = self.window_bytes = self.window_total = self.window_max = 0
        self._lock = threading.Lock()

    def record(self, iteration: int, latency: int, size: int, now: float) -> None:
        with self._lock:
            self.count += 1
            self.bytes += size
            self.total_latency += latency
            self.max_latency = max(self.max_latency, latency)
            self.window_count += 1
            self.window_bytes += size
            self.window_total += latency
            self.window_max = max(self.window_max, latency)
            if iteration % self.sampling == 0:
                self.latencies.append(latency)
            if now - self.window_start >= self.reporting_interval:
                self.print_window()
                self.window_start = time.time()
                self.window_count = self.window_bytes = self.window_total = 0
                self.window_max = 0

    def print_window(self) -> None:
        elapsed = max(1e-3, time.time() - self.window_start)
        self.out.write(
            f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
            f"({self.window_bytes / elapsed / (1024 * 1024):.2f} MB/sec), "
            f"{self.window_total / max(1, self.window_count):.1f} ms avg latency, "
            f"{float(self.window_max):.1f} ms max latency.\n")
        self.out.flush()

    def print_total(self) -> None:
        elapsed = max(1e-3, time.time() - self.start)
        ordered = sorted(self.latencies)

        def percentile(p: float) -> int:
            return ordered[int(p * len(ordered))] if ordered else 0

        self.out.write(
            f"{self.count} records sent, {self.count / elapsed:f} records/sec "
            f"({self.bytes / elapsed / (1024 * 1024):.2f} MB/sec), "
            f"{self.total_latency / max(1, self.count):.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, {percentile(0.5)} ms 50th, "
            f"{percentile(0.95)} ms 95th, {percentile(0.99)} ms 99th, "
            f"{percentile(0.999)} ms 99.9th.\n")
        self.out.flush()


def print_metrics(metrics: Mapping[str, float], group: str, client_id: str,
                  out: TextIO) -> None:
    """The metrics table of Kafka's ToolsUtils.printMetrics."""
    names = {f"{group}:{name}:{{client-id={client_id}}}": value
             for name, value in sorted(metrics.items())}
    width = max([len("Metric Name"), *map(len, names)])
    out.write(f"\n{'Metric Name':<{width}} Value\n")
    for name, value in names.items():
        out.write(f"{name:<{width}} : {value:.3f}\n")


class Throttler:
    """Kafka's ThroughputThrottler: sleep whenever the rate so far is above the target."""

    def __init__(self, target: float, start: float) -> None:
        self.target = target
        self.start = start

    def throttle(self, sent: int, now: float) -> None:
        if self.target < 0:
            return
        if self.target == 0:
            time.sleep(3600)
            return
        ahead = sent / self.target - (now - self.start)
        if ahead > 0.002:
            time.sleep(ahead)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    opts = parser.parse_args(argv)
    if opts.num_records <= 0:
        parser.error("--num-records should be greater than zero")
    if opts.record_size is not None and opts.record_size <= 0:
        parser.error("--record-size should be greater than zero")
    if not opts.producer_props and not opts.producer_config:
        parser.error("Either --producer-props or --producer.config must be specified.")
    duration_ms = opts.transaction_duration_ms
    if duration_ms is None:
        duration_ms = DEFAULT_TRANSACTION_DURATION_MS if opts.transactional_id else 0
    transactions = duration_ms > 0
    try:
        conf = client_config(opts.producer_config, flatten(opts.producer_props),
                             what="property")
    except (OSError, ValueError) as exc:
        err.write(f"{exc}\n")
        return 1
    conf.setdefault("client.id", "perf-producer-client")
    if transactions:
        conf["transactional.id"] = opts.transactional_id or DEFAULT_TRANSACTIONAL_ID
    payloads: list[bytes] = []
    rng = random.Random(0)
    if opts.payload_file:
        delimiter = "\n" if opts.payload_delimiter == "\\n" else opts.payload_delimiter
        try:
            with open(opts.payload_file, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            err.write(f"{exc}\n")
            return 1
        out.write(f"Reading payloads from: {os.path.abspath(opts.payload_file)}\n")
        payloads = [p.encode() for p in text.split(delimiter) if p]
        if not payloads:
            err.write("File does not exist or empty file provided.\n")
            return 1
        out.write(f"Number of messages read: {len(payloads)}\n")
    try:
        producer = Producer(conf)
    except (ConfigException, KafkaError) as exc:
        err.write(f"{exc}\n")
        return 1
    payload = bytes(rng.randrange(26) + 65 for _ in range(opts.record_size or 0))
    stats = Stats(opts.num_records, 5000, out)
    throttler = Throttler(opts.throughput, time.time())
    failures = 0
    transaction_size = 0
    transaction_start = 0.0
    try:
        if transactions:
            producer.init_transactions()
        for i in range(opts.num_records):
            value = payloads[rng.randrange(len(payloads))] if payloads else payload
            send_start = time.time()
            if transactions and transaction_size == 0:
                producer.begin_transaction()
                transaction_start = send_start

            def on_delivery(error: KafkaError | None, _md: RecordMetadata, i: int = i,
                            start: float = send_start, size: int = len(value)) -> None:
                nonlocal failures
                now = time.time()
                if error is None:
                    stats.record(i, int((now - start) * 1000), size, now)
                else:
                    failures += 1
                    if failures <= 10:
                        err.write(f"{type(error).__name__}: {error}\n")

            producer.send(opts.topic, value, on_delivery=on_delivery)
            transaction_size += 1
            if transactions and (send_start - transaction_start) * 1000 >= duration_ms:
                producer.commit_transaction()
                transaction_size = 0
            if opts.throughput >= 0:
                throttler.throttle(i + 1, send_start)
        if transactions and transaction_size:
            producer.commit_transaction()
        if opts.print_metrics:
            producer.flush()
            stats.print_total()
            print_metrics(producer.metrics(), "producer-metrics", conf["client.id"], out)
            producer.close()
        else:
            producer.close()
            stats.print_total()
    except KafkaError as exc:
        err.write(f"{type(exc).__name__}: {exc}\n")
        producer.close(0)
        return 1
    except KeyboardInterrupt:
        producer.close(0)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
