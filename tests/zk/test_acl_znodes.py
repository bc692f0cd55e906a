"""The ACL znodes (Kafka's ZkAclStore / ZkAclChangeStore): paths, Kafka's exact bytes, the
schemas in zk_schema/, and payloads as Kafka brokers of other versions wrote them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from kafkaclone.common.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.znodes import (
    ACL_ZK_PATHS,
    AclChangeNotificationSequenceZNode,
    ExtendedAclChangeNotificationSequenceZNode,
    ResourceZNode,
    payload_instance,
)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "zk_schema"


def valid(znode: type, data: bytes) -> None:
    schema = json.loads((SCHEMA_DIR / f"{znode.SCHEMA}.schema.json").read_text())  # type: ignore[attr-defined]
    Draft202012Validator(schema).validate(payload_instance(znode, data))


def test_paths() -> None:
    assert ResourceZNode.path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")) \
        == "/kafka-acl/TransactionalId/tx"
    assert ResourceZNode.path(ResourcePattern(ResourceType.TOPIC, "logs-", PatternType.PREFIXED)) \
        == "/kafka-acl-extended/prefixed/Topic/logs-"
    assert "/kafka-acl/DelegationToken" in ACL_ZK_PATHS
    assert "/kafka-acl-extended/prefixed/Cluster" in ACL_ZK_PATHS
    assert {"/kafka-acl-changes", "/kafka-acl-extended-changes"} <= set(ACL_ZK_PATHS)
    with pytest.raises(ValueError):
        ResourceZNode.path(ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH))


def test_resource_acls_round_trip() -> None:
    entries = {AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
               AccessControlEntry("User:*", "10.0.0.1", AclOperation.CLUSTER_ACTION,
                                  AclPermissionType.DENY)}
    data = ResourceZNode.encode(entries)
    valid(ResourceZNode, data)
    assert b'"operation":"ClusterAction"' in data and b'"permissionType":"Deny"' in data
    assert ResourceZNode.decode(data) == entries
    # Another key order, as any JSON writer may produce; an empty znode is no ACLs.
    kafka = (b'{"acls":[{"host":"*","operation":"DescribeConfigs","principal":"User:bob",'
             b'"permissionType":"Allow"}],"version":1}')
    assert ResourceZNode.decode(kafka) == {AccessControlEntry(
        "User:bob", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)}
    assert ResourceZNode.decode(b"") == set()
    with pytest.raises(ZNodeDecodeError):
        ResourceZNode.decode(b'{"version":1,"acls":[{"principal":"User:a","host":"*",'
                             b'"operation":"Fly","permissionType":"Allow"}]}')


def test_change_notifications() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx:1")
    data = AclChangeNotificationSequenceZNode.encode(literal)
    assert data == b"TRANSACTIONAL_ID:tx:1"
    valid(AclChangeNotificationSequenceZNode, data)
    assert AclChangeNotificationSequenceZNode.decode(data) == literal
    # Kafka 2.0-2.3 wrote the PascalCase name.
    assert AclChangeNotificationSequenceZNode.decode(b"Topic:orders") \
        == ResourcePattern(ResourceType.TOPIC, "orders")
    prefixed = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
    data = ExtendedAclChangeNotificationSequenceZNode.encode(prefixed)
    assert data == b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}'
    valid(ExtendedAclChangeNotificationSequenceZNode, data)
    assert ExtendedAclChangeNotificationSequenceZNode.decode(data) == prefixed
    with pytest.raises(ValueError):
        AclChangeNotificationSequenceZNode.encode(prefixed)
    with pytest.raises(ValueError):
        ExtendedAclChangeNotificationSequenceZNode.encode(literal)
