"""kafka-console-producer: one record per line of stdin, as Kafka 2.8's ConsoleProducer.

    kafka-console-producer.sh --bootstrap-server h:p (or --broker-list h:p) --topic T
        [--property parse.key=true] [--property key.separator=:] [--property ignore.error=true]
        [--producer-property k=v ...] [--producer.config file] [--compression-codec [codec]]
        [--request-required-acks acks] [--sync] [--timeout ms] [--request-timeout-ms ms]
        [--message-send-max-retries n] [--retry-backoff-ms ms] [--max-block-ms ms]
        [--max-memory-bytes n] [--max-partition-memory-bytes n]

The options map to producer configs as Kafka's do (``--timeout`` is ``linger.ms``,
``--max-partition-memory-bytes`` is ``batch.size``, ...); ``--producer-property`` and
``--producer.config`` override them. Lines without a key that one read of the input
completes together (a piped file's backlog) go to the producer as one column
(``send_batch``); a line typed alone is sent at once. A record that cannot be delivered
prints Kafka's "Error when sending message to topic ..." line on stderr; with ``--sync`` it
stops the tool (exit status 1).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, BinaryIO, TextIO

from kafkaclone.clients import ConfigException, Producer
from kafkaclone.clients.producer import FutureRecordMetadata, RecordMetadata
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from kafkaclone.tools.client_options import (
    Progress,
    ToolParser,
    client_config,
    flatten,
    parse_pairs,
)

SOURCE = "org.apache.kafka.clients.producer.internals.ErrorLoggingCallback"


def line_groups(source: BinaryIO, size: int = 1 << 16) -> Iterator[list[bytes]]:
    """The input's lines (without their newline) as they arrive, in groups: a group is
    what one read of the input completed (``read1``), so a piped file's lines go to the
    producer together while a line typed alone is sent at once. A last line without a
    newline ends the input."""
    read: Callable[[int], bytes] = getattr(source, "read1", None) or source.read
    pending: list[bytes] = []
    while True:
        chunk = read(size)
        if not chunk:
            if pending:
                yield [b"".join(pending)]
            return
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            pending.append(chunk)
            continue
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending = []
        tail = lines.pop()
        if tail:
            pending.append(tail)
        yield lines


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-console-producer.sh",
                   description="This tool helps to read data from standard input and "
                               "publish it to Kafka.")
    p.add_argument("--bootstrap-server", help="REQUIRED unless --broker-list is given")
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead")
    p.add_argument("--topic", required=True)
    p.add_argument("--sync", action="store_true",
                   help="If set message send requests to the brokers are synchronously, "
                        "one at a time as they arrive.")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none",
                   help="none, gzip, snappy, lz4 or zstd (gzip if given without a value)")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--timeout", type=int, default=1000, help="linger.ms")
    p.add_argument("--request-required-acks", default="1")
    p.add_argument("--request-timeout-ms", type=int, default=1500)
    p.add_argument("--message-send-max-retries", type=int, default=3)
    p.add_argument("--retry-backoff-ms", type=int, default=100)
    p.add_argument("--max-block-ms", type=int, default=60000)
    p.add_argument("--max-memory-bytes", type=int, default=32 * 1024 * 1024)
    p.add_argument("--max-partition-memory-bytes", type=int, default=16384)
    p.add_argument("--socket-buffer-size", type=int, default=1024 * 100)
    p.add_argument("--property", action="append", nargs="+", default=[],
                   help="parse.key=true|false, key.separator=<sep>, ignore.error=true|false")
    p.add_argument("--producer-property", action="append", nargs="+", default=[])
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--line-reader", default="kafka.tools.ConsoleProducer$LineMessageReader")
    return p


def producer_config(opts: Any) -> dict[str, Any]:
    servers = opts.bootstrap_server or opts.broker_list
    conf: dict[str, Any] = {
        "bootstrap.servers": servers,
        "compression.type": opts.compression_codec,
        "linger.ms": opts.timeout,
        "max.block.ms": opts.max_block_ms,
        "acks": opts.request_required_acks,
        "request.timeout.ms": opts.request_timeout_ms,
        "retries": opts.message_send_max_retries,
        "retry.backoff.ms": opts.retry_backoff_ms,
        "send.buffer.bytes": opts.socket_buffer_size,
        "buffer.memory": opts.max_memory_bytes,
        "batch.size": opts.max_partition_memory_bytes,
        "client.id": "console-producer",
        # A console producer's records wait at most this long overall (Kafka derives
        # delivery.timeout.ms = linger.ms + request.timeout.ms when it is smaller).
        "delivery.timeout.ms": max(120000, opts.timeout + opts.request_timeout_ms),
    }
    conf.update(client_config(opts.producer_config, flatten(opts.producer_property),
                              what="producer property"))
    return conf


def main(argv: Sequence[str] | None = None, stdin: BinaryIO | None = None,
         out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    opts = build_parser().parse_args(argv)
    if not (opts.bootstrap_server or opts.broker_list):
        err.write("Missing required argument \"[bootstrap-server]\"\n")
        return 1
    try:
        reader_props = parse_pairs(flatten(opts.property), "property")
        conf = producer_config(opts)
        producer = Producer(conf)
    except (ConfigException, ValueError, OSError) as exc:
        err.write(f"{exc}\n")
        return 1
    parse_key = reader_props.get("parse.key", "false").strip().lower() == "true"
    separator = reader_props.get("key.separator", "\t").encode()
    ignore_error = reader_props.get("ignore.error", "false").strip().lower() == "true"
    source = stdin if stdin is not None else sys.stdin.buffer
    progress = Progress("records", err, enabled=err.isatty() and not sys.stdin.isatty()
                        if stdin is None else False)
    line_number = 0

    def report(error: KafkaError, key_size: int, value_size: int) -> None:
        err.write(f"Error when sending message to topic {opts.topic} with key: "
                  f"{'null' if key_size < 0 else f'{key_size} bytes'}, value: "
                  f"{value_size} bytes with error: ({SOURCE})\n"
                  f"{type(error).__name__}: {error}\n")

    def on_delivery(error: KafkaError | None, metadata: RecordMetadata) -> None:
        if error is not None:
            report(error, -1 if metadata.key is None else len(metadata.key),
                   -1 if metadata.value is None else len(metadata.value))

    def on_batch_done(future: FutureRecordMetadata, sizes: list[int]) -> None:
        error = future.exception(0)
        if error is not None:
            for size in sizes:
                report(error, -1, size)

    together = not opts.sync and not producer.interceptors

    def send_together(values: list[bytes]) -> None:
        """Keyless lines read together go to the producer as one column (send_batch)."""
        if len(values) == 1:
            producer.send(opts.topic, values[0], on_delivery=on_delivery)
            return
        column = BinaryColumn.of(values)
        offsets = column.offsets.tolist()
        first = 0
        for future in producer.send_batch(opts.topic, producer.choose_partition(opts.topic),
                                          column):
            end = first + future.batch_records
            sizes = [offsets[i + 1] - offsets[i] for i in range(first, end)]
            future.add_done_callback(partial(on_batch_done, sizes=sizes))
            first = end

    status = 0
    try:
        for group in line_groups(source):
            keyless: list[bytes] = []
            for raw in group:
                line_number += 1
                line = raw[:-1] if raw.endswith(b"\r") else raw
                key: bytes | None = None
                value = line
                if parse_key:
                    index = line.find(separator)
                    if index < 0:
                        if not ignore_error:
                            err.write(f"Error: No key found on line {line_number}: "
                                      f"{line.decode(errors='replace')}\n")
                            status = 1
                            break
                    else:
                        key, value = line[:index], line[index + len(separator):]
                if key is None and together:
                    keyless.append(value)
                    continue
                if keyless:
                    send_together(keyless)
                    keyless = []
                future = producer.send(opts.topic, value, key=key, on_delivery=on_delivery)
                if opts.sync:
                    try:
                        future.result(None)
                    except KafkaError:
                        status = 1
                        break
            if keyless:
                send_together(keyless)
            progress.add(len(group))
            if status:
                break
    except KafkaError as exc:
        err.write(f"ERROR {type(exc).__name__}: {exc}\n")
        status = 1
    except KeyboardInterrupt:
        pass
    finally:
        producer.close()
        progress.done()
    return status


if __name__ == "__main__":
    sys.exit(main())
