"""kafka-leader-election: elect preferred or unclean leaders, as Kafka 2.8's
LeaderElectionCommand (ElectLeaders, KIP-460).

    kafka-leader-election.sh --bootstrap-server h:p --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)
        [--admin.config F]

The JSON file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. The
request goes to the controller (found through the cluster metadata, retried while the
controller moves). Output is Kafka's: "Successfully completed leader election (PREFERRED) for
partitions t-0, t-1", "Valid replica already elected for partitions ...", and one "Error
completing leader election (...) for partition: t-0: ..." line per failure, which makes the
exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from kafkaclone.clients.admin import AdminClient
from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import (
    ElectionNotNeededError,
    KafkaError,
    NetworkExceptionError,
    NotControllerError,
    error_for_code,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.tools.command import CommandParser, UsageError, run_tool

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
TIMEOUT_MS = 30000
"""LeaderElectionCommand's admin timeout (30 s)."""


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="kafka-leader-election.sh",
                      description="This tool attempts to elect a new leader for a set of "
                                  "topic partitions. The type of elections supported are "
                                  "preferred replicas and unclean replicas.")
    p.add_argument("--bootstrap-server")
    p.add_argument("--admin.config", dest="admin_config")
    p.add_argument("--path-to-json-file")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--all-topic-partitions", action="store_true")
    p.add_argument("--election-type")
    return p


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options (``argv`` None: the command line's)."""
    opts = build_parser().parse_args(None if argv is None else list(argv))
    if not opts.bootstrap_server:
        raise UsageError("Missing required option(s): bootstrap-server")
    if not opts.election_type:
        raise UsageError("Missing required option(s): election-type")
    if opts.election_type.upper() not in ELECTION_TYPES:
        raise UsageError(f"Unknown election type: {opts.election_type} (PREFERRED or UNCLEAN)")
    actions = sum(1 for given in (opts.topic, opts.all_topic_partitions, opts.path_to_json_file)
                  if given)
    if actions != 1:
        raise UsageError("One and only one of the following options is required: "
                         "all-topic-partitions, topic, path-to-json-file")
    if opts.topic and opts.partition is None:
        raise UsageError("Missing required option(s): partition")
    if opts.partition is not None and not opts.topic:
        raise UsageError("Option partition is only allowed if topic is used")
    return opts


def partitions_of(opts: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for; None for every partition."""
    if opts.all_topic_partitions:
        return None
    if opts.topic:
        return [TopicPartition(opts.topic, opts.partition)]
    try:
        document = json.loads(Path(opts.path_to_json_file).read_text())
        entries = document["partitions"]
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"Invalid JSON file {opts.path_to_json_file}: {exc}") from exc
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise UsageError("Replica election data contains duplicate partitions: "
                         + ",".join(f"{tp.topic}-{tp.partition}" for tp in duplicates))
    return partitions


def elect_leaders(bootstrap: str, election_type: int,
                  partitions: list[TopicPartition] | None,
                  timeout_ms: int = TIMEOUT_MS) -> dict[TopicPartition, KafkaError | None]:
    """Send ElectLeaders to the controller; each partition's outcome (None: elected)."""
    request_cls = APIS[ApiKey.ELECT_LEADERS].request
    body = request_cls(
        election_type=election_type,
        topic_partitions=None if partitions is None else [
            request_cls.structs["TopicPartitions"](topic=topic, partitions=sorted(
                tp.partition for tp in partitions if tp.topic == topic))
            for topic in sorted({tp.topic for tp in partitions})],
        timeout_ms=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000.0
    with AdminClient(bootstrap) as admin:
        while True:
            response = None
            try:
                controller = admin.describe_cluster().controller
                if controller is None:
                    raise NotControllerError("The cluster has no controller now")
                with BrokerConnection(controller.host, controller.port,
                                      node_id=controller.id,
                                      client_id="leader-election") as conn:
                    if election_type != 0 and conn.version_for(ApiKey.ELECT_LEADERS) < 1:
                        raise KafkaError("The broker does not support unclean elections")
                    _, response = conn.request(ApiKey.ELECT_LEADERS, body,
                                               broker_wait_ms=timeout_ms)
            except (NetworkExceptionError, NotControllerError):
                if time.monotonic() > deadline:
                    raise
            if response is not None:
                results = {
                    TopicPartition(topic.topic, p.partition_id):
                        None if p.error_code == 0 else error_for_code(p.error_code)(
                            p.error_message)
                    for topic in response.replica_election_results
                    for p in topic.partition_result}
                moved = results and all(isinstance(e, NotControllerError)
                                        for e in results.values())
                if not moved or time.monotonic() > deadline:
                    return results
            time.sleep(0.2)


def print_results(election: str, results: dict[TopicPartition, KafkaError | None],
                  out: TextIO) -> int:
    def names(tps: list[TopicPartition]) -> str:
        return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))

    succeeded = [tp for tp, e in results.items() if e is None]
    noop = [tp for tp, e in results.items() if isinstance(e, ElectionNotNeededError)]
    failed = {tp: e for tp, e in results.items()
              if e is not None and not isinstance(e, ElectionNotNeededError)}
    if succeeded:
        out.write(f"Successfully completed leader election ({election}) for partitions "
                  f"{names(succeeded)}\n")
    if noop:
        out.write(f"Valid replica already elected for partitions {names(noop)}\n")
    for tp, error in sorted(failed.items()):
        out.write(f"Error completing leader election ({election}) for partition: "
                  f"{tp.topic}-{tp.partition}: {type(error).__name__}: {error.message}\n")
    return 1 if failed else 0


def run_command(opts: argparse.Namespace, out: TextIO) -> int:
    partitions = partitions_of(opts)
    election = opts.election_type.upper()
    results = elect_leaders(opts.bootstrap_server, ELECTION_TYPES[election], partitions)
    return print_results(election, results, out)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout,
         err: TextIO | None = None) -> int:
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        assert isinstance(exc, KafkaError)
        err.write(f"Error while making request: {exc.message}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(KafkaError,): report}, usage=build_parser())


if __name__ == "__main__":
    sys.exit(main(out=sys.stdout))
