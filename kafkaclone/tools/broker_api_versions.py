"""kafka-broker-api-versions: each broker's supported API versions, as Kafka 2.8's
BrokerApiVersionsCommand prints them.

    kafka-broker-api-versions.sh --bootstrap-server h:p

For each broker ``host:port (id: N rack: R) -> (`` then one line per API key of Kafka 2.8
(kafkaclone.protocol.api_keys.ApiKey, as Kafka's NodeApiVersions lists every ApiKeys entry):
``<tab>Name(key): min to max [usable: v]``, ``UNSUPPORTED`` when the broker does not serve
it, or ``[unusable: node too new/old]`` when the ranges do not meet; a key the broker
advertises that Kafka 2.8 does not know is ``UNKNOWN(key): min to max``; then ``)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final, TextIO

from kafkaclone.clients.admin import AdminClient, Node
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import CommandParser, run_tool

KAFKA_API_KEYS: Final = frozenset(int(key) for key in ApiKey)


def api_name(key: int) -> str:
    """Kafka's name of an API key: the declared message's, else the key's in CamelCase
    (``ALTER_PARTITION_REASSIGNMENTS`` -> ``AlterPartitionReassignments``)."""
    declared = APIS.get(key)
    if declared is not None:
        return declared.name
    return "".join(word.capitalize() for word in ApiKey(key).name.split("_"))


def format_api(key: int, broker_range: tuple[int, int] | None) -> str:
    name = f"{api_name(key)}({key})" if key in KAFKA_API_KEYS else f"UNKNOWN({key})"
    if broker_range is None:
        return f"{name}: UNSUPPORTED"
    low, high = broker_range
    versions = f"{low}" if low == high else f"{low} to {high}"
    declared = APIS.get(key)
    if declared is None:
        return f"{name}: {versions}"
    if declared.min_version > high:
        usable = "[unusable: node too old]"
    elif declared.max_version < low:
        usable = "[unusable: node too new]"
    else:
        usable = f"[usable: {min(high, declared.max_version)}]"
    return f"{name}: {versions} {usable}"


def format_node(node: Node, versions: dict[int, tuple[int, int]]) -> str:
    rack = node.rack if node.rack is not None else "null"
    lines = [f"{node.host}:{node.port} (id: {node.id} rack: {rack}) -> ("]
    keys = sorted({int(key) for key in ApiKey} | set(versions))
    entries = [format_api(key, versions.get(key)) for key in keys]
    lines.append(",\n".join(f"\t{entry}" for entry in entries))
    lines.append(")")
    return "\n".join(lines) + "\n"


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CommandParser(prog="kafka-broker-api-versions.sh",
                           description="Print the API versions each broker supports.")
    parser.add_argument("--bootstrap-server", required=True,
                        help="REQUIRED: The server to connect to.")
    parser.add_argument("--command-config")
    return parser.parse_args(argv)


def run_command(opts: argparse.Namespace, out: TextIO) -> None:
    with AdminClient(opts.bootstrap_server, client_id="kafka-broker-api-versions",
                     security=command_security(opts.command_config)) as admin:
        for node, versions in admin.api_versions().items():
            out.write(format_node(node, versions))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        err.write(f"Error while executing broker api versions command: {exc}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(KafkaError, ValueError): report})


if __name__ == "__main__":
    sys.exit(main())
