"""kafka-console-consumer: print records to stdout, as Kafka 2.8's ConsoleConsumer.

    kafka-console-consumer.sh --bootstrap-server h:p
        (--topic T | --include REGEX | --whitelist REGEX) [--partition N [--offset O]]
        [--from-beginning] [--group G] [--max-messages N] [--timeout-ms MS]
        [--property print.key=true|print.timestamp=true|print.partition=true|
                    print.offset=true|print.headers=true|print.value=false|
                    key.separator=S|line.separator=S|headers.separator=S|null.literal=S]
        [--consumer-property k=v ...] [--consumer.config f] [--isolation-level L]
        [--skip-message-on-error] [--enable-systest-events]

Records print through Kafka's DefaultMessageFormatter layout (timestamp, partition, offset,
headers, key, value, each optional, separated by ``key.separator``). With ``--partition``
the consumer is assigned that partition from ``--offset`` (earliest, latest or a number);
otherwise it subscribes in ``--group`` (default ``console-consumer-<n>``) with the group
protocol, or, where the cluster has no group coordinator, reads every partition of the
matched topics by assignment. At the end it prints "Processed a total of N messages" to
stderr.
"""

from __future__ import annotations

import random
import re
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO, TextIO

from kafkaclone.clients import ConfigException, Consumer, ConsumerRecord, TopicPartition
from kafkaclone.clients.common import OFFSET_BEGINNING, OFFSET_END
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.tools.client_options import (
    Progress,
    ToolParser,
    client_config,
    flatten,
    log_error,
    parse_pairs,
)

SOURCE = "kafka.tools.ConsoleConsumer$"
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-console-consumer.sh",
                   description="This tool helps to read data from Kafka topics and outputs "
                               "it to standard output.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic")
    p.add_argument("--include", "--whitelist", dest="include")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default="latest")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--group")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int)
    p.add_argument("--property", action="append", nargs="+", default=[])
    p.add_argument("--consumer-property", action="append", nargs="+", default=[])
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"])
    p.add_argument("--skip-message-on-error", action="store_true")
    p.add_argument("--formatter", default="kafka.tools.DefaultMessageFormatter")
    p.add_argument("--key-deserializer")
    p.add_argument("--value-deserializer")
    p.add_argument("--enable-systest-events", action="store_true")
    return p


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


class MessageFormatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        self.print_timestamp = flag("print.timestamp", False)
        self.print_partition = flag("print.partition", False)
        self.print_offset = flag("print.offset", False)
        self.print_headers = flag("print.headers", False)
        self.print_key = flag("print.key", False)
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, record: ConsumerRecord) -> bytes:
        parts: list[bytes] = []
        if self.print_timestamp:
            kind = TIMESTAMP_TYPES.get(record.timestamp_type)
            parts.append(b"NO_TIMESTAMP" if kind is None or record.timestamp < 0
                         else f"{kind}:{record.timestamp}".encode())
        if self.print_partition:
            parts.append(b"Partition:%d" % record.partition)
        if self.print_offset:
            parts.append(b"Offset:%d" % record.offset)
        if self.print_headers:
            if record.headers:
                parts.append(self.headers_separator.join(
                    k.encode() + b":" + (self.null_literal if v is None else v)
                    for k, v in record.headers))
            else:
                parts.append(b"NO_HEADERS")
        if self.print_key:
            parts.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            parts.append(self.null_literal if record.value is None else record.value)
        return self.key_separator.join(parts) + self.line_separator


def _start_offset(opts: Any) -> int:
    text = str(opts.offset).strip().lower()
    if text == "earliest" or opts.from_beginning:
        return OFFSET_BEGINNING
    if text == "latest":
        return OFFSET_END
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"The provided offset value '{opts.offset}' is incorrect. Valid "
                         f"values are 'earliest', 'latest', or a non-negative long.") from None
    if value < 0:
        raise ValueError(f"The provided offset value '{opts.offset}' is incorrect. Valid "
                         f"values are 'earliest', 'latest', or a non-negative long.")
    return value


def check_args(opts: Any) -> str | None:
    """Kafka's argument checks: the message, or None when the options are fine."""
    if bool(opts.topic) == bool(opts.include):
        return "Exactly one of whitelist/topic is required."
    if opts.partition is not None and not opts.topic:
        return "The topic is required when partition is specified."
    if opts.partition is None and str(opts.offset).lower() != "latest":
        return "The partition is required when offset is specified."
    if opts.from_beginning and str(opts.offset).lower() != "latest":
        return "Options from-beginning and offset cannot be specified together."
    if opts.partition is not None and opts.group:
        return "Options group and partition cannot be specified together."
    return None


def main(argv: Sequence[str] | None = None, out: BinaryIO | None = None,
         err: TextIO | None = None) -> int:
    stdout = out or sys.stdout.buffer
    err = err or sys.stderr
    opts = build_parser().parse_args(argv)
    problem = check_args(opts)
    if problem:
        err.write(problem + "\n")
        return 1
    try:
        start = _start_offset(opts)
        formatter = MessageFormatter(parse_pairs(flatten(opts.property), "property"))
        conf = client_config(opts.consumer_config, flatten(opts.consumer_property),
                             what="consumer property")
    except (ValueError, OSError) as exc:
        err.write(f"{exc}\n")
        return 1
    conf["bootstrap.servers"] = opts.bootstrap_server
    conf.setdefault("isolation.level", opts.isolation_level)
    conf.setdefault("client.id", "console-consumer")
    reset = "earliest" if opts.from_beginning else "latest"
    conf.setdefault("auto.offset.reset", reset)
    group = opts.group or conf.get("group.id")
    use_group = opts.partition is None
    try:
        if use_group and not supports_groups(conf):
            err.write("WARNING: the cluster has no group coordinator; reading every partition "
                      "by assignment instead of in a group\n")
            use_group = False
        if use_group:
            conf["group.id"] = group or f"console-consumer-{random.randint(0, 99999)}"
            if not opts.group and "enable.auto.commit" not in conf:
                conf["enable.auto.commit"] = "false"
        else:
            conf.pop("group.id", None)
        consumer = Consumer(conf)
    except (ConfigException, KafkaError) as exc:
        err.write(f"{exc}\n")
        return 1

    stop = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    previous = signal.signal(signal.SIGTERM, on_signal)
    count = 0
    progress = Progress("messages", err)
    try:
        if opts.partition is not None:
            consumer.assign([TopicPartition(opts.topic, opts.partition, start)])
        else:
            pattern = re.compile(opts.include) if opts.include else None
            if use_group:
                consumer.subscribe(pattern if pattern is not None else [opts.topic])
            else:
                assign_matching(consumer, opts.topic, pattern)
        timeout_s = None if opts.timeout_ms is None else opts.timeout_ms / 1000.0
        last_record = time.monotonic()
        limit = opts.max_messages if opts.max_messages and opts.max_messages > 0 else None
        while not stop and (limit is None or count < limit):
            try:
                records = consumer.poll(0.2 if timeout_s is None else min(0.2, timeout_s))
            except KafkaError as exc:
                if opts.skip_message_on_error and exc.code not in (1, 35):
                    log_error(f"Error processing message, skipping this message: {exc}",
                              SOURCE, err)
                    continue
                raise
            if records:
                last_record = time.monotonic()
            elif timeout_s is not None and time.monotonic() - last_record >= timeout_s:
                log_error("Error processing message, terminating consumer process: ",
                          SOURCE, err)
                err.write("org.apache.kafka.common.errors.TimeoutException\n")
                break
            for record in records:
                if limit is not None and count >= limit:
                    break
                stdout.write(formatter.format(record))
                count += 1
                progress.add()
            stdout.flush()
    except KafkaError as exc:
        log_error("Error processing message, terminating consumer process: ", SOURCE, err)
        err.write(f"{type(exc).__name__}: {exc}\n")
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        try:
            consumer.close()
        finally:
            progress.done()
            err.write(f"Processed a total of {count} messages\n")
            err.flush()
    return 0


def supports_groups(conf: dict[str, Any]) -> bool:
    """Whether the cluster answers the group APIs (JoinGroup and friends)."""
    probe = Consumer({k: v for k, v in conf.items() if k != "group.id"})
    try:
        versions = probe.metadata.api_versions(timeout_s=30)
    finally:
        probe.close()
    return all(int(key) in versions for key in (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP,
                                                ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT))


def assign_matching(consumer: Consumer, topic: str | None,
                    pattern: re.Pattern[str] | None) -> None:
    """Assign every partition of ``topic`` or of the topics ``pattern`` matches."""
    metadata = consumer.list_topics(topic, timeout=30)
    partitions = []
    for name, meta in sorted(metadata.topics.items()):
        if meta.error is not None:
            if topic is not None:
                raise meta.error
            continue
        if (pattern is not None and pattern.fullmatch(name)) or name == topic:
            partitions += [TopicPartition(name, p) for p in sorted(meta.partitions)]
    consumer.assign(partitions)


if __name__ == "__main__":
    sys.exit(main())
