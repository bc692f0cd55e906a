"""The AclAuthorizer against a real ZooKeeper: Kafka's matching rules (super users,
allow.everyone.if.no.acl.found, literal / wildcard / prefixed patterns, principals and hosts,
DENY over ALLOW, implied operations), its znodes and change notifications byte for byte, and
a second authorizer (another broker) following the first's changes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.common.acl import (
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
from kafkaclone.common.errors import InvalidRequestError
from kafkaclone.common.security import ANONYMOUS, KafkaPrincipal
from kafkaclone.server.authorizer.acl_authorizer import (
    AclAuthorizer,
    acls_allow,
    parse_super_users,
)
from kafkaclone.server.config import ConfigError, KafkaConfig
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.zk.client import KafkaZkClient

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC = ResourceType.TOPIC

AuthorizerFactory = Callable[..., AclAuthorizer]


@pytest.fixture
def make_authorizer(make_client: Callable[..., KafkaZkClient]) -> Iterator[AuthorizerFactory]:
    started: list[AclAuthorizer] = []

    def make(**kwargs: object) -> AclAuthorizer:
        authorizer = AclAuthorizer(make_client(), reactor, **kwargs)  # type: ignore[arg-type]
        run(authorizer.startup())
        started.append(authorizer)
        return authorizer

    yield make
    for authorizer in started:
        authorizer.shutdown()


def binding(name: str, principal: str = "User:alice", operation: AclOperation = READ,
            permission: AclPermissionType = ALLOW, host: str = "*",
            pattern_type: PatternType = PatternType.LITERAL,
            resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def add(authorizer: AclAuthorizer, *bindings: AclBinding) -> None:
    assert run(authorizer.create_acls(list(bindings))) == [None] * len(bindings)


def test_rules_of_acls_allow() -> None:
    read = AccessControlEntry("User:alice", "*", READ, ALLOW)
    assert acls_allow([read], "User:alice", "1.2.3.4", READ, False)
    assert acls_allow([read], "User:alice", "1.2.3.4", DESCRIBE, False)  # implied
    assert not acls_allow([read], "User:alice", "1.2.3.4", WRITE, False)
    assert not acls_allow([read], "User:bob", "1.2.3.4", READ, True)  # ACLs exist: no default
    assert acls_allow([], "User:bob", "1.2.3.4", READ, True)
    assert not acls_allow([], "User:bob", "1.2.3.4", READ, False)
    alter_configs = AccessControlEntry("User:alice", "*", AclOperation.ALTER_CONFIGS, ALLOW)
    assert acls_allow([alter_configs], "User:alice", "h", AclOperation.DESCRIBE_CONFIGS, False)
    describe = AccessControlEntry("User:alice", "*", DESCRIBE, ALLOW)
    assert not acls_allow([describe], "User:alice", "h", READ, False)  # not the other way
    everything = AccessControlEntry("User:*", "*", AclOperation.ALL, ALLOW)
    deny_host = AccessControlEntry("User:alice", "10.0.0.9", READ, DENY)
    assert acls_allow([everything, deny_host], "User:alice", "10.0.0.1", READ, False)
    assert not acls_allow([everything, deny_host], "User:alice", "10.0.0.9", READ, False)
    assert acls_allow([everything, deny_host], "User:alice", "10.0.0.9", WRITE, False)
    only_host = AccessControlEntry("User:alice", "10.0.0.1", READ, ALLOW)
    assert not acls_allow([only_host], "User:alice", "10.0.0.2", READ, False)


def test_super_users() -> None:
    assert parse_super_users("User:admin; User:ANONYMOUS;") == {"User:admin", "User:ANONYMOUS"}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_matching_literal_wildcard_and_prefixed(make_authorizer: AuthorizerFactory) -> None:
    authorizer = make_authorizer(super_users=frozenset({"User:admin"}))
    assert not authorizer.authorize(ALICE, "127.0.0.1", READ, TOPIC, "orders")
    assert authorizer.authorize(KafkaPrincipal("User", "admin"), "127.0.0.1",
                                AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    add(authorizer, binding("orders"), binding("*", "User:bob", WRITE),
        binding("pay-", "User:alice", WRITE, pattern_type=PatternType.PREFIXED))
    assert authorizer.authorize(ALICE, "127.0.0.1", READ, TOPIC, "orders")
    assert authorizer.authorize(ALICE, "127.0.0.1", DESCRIBE, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "127.0.0.1", WRITE, TOPIC, "orders")
    assert authorizer.authorize(BOB, "127.0.0.1", WRITE, TOPIC, "anything")
    assert authorizer.authorize(ALICE, "127.0.0.1", WRITE, TOPIC, "pay-eu")
    assert not authorizer.authorize(ALICE, "127.0.0.1", WRITE, TOPIC, "pa")
    assert not authorizer.authorize(ALICE, "127.0.0.1", READ, ResourceType.GROUP, "orders")
    # DENY on the prefix wins over the literal ALLOW.
    add(authorizer, binding("ord", "User:*", READ, DENY, pattern_type=PatternType.PREFIXED))
    assert not authorizer.authorize(ALICE, "127.0.0.1", READ, TOPIC, "orders")
    assert not authorizer.authorize(ANONYMOUS, "127.0.0.1", READ, TOPIC, "orders")


def test_znodes_and_notifications_are_kafkas(make_authorizer: AuthorizerFactory,
                                            zk: KazooClient) -> None:
    authorizer = make_authorizer()
    for path in ("/kafka-acl/Topic", "/kafka-acl/TransactionalId",
                 "/kafka-acl-extended/prefixed/Group", "/kafka-acl-changes",
                 "/kafka-acl-extended-changes"):
        assert zk.exists(path), path
    add(authorizer, binding("orders"),
        binding("app-", operation=READ, resource_type=ResourceType.GROUP,
                pattern_type=PatternType.PREFIXED))
    data, _ = zk.get("/kafka-acl/Topic/orders")
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                    b'"operation":"Read","host":"*"}]}')
    data, _ = zk.get("/kafka-acl-extended/prefixed/Group/app-")
    assert json.loads(data)["acls"][0]["operation"] == "Read"
    literal_changes = zk.get_children("/kafka-acl-changes")
    assert [c[:len("acl_changes_")] for c in literal_changes] == ["acl_changes_"]
    assert zk.get(f"/kafka-acl-changes/{literal_changes[0]}")[0] == b"TOPIC:orders"
    (extended,) = zk.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}


def test_another_broker_follows_changes(make_authorizer: AuthorizerFactory,
                                        zk: KazooClient) -> None:
    first = make_authorizer()
    add(first, binding("before"))
    second = make_authorizer()  # loads what exists at start
    assert second.authorize(ALICE, "h", READ, TOPIC, "before")
    add(first, binding("after", "User:bob", WRITE))
    run_until(lambda: second.authorize(BOB, "h", WRITE, TOPIC, "after"), timeout=10)
    # A write from the second, whose cache of "after" is current, keeps the first's ACL.
    add(second, binding("after", "User:alice", READ))
    run_until(lambda: first.authorize(ALICE, "h", READ, TOPIC, "after"), timeout=10)
    assert first.authorize(BOB, "h", WRITE, TOPIC, "after")
    assert len(json.loads(zk.get("/kafka-acl/Topic/after")[0])["acls"]) == 2


def test_stale_cache_write_is_retried_not_lost(make_authorizer: AuthorizerFactory,
                                               zk: KazooClient) -> None:
    first = make_authorizer()
    second = make_authorizer()
    add(first, binding("t"))
    second.shutdown()  # second no longer follows: its cache of "t" stays empty ...
    add(first, binding("t", "User:carol"))
    add(second, binding("t", "User:bob"))  # ... its conditional write fails once, re-reads
    principals = {acl["principal"] for acl in json.loads(zk.get("/kafka-acl/Topic/t")[0])["acls"]}
    assert principals == {"User:alice", "User:bob", "User:carol"}


def test_describe_and_delete(make_authorizer: AuthorizerFactory, zk: KazooClient) -> None:
    authorizer = make_authorizer()
    add(authorizer, binding("a"), binding("a", "User:bob", WRITE), binding("b"),
        binding("a", resource_type=ResourceType.GROUP))
    topics = AclBindingFilter(ResourcePatternFilter(TOPIC), AccessControlEntryFilter())
    assert {b.pattern.name for b in authorizer.acls(topics)} == {"a", "b"}
    alice = AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter("User:alice"))
    results = run(authorizer.delete_acls([alice, topics]))
    assert sorted((b.pattern.resource_type, b.pattern.name) for b, _ in results[0].deleted) \
        == [(TOPIC, "a"), (TOPIC, "b"), (ResourceType.GROUP, "a")]
    assert [b.entry.principal for b, _ in results[1].deleted] == ["User:bob"]
    assert all(error is None for r in results for _, error in r.deleted)
    assert not zk.exists("/kafka-acl/Topic/a") and not zk.exists("/kafka-acl/Topic/b")
    assert authorizer.acls(topics) == []


def test_unknown_elements_are_invalid(make_authorizer: AuthorizerFactory) -> None:
    authorizer = make_authorizer()
    (error,) = run(authorizer.create_acls([binding("t", operation=AclOperation.ANY)]))
    assert isinstance(error, InvalidRequestError)


def test_authorize_by_resource_type(make_authorizer: AuthorizerFactory) -> None:
    authorizer = make_authorizer()
    assert not authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)
    add(authorizer, binding("logs-", "User:alice", WRITE, pattern_type=PatternType.PREFIXED))
    assert authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)
    assert not authorizer.authorize_by_resource_type(BOB, "h", WRITE, TOPIC)
    add(authorizer, binding("logs", "User:alice", WRITE, DENY,
                            pattern_type=PatternType.PREFIXED))
    assert not authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)


def test_an_authorizer_kafkaclone_lacks_refuses_the_config() -> None:
    with pytest.raises(ConfigError, match=r"kafkaclone cannot load com\.acme\.Authorizer"):
        KafkaConfig({"zookeeper.connect": "127.0.0.1:2181",
                     "authorizer.class.name": "com.acme.Authorizer"})
    for name in ("kafka.security.authorizer.AclAuthorizer",
                 "kafka.security.auth.SimpleAclAuthorizer", ""):
        config = KafkaConfig({"zookeeper.connect": "127.0.0.1:2181",
                              "authorizer.class.name": name})
        assert config.authorizer_class_name == name
        assert not config.allow_everyone_if_no_acl_found


def test_super_users_must_be_principals() -> None:
    with pytest.raises(ConfigError, match=r"not admin"):
        KafkaConfig({"zookeeper.connect": "127.0.0.1:2181",
                     "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                     "super.users": "User:root;admin"})
    config = KafkaConfig({"zookeeper.connect": "127.0.0.1:2181",
                          "super.users": "User:root; User:ANONYMOUS"})
    assert parse_super_users(config.super_users) == {"User:root", "User:ANONYMOUS"}
