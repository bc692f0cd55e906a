"""kafka-broker-api-versions: each broker's supported API versions, as Kafka 2.8's
BrokerApiVersionsCommand prints them.

    kafka-broker-api-versions.sh --bootstrap-server h:p

For each broker ``host:port (id: N rack: R) -> (`` then one line per API the client knows:
``<tab>Name(key): min to max [usable: v]``, ``UNSUPPORTED`` when the broker does not serve
it, or ``[unusable: node too new/old]`` when the ranges do not meet; then ``)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from kafkaclone.clients.admin import AdminClient, Node
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api import APIS
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import CommandParser, run_tool


def format_api(key: int, broker_range: tuple[int, int] | None) -> str:
    declared = APIS[key]
    name = f"{declared.name}({key})"
    if broker_range is None:
        return f"{name}: UNSUPPORTED"
    low, high = broker_range
    versions = f"{low}" if low == high else f"{low} to {high}"
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
    entries = [format_api(key, versions.get(key)) for key in sorted(APIS)]
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
