"""kafka-acls: add, remove and list ACLs through the brokers, as Kafka 2.8's AclCommand with
``--bootstrap-server`` (its AdminClientService).

    kafka-acls.sh --bootstrap-server h:p --add --allow-principal User:alice \\
        --operation Read --topic orders --group app
    kafka-acls.sh --bootstrap-server h:p --add --allow-principal User:bob --producer --topic t
    kafka-acls.sh --bootstrap-server h:p --list [--topic t]
    kafka-acls.sh --bootstrap-server h:p --remove --force --topic t

Output is Kafka's: ``Adding ACLs for resource `ResourcePattern(...)`:`` followed by the
entries, then the resulting ``Current ACLs for resource ...``.

``--authorizer-properties zookeeper.connect=h:p`` instead of ``--bootstrap-server`` writes
the ACLs straight into ZooKeeper with the broker's own AclAuthorizer (Kafka's
AuthorizerService), which is how the first ACLs are made when no principal may create
them through a broker yet.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol, TextIO

from kafkaclone.clients.admin import AdminClient
from kafkaclone.common.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafkaclone.common.errors import KafkaError
from kafkaclone.common.security import KafkaPrincipal
from kafkaclone.tools.client_options import ToolParser, client_config, flatten, parse_pairs
from kafkaclone.tools.command import CommandError

NEWLINE = "\n"

VALID_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                         AclOperation.ALL),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.ALL),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE, AclOperation.ALL),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE,
                                    AclOperation.ALL),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE, AclOperation.ALL),
}
"""The operations each resource type supports (AclCommand.ResourceTypeToValidOperations)."""


class AclDeletionResult(Protocol):
    @property
    def error(self) -> KafkaError | None: ...

    @property
    def deleted(self) -> Sequence[tuple[AclBinding, KafkaError | None]]: ...


class AclService(Protocol):
    """Where the command's ACLs go: the AdminClient (--bootstrap-server) or an AclAuthorizer
    on ZooKeeper (--authorizer-properties)."""

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]: ...

    def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> Sequence[AclDeletionResult]: ...


class AuthorizerService:
    """The AclAuthorizer on ``zookeeper.connect``, driven on the tool's reactor loop."""

    def __init__(self, connect: str) -> None:
        from kafkaclone.server.authorizer.acl_authorizer import AclAuthorizer
        from kafkaclone.tools.command import ZkSession

        self._session = ZkSession(connect)
        self._authorizer = AclAuthorizer(self._session.zk, _global_reactor())
        self._session.run(self._authorizer.startup())

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        return self._session.run(self._authorizer.create_acls(bindings))

    def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self._authorizer.acls(binding_filter)

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> Sequence[AclDeletionResult]:
        return self._session.run(self._authorizer.delete_acls(filters))

    def close(self) -> None:
        self._authorizer.shutdown()
        self._session.close()


def _global_reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class UsageError(Exception):
    """A command line AclCommand refuses (printed with the usage, exit status 1)."""


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-acls.sh",
                   description="This tool helps to manage acls on kafka.")
    p.add_argument("--bootstrap-server",
                   help="A list of host/port pairs to use for establishing the connection "
                        "to the Kafka cluster.")
    p.add_argument("--command-config",
                   help="A property file containing configs to be passed to Admin Client.")
    p.add_argument("--authorizer-properties", action="append", nargs="+",
                   help="zookeeper.connect=host:port: change the ACLs in ZooKeeper directly.")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    action.add_argument("--remove", action="store_true",
                        help="Indicates you are trying to remove ACLs.")
    action.add_argument("--list", action="store_true",
                        help="List ACLs for the specified resource, use --topic <topic> or "
                             "--group <group> or --cluster to specify a resource.")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--delegation-token", action="append", default=[])
    p.add_argument("--resource-pattern-type", default="LITERAL",
                   help="The type of the resource pattern or pattern filter: LITERAL, "
                        "PREFIXED, and for --list/--remove also ANY and MATCH.")
    p.add_argument("--operation", action="append", default=[],
                   help="Operation that is being allowed or denied (All, Read, Write, Create, "
                        "Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite). Default: All.")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--principal", action="append", default=[],
                   help="List ACLs for the specified principal (with --list).")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--producer", action="store_true",
                   help="Convenience option to add/remove ACLs for producer role.")
    p.add_argument("--consumer", action="store_true",
                   help="Convenience option to add/remove ACLs for consumer role.")
    p.add_argument("--idempotent", action="store_true",
                   help="Enable idempotence for the producer (with --producer).")
    p.add_argument("--force", action="store_true",
                   help="Assume Yes to all queries and do not prompt.")
    return p


def _pattern_type(text: str) -> PatternType:
    pattern_type = PatternType.from_string(text)
    if pattern_type == PatternType.UNKNOWN:
        raise UsageError(f"Unrecognised --resource-pattern-type: {text}")
    return pattern_type


def _principals(values: Sequence[str]) -> list[str]:
    principals = []
    for value in values:
        try:
            principals.append(str(KafkaPrincipal.parse(value.strip())))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return principals


def _operations(values: Sequence[str]) -> list[AclOperation]:
    operations: list[AclOperation] = []
    for value in values or ["All"]:
        operation = AclOperation.from_string(value.strip())
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise UsageError(f"Unknown operation: {value}")
        operations.append(operation)
    return operations


def resource_filters(opts: argparse.Namespace, *, die_if_none: bool) -> list[ResourcePatternFilter]:
    """The --topic/--group/--cluster/--transactional-id/--delegation-token filters."""
    pattern_type = _pattern_type(opts.resource_pattern_type)
    filters = [ResourcePatternFilter(ResourceType.TOPIC, name, pattern_type)
               for name in opts.topic]
    filters += [ResourcePatternFilter(ResourceType.GROUP, name, pattern_type)
                for name in opts.group]
    if opts.cluster:
        filters.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    filters += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, name, pattern_type)
                for name in opts.transactional_id]
    filters += [ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, name, pattern_type)
                for name in opts.delegation_token]
    if not filters and die_if_none:
        raise UsageError("You must provide at least one resource: --topic <topic> or "
                         "--cluster or --group <group> or --delegation-token "
                         "<Delegation Token ID>")
    return filters


def entries(opts: argparse.Namespace,
            operations: Sequence[AclOperation]) -> list[AccessControlEntry]:
    """The entries the principals, hosts and operations make (AclCommand.getAcls): a host
    list defaults to ``*`` when principals are given."""
    result: list[AccessControlEntry] = []
    for principal_values, host_values, permission in (
            (opts.allow_principal, opts.allow_host, AclPermissionType.ALLOW),
            (opts.deny_principal, opts.deny_host, AclPermissionType.DENY)):
        principals = _principals(principal_values)
        hosts = list(host_values) or ([WILDCARD_HOST] if principals else [])
        result += [AccessControlEntry(principal, host, operation, permission)
                   for principal in principals for host in hosts for operation in operations]
    return list(dict.fromkeys(result))


def filter_to_entries(
        opts: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """What --add / --remove act on, resource by resource: the --producer and --consumer
    roles' operations (AclCommand.getProducerResourceFilterToAcls / ...Consumer...) or the
    --operation list."""
    filters = resource_filters(opts, die_if_none=True)
    result: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}
    if opts.producer or opts.consumer:
        topics = [f for f in filters if f.resource_type == ResourceType.TOPIC]
        if opts.producer:
            if not topics:
                raise UsageError("With --producer you must specify a --topic")
            for f in topics:
                result.setdefault(f, []).extend(entries(opts, (
                    AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)))
            for f in filters:
                if f.resource_type == ResourceType.TRANSACTIONAL_ID:
                    result.setdefault(f, []).extend(
                        entries(opts, (AclOperation.WRITE, AclOperation.DESCRIBE)))
            if opts.idempotent:
                cluster = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME,
                                                PatternType.LITERAL)
                result.setdefault(cluster, []).extend(
                    entries(opts, (AclOperation.IDEMPOTENT_WRITE,)))
        if opts.consumer:
            groups = [f for f in filters if f.resource_type == ResourceType.GROUP]
            if not topics or not groups:
                raise UsageError("With --consumer you must specify a --topic and a --group")
            for f in topics:
                result.setdefault(f, []).extend(
                    entries(opts, (AclOperation.READ, AclOperation.DESCRIBE)))
            for f in groups:
                result.setdefault(f, []).extend(entries(opts, (AclOperation.READ,)))
        return {f: list(dict.fromkeys(acls)) for f, acls in result.items()}
    operations = _operations(opts.operation)
    for f in filters:
        valid = VALID_OPERATIONS.get(f.resource_type, ())
        invalid = [op for op in operations if op not in valid]
        if invalid:
            raise UsageError(f"ResourceType {f.resource_type.pascal_name} only supports "
                             f"operations {','.join(op.pascal_name for op in valid)}")
        result[f] = entries(opts, operations)
    return result


def _print_acls(bindings: Sequence[AclBinding], out: TextIO,
                principal: str | None = None) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        if principal is None or binding.entry.principal == principal:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, acls in by_pattern.items():
        out.write(f"Current ACLs for resource `{pattern}`: {NEWLINE} "
                  f"{NEWLINE.join(chr(9) + str(acl) for acl in acls)} {NEWLINE}\n")


def list_acls(admin: AclService, opts: argparse.Namespace, out: TextIO) -> None:
    filters = resource_filters(opts, die_if_none=False) or [
        ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)]
    bindings: list[AclBinding] = []
    for pattern_filter in filters:
        bindings += admin.describe_acls(
            AclBindingFilter(pattern_filter, AccessControlEntryFilter()))
    principals = _principals(opts.principal)
    if not principals:
        _print_acls(bindings, out)
    for principal in principals:
        out.write(f"ACLs for principal `{principal}`\n")
        _print_acls(bindings, out, principal)


def _confirm(opts: argparse.Namespace, message: str, out: TextIO) -> bool:
    if opts.force:
        return True
    out.write(message + "\n")
    out.flush()
    return sys.stdin.readline().strip().lower() == "y"


def add_acls(admin: AclService, opts: argparse.Namespace, out: TextIO) -> None:
    if _pattern_type(opts.resource_pattern_type) not in (
            PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(f"A '--resource-pattern-type' value of "
                         f"'{opts.resource_pattern_type}' is not valid when "
                         f"adding acls.")
    for pattern_filter, acls in filter_to_entries(opts).items():
        if not acls:
            raise UsageError("You must specify one of: --allow-principal, --deny-principal "
                             "when trying to add ACLs.")
        assert pattern_filter.name is not None
        pattern = ResourcePattern(pattern_filter.resource_type, pattern_filter.name,
                                  pattern_filter.pattern_type)
        out.write(f"Adding ACLs for resource `{pattern}`: {NEWLINE} "
                  f"{NEWLINE.join(chr(9) + str(acl) for acl in acls)} {NEWLINE}\n")
        for error in admin.create_acls([AclBinding(pattern, acl) for acl in acls]):
            if error is not None:
                raise error
    list_acls(admin, opts, out)


def remove_acls(admin: AclService, opts: argparse.Namespace, out: TextIO) -> None:
    for pattern_filter, acls in filter_to_entries(opts).items():
        if not acls:
            question = (f"Are you sure you want to delete all ACLs for resource filter "
                        f"`{pattern_filter}`? (y/n)")
            filters = [AclBindingFilter(pattern_filter, AccessControlEntryFilter())]
        else:
            question = (f"Are you sure you want to remove ACLs: {NEWLINE} "
                        f"{NEWLINE.join(chr(9) + str(acl) for acl in acls)} {NEWLINE} from "
                        f"resource filter `{pattern_filter}`? (y/n)")
            filters = [AclBindingFilter(pattern_filter, AccessControlEntryFilter(
                acl.principal, acl.host, acl.operation, acl.permission_type)) for acl in acls]
        if not _confirm(opts, question, out):
            continue
        for deletion in admin.delete_acls(filters):
            if deletion.error is not None:
                raise deletion.error
            for _, error in deletion.deleted:
                if error is not None:
                    raise error
    list_acls(admin, opts, out)


def _run(service: AclService, opts: argparse.Namespace, out: TextIO) -> None:
    if opts.add:
        add_acls(service, opts, out)
    elif opts.remove:
        remove_acls(service, opts, out)
    else:
        list_acls(service, opts, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    opts = parser.parse_args(argv)
    try:
        if bool(opts.authorizer_properties) == bool(opts.bootstrap_server):
            raise UsageError("Only one of --authorizer-properties or --bootstrap-server "
                             "must be specified")
        if not (opts.add or opts.remove or opts.list):
            raise UsageError("Command must include exactly one action: --list, --add, "
                             "--remove.")
        if (opts.producer or opts.consumer) and not (opts.add or opts.remove):
            raise UsageError("Option --producer/--consumer is only valid with --add or "
                             "--remove")
        if opts.bootstrap_server:
            conf = client_config(opts.command_config, None, what="property")
            with AdminClient(opts.bootstrap_server,
                             client_id=str(conf.get("client.id", "adminclient"))) as admin:
                _run(admin, opts, out)
        else:
            props = parse_pairs(flatten(opts.authorizer_properties), "authorizer property")
            connect = props.get("zookeeper.connect")
            if not connect:
                raise UsageError("--authorizer-properties needs zookeeper.connect=host:port")
            service = AuthorizerService(connect)
            try:
                _run(service, opts, out)
            finally:
                service.close()
    except UsageError as exc:
        err.write(f"{exc}\n")
        parser.print_usage(err)
        return 1
    except (OSError, ValueError) as exc:
        err.write(f"Error: {exc}\n")
        return 1
    except (KafkaError, CommandError) as exc:
        err.write(f"Error while executing ACL command: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
