"""kafka-log-dirs: the log directories of brokers, as Kafka 2.8's LogDirsCommand prints them.

    kafka-log-dirs.sh --bootstrap-server h:p --describe [--broker-list 1,2] [--topic-list a,b]

Prints ``Querying brokers for log directories information``, then ``Received log directory
information from brokers <ids>``, then one line of JSON::

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/a","error":null,
     "partitions":[{"partition":"foo-0","size":1024,"offsetLag":0,"isFuture":false}]}]}]}

``error`` is the Java exception class of a directory's error
(``org.apache.kafka.common.errors.KafkaStorageException`` for an offline directory), null
otherwise. A broker in --broker-list that is not in the cluster is an error, as Kafka's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from kafkaclone.clients.admin import AdminClient, LogDirDescription
from kafkaclone.common.errors import KafkaError
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import CommandParser, UsageError, run_tool

_JAVA_EXCEPTIONS = {
    "KAFKA_STORAGE_ERROR": "KafkaStorageException",
    "LOG_DIR_NOT_FOUND": "LogDirNotFoundException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
}


def java_exception_name(error: KafkaError) -> str:
    """The class name Kafka's tool prints for an error (``Json.encodeAsString`` of
    ``ex.getClass.getName``)."""
    name = _JAVA_EXCEPTIONS.get(error.name)
    if name is None:
        name = "".join(word.capitalize() for word in error.name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{name}"


def format_as_json(by_broker: dict[int, dict[str, LogDirDescription]],
                   topics: set[str]) -> str:
    """Kafka's LogDirsCommand.formatAsJson: compact JSON, keys in Kafka's order."""
    brokers: list[dict[str, Any]] = []
    for broker_id, log_dirs in by_broker.items():
        dirs: list[dict[str, Any]] = []
        for log_dir, description in log_dirs.items():
            partitions = [
                {"partition": f"{topic}-{partition}", "size": info.size,
                 "offsetLag": info.offset_lag, "isFuture": info.is_future}
                for (topic, partition), info in description.replica_infos.items()
                if not topics or topic in topics
            ]
            error = (None if description.error is None
                     else java_exception_name(description.error))
            dirs.append({"logDir": log_dir, "error": error, "partitions": partitions})
        brokers.append({"broker": broker_id, "logDirs": dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = CommandParser(
        prog="kafka-log-dirs.sh",
        description="This tool helps to query log directory usage on the specified brokers.")
    parser.add_argument("--bootstrap-server", required=True,
                        help="REQUIRED: the server(s) to use for bootstrapping")
    parser.add_argument("--command-config",
                        help="Property file containing configs to be passed to Admin Client.")
    parser.add_argument("--describe", action="store_true",
                        help="Describe the specified log directories on the specified brokers.")
    parser.add_argument("--broker-list", default=None,
                        help="The list of brokers to be queried in the form "
                             "\"0,1,2\". All brokers in the cluster will be queried if no "
                             "broker list is specified")
    parser.add_argument("--topic-list", default="",
                        help="The list of topics to be queried in the form \"topic1,topic2,"
                             "topic3\". All topics will be queried if no topic list is "
                             "specified")
    opts = parser.parse_args(argv)
    if not opts.describe:
        raise UsageError("Command must include exactly one action: --describe")
    return opts


def run_command(opts: argparse.Namespace, out: TextIO) -> int:
    topics = {t for t in opts.topic_list.split(",") if t}
    with AdminClient(opts.bootstrap_server, client_id="kafka-log-dirs",
                     security=command_security(opts.command_config)) as admin:
        cluster_brokers = [node.id for node in admin.describe_cluster().nodes]
        if opts.broker_list is None:
            existing, missing = cluster_brokers, []
        else:
            try:
                wanted = [int(b) for b in opts.broker_list.split(",") if b]
            except ValueError as exc:
                raise UsageError(f"Invalid --broker-list {opts.broker_list}") from exc
            existing = [b for b in wanted if b in cluster_brokers]
            missing = [b for b in wanted if b not in cluster_brokers]
        if missing:
            out.write(f"ERROR: The given brokers do not exist from --broker-list: "
                      f"{','.join(map(str, missing))}. Current existent brokers: "
                      f"{','.join(map(str, cluster_brokers))}\n")
            return 0
        out.write("Querying brokers for log directories information\n")
        by_broker = admin.describe_log_dirs(existing)
        out.write("Received log directory information from brokers "
                  f"{','.join(map(str, existing))}\n")
        out.write(format_as_json(by_broker, topics) + "\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        err.write(f"Error while executing log dirs command: {exc}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(KafkaError, OSError): report})


if __name__ == "__main__":
    sys.exit(main())
