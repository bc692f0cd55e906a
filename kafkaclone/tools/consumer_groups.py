"""kafka-consumer-groups: list, describe, delete consumer groups and reset their offsets, as
Kafka 2.8's ConsumerGroupCommand.

    kafka-consumer-groups.sh --bootstrap-server h:p
        --list [--state [STATES]]
        --describe (--group G ... | --all-groups) [--members [--verbose] | --state | --offsets]
        --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P...] ... | --all-topics)
                 (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N |
                  --to-datetime YYYY-MM-DDTHH:mm:SS.sss[TZ] | --by-duration PnDTnHnMnS)
                 [--dry-run | --execute]
        --delete (--group G ... | --all-groups)
        --delete-offsets --group G (--topic T[:P,P...] ...)

It talks to the cluster through the protocol only (kafkaclone.clients.admin): ListGroups,
DescribeGroups and OffsetFetch at the group's coordinator, ListOffsets at the partition
leaders for log end offsets and reset targets, OffsetCommit (no generation: only an
inactive group accepts it, as Kafka), DeleteGroups, OffsetDelete. The output is Kafka's:
same columns, same widths, same messages.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

from kafkaclone.clients.admin import AdminClient, CommittedOffset, ConsumerGroupDescription
from kafkaclone.common.errors import (
    GroupIdNotFoundError,
    InvalidGroupIdError,
    KafkaError,
    NonEmptyGroupError,
)
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import CommandError, CommandParser, UsageError, run_tool

MISSING = "-"
EARLIEST, LATEST = -2, -1
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major "
    "release, the default behavior of this command will be to prompt the user before "
    "executing the reset rather than doing a dry run. You should add the --dry-run option "
    "explicitly if you are scripting this command and want to keep the current default "
    "behavior without prompting.")

TopicPartition = tuple[str, int]


def print_error(out: TextIO, message: str) -> None:
    out.write(f"\nError: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="kafka-consumer-groups.sh",
                      description="List all consumer groups, describe a consumer group, "
                                  "delete consumer group info, or reset consumer group "
                                  "offsets.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--command-config", help="Property file containing configs to be passed "
                                            "to Admin Client (accepted, not used).")
    p.add_argument("--timeout", type=int, default=5000,
                   help="The timeout that can be set for some use cases (ms).")
    for action in ("list", "describe", "delete", "reset-offsets", "delete-offsets"):
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--members", action="store_true")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--state", nargs="?", const="", default=None)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--export", action="store_true")
    for target in ("to-earliest", "to-latest", "to-current"):
        p.add_argument(f"--{target}", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--shift-by", type=int)
    p.add_argument("--to-datetime")
    p.add_argument("--by-duration")
    return p


RESET_TARGETS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by",
                 "to_datetime", "by_duration")


def _given(opts: argparse.Namespace, name: str) -> bool:
    value = getattr(opts, name)
    return value is not None and value is not False


def check_args(opts: argparse.Namespace) -> None:
    """Kafka's ConsumerGroupCommandOptions.checkArgs (the checks that apply here)."""
    actions = [a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets")
               if getattr(opts, a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, "
                         "--delete, --reset-offsets, --delete-offsets")
    if not opts.bootstrap_server:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    action = actions[0]
    if action in ("describe", "delete", "reset_offsets") and not opts.group \
            and not opts.all_groups:
        raise UsageError(f"Option [{action.replace('_', '-')}] takes one of these options: "
                         "[all-groups], [group]")
    if opts.group and opts.all_groups:
        raise UsageError("Option [all-groups] is not valid with [group]")
    if action == "delete_offsets":
        if len(opts.group) != 1:
            raise UsageError("Option [delete-offsets] takes the following options: [group]")
        if not opts.topic:
            raise UsageError("Option [delete-offsets] takes the following options: [topic]")
    if action == "reset_offsets":
        if opts.dry_run and opts.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute], [dry-run]")
        targets = [t for t in RESET_TARGETS if _given(opts, t)]
        if len(targets) != 1:
            raise UsageError("Option [reset-offsets] takes exactly one of these options: "
                             "[to-datetime], [by-duration], [to-earliest], [to-latest], "
                             "[shift-by], [from-file], [to-current], [to-offset]")
        if not opts.topic and not opts.all_topics:
            raise UsageError("Option [reset-offsets] takes one of these options: "
                             "[all-topics], [topic]")
        if opts.topic and opts.all_topics:
            raise UsageError("Option [all-topics] is not valid with [topic]")
    elif opts.topic and action not in ("delete_offsets", "delete"):
        raise UsageError(f"Option [topic] is not valid with [{action.replace('_', '-')}]")
    if opts.members and not opts.describe:
        raise UsageError("Option [members] takes one of these options: [describe]")
    if opts.state is not None and not (opts.describe or opts.list):
        raise UsageError("Option [state] takes one of these options: [describe], [list]")
    if opts.describe and opts.state:
        raise UsageError("Option [describe] does not take a value for [state]")
    if opts.describe and sum([opts.members, opts.offsets, opts.state is not None]) > 1:
        raise UsageError("Option [describe] takes at most one of these options: [members], "
                         "[offsets], [state]")


def parse_states(value: str) -> list[str]:
    by_lower = {s.lower(): s for s in STATES}
    states = []
    for item in value.split(","):
        name = item.strip()
        if name.lower() not in by_lower:
            raise CommandError(f"State '{name}' is not valid. The valid states are: "
                               f"{', '.join(STATES)}")
        states.append(by_lower[name.lower()])
    return states


def parse_duration_ms(value: str) -> int:
    """A java.time.Duration text (``PnDTnHnMn.nS``) in milliseconds."""
    match = re.fullmatch(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                         r"(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?", value.strip(), re.IGNORECASE)
    if match is None or value.strip().upper().endswith("T") or value.strip().upper() == "P":
        raise CommandError(f"Text cannot be parsed to a Duration: {value}")
    sign, days, hours, minutes, seconds = match.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
             + float((seconds or "0").replace(",", ".")))
    return round(total * 1000) * (-1 if sign == "-" else 1)


def parse_datetime_ms(value: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:SS.sss`` with an optional time zone
    (``Z``, ``+hh:mm``), local time without one."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise CommandError(f"Error parsing timestamp. It does not match the expected format "
                           f"yyyy-MM-dd'T'HH:mm:ss.SSS: {value}") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


@dataclass
class PartitionRow:
    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset == -1 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


class ConsumerGroupService:
    def __init__(self, admin: AdminClient, opts: argparse.Namespace, out: TextIO,
                 err: TextIO) -> None:
        self.admin = admin
        self.opts = opts
        self.out = out
        self.err = err

    def print_error(self, message: str) -> None:
        print_error(self.out, message)

    def group_ids(self) -> list[str]:
        if self.opts.all_groups:
            return [g.group_id for g in self.admin.list_consumer_groups()]
        return list(dict.fromkeys(self.opts.group))

    # -- --list ------------------------------------------------------------------------------

    def list_groups(self) -> None:
        if self.opts.state is None:
            for listing in self.admin.list_consumer_groups():
                self.out.write(f"{listing.group_id}\n")
            return
        states = parse_states(self.opts.state) if self.opts.state else []
        listings = self.admin.list_consumer_groups(states)
        width = max([15, *(len(g.group_id) for g in listings)])
        self.out.write(f"{'GROUP':<{width}} STATE\n")
        for g in listings:
            self.out.write(f"{g.group_id:<{width}} {g.state or 'Unknown'}\n")

    # -- --describe ---------------------------------------------------------------------------

    def describe_groups(self) -> None:
        described = self.admin.describe_consumer_groups(self.group_ids())
        for group_id in sorted(described):
            description = described[group_id]
            if isinstance(description, KafkaError):
                self.print_error(f"Executing consumer group command failed due to "
                                 f"{description.message}")
                continue
            if self.opts.members:
                self._print_members(description)
            elif self.opts.state is not None:
                self._print_state(description)
            else:
                self._print_offsets(description)

    def _should_print(self, group_id: str, state: str, rows: int) -> bool:
        if state == "Dead":
            self.print_error(f"Consumer group '{group_id}' does not exist.")
        elif state == "Empty":
            self.err.write(f"\nConsumer group '{group_id}' has no active members.\n")
        elif state in ("PreparingRebalance", "CompletingRebalance"):
            self.err.write(f"\nWarning: Consumer group '{group_id}' is rebalancing.\n")
        return state != "Dead" and rows > 0

    def partition_rows(self, description: ConsumerGroupDescription) -> list[PartitionRow]:
        """Kafka's collectGroupsOffsets: the members' partitions (members with most partitions
        first), then committed partitions nobody is assigned."""
        group_id = description.group_id
        committed = self.admin.list_consumer_group_offsets(group_id)
        rows: list[PartitionRow] = []
        assigned: set[TopicPartition] = set()
        members = sorted((m for m in description.members if m.assignment),
                         key=lambda m: -len(m.assignment))
        for member in members:
            assigned.update(member.assignment)
            rows += self._rows(group_id, sorted(member.assignment, key=lambda tp: tp[1]),
                               committed, member.consumer_id, member.host, member.client_id)
        unassigned = [tp for tp in committed if tp not in assigned]
        if unassigned:
            rows += self._rows(group_id, sorted(unassigned, key=lambda tp: tp[1]), committed,
                               MISSING, MISSING, MISSING)
        return rows

    def _rows(self, group_id: str, partitions: list[TopicPartition],
              committed: Mapping[TopicPartition, CommittedOffset], consumer_id: str, host: str,
              client_id: str) -> list[PartitionRow]:
        ends = self.admin.list_offsets(dict.fromkeys(partitions, LATEST))
        rows = []
        for tp in partitions:
            end = ends.get(tp)
            offset = committed.get(tp)
            rows.append(PartitionRow(
                group_id, tp[0], tp[1], None if offset is None else offset.offset,
                end[0] if isinstance(end, tuple) else None, consumer_id, host, client_id))
        return rows

    def _print_offsets(self, description: ConsumerGroupDescription) -> None:
        rows = self.partition_rows(description)
        if not self._should_print(description.group_id, description.state, len(rows)):
            return
        widths = [15, 15, 15, 15]
        for row in rows:
            widths = [max(widths[0], len(row.group)), max(widths[1], len(_cell(row.topic))),
                      max(widths[2], len(row.consumer_id)), max(widths[3], len(row.host))]
        g, t, c, h = widths

        def line(*cells: object) -> str:
            v = [_cell(x) for x in cells]
            return (f"\n{v[0]:<{g}} {v[1]:<{t}} {v[2]:<10} {v[3]:<15} {v[4]:<15} {v[5]:<15} "
                    f"{v[6]:<{c}} {v[7]:<{h}} {v[8]}")

        self.out.write(line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                            "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"))
        for row in rows:
            self.out.write(line(row.group, row.topic, row.partition, row.offset,
                                row.log_end_offset, row.lag, row.consumer_id, row.host,
                                row.client_id))
        self.out.write("\n")

    def _print_members(self, description: ConsumerGroupDescription) -> None:
        members = description.members
        if not self._should_print(description.group_id, description.state, len(members)):
            return
        verbose = self.opts.verbose
        group_w = max([15, len(description.group_id)])
        consumer_w = max([15, *(len(m.consumer_id) for m in members)])
        instance_w = max([17, *(len(m.group_instance_id or "") for m in members)])
        host_w = max([15, *(len(m.host) for m in members)])
        client_w = max([15, *(len(m.client_id) for m in members)])
        with_instance = any(m.group_instance_id for m in members)

        def line(group: str, consumer_id: str, instance: str, host: str, client: str,
                 partitions: object) -> str:
            if with_instance:
                return (f"\n{group:<{group_w}} {consumer_id:<{consumer_w}} "
                        f"{instance:<{instance_w}} {host:<{host_w}} {client:<{client_w}} "
                        f"{partitions!s:<15} ")
            return (f"\n{group:<{group_w}} {consumer_id:<{consumer_w}} {host:<{host_w}} "
                    f"{client:<{client_w}} {partitions!s:<15} ")

        self.out.write(line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                            "#PARTITIONS"))
        if verbose:
            self.out.write("ASSIGNMENT")
        for m in members:
            self.out.write(line(description.group_id, m.consumer_id, m.group_instance_id or "",
                                m.host, m.client_id, len(m.assignment)))
            if verbose:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in m.assignment:
                    by_topic.setdefault(topic, []).append(partition)
                text = ", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})"
                                        for t, ps in by_topic.items())) or MISSING
                self.out.write(text)
        self.out.write("\n")

    def _print_state(self, description: ConsumerGroupDescription) -> None:
        if not self._should_print(description.group_id, description.state, 1):
            return
        node = description.coordinator
        coordinator = f"{node.host}:{node.port} ({node.id})"
        width = max(25, len(coordinator))

        def line(*cells: object) -> str:
            v = [str(x) for x in cells]
            return f"\n{v[0]:<{width}} {v[1]:<25} {v[2]:<20} {v[3]:<15} {v[4]}"

        self.out.write(line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            "#MEMBERS"))
        self.out.write(line(description.group_id, coordinator, description.partition_assignor,
                            description.state, len(description.members)))
        self.out.write("\n")

    # -- --reset-offsets -----------------------------------------------------------------------

    def reset_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        if not self.opts.dry_run and not self.opts.execute:
            self.err.write(f"{NO_EXECUTE_WARNING}\n")
        described = self.admin.describe_consumer_groups(self.group_ids())
        result: dict[str, dict[TopicPartition, int]] = {}
        for group_id in sorted(described):
            description = described[group_id]
            if isinstance(description, KafkaError):
                raise description
            if description.state not in ("Empty", "Dead"):
                self.print_error(f"Assignments can only be reset if the group '{group_id}' is "
                                 f"inactive, but the current state is {description.state}.")
                result[group_id] = {}
                continue
            prepared = self._prepare(group_id, self._partitions_to_reset(group_id))
            if self.opts.execute:
                outcome = self.admin.alter_consumer_group_offsets(group_id, prepared)
                failed = [error for error in outcome.values() if error is not None]
                if failed:
                    raise failed[0]
            result[group_id] = prepared
        if not self.opts.export:
            self._print_reset(result)
        else:
            for group_id, offsets in result.items():
                for (topic, partition), offset in sorted(offsets.items()):
                    group_column = f"{group_id}," if self.opts.all_groups or len(result) > 1 \
                        else ""
                    self.out.write(f"{group_column}{topic},{partition},{offset}\n")
        return result

    def _partitions_to_reset(self, group_id: str) -> list[TopicPartition]:
        if self.opts.all_topics:
            return sorted(self.admin.list_consumer_group_offsets(group_id))
        partitions: list[TopicPartition] = []
        whole_topics: list[str] = []
        for arg in self.opts.topic:
            topic, _, numbers = arg.partition(":")
            if numbers:
                partitions += [(topic, int(p)) for p in numbers.split(",") if p.strip()]
            else:
                whole_topics.append(topic)
        if whole_topics:
            described = self.admin.describe_topics(whole_topics)
            for topic in whole_topics:
                description = described.get(topic)
                if description is None or isinstance(description, KafkaError):
                    raise CommandError(f"The partitions of topic {topic} are unknown")
                partitions += [(topic, p.partition) for p in description.partitions]
        return partitions

    def _prepare(self, group_id: str, partitions: list[TopicPartition]
                 ) -> dict[TopicPartition, int]:
        opts = self.opts
        if opts.to_earliest:
            return self._offsets(partitions, EARLIEST)
        if opts.to_latest:
            return self._offsets(partitions, LATEST)
        if opts.to_offset is not None:
            return self._clamped(dict.fromkeys(partitions, opts.to_offset))
        if opts.shift_by is not None or opts.to_current:
            committed = self.admin.list_consumer_group_offsets(group_id, partitions)
            wanted: dict[TopicPartition, int] = {}
            latest: list[TopicPartition] = []
            for tp in partitions:
                current = committed.get(tp)
                if current is None:
                    if opts.to_current:
                        latest.append(tp)  # Kafka: no committed offset -> the log end
                        continue
                    raise CommandError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} "
                                       "since there is no current committed offset")
                wanted[tp] = current.offset + (opts.shift_by or 0)
            result = self._clamped(wanted) if opts.shift_by is not None else wanted
            result.update(self._offsets(latest, LATEST))
            return result
        if opts.to_datetime is not None:
            timestamp = parse_datetime_ms(opts.to_datetime)
        else:
            timestamp = int(time.time() * 1000) - parse_duration_ms(opts.by_duration)
        found = self._lookup(dict.fromkeys(partitions, timestamp))
        missing = [tp for tp, offset in found.items() if offset < 0]
        found.update(self._offsets(missing, LATEST))
        return found

    def _lookup(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        answers = self.admin.list_offsets(specs)
        result = {}
        for tp in specs:
            answer = answers.get(tp)
            if isinstance(answer, KafkaError):
                raise answer
            if answer is None:
                raise CommandError(f"No offset for partition {tp[0]}-{tp[1]}")
            result[tp] = answer[0]
        return result

    def _offsets(self, partitions: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        return self._lookup(dict.fromkeys(partitions, spec))

    def _clamped(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Kafka's checkOffsetsRange: keep each offset within [log start, log end]."""
        earliest = self._offsets(list(wanted), EARLIEST)
        latest = self._offsets(list(wanted), LATEST)
        result = {}
        for tp, offset in wanted.items():
            name = f"{tp[0]}-{tp[1]}"
            if offset > latest[tp]:
                self.err.write(f"New offset ({offset}) is higher than latest offset for topic "
                               f"partition {name}. Value will be set to {latest[tp]}\n")
                offset = latest[tp]
            elif offset < earliest[tp]:
                self.err.write(f"New offset ({offset}) is lower than earliest offset for topic "
                               f"partition {name}. Value will be set to {earliest[tp]}\n")
                offset = earliest[tp]
            result[tp] = offset
        return result

    def _print_reset(self, result: dict[str, dict[TopicPartition, int]]) -> None:
        if result:
            self.out.write(f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} "
                           f"{'NEW-OFFSET':<15}\n")
        for group_id, offsets in result.items():
            for (topic, partition), offset in sorted(offsets.items()):
                self.out.write(f"{group_id:<30} {topic:<30} {partition!s:<10} "
                               f"{offset!s:<15}\n")

    # -- --delete, --delete-offsets --------------------------------------------------------------

    def delete_groups(self) -> None:
        results = self.admin.delete_consumer_groups(self.group_ids())
        succeeded = [g for g, error in results.items() if error is None]
        failed = {g: error for g, error in results.items() if error is not None}
        quoted = ", ".join(f"'{g}'" for g in succeeded)
        if not failed:
            self.out.write(f"Deletion of requested consumer groups ({quoted}) was successful.\n")
            return
        self.print_error("Deletion of some consumer groups failed:")
        for group_id, error in failed.items():
            self.out.write(f"* Group '{group_id}' could not be deleted due to: "
                           f"{_java_name(error)}: {error.message}\n")
        if succeeded:
            self.out.write(f"\nThese consumer groups were deleted successfully: {quoted}\n")

    def delete_offsets(self) -> None:
        group_id = self.opts.group[0]
        partitions = self._partitions_to_reset(group_id)
        error, results = self.admin.delete_consumer_group_offsets(group_id, partitions)
        topics = ", ".join(dict.fromkeys(t.partition(":")[0] for t in self.opts.topic))
        if error is None:
            if any(e is not None for e in results.values()):
                self.print_error("Encounter some partition level error, see the follow-up "
                                 "details:")
            else:
                self.out.write(f"Request succeed for deleting offsets with topic {topics} "
                               f"group {group_id}\n")
        elif isinstance(error, InvalidGroupIdError):
            self.print_error(f"'{group_id}' is not valid.")
        elif isinstance(error, GroupIdNotFoundError):
            self.print_error(f"'{group_id}' does not exist.")
        elif isinstance(error, NonEmptyGroupError):
            self.print_error(f"Deleting offsets of a consumer group '{group_id}' is forbidden "
                             "if the group is not empty.")
        else:
            self.print_error(f"Encounter some unknown error: {error.name}")
        self.out.write(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}\n")
        for (topic, partition), outcome in sorted(results.items(),
                                                  key=lambda item: f"{item[0][0]}{item[0][1]}"):
            status = "Successful" if outcome is None else f"Error: {outcome.message}"
            self.out.write(f"{topic:<30} {partition!s:<15} {status:<15}\n")


def _java_name(error: KafkaError) -> str:
    """The exception name a Kafka tool prints for an error (``GroupNotEmptyException``)."""
    words = error.name.lower().split("_")
    name = "".join(w.capitalize() for w in words)
    special = {"NonEmptyGroup": "GroupNotEmpty", "GroupIdNotFound": "GroupIdNotFound"}
    name = special.get(name, name)
    return f"org.apache.kafka.common.errors.{name}Exception"


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    opts = build_parser().parse_args(argv)
    check_args(opts)
    return opts


def run_command(opts: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    with AdminClient(opts.bootstrap_server, client_id="kafka-consumer-groups",
                     default_api_timeout_ms=max(opts.timeout, 5000) * 6,
                     security=command_security(opts.command_config)) as admin:
        service = ConsumerGroupService(admin, opts, out, err)
        if opts.list:
            service.list_groups()
        elif opts.describe:
            service.describe_groups()
        elif opts.reset_offsets:
            service.reset_offsets()
        elif opts.delete:
            service.delete_groups()
        else:
            service.delete_offsets()


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        message = exc.message if isinstance(exc, KafkaError) else str(exc)
        print_error(out, f"Executing consumer group command failed due to {message}")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out, err), out=out,
                    err=err, failures={(CommandError, KafkaError, ValueError, OSError): report})


if __name__ == "__main__":
    sys.exit(main())
