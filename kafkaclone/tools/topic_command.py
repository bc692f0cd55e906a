"""kafka-topics: create, list, describe, alter and delete topics, as Kafka 2.8's TopicCommand.

    kafka-topics.sh --bootstrap-server h:p | --zookeeper h:p[/chroot]
        --create --topic T [--partitions N] [--replication-factor R]
                 [--replica-assignment 1:2,2:3] [--config k=v ...] [--if-not-exists]
                 [--disable-rack-aware]
        --list [--topic REGEX] [--exclude-internal]
        --describe [--topic REGEX] [--if-exists] [--exclude-internal]
                 [--under-replicated-partitions | --unavailable-partitions |
                  --under-min-isr-partitions | --at-min-isr-partitions |
                  --topics-with-overrides]
        --alter --topic REGEX --partitions N [--replica-assignment ...] [--if-exists]
                 (--zookeeper only: [--config k=v ...] [--delete-config k ...])
        --delete --topic REGEX [--if-exists]

``--bootstrap-server`` goes through the project's AdminClient (the Kafka protocol);
``--zookeeper`` reads and writes ZooKeeper directly with AdminZkClient, as Kafka's legacy
path does. Replicas go to different racks when every broker has a ``broker.rack``; with
``--zookeeper``, a cluster where only some brokers have one refuses ``--create`` unless
``--disable-rack-aware`` is given (RackAwareMode.Disabled). Through ``--bootstrap-server``
the broker decides (CreateTopics has no such field) and the option is ignored, as in
Kafka. Output is Kafka's, byte for byte; an error prints
``Error while executing topic command : <message>`` and exits 1.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from kafkaclone.clients.admin import (
    TOPIC,
    AdminClient,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafkaclone.clients.admin import TopicDescription as AdminTopicDescription
from kafkaclone.common.errors import KafkaError, TopicAlreadyExistsError
from kafkaclone.common.topic import has_collision_chars, is_internal
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import (
    CommandError,
    CommandParser,
    UsageError,
    ZkSession,
    run_tool,
)

COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') "
                     "or underscore ('_') could collide. To avoid issues it is best to use "
                     "either, but not both.")


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


# --- arguments -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="kafka-topics.sh",
                      description="Create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--zookeeper", help="DEPRECATED, The connection string for the zookeeper "
                                       "connection in the form host:port.")
    p.add_argument("--command-config", help="Property file containing configs to be passed "
                                            "to Admin Client (accepted, not used).")
    for action in ("list", "create", "delete", "alter", "describe"):
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--config", action="append", default=[])
    p.add_argument("--delete-config", action="append", default=[])
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--under-min-isr-partitions", action="store_true")
    p.add_argument("--at-min-isr-partitions", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--disable-rack-aware", action="store_true")
    return p


def check_args(opts: argparse.Namespace) -> None:
    actions = sum(bool(getattr(opts, a)) for a in ("create", "list", "alter", "describe",
                                                     "delete"))
    if actions != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--create, --alter or --delete")
    if bool(opts.bootstrap_server) == bool(opts.zookeeper):
        raise UsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    if (opts.create or opts.delete or opts.alter) and not opts.topic:
        raise UsageError('Missing required argument "[topic]"')
    if opts.create and opts.zookeeper and not opts.replica_assignment and (
            opts.partitions is None or opts.replication_factor is None):
        raise UsageError('Missing required argument "[partitions]" or "[replication-factor]"')
    if opts.alter and opts.bootstrap_server:
        if opts.config or opts.delete_config:
            raise UsageError("Option \"[config]\" can't be used with option "
                             "\"[bootstrap-server]\": use kafka-configs.sh to change topic "
                             "configs")
        if opts.partitions is None:
            raise UsageError('Missing required argument "[partitions]"')
    if opts.replica_assignment and ((opts.partitions is not None and opts.create) or
                                    opts.replication_factor is not None):
        raise UsageError("Option \"[replica-assignment]\" can't be used with option "
                         "\"[partitions]\" or \"[replication-factor]\"")
    if opts.if_exists and not (opts.alter or opts.delete or opts.describe):
        raise UsageError("Option \"[if-exists]\" can only be used with option \"[alter]\", "
                         "\"[delete]\" or \"[describe]\"")
    if opts.if_not_exists and not opts.create:
        raise UsageError("Option \"[if-not-exists]\" can only be used with option \"[create]\"")
    reports = [opts.under_replicated_partitions, opts.unavailable_partitions,
               opts.under_min_isr_partitions, opts.at_min_isr_partitions,
               opts.topics_with_overrides]
    if sum(map(bool, reports)) > 1:
        raise UsageError("Only one of --under-replicated-partitions, --unavailable-partitions, "
                         "--under-min-isr-partitions, --at-min-isr-partitions or "
                         "--topics-with-overrides may be given")
    if any(reports) and not opts.describe:
        raise UsageError("The reporting options can only be used with option \"[describe]\"")


def parse_configs(items: Sequence[str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise CommandError("Invalid topic config: all configs to be added must be in the "
                               "format \"key=val\".")
        configs[parts[0]] = parts[1]
    return configs


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's parseReplicaAssignment: ``1:2,2:3`` -> {0: [1, 2], 1: [2, 3]}."""
    assignment: dict[int, list[int]] = {}
    for i, partition in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in partition.split(":")]
        except ValueError:
            raise CommandError(f"Invalid replica assignment: {text}") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise CommandError("Partition replica lists may not contain duplicate entries: "
                               + ",".join(map(str, duplicates)))
        assignment[i] = brokers
        if len(brokers) != len(assignment[0]):
            raise CommandError(f"Partition {i} has different replication factor: "
                               f"[{', '.join(map(str, brokers))}]")
    return assignment


def topic_filter(pattern: str | None, exclude_internal: bool) -> Callable[[str], bool]:
    """Kafka's IncludeList: the ``--topic`` value as a regex (commas mean "or"), matched
    against the whole name."""
    regex = None
    if pattern is not None:
        cleaned = pattern.strip().replace(",", "|").replace(" ", "")
        cleaned = re.sub(r"^[\"']+", "", cleaned)
        cleaned = re.sub(r"[\"']+$", "", cleaned)
        try:
            regex = re.compile(cleaned)
        except re.error as exc:
            raise CommandError(f"Invalid topic regex {pattern}: {exc}") from None

    def allowed(topic: str) -> bool:
        if exclude_internal and is_internal(topic):
            return False
        return regex is None or regex.fullmatch(topic) is not None

    return allowed


def ensure_topic_exists(found: Sequence[str], requested: str | None, required: bool) -> None:
    if requested is not None and required and not found:
        raise CommandError(f"Topic '{requested}' does not exist as expected")


# --- printing --------------------------------------------------------------------------------


@dataclass
class PartitionLine:
    topic: str
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    marked_for_deletion: bool = False

    def under_replicated(self) -> bool:
        return len(self.replicas) - len(self.isr) > 0

    def under_min_isr(self, min_isr: int | None) -> bool:
        return self.leader is None or (min_isr is not None and len(self.isr) < min_isr)

    def at_min_isr(self, min_isr: int | None) -> bool:
        return min_isr is not None and len(self.isr) == min_isr

    def unavailable(self, live: set[int]) -> bool:
        return self.leader is None or self.leader not in live

    def print(self, out: TextIO) -> None:
        out.write(f"\tTopic: {self.topic}\tPartition: {self.partition}\tLeader: "
                  f"{'none' if self.leader is None else self.leader}\tReplicas: "
                  f"{','.join(map(str, self.replicas))}\tIsr: {','.join(map(str, self.isr))}"
                  f"{chr(9) + 'MarkedForDeletion: true' if self.marked_for_deletion else ''}\n")


@dataclass
class TopicSummary:
    topic: str
    topic_id: uuid.UUID | None
    partition_count: int
    replication_factor: int
    overrides: list[tuple[str, str | None]]
    min_isr: int | None
    partitions: list[PartitionLine] = field(default_factory=list)
    marked_for_deletion: bool = False

    def print(self, out: TextIO) -> None:
        line = f"Topic: {self.topic}"
        if self.topic_id is not None and self.topic_id.int != 0:
            line += f"\tTopicId: {kafka_uuid(self.topic_id)}"
        line += f"\tPartitionCount: {self.partition_count}"
        line += f"\tReplicationFactor: {self.replication_factor}"
        line += "\tConfigs: " + ",".join(f"{k}={v}" for k, v in self.overrides)
        if self.marked_for_deletion:
            line += "\tMarkedForDeletion: true"
        out.write(line + "\n")


def print_descriptions(summaries: Sequence[TopicSummary], opts: argparse.Namespace,
                       live: set[int], out: TextIO) -> None:
    """Kafka's DescribeOptions: which topic and partition lines to print."""
    describe_configs = not (opts.unavailable_partitions or opts.under_replicated_partitions
                            or opts.under_min_isr_partitions or opts.at_min_isr_partitions)
    describe_partitions = not opts.topics_with_overrides
    for summary in summaries:
        if describe_configs and (not opts.topics_with_overrides or summary.overrides):
            summary.print(out)
        if not describe_partitions:
            continue
        for p in summary.partitions:
            if (describe_configs
                    or (opts.under_replicated_partitions and p.under_replicated())
                    or (opts.unavailable_partitions and p.unavailable(live))
                    or (opts.under_min_isr_partitions and p.under_min_isr(summary.min_isr))
                    or (opts.at_min_isr_partitions and p.at_min_isr(summary.min_isr))):
                p.print(out)


# --- the AdminClient path ----------------------------------------------------------------------


class AdminClientTopicService:
    def __init__(self, admin: AdminClient, out: TextIO) -> None:
        self.admin = admin
        self.out = out

    def topics(self, opts: argparse.Namespace) -> list[str]:
        allowed = topic_filter(opts.topic, opts.exclude_internal)
        return [t for t in self.admin.list_topics(include_internal=not opts.exclude_internal)
                if allowed(t)]

    def create(self, opts: argparse.Namespace) -> None:
        configs = parse_configs(opts.config)
        if opts.replication_factor is not None and not 1 <= opts.replication_factor <= 32767:
            raise CommandError("The replication factor must be between 1 and 32767 inclusive")
        if opts.partitions is not None and opts.partitions < 1:
            raise CommandError("The partitions must be greater than 0")
        assignment = (parse_replica_assignment(opts.replica_assignment)
                      if opts.replica_assignment else None)
        new_topic = NewTopic(opts.topic,
                             -1 if opts.partitions is None else opts.partitions,
                             -1 if opts.replication_factor is None else opts.replication_factor,
                             replica_assignment=assignment, configs=configs)
        error = self.admin.create_topics([new_topic]).get(opts.topic)
        if error is not None:
            if isinstance(error, TopicAlreadyExistsError) and opts.if_not_exists:
                return
            raise error
        self.out.write(f"Created topic {opts.topic}.\n")

    def list(self, opts: argparse.Namespace) -> None:
        self.out.write("\n".join(self.topics(opts)) + "\n")

    def describe(self, opts: argparse.Namespace) -> None:
        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        configs = self.admin.describe_configs([ConfigResource(TOPIC, t) for t in topics])
        live = {n.id for n in self.admin.describe_cluster().nodes}
        descriptions = self.admin.describe_topics(topics)
        summaries = []
        for name in topics:
            description = descriptions.get(name)
            if isinstance(description, KafkaError):
                raise description
            if description is None:
                continue
            entries = configs.get(ConfigResource(TOPIC, name))
            if isinstance(entries, KafkaError):
                raise entries
            summaries.append(_admin_summary(description, entries or {}))
        print_descriptions(summaries, opts, live, self.out)

    def alter(self, opts: argparse.Namespace) -> None:
        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        assignment = (parse_replica_assignment(opts.replica_assignment)
                      if opts.replica_assignment else None)
        requests = {}
        descriptions = self.admin.describe_topics(topics) if assignment else {}
        for name in topics:
            new_assignments = None
            if assignment is not None:
                description = descriptions[name]
                if isinstance(description, KafkaError):
                    raise description
                start = len(description.partitions)
                new_assignments = [b for p, b in sorted(assignment.items()) if p >= start]
            requests[name] = NewPartitions(opts.partitions, new_assignments)
        for error in self.admin.create_partitions(requests).values():
            if error is not None:
                raise error

    def delete(self, opts: argparse.Namespace) -> None:
        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        if not topics:
            return
        for error in self.admin.delete_topics(topics).values():
            if error is not None:
                raise error


def _admin_summary(description: AdminTopicDescription,
                   entries: dict[str, ConfigEntry]) -> TopicSummary:
    partitions = [PartitionLine(description.name, p.partition,
                                None if p.leader < 0 else p.leader, p.replicas, p.isr)
                  for p in description.partitions]
    min_isr_entry = entries.get("min.insync.replicas")
    min_isr = (int(min_isr_entry.value) if min_isr_entry is not None and min_isr_entry.value
               else None)
    return TopicSummary(
        topic=description.name, topic_id=description.topic_id,
        partition_count=len(partitions),
        replication_factor=len(partitions[0].replicas) if partitions else 0,
        overrides=[(e.name, e.value) for e in entries.values() if not e.is_default],
        min_isr=min_isr, partitions=partitions)


# --- the ZooKeeper path ----------------------------------------------------------------------


class ZookeeperTopicService:
    def __init__(self, session: ZkSession, out: TextIO) -> None:
        self.session = session
        self.out = out

    def topics(self, opts: argparse.Namespace) -> list[str]:
        allowed = topic_filter(opts.topic, opts.exclude_internal)
        return sorted(t for t in self.session.run(self.session.zk.get_all_topics_in_cluster())
                      if allowed(t))

    def create(self, opts: argparse.Namespace) -> None:
        from kafkaclone.zk.admin import RackAwareMode

        configs = parse_configs(opts.config)
        try:
            if opts.replica_assignment:
                assignment = parse_replica_assignment(opts.replica_assignment)
                self.session.run(self.session.admin.create_topic(
                    opts.topic, len(assignment), len(assignment[0]), configs, assignment))
            else:
                mode = (RackAwareMode.DISABLED if opts.disable_rack_aware
                        else RackAwareMode.ENFORCED)
                self.session.run(self.session.admin.create_topic(
                    opts.topic, opts.partitions, opts.replication_factor, configs,
                    rack_aware_mode=mode))
        except TopicAlreadyExistsError:
            if opts.if_not_exists:
                return
            raise
        self.out.write(f"Created topic {opts.topic}.\n")

    def list(self, opts: argparse.Namespace) -> None:
        zk = self.session.zk
        for topic in self.topics(opts):
            if self.session.run(zk.is_topic_marked_for_deletion(topic)):
                self.out.write(f"{topic} - marked for deletion\n")
            else:
                self.out.write(f"{topic}\n")

    def describe(self, opts: argparse.Namespace) -> None:
        from kafkaclone.common.topic_partition import TopicPartition
        from kafkaclone.log.config import LogConfig

        zk = self.session.zk
        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        live = {int(b) for b in self.session.run(zk.get_all_broker_ids())}
        summaries = []
        for topic in topics:
            found = self.session.run(zk.get_topic_assignment(topic))
            if found is None:
                continue
            assignment = found.value
            marked = self.session.run(zk.is_topic_marked_for_deletion(topic))
            overrides = self.session.run(self.session.admin.fetch_entity_config("topics", topic))
            states = self.session.run(zk.get_topic_partition_states(
                TopicPartition(topic, p) for p in assignment.partitions))
            partitions = []
            for p, replicas in assignment.replicas().items():
                state = states.get(TopicPartition(topic, p))
                leader = None if state is None else state.leader_and_isr.leader
                partitions.append(PartitionLine(
                    topic, p, None if leader is None or leader < 0 else leader, list(replicas),
                    [] if state is None else list(state.leader_and_isr.isr), marked))
            min_isr = LogConfig.from_props(overrides, ignore_unknown=True).min_insync_replicas
            summaries.append(TopicSummary(
                topic, assignment.topic_id, len(partitions),
                len(partitions[0].replicas) if partitions else 0,
                sorted(overrides.items()), min_isr, partitions, marked))
        print_descriptions(summaries, opts, live, self.out)

    def alter(self, opts: argparse.Namespace) -> None:
        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        for topic in topics:
            if opts.config or opts.delete_config:
                self.out.write(
                    "WARNING: Altering topic configuration from this script has been deprecated "
                    "and may be removed in future releases.\n         Going forward, please use "
                    "kafka-configs.sh for this functionality\n")
                configs = self.session.run(self.session.admin.fetch_entity_config("topics",
                                                                                  topic))
                configs.update(parse_configs(opts.config))
                for name in opts.delete_config:
                    configs.pop(name, None)
                self.session.run(self.session.admin.change_topic_config(topic, configs))
                self.out.write(f"Updated config for topic {topic}.\n")
            if opts.partitions is not None:
                if is_internal(topic):
                    raise CommandError(
                        f"The number of partitions for the internal topics{topic} cannot be "
                        "changed.")
                self.out.write("WARNING: If partitions are increased for a topic that has a "
                               "key, the partition logic or ordering of the messages will be "
                               "affected\n")
                new_assignments = None
                if opts.replica_assignment:
                    found = self.session.run(self.session.zk.get_topic_assignment(topic))
                    start = 0 if found is None else len(found.value.partitions)
                    new_assignments = [b for p, b in sorted(parse_replica_assignment(
                        opts.replica_assignment).items()) if p >= start]
                self.session.run(self.session.admin.add_partitions(
                    topic, opts.partitions, new_assignments))
                self.out.write("Adding partitions succeeded!\n")

    def delete(self, opts: argparse.Namespace) -> None:
        from kazoo.exceptions import NodeExistsError

        topics = self.topics(opts)
        ensure_topic_exists(topics, opts.topic, not opts.if_exists)
        for topic in topics:
            if is_internal(topic):
                raise CommandError(f"Topic {topic} is a kafka internal topic and is not allowed "
                                   "to be marked for deletion.")
            try:
                self.session.run(self.session.zk.create_delete_topic_path(topic))
            except NodeExistsError:
                self.out.write(f"Topic {topic} is already marked for deletion.\n")
                continue
            self.out.write(f"Topic {topic} is marked for deletion.\n"
                           "Note: This will have no impact if delete.topic.enable is not set "
                           "to true.\n")


# --- main --------------------------------------------------------------------------------------


def run_command(opts: argparse.Namespace, out: TextIO) -> None:
    if opts.create and has_collision_chars(opts.topic):
        out.write(COLLISION_WARNING + "\n")
    service: Any
    if opts.bootstrap_server:
        with AdminClient(opts.bootstrap_server, client_id="kafka-topics",
                         security=command_security(opts.command_config)) as admin:
            service = AdminClientTopicService(admin, out)
            _dispatch(service, opts)
    else:
        session = ZkSession(opts.zookeeper)
        try:
            service = ZookeeperTopicService(session, out)
            _dispatch(service, opts)
        finally:
            session.close()


def _dispatch(service: Any, opts: argparse.Namespace) -> None:
    for action in ("create", "list", "describe", "alter", "delete"):
        if getattr(opts, action):
            getattr(service, action)(opts)
            return


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    opts = build_parser().parse_args(argv)
    check_args(opts)
    return opts


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout

    def report(exc: Exception) -> None:
        out.write(f"Error while executing topic command : {exc}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(CommandError, KafkaError, ValueError): report})


if __name__ == "__main__":
    sys.exit(main())
