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

import numpy as np

from kafkaclone.clients import ConfigException, Producer
from kafkaclone.clients.producer import FutureRecordMetadata
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from kafkaclone.tools.client_options import ToolParser, client_config, flatten

DEFAULT_TRANSACTIONAL_ID: Final = "performance-producer-default-transactional-id"
DEFAULT_TRANSACTION_DURATION_MS: Final = 3000
RECORDS_PER_CALL: Final = 1000
"""Records per ``Producer.send_batch`` call (encoded as columns, no Python call per
record) when nothing needs them one at a time."""


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
        self.failures = 0
        self._lock = threading.Lock()

    def record(self, iteration: int, latency: int, size: int, now: float) -> None:
        self.record_many(iteration, 1, latency, size, now)

    def record_many(self, first: int, count: int, latency: int, size: int,
                    now: float) -> None:
        """``count`` records, iterations ``first`` onwards, acknowledged together:
        ``size`` bytes in all, each ``latency`` ms after it was sent."""
        with self._lock:
            self.count += count
            self.bytes += size
            self.total_latency += latency * count
            self.max_latency = max(self.max_latency, latency)
            self.window_count += count
            self.window_bytes += size
            self.window_total += latency * count
            self.window_max = max(self.window_max, latency)
            # The iterations in [first, first + count) that are multiples of the sampling.
            sampled = (first + count - 1) // self.sampling - (first - 1) // self.sampling
            self.latencies.extend([latency] * sampled)
            if now - self.window_start >= self.reporting_interval:
                self.print_window()
                self.window_start = time.time()
                self.window_count = self.window_bytes = self.window_total = 0
                self.window_max = 0

    def fail(self, records: int) -> int:
        """Count ``records`` failed; the number of failures before them, plus one."""
        with self._lock:
            self.failures += records
            return self.failures - records + 1

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


class Acknowledgement:
    """The delivery callback of ``records`` records sent together at ``start``
    (iterations ``first`` onwards, ``size`` bytes): their latency into the stats, or the
    first ten errors."""

    __slots__ = ("err", "first", "records", "size", "start", "stats")

    def __init__(self, stats: Stats, first: int, records: int, size: int, start: float,
                 err: TextIO) -> None:
        self.stats = stats
        self.first = first
        self.records = records
        self.size = size
        self.err = err
        self.start = start

    def __call__(self, error: KafkaError | None, _metadata: object = None) -> None:
        now = time.time()
        if error is None:
            self.stats.record_many(self.first, self.records, int((now - self.start) * 1000),
                                   self.size, now)
        elif self.stats.fail(self.records) <= 10:
            self.err.write(f"{type(error).__name__}: {error}\n")

    def future_done(self, future: FutureRecordMetadata) -> None:
        self(future.exception(0))


def records_per_call(throughput: float, producer: Producer) -> int:
    """Records handed to the producer at once: RECORDS_PER_CALL without a throughput
    limit, at most 10 ms of the target rate with one (so the throttle keeps its
    granularity), 1 (``send``) when interceptors must see each record."""
    if producer.interceptors:
        return 1
    if throughput < 0:
        return RECORDS_PER_CALL
    return max(1, min(RECORDS_PER_CALL, int(throughput / 100)))


def repeated(payload: bytes, count: int) -> BinaryColumn:
    """``count`` copies of ``payload`` as a column."""
    offsets = np.arange(count + 1, dtype=np.int64) * len(payload)
    return BinaryColumn(offsets, np.frombuffer(payload * count, dtype=np.uint8))


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
    transaction_size = 0
    transaction_start = 0.0
    try:
        if transactions:
            producer.init_transactions()
        chunk = records_per_call(opts.throughput, producer)
        sent = 0
        while sent < opts.num_records:
            count = min(chunk, opts.num_records - sent)
            values = [payloads[rng.randrange(len(payloads))] for _ in range(count)] \
                if payloads else None
            send_start = time.time()
            if transactions and transaction_size == 0:
                producer.begin_transaction()
                transaction_start = send_start
            if count == 1:
                value = values[0] if values else payload
                producer.send(opts.topic, value, on_delivery=Acknowledgement(
                    stats, sent, 1, len(value), send_start, err))
            else:
                column = BinaryColumn.of(values) if values else repeated(payload, count)
                offsets = column.offsets.tolist()
                first = sent
                for future in producer.send_batch(opts.topic,
                                                  producer.choose_partition(opts.topic), column):
                    records = future.batch_records
                    size = offsets[first - sent + records] - offsets[first - sent]
                    future.add_done_callback(
                        Acknowledgement(stats, first, records, size, send_start,
                                        err).future_done)
                    first += records
            sent += count
            transaction_size += count
            if transactions and (send_start - transaction_start) * 1000 >= duration_ms:
                producer.commit_transaction()
                transaction_size = 0
            if opts.throughput >= 0:
                throttler.throttle(sent, send_start)
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
