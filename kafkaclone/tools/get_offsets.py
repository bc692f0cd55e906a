"""kafka-get-offsets: partition offsets by time, as Kafka's GetOffsetShell.

    kafka-get-offsets.sh --bootstrap-server h:p (or --broker-list h:p) --topic T|REGEX
        [--partitions 0,1] [--time -1|-2|<ms timestamp>] [--exclude-internal-topics]
        [--command-config f]

One line per partition, sorted by topic and partition: ``topic:partition:offset``.
``--time -1`` is the latest offset (the high watermark), ``-2`` the earliest, a timestamp
the first offset at or after it (empty when there is none). ``--topic`` is a topic name or
a regular expression over the topic names (Kafka 3.0's GetOffsetShell).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TextIO

from kafkaclone.clients import ConfigException, Consumer, TopicPartition
from kafkaclone.common.errors import KafkaError
from kafkaclone.tools.client_options import ToolParser, client_config


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-get-offsets.sh",
                   description="An interactive shell for getting topic-partition offsets.")
    p.add_argument("--bootstrap-server")
    p.add_argument("--broker-list")
    p.add_argument("--topic")
    p.add_argument("--partitions", default="")
    p.add_argument("--time", default="-1")
    p.add_argument("--offsets", type=int, default=1, help="DEPRECATED AND IGNORED")
    p.add_argument("--max-wait-ms", type=int, default=1000, help="DEPRECATED AND IGNORED")
    p.add_argument("--exclude-internal-topics", action="store_true")
    p.add_argument("--command-config")
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    opts = build_parser().parse_args(argv)
    servers = opts.bootstrap_server or opts.broker_list
    if not servers:
        err.write("Missing required argument \"[bootstrap-server]\"\n")
        return 1
    try:
        when = int(opts.time)
    except ValueError:
        err.write(f"Malformed time argument {opts.time}. Please use -1 or latest / -2 or "
                  "earliest, or a specific timestamp.\n")
        return 1
    try:
        partitions = {int(p) for p in opts.partitions.split(",") if p.strip()}
    except ValueError:
        err.write(f"--partitions expects a comma separated list of numeric partition ids, "
                  f"not {opts.partitions}\n")
        return 1
    try:
        conf = client_config(opts.command_config, None, what="property")
        conf["bootstrap.servers"] = servers
        conf.setdefault("client.id", "GetOffsetShell")
        consumer = Consumer(conf)
    except (ConfigException, ValueError, OSError) as exc:
        err.write(f"{exc}\n")
        return 1
    try:
        metadata = consumer.list_topics(timeout=30)
        if opts.topic and opts.topic in metadata.topics:
            topics = [opts.topic]
        else:
            pattern = re.compile(opts.topic or ".*")
            topics = sorted(name for name, meta in metadata.topics.items()
                            if pattern.fullmatch(name) and not (
                                opts.exclude_internal_topics and meta.is_internal))
        wanted = [TopicPartition(t, p, when) for t in sorted(topics)
                  for p in sorted(metadata.topics[t].partitions)
                  if not partitions or p in partitions]
        if opts.topic and not topics:
            err.write(f"Error: topic {opts.topic} does not exist\n")
            return 1
        lines = []
        if when in (-1, -2):
            for tp in wanted:
                low, high = consumer.get_watermark_offsets(tp, timeout=30)
                lines.append(f"{tp.topic}:{tp.partition}:{high if when == -1 else low}")
        elif wanted:
            for tp in consumer.offsets_for_times(wanted, timeout=30):
                offset = "" if tp.offset is None or tp.offset < 0 else str(tp.offset)
                lines.append(f"{tp.topic}:{tp.partition}:{offset}")
        for line in lines:
            out.write(line + "\n")
        return 0
    except KafkaError as exc:
        err.write(f"Error: {type(exc).__name__}: {exc}\n")
        return 1
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
