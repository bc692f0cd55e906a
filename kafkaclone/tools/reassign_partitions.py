"""kafka-reassign-partitions: move partition replicas between brokers, as Kafka 2.8's
ReassignPartitionsCommand (KIP-455, through the admin API).

    kafka-reassign-partitions.sh --bootstrap-server h:p [--command-config F]
        --generate --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]
        --execute --reassignment-json-file F [--throttle B/s] [--additional]
        --verify --reassignment-json-file F [--preserve-throttles]
        --cancel --reassignment-json-file F [--preserve-throttles]
        --list

The files are Kafka's: ``{"version":1,"topics":[{"topic":"t"}]}`` for --generate and
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],
"log_dirs":["any","any"]}]}`` for the others, and so is the output. ``--throttle`` sets the
brokers' ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
and the topics' ``leader.replication.throttled.replicas`` (the partitions' current
replicas) / ``follower.replication.throttled.replicas`` (the replicas being added);
``--verify`` removes them once no partition of the file is still moving, as Kafka does.
A log dir other than "any" moves that replica into that directory of its broker
(AlterReplicaLogDirs, retried until the replica exists there or ``--timeout`` ms pass);
``--replica-alter-log-dirs-throttle`` sets those brokers'
``replica.alter.log.dirs.io.max.bytes.per.second``; ``--verify`` and ``--cancel`` report
and cancel those moves too (DescribeLogDirs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence, Sized
from pathlib import Path
from typing import Any, Final, TextIO

from kafkaclone.clients.admin import (
    BROKER,
    DELETE,
    SET,
    TOPIC,
    AdminClient,
    AlterConfigOp,
    ConfigResource,
)
from kafkaclone.common.errors import KafkaError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import CommandError, CommandParser, UsageError, run_tool
from kafkaclone.zk.admin import BrokerMetadata, assign_replicas_to_brokers
from kafkaclone.zk.errors import AdminOperationError

LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
LOG_DIR_THROTTLED_RATE: Final = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
BROKER_THROTTLES: Final = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE,
                           LOG_DIR_THROTTLED_RATE)
TOPIC_THROTTLES: Final = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
ANY_LOG_DIR: Final = "any"

YOU_MUST_RUN_VERIFY_PERIODICALLY: Final = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed.")
CANNOT_EXECUTE_BECAUSE_OF_EXISTING: Final = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment.")
ACTIONS: Final = ("generate", "execute", "verify", "cancel", "list")

Assignment = dict[TopicPartition, list[int]]
Replica = tuple[str, int, int]
"""Kafka's TopicPartitionReplica: (topic, partition, broker id)."""
ReplicaDirs = dict[Replica, str]
"""A replica's target log directory, for the replicas the file does not leave at "any"."""
MOVE_RETRY_SECONDS: Final = 0.1


class ReassignmentFailedError(CommandError):
    """Kafka's TerseReassignmentFailureException: printed alone, exit status 1."""


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="kafka-reassign-partitions.sh",
                      description="This tool helps to move topic partitions between replicas.")
    p.add_argument("--bootstrap-server")
    p.add_argument("--command-config")
    p.add_argument("--zookeeper")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file")
    p.add_argument("--reassignment-json-file")
    p.add_argument("--broker-list")
    p.add_argument("--disable-rack-aware", action="store_true")
    p.add_argument("--throttle", type=int, default=-1)
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1)
    p.add_argument("--timeout", type=int, default=10000)
    p.add_argument("--additional", action="store_true")
    p.add_argument("--preserve-throttles", action="store_true")
    return p


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    opts = build_parser().parse_args(None if argv is None else list(argv))
    chosen = [a for a in ACTIONS if getattr(opts, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute, "
                         "--verify, --cancel, or --list")
    opts.action = chosen[0]
    if opts.zookeeper:
        raise UsageError("--zookeeper is not supported by this tool: use --bootstrap-server")
    if not opts.bootstrap_server:
        raise UsageError("Please specify --bootstrap-server")
    if opts.action == "generate":
        if not opts.topics_to_move_json_file or not opts.broker_list:
            raise UsageError("Missing required option(s): topics-to-move-json-file, "
                             "broker-list")
    elif opts.action in ("execute", "verify", "cancel") and not opts.reassignment_json_file:
        raise UsageError("Missing required option(s): reassignment-json-file")
    if opts.throttle >= 0 and opts.action != "execute":
        raise UsageError("Option throttle is only allowed with execute")
    if opts.replica_alter_log_dirs_throttle >= 0 and opts.action != "execute":
        raise UsageError("Option replica-alter-log-dirs-throttle is only allowed with execute")
    return opts


# -- the JSON files --------------------------------------------------------------------------


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"Failed to parse {path}: {exc}") from exc


def parse_topics_data(text_or_doc: Any) -> list[str]:
    """Kafka's parseTopicsData: the topics of ``{"version":1,"topics":[{"topic":..}]}``."""
    doc = text_or_doc
    if not isinstance(doc, dict) or doc.get("version", 1) != 1:
        raise CommandError("Not supported version field value "
                           f"{doc.get('version') if isinstance(doc, dict) else doc}")
    topics = doc.get("topics")
    if not isinstance(topics, list):
        raise CommandError("Missing or invalid 'topics' in the topics JSON file")
    return [str(entry["topic"]) for entry in topics]


def parse_partition_reassignment_data(doc: Any) -> tuple[Assignment, ReplicaDirs]:
    """Kafka's parsePartitionReassignmentData: each partition's target replicas, and the
    target log directory of each replica given one other than "any"."""
    if not isinstance(doc, dict) or doc.get("version", 1) != 1:
        raise CommandError("Not supported version field value "
                           f"{doc.get('version') if isinstance(doc, dict) else doc}")
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise CommandError("Missing or invalid 'partitions' in the reassignment JSON file")
    result: Assignment = {}
    replica_dirs: ReplicaDirs = {}
    for entry in entries:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise CommandError(f"Invalid partition entry {entry}: {exc}") from exc
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if len(log_dirs) != len(replicas):
            raise CommandError(f"Size of replicas list {replicas} is different from size of "
                               f"log dirs list {log_dirs} for partition {tp}")
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise CommandError(f"Invalid log_dirs {log_dirs} for partition {tp}: a list of "
                               f"\"{ANY_LOG_DIR}\" or absolute paths")
        if tp in result:
            raise CommandError(f"Partition reassignment contains duplicate topic partitions: "
                               f"{tp}")
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"Partition replica lists may not contain duplicate entries: "
                               f"{tp} contains {','.join(map(str, replicas))}")
        result[tp] = replicas
        replica_dirs.update({(tp.topic, tp.partition, broker): log_dir
                             for broker, log_dir in zip(replicas, log_dirs, strict=True)
                             if log_dir != ANY_LOG_DIR})
    if not result:
        raise CommandError("Partition reassignment list cannot be empty")
    return result, replica_dirs


def format_as_reassignment_json(assignment: Assignment,
                                replica_dirs: Mapping[Replica, str] | None = None) -> str:
    """Kafka's formatAsReassignmentJson (compact, partitions sorted)."""
    dirs = replica_dirs or {}
    partitions = [{"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
                   "log_dirs": [dirs.get((tp.topic, tp.partition, b), ANY_LOG_DIR)
                                for b in replicas]}
                  for tp, replicas in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions))


def _replica_names(replicas: Iterable[Replica]) -> str:
    """Kafka's TopicPartitionReplica strings (``topic-partition-broker``), sorted by broker
    first as its compareTopicPartitionReplicas."""
    return ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(replicas, key=lambda r: (r[2], r[0],
                                                                                    r[1])))


def _plural(items: Sized) -> str:
    return "" if len(items) == 1 else "s"


# -- actions -----------------------------------------------------------------------------------


def current_assignment(admin: AdminClient, topics: Iterable[str]) -> Assignment:
    """Each partition's replicas; an unknown topic is an error."""
    wanted = sorted(set(topics))
    described = admin.describe_topics(wanted)
    result: Assignment = {}
    for name in wanted:
        topic = described.get(name)
        if topic is None or isinstance(topic, KafkaError):
            raise CommandError(f"Topic {name} not found")
        for p in topic.partitions:
            result[TopicPartition(name, p.partition)] = list(p.replicas)
    return result


def generate_assignment(admin: AdminClient, topics: Sequence[str], broker_list: Sequence[int],
                        rack_aware: bool) -> tuple[Assignment, Assignment]:
    """(current, proposed): each topic's partitions placed over ``broker_list`` with the
    topic creation's placement, keeping each partition's replication factor."""
    if len(set(broker_list)) != len(broker_list):
        raise CommandError(f"Duplicate broker ids in broker list {broker_list}")
    if len(set(topics)) != len(topics):
        raise CommandError(f"Duplicate topic names in topics list {list(topics)}")
    nodes = {n.id: n for n in admin.describe_cluster().nodes}
    unknown = [b for b in broker_list if b not in nodes]
    if unknown:
        raise CommandError(f"The given broker list contains unknown brokers: "
                           f"{','.join(map(str, unknown))}")
    brokers = [BrokerMetadata(b, nodes[b].rack if rack_aware else None)
               for b in sorted(broker_list)]
    with_rack = [b for b in brokers if b.rack is not None]
    if rack_aware and 0 < len(with_rack) < len(brokers):
        raise CommandError("Not all brokers have rack information. Add --disable-rack-aware "
                           "in command line to make replica assignment without rack "
                           "information.")
    current = current_assignment(admin, topics)
    proposed: Assignment = {}
    for topic in topics:
        partitions = sorted(tp.partition for tp in current if tp.topic == topic)
        replication_factor = len(current[TopicPartition(topic, partitions[0])])
        try:
            placed = assign_replicas_to_brokers(brokers, len(partitions), replication_factor)
        except (KafkaError, AdminOperationError) as exc:
            raise CommandError(str(exc)) from exc
        for partition, replicas in placed.items():
            proposed[TopicPartition(topic, partition)] = list(replicas)
    return current, proposed


def execute_assignment(admin: AdminClient, proposed: Assignment, throttle: int,
                       additional: bool, out: TextIO, replica_dirs: ReplicaDirs | None = None,
                       log_dir_throttle: int = -1, timeout_ms: int = 10000) -> None:
    ongoing = admin.list_partition_reassignments()
    if ongoing and not additional:
        raise ReassignmentFailedError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    current = current_assignment(admin, {tp.topic for tp in proposed})
    missing = sorted(tp for tp in proposed if tp not in current)
    if missing:
        raise ReassignmentFailedError(f"Unable to find partition: {_names(missing[:1])}")
    out.write("Current partition replica assignment\n\n"
              f"{format_as_reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
              "Save this to use as the --reassignment-json-file option during rollback\n")
    replica_dirs = replica_dirs or {}
    if throttle >= 0 or log_dir_throttle >= 0:
        out.write(f"{YOU_MUST_RUN_VERIFY_PERIODICALLY}\n")
    if throttle >= 0:
        set_throttles(admin, current, proposed, ongoing, throttle)
        out.write(f"The inter-broker throttle limit was set to {throttle} B/s\n")
    if log_dir_throttle >= 0:
        moving_brokers = sorted({broker for _, _, broker in replica_dirs})
        _alter(admin, {ConfigResource(BROKER, str(b)): [
            AlterConfigOp(LOG_DIR_THROTTLED_RATE, str(log_dir_throttle), SET)]
            for b in moving_brokers})
        out.write(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s\n")
    results = admin.alter_partition_reassignments(
        {(tp.topic, tp.partition): replicas for tp, replicas in proposed.items()})
    errors = {TopicPartition(*key): e for key, e in results.items() if e is not None}
    if errors:
        raise ReassignmentFailedError("Error reassigning partition(s):\n" + "\n".join(
            f"{tp.topic}-{tp.partition}: {type(e).__name__}: {e.message}"
            for tp, e in sorted(errors.items())))
    plural = "" if len(proposed) == 1 else "s"
    out.write(f"Successfully started partition reassignment{plural} for "
              f"{_names(proposed)}\n")
    if replica_dirs:
        execute_moves(admin, replica_dirs, timeout_ms, out)


def execute_moves(admin: AdminClient, moves: Mapping[Replica, str], timeout_ms: int,
                  out: TextIO) -> None:
    """Kafka's executeMoves: ask each replica's broker to move it to its directory, again
    every 100 ms for those not there yet (REPLICA_NOT_AVAILABLE: a replica being added by
    the reassignment exists only once its broker has it; the broker keeps the wish for
    when it does), until all are started or ``timeout_ms`` has passed."""
    deadline = time.monotonic() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        started: list[Replica] = []
        for replica, error in admin.alter_replica_log_dirs(pending).items():
            if error is None:
                started.append(replica)
            elif error.name != "REPLICA_NOT_AVAILABLE":
                topic, partition, broker = replica
                raise CommandError(f"Failed to alter dir for {topic}-{partition}-{broker}: "
                                   f"{type(error).__name__}: {error.message}")
        if started:
            out.write(f"Successfully started log directory move{_plural(started)} for: "
                      f"{_replica_names(started)}\n")
        for replica in started:
            pending.pop(replica, None)
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ReassignmentFailedError(
                f"Timed out before log directory move{_plural(pending)} could be started "
                f"for: {_replica_names(pending)}")
        time.sleep(MOVE_RETRY_SECONDS)


class MoveState:
    """Kafka's LogDirMoveState of one replica: where it is, where a move is taking it."""

    __slots__ = ("current", "future", "target")

    def __init__(self, target: str, current: str | None, future: str | None) -> None:
        self.target = target
        self.current = current
        self.future = future

    @property
    def done(self) -> bool:
        """Nothing is moving: completed, cancelled or missing (ActiveMoveState is the one
        not done)."""
        return self.future is None


def log_dir_move_states(admin: AdminClient, targets: Mapping[Replica, str]
                        ) -> dict[Replica, MoveState | None]:
    """Kafka's findLogDirMoveStates: each replica's current and future directory from its
    broker's DescribeLogDirs; None where the broker does not have it in a live directory."""
    brokers = sorted({broker for _, _, broker in targets})
    described = admin.describe_log_dirs(brokers)
    states: dict[Replica, MoveState | None] = {}
    for replica, target in targets.items():
        topic, partition, broker = replica
        current = future = None
        found = False
        for log_dir, description in described.get(broker, {}).items():
            info = description.replica_infos.get((topic, partition))
            if description.error is not None or info is None:
                continue
            found = True
            if info.is_future:
                future = log_dir
            else:
                current = log_dir
        states[replica] = MoveState(target, current, future) if found else None
    return states


def format_move_states(states: Mapping[Replica, MoveState | None]) -> list[str]:
    """Kafka's replicaMoveStatesToString, a line per replica."""
    lines = []
    for replica in sorted(states, key=lambda r: (r[2], r[0], r[1])):
        topic, partition, broker = replica
        name = f"{topic}-{partition}"
        state = states[replica]
        if state is None:
            lines.append(f"Partition {name} cannot be found in any live log directory on "
                         f"broker {broker}.")
        elif state.current is None:
            lines.append(f"Partition {name} is not found in any live log dir on broker "
                         f"{broker}. There is likely an offline log directory on the broker.")
        elif state.future is not None:
            if state.future == state.target:
                lines.append(f"Reassignment of replica {name}-{broker} is still in progress.")
            else:
                lines.append(f"Partition {name} on broker {broker} is being moved to log dir "
                             f"{state.future} instead of {state.target}.")
        elif state.current == state.target:
            lines.append(f"Reassignment of replica {name}-{broker} completed successfully.")
        else:
            lines.append(f"Partition {name} on broker {broker} is not being moved from log "
                         f"dir {state.current} to {state.target}.")
    return lines


def set_throttles(admin: AdminClient, current: Assignment, proposed: Assignment,
                  ongoing: dict[tuple[str, int], Any], throttle: int) -> None:
    """Kafka's modifyReassignmentThrottle: per topic, the moving partitions' current
    replicas are leader-throttled and the replicas being added follower-throttled; every
    broker involved gets the rate."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for tp, target in proposed.items():
        reassignment = ongoing.get((tp.topic, tp.partition))
        sources = (current[tp] if reassignment is None else
                   [r for r in reassignment.replicas if r not in reassignment.adding_replicas])
        if sources == target:
            continue
        leaders.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in sources)
        followers.setdefault(tp.topic, set()).update(
            f"{tp.partition}:{b}" for b in target if b not in sources)
        brokers.update(sources)
        brokers.update(target)
    topic_ops: dict[ConfigResource, list[AlterConfigOp]] = {}
    for topic in sorted(set(leaders) | set(followers)):
        topic_ops[ConfigResource(TOPIC, topic)] = [
            AlterConfigOp(LEADER_THROTTLED_REPLICAS, _sorted_list(leaders.get(topic, set())),
                          SET),
            AlterConfigOp(FOLLOWER_THROTTLED_REPLICAS,
                          _sorted_list(followers.get(topic, set())), SET)]
    _alter(admin, topic_ops)
    _alter(admin, {ConfigResource(BROKER, str(b)): [
        AlterConfigOp(LEADER_THROTTLED_RATE, str(throttle), SET),
        AlterConfigOp(FOLLOWER_THROTTLED_RATE, str(throttle), SET)] for b in sorted(brokers)})


def _sorted_list(components: set[str]) -> str:
    return ",".join(sorted(components, key=lambda c: tuple(int(x) for x in c.split(":"))))


def _alter(admin: AdminClient, ops: dict[ConfigResource, list[AlterConfigOp]]) -> None:
    if not ops:
        return
    for resource, error in admin.incremental_alter_configs(ops).items():
        if error is not None:
            raise ReassignmentFailedError(
                f"Failed to alter the configuration of {resource.name}: {error.message}")


def clear_all_throttles(admin: AdminClient, targets: Assignment, out: TextIO) -> None:
    """Kafka's clearAllThrottles: every live broker's rates and the file's topics'
    throttled replicas. (Kafka adds the file's brokers; one that is down cannot take a
    broker config change, so only the live ones are cleared here.)"""
    brokers = {n.id for n in admin.describe_cluster().nodes}
    out.write(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
              f"{','.join(map(str, sorted(brokers)))}\n")
    _alter(admin, {ConfigResource(BROKER, str(b)): [AlterConfigOp(name, None, DELETE)
                                                     for name in BROKER_THROTTLES]
                   for b in sorted(brokers)})
    topics = sorted({tp.topic for tp in targets})
    out.write(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} "
              f"{','.join(topics)}\n")
    _alter(admin, {ConfigResource(TOPIC, t): [AlterConfigOp(name, None, DELETE)
                                              for name in TOPIC_THROTTLES] for t in topics})


def verify_assignment(admin: AdminClient, targets: Assignment, preserve_throttles: bool,
                      out: TextIO, replica_dirs: ReplicaDirs | None = None) -> bool:
    """Print each partition's state and each log-dir move's; clear the throttles once
    nothing is moving. Whether something is still moving."""
    ongoing = admin.list_partition_reassignments([(tp.topic, tp.partition) for tp in targets])
    current = current_assignment(admin, {tp.topic for tp in targets})
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(targets.items()):
        name = f"{tp.topic}-{tp.partition}"
        if (tp.topic, tp.partition) in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif current.get(tp) == target:
            lines.append(f"Reassignment of partition {name} is complete.")
        else:
            lines.append(f"There is no active reassignment of partition {name}, but replica "
                         f"set is {','.join(map(str, current.get(tp, [])))} rather than "
                         f"{','.join(map(str, target))}.")
    out.write("\n".join(lines) + "\n")
    moves = log_dir_move_states(admin, replica_dirs) if replica_dirs else {}
    out.write("\n".join(format_move_states(moves)) + "\n")
    moving = bool(ongoing) or any(s is not None and not s.done for s in moves.values())
    if not moving and not preserve_throttles:
        clear_all_throttles(admin, targets, out)
    return moving


def cancel_assignment(admin: AdminClient, targets: Assignment, preserve_throttles: bool,
                      out: TextIO, replica_dirs: ReplicaDirs | None = None,
                      timeout_ms: int = 10000) -> None:
    ongoing = admin.list_partition_reassignments([(tp.topic, tp.partition) for tp in targets])
    cancelling = sorted(TopicPartition(*key) for key, r in ongoing.items()
                        if r.adding_replicas or r.removing_replicas)
    if cancelling:
        results = admin.alter_partition_reassignments(
            {(tp.topic, tp.partition): None for tp in cancelling})
        errors = {TopicPartition(*key): e for key, e in results.items() if e is not None}
        if errors:
            plural = "" if len(errors) == 1 else "s"
            raise ReassignmentFailedError(
                f"Error cancelling partition reassignment{plural} for:\n" + "\n".join(
                    f"{tp.topic}-{tp.partition}: {type(e).__name__}: {e.message}"
                    for tp, e in sorted(errors.items())))
        plural = "" if len(cancelling) == 1 else "s"
        out.write(f"Successfully cancelled partition reassignment{plural} for: "
                  f"{_names(cancelling)}\n")
    else:
        out.write("None of the specified partition reassignments are active.\n")
    # A move in progress is cancelled as Kafka does: by moving the replica to the
    # directory it is in now (the broker drops the future log).
    moves = log_dir_move_states(admin, replica_dirs) if replica_dirs else {}
    stay = {replica: state.current for replica, state in moves.items()
            if state is not None and state.current is not None and not state.done}
    if stay:
        execute_moves(admin, stay, timeout_ms, out)
    else:
        out.write("None of the specified partition moves are active.\n")
    if not preserve_throttles:
        clear_all_throttles(admin, targets, out)


def list_reassignments(admin: AdminClient, out: TextIO) -> None:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        out.write("No partition reassignments found.\n")
        return
    out.write("Current partition reassignments:\n")
    for (topic, partition), r in sorted(ongoing.items()):
        adding = f" adding: {','.join(map(str, r.adding_replicas))}." if r.adding_replicas else ""
        removing = (f" removing: {','.join(map(str, r.removing_replicas))}."
                    if r.removing_replicas else "")
        out.write(f"{topic}-{partition}: replicas: {','.join(map(str, r.replicas))}."
                  f"{adding}{removing}\n")


def run_command(opts: argparse.Namespace, out: TextIO) -> int:
    with AdminClient(opts.bootstrap_server,
                     security=command_security(opts.command_config)) as admin:
        if opts.action == "generate":
            topics = parse_topics_data(_read_json(opts.topics_to_move_json_file))
            try:
                broker_list = [int(b) for b in opts.broker_list.split(",") if b.strip()]
            except ValueError as exc:
                raise UsageError(f"Invalid --broker-list {opts.broker_list}") from exc
            current, proposed = generate_assignment(admin, topics, broker_list,
                                                    not opts.disable_rack_aware)
            out.write(f"Current partition replica assignment\n"
                      f"{format_as_reassignment_json(current)}\n\n"
                      f"Proposed partition reassignment configuration\n"
                      f"{format_as_reassignment_json(proposed)}\n")
        elif opts.action == "list":
            list_reassignments(admin, out)
        else:
            targets, replica_dirs = parse_partition_reassignment_data(
                _read_json(opts.reassignment_json_file))
            if opts.action == "execute":
                execute_assignment(admin, targets, opts.throttle, opts.additional, out,
                                   replica_dirs, opts.replica_alter_log_dirs_throttle,
                                   opts.timeout)
            elif opts.action == "verify":
                verify_assignment(admin, targets, opts.preserve_throttles, out, replica_dirs)
            else:
                cancel_assignment(admin, targets, opts.preserve_throttles, out, replica_dirs,
                                  opts.timeout)
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout,
         err: TextIO | None = None) -> int:
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        if isinstance(exc, KafkaError):
            err.write(f"Error: {type(exc).__name__}: {exc.message}\n")
        else:
            err.write(f"{exc}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(CommandError, KafkaError): report}, usage=build_parser())


if __name__ == "__main__":
    sys.exit(main(out=sys.stdout))
