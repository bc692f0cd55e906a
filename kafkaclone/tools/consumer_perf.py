"""kafka-consumer-perf-test: Kafka 2.8's ConsumerPerformance on the project's consumer.

    kafka-consumer-perf-test.sh --bootstrap-server h:p (or --broker-list h:p) --topic T
        --messages N [--group G] [--fetch-size B] [--timeout MS] [--from-latest]
        [--show-detailed-stats] [--reporting-interval MS] [--hide-header]
        [--date-format F] [--consumer.config F] [--print-metrics]

Consumes N records (in group G, by subscription; where the cluster has no group
coordinator, by assignment of every partition) and prints Kafka's CSV: the header
``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec`` and one row, or with
``--show-detailed-stats`` a row per reporting interval.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from kafkaclone.clients import ConfigException, Consumer, TopicPartition
from kafkaclone.common.errors import KafkaError
from kafkaclone.tools.client_options import ToolParser, client_config
from kafkaclone.tools.console_consumer import assign_matching, supports_groups
from kafkaclone.tools.producer_perf import print_metrics

HEADER = ("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-consumer-perf-test.sh",
                   description="This tool helps in performance test for the full zookeeper "
                               "consumer")
    p.add_argument("--bootstrap-server")
    p.add_argument("--broker-list")
    p.add_argument("--topic", required=True)
    p.add_argument("--messages", required=True, type=int)
    p.add_argument("--group", default=f"perf-consumer-{random.randint(0, 99999)}")
    p.add_argument("--fetch-size", type=int, default=1024 * 1024)
    p.add_argument("--from-latest", action="store_true")
    p.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024)
    p.add_argument("--threads", type=int, default=10)
    p.add_argument("--num-fetch-threads", type=int, default=1)
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--print-metrics", action="store_true")
    p.add_argument("--show-detailed-stats", action="store_true")
    p.add_argument("--timeout", type=int, nargs="?", const=10000, default=10000)
    p.add_argument("--reporting-interval", type=int, default=5000)
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS")
    p.add_argument("--hide-header", action="store_true")
    return p


def java_date(pattern: str, epoch_s: float) -> str:
    """A SimpleDateFormat pattern's common letters (y M d H m s S) for ``epoch_s``."""
    t = time.localtime(epoch_s)
    millis = int(epoch_s * 1000) % 1000
    replacements = [("yyyy", f"{t.tm_year:04d}"), ("MM", f"{t.tm_mon:02d}"),
                    ("dd", f"{t.tm_mday:02d}"), ("HH", f"{t.tm_hour:02d}"),
                    ("mm", f"{t.tm_min:02d}"), ("ss", f"{t.tm_sec:02d}"),
                    ("SSS", f"{millis:03d}")]
    out = pattern
    for token, value in replacements:
        out = out.replace(token, value)
    return out


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    opts = parser.parse_args(argv)
    servers = opts.bootstrap_server or opts.broker_list
    if not servers:
        parser.error("Missing required argument \"[bootstrap-server]\"")
    if opts.reporting_interval <= 0:
        parser.error("Reporting interval must be greater than 0.")
    try:
        conf: dict[str, Any] = client_config(opts.consumer_config, None, what="property")
    except (OSError, ValueError) as exc:
        err.write(f"{exc}\n")
        return 1
    conf.update({"bootstrap.servers": servers, "group.id": opts.group,
                 "receive.buffer.bytes": opts.socket_buffer_size,
                 "max.partition.fetch.bytes": opts.fetch_size,
                 "auto.offset.reset": "latest" if opts.from_latest else "earliest",
                 "check.crcs": "false"})
    conf.setdefault("client.id", "perf-consumer-client")
    if not opts.hide_header:
        first = "time, threadId" if opts.show_detailed_stats else "start.time, end.time"
        out.write(f"{first}, {HEADER}\n")
    try:
        use_group = supports_groups(conf)
        if not use_group:
            conf.pop("group.id")
        consumer = Consumer(conf)
    except (ConfigException, KafkaError) as exc:
        err.write(f"{exc}\n")
        return 1
    join_ms = 0
    join_round_ms = 0
    join_start = time.time()

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            nonlocal join_ms, join_round_ms
            elapsed = int((time.time() - join_start) * 1000)
            join_ms += elapsed
            join_round_ms += elapsed

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            nonlocal join_start
            join_start = time.time()

    start = time.time()
    messages = bytes_read = 0
    last_messages = last_bytes = 0
    try:
        if use_group:
            consumer.subscribe([opts.topic], Listener())
        else:
            assign_matching(consumer, opts.topic, None)
        last_report = last_consumed = time.time()
        now = last_report
        while messages < opts.messages and now - last_consumed <= opts.timeout / 1000.0:
            records = consumer.poll(0.1)
            now = time.time()
            if records:
                last_consumed = now
            for record in records:
                messages += 1
                if record.key is not None:
                    bytes_read += len(record.key)
                if record.value is not None:
                    bytes_read += len(record.value)
            if records and now - last_report >= opts.reporting_interval / 1000.0:
                if opts.show_detailed_stats:
                    elapsed_ms = (now - last_report) * 1000
                    mb = bytes_read / (1024 * 1024)
                    interval_mb = (bytes_read - last_bytes) / (1024 * 1024)
                    fetch_ms = elapsed_ms - join_round_ms
                    interval_n = messages - last_messages
                    out.write(
                        f"{java_date(opts.date_format, now)}, 0, {mb:.4f}, "
                        f"{1000 * interval_mb / elapsed_ms:.4f}, {messages}, "
                        f"{(messages - last_messages) / elapsed_ms * 1000:.4f}, "
                        f"{join_round_ms}, {int(fetch_ms)}, "
                        f"{1000 * interval_mb / fetch_ms if fetch_ms > 0 else 0.0:.4f}, "
                        f"{1000 * interval_n / fetch_ms if fetch_ms > 0 else 0.0:.4f}\n")
                join_round_ms = 0
                last_report, last_messages, last_bytes = now, messages, bytes_read
        if messages < opts.messages:
            out.write(f"WARNING: Exiting before consuming the expected number of messages: "
                      f"timeout ({opts.timeout} ms) exceeded. You can use the --timeout "
                      f"option to increase the timeout.\n")
    except KafkaError as exc:
        err.write(f"{type(exc).__name__}: {exc}\n")
        consumer.close()
        return 1
    end = time.time()
    metrics = consumer.metrics() if opts.print_metrics else None
    consumer.close()
    elapsed = max(1e-3, end - start)
    fetch_ms = int((end - start) * 1000) - join_ms
    if not opts.show_detailed_stats:
        mb = bytes_read / (1024 * 1024)
        fetch_s = fetch_ms / 1000.0
        out.write(f"{java_date(opts.date_format, start)}, {java_date(opts.date_format, end)}, "
                  f"{mb:.4f}, {mb / elapsed:.4f}, {messages}, {messages / elapsed:.4f}, "
                  f"{join_ms}, {fetch_ms}, {mb / fetch_s if fetch_s > 0 else 0.0:.4f}, "
                  f"{messages / fetch_s if fetch_s > 0 else 0.0:.4f}\n")
    if metrics is not None:
        print_metrics(metrics, "consumer-fetch-manager-metrics", conf["client.id"], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
