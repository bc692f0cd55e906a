"""Authorization end to end on broker processes, with clients nobody here wrote
(confluent-kafka) and kafka-acls.sh.

PLAINTEXT connections are all ``User:ANONYMOUS`` (brokers included), so:

- the deny-by-default broker (``allow.everyone.if.no.acl.found=false``, no super user) is
  bootstrapped as a Kafka operator would: ClusterAction on the cluster for User:ANONYMOUS,
  written straight into ZooKeeper with ``kafka-acls.sh --authorizer-properties`` before the
  broker starts; then topic ACLs decide what an anonymous client may do;
- the three-broker cluster lists User:ANONYMOUS in ``super.users`` (what Kafka requires
  with a PLAINTEXT inter-broker listener), so its clients may do everything, and ACLs added
  through one broker are checked on the others.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AclBinding as CkAclBinding
from confluent_kafka.admin import AclBindingFilter as CkAclBindingFilter
from confluent_kafka.admin import AclOperation as CkAclOperation
from confluent_kafka.admin import AclPermissionType as CkAclPermissionType
from confluent_kafka.admin import AdminClient as CkAdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from confluent_kafka.admin import ResourcePatternType as CkResourcePatternType
from confluent_kafka.admin import ResourceType as CkResourceType

from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import TopicAuthorizationFailedError
from kafkaclone.testing.cluster import LocalCluster

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30


def kafka_acls(*args: str) -> str:
    done = subprocess.run([str(SCRIPTS / "kafka-acls.sh"), *args], capture_output=True,
                          text=True, timeout=60, cwd="/", env=os.environ.copy(), check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def eventually(condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, count: int = 5) -> list[Any]:
    """The delivery errors (None for each delivered message)."""
    outcomes: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000,
                         "retries": 0, "enable.idempotence": False})
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode(),
                         on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(20)
    return outcomes


def codes(outcomes: list[Any]) -> set[int | None]:
    return {None if error is None else error.code() for error in outcomes}


def consume(bootstrap: str, topic: str, group: str, expected: int,
            timeout: float = 20.0) -> tuple[list[bytes], list[int]]:
    """(values consumed, error codes seen)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error().code())
            else:
                values.append(msg.value())
    finally:
        consumer.close()
    return values, errors


@pytest.fixture(scope="module")
def deny_by_default() -> Iterator[LocalCluster]:
    cluster = LocalCluster(1, overrides={"authorizer.class.name": ACL_AUTHORIZER,
                                         "allow.everyone.if.no.acl.found": "false",
                                         "auto.create.topics.enable": "false"})
    try:
        cluster.base_dir.mkdir(parents=True, exist_ok=True)
        cluster.zookeeper.start()
        kafka_acls("--authorizer-properties", f"zookeeper.connect={cluster.zookeeper_connect}",
                   "--add", "--allow-principal", "User:ANONYMOUS", "--operation",
                   "ClusterAction", "--cluster")
        kafka_acls("--authorizer-properties", f"zookeeper.connect={cluster.zookeeper_connect}",
                   "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Create",
                   "--topic", "secured")
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def test_anonymous_client_gets_only_what_acls_allow(deny_by_default: LocalCluster) -> None:
    cluster = deny_by_default
    bootstrap = cluster.bootstrap_servers
    zk_option = f"zookeeper.connect={cluster.zookeeper_connect}"
    with AdminClient(bootstrap) as admin:
        assert admin.create_topics([NewTopic("secured", 1, 1)]) == {"secured": None}
        ck_admin = CkAdminClient({"bootstrap.servers": bootstrap})
        with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
            ck_admin.create_topics([CkNewTopic("not-allowed", 1, 1)])["not-allowed"].result(20)

        # No ACL on the topic: nothing goes in, nothing comes out.
        assert codes(produce(bootstrap, "secured")) == {TOPIC_AUTHORIZATION_FAILED}
        values, errors = consume(bootstrap, "secured", "readers", 1)
        assert values == [] and set(errors) <= {TOPIC_AUTHORIZATION_FAILED,
                                                GROUP_AUTHORIZATION_FAILED} and errors

        # Write for a while (kafka-acls.sh --producer), then taken away again.
        out = kafka_acls("--authorizer-properties", zk_option, "--add", "--allow-principal",
                         "User:ANONYMOUS", "--producer", "--topic", "secured")
        assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=secured, "
                "patternType=LITERAL)`: \n \t(principal=User:ANONYMOUS, host=*, "
                "operation=WRITE, permissionType=ALLOW)") in out
        eventually(lambda: produce(bootstrap, "secured", 1) == [None])
        assert produce(bootstrap, "secured", 4) == [None] * 4
        kafka_acls("--authorizer-properties", zk_option, "--remove", "--force",
                   "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
                   "--topic", "secured")
        eventually(lambda: produce(bootstrap, "secured", 1)[0] is not None)

        # Only Read on the topic and its group (--consumer): reads, cannot write or delete.
        kafka_acls("--authorizer-properties", zk_option, "--add", "--allow-principal",
                   "User:ANONYMOUS", "--consumer", "--topic", "secured", "--group", "readers")
        time.sleep(1)
        values, errors = consume(bootstrap, "secured", "readers", 5)
        # The first successful probe wrote one m0, then m0..m3.
        assert (values, errors) == ([b"m0", b"m0", b"m1", b"m2", b"m3"], [])
        assert codes(produce(bootstrap, "secured", 2)) == {TOPIC_AUTHORIZATION_FAILED}
        (error,) = admin.delete_topics(["secured"]).values()
        assert isinstance(error, TopicAuthorizationFailedError)
        (outcome,) = admin.delete_records({("secured", 0): -1}).values()
        assert isinstance(outcome, TopicAuthorizationFailedError)
        assert "secured" in admin.list_topics()


@pytest.fixture(scope="module")
def three_brokers() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"authorizer.class.name": ACL_AUTHORIZER,
                                    "super.users": "User:ANONYMOUS",
                                    "allow.everyone.if.no.acl.found": "false"}) as cluster:
        yield cluster


def acls_seen_by(cluster: LocalCluster, broker_id: int) -> set[tuple[str, str, str]]:
    with AdminClient(cluster.broker(broker_id).bootstrap_server) as admin:
        return {(b.pattern.name, b.entry.principal, b.entry.operation.name)
                for b in admin.describe_acls()}


def test_acls_added_through_one_broker_apply_on_all(three_brokers: LocalCluster) -> None:
    cluster = three_brokers
    out = kafka_acls("--bootstrap-server", cluster.broker(1).bootstrap_server, "--add",
                     "--allow-principal", "User:alice", "--operation", "Read",
                     "--topic", "orders")
    assert out.startswith(
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=READ, "
        "permissionType=ALLOW) \n\n")
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " \
           "patternType=LITERAL)`:" in out
    for broker_id in (1, 2, 3):
        eventually(lambda b=broker_id: acls_seen_by(cluster, b) == {
            ("orders", "User:alice", "READ")}, timeout=10)

    listed = kafka_acls("--bootstrap-server", cluster.broker(3).bootstrap_server, "--list",
                        "--topic", "orders")
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed

    # The super user (every PLAINTEXT client here) does anything, ACLs or not.
    with AdminClient(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic("orders", 1, 3)]) == {"orders": None}
        eventually(lambda: produce(cluster.bootstrap_servers, "orders", 1) == [None])
        values, errors = consume(cluster.bootstrap_servers, "orders", "g", 1)
        assert (values, errors) == ([b"m0"], [])
        assert admin.delete_topics(["orders"]) == {"orders": None}

    kafka_acls("--bootstrap-server", cluster.broker(2).bootstrap_server, "--remove",
               "--force", "--topic", "orders")
    for broker_id in (1, 2, 3):
        eventually(lambda b=broker_id: acls_seen_by(cluster, b) == set(), timeout=10)


def test_confluent_admin_client_acls(three_brokers: LocalCluster) -> None:
    admin = CkAdminClient({"bootstrap.servers": three_brokers.bootstrap_servers})
    binding = CkAclBinding(CkResourceType.GROUP, "app-", CkResourcePatternType.PREFIXED,
                           "User:bob", "*", CkAclOperation.READ, CkAclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(20)
    groups = CkAclBindingFilter(CkResourceType.GROUP, None, CkResourcePatternType.ANY,
                                None, None, CkAclOperation.ANY, CkAclPermissionType.ANY)
    assert admin.describe_acls(groups).result(20) == [binding]
    (deleted,) = admin.delete_acls([groups]).values()
    assert deleted.result(20) == [binding]
    assert admin.describe_acls(groups).result(20) == []
    # Another broker learns of the deletion from its change notification a moment later.
    with AdminClient(three_brokers.bootstrap_servers) as ours:
        eventually(lambda: all(b.pattern.resource_type != ResourceType.GROUP
                               or b.entry.operation != AclOperation.READ
                               for b in ours.describe_acls()))
