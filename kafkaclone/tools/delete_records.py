"""kafka-delete-records: delete the records of partitions below given offsets, as Kafka's
DeleteRecordsCommand.

    kafka-delete-records.sh --bootstrap-server h:p --offset-json-file f [--command-config f]

The JSON file: ``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}],
"version": 1}`` (offset -1: the high watermark). Prints each partition's new low watermark
or its error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from kafkaclone.clients.admin import AdminClient
from kafkaclone.clients.security import ClientSecurity
from kafkaclone.common.errors import KafkaError
from kafkaclone.tools.client_options import ToolParser, client_config


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-delete-records.sh",
                   description="This tool helps to delete records of the given partitions "
                               "down to the specified offset.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--offset-json-file", required=True)
    p.add_argument("--command-config")
    return p


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """The JSON file's (topic, partition) -> offset; ValueError with Kafka's messages."""
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("The input string is not a valid JSON") from None
    if not isinstance(document, dict) or "partitions" not in document:
        raise ValueError("The input string is not a valid JSON")
    offsets: dict[tuple[str, int], int] = {}
    duplicates = []
    for item in document["partitions"]:
        try:
            key = (str(item["topic"]), int(item["partition"]))
            offset = int(item["offset"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"Invalid partition entry {item!r}") from None
        if key in offsets:
            duplicates.append(f"{key[0]}-{key[1]}")
        offsets[key] = offset
    if duplicates:
        raise ValueError("Offset json file contains duplicate topic partitions: " +
                         ",".join(duplicates))
    return offsets


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    opts = build_parser().parse_args(argv)
    try:
        with open(opts.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offsets(f.read())
        conf = client_config(opts.command_config, None, what="property")
        security = ClientSecurity.from_properties(conf)
    except (OSError, ValueError) as exc:
        err.write(f"Error: {exc}\n")
        return 1
    out.write("Executing records delete operation\n")
    try:
        with AdminClient(opts.bootstrap_server,
                         client_id=str(conf.get("client.id", "adminclient")),
                         security=security) as admin:
            results = admin.delete_records(offsets)
    except KafkaError as exc:
        err.write(f"Error: {type(exc).__name__}: {exc}\n")
        return 1
    out.write("Records delete operation completed:\n")
    for (topic, partition), result in sorted(results.items()):
        if isinstance(result, KafkaError):
            out.write(f"partition: {topic}-{partition}\terror: {type(result).__name__}: "
                      f"{result}\n")
        else:
            out.write(f"partition: {topic}-{partition}\tlow_watermark: {result}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
