"""kafka-acls.sh's command line into ACLs (AclCommand's rules), without a cluster: the
--producer / --consumer roles, hosts defaulting to *, operations each resource type allows,
and the refusals Kafka prints with the usage."""

from __future__ import annotations

import io

import pytest

from kafkaclone.common.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from kafkaclone.tools import acl_command
from kafkaclone.tools.acl_command import UsageError, build_parser, filter_to_entries


def parsed(*args: str) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    return filter_to_entries(build_parser().parse_args(["--bootstrap-server", "x:1", *args]))


def allow(principal: str, operation: AclOperation, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, AclPermissionType.ALLOW)


def test_consumer_and_producer_roles() -> None:
    topic = ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.LITERAL)
    group = ResourcePatternFilter(ResourceType.GROUP, "g", PatternType.LITERAL)
    assert parsed("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t",
                  "--group", "g") == {
        topic: [allow("User:a", AclOperation.READ), allow("User:a", AclOperation.DESCRIBE)],
        group: [allow("User:a", AclOperation.READ)]}
    produced = parsed("--add", "--allow-principal", "User:a", "--producer", "--topic", "t",
                      "--idempotent")
    assert [e.operation for e in produced[topic]] == [
        AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
    cluster = ResourcePatternFilter(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    assert produced[cluster] == [allow("User:a", AclOperation.IDEMPOTENT_WRITE)]


def test_principals_hosts_and_operations() -> None:
    (entries,) = parsed("--add", "--allow-principal", "User:a", "--deny-principal", "User:b",
                        "--deny-host", "10.0.0.1", "--operation", "Read", "--operation",
                        "describe", "--topic", "t", "--resource-pattern-type",
                        "prefixed").values()
    assert entries == [
        allow("User:a", AclOperation.READ), allow("User:a", AclOperation.DESCRIBE),
        AccessControlEntry("User:b", "10.0.0.1", AclOperation.READ, AclPermissionType.DENY),
        AccessControlEntry("User:b", "10.0.0.1", AclOperation.DESCRIBE,
                           AclPermissionType.DENY)]
    (entries,) = parsed("--add", "--allow-principal", "User:a", "--cluster").values()
    assert entries == [allow("User:a", AclOperation.ALL)]  # --operation defaults to All


def test_refusals() -> None:
    with pytest.raises(UsageError, match="only supports operations Read,Describe,Delete,All"):
        parsed("--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g")
    with pytest.raises(UsageError, match="you must specify a --topic and a --group"):
        parsed("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t")
    with pytest.raises(UsageError, match="at least one resource"):
        parsed("--add", "--allow-principal", "User:a")
    with pytest.raises(UsageError, match="principalType:principalName"):
        parsed("--add", "--allow-principal", "alice", "--topic", "t")
    err = io.StringIO()
    assert acl_command.main(["--list"], io.StringIO(), err) == 1
    assert "Only one of --authorizer-properties or --bootstrap-server" in err.getvalue()
    err = io.StringIO()
    assert acl_command.main(["--bootstrap-server", "x:1"], io.StringIO(), err) == 1
    assert "exactly one action" in err.getvalue()
