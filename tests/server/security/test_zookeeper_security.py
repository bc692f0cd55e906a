"""ZooKeeper security: brokers authenticate to a SASL ZooKeeper with DIGEST-MD5 from the JAAS
file KAFKA_OPTS names, create every znode with Kafka's secure ACLs (zookeeper.set.acl), and
an unauthenticated ZooKeeper client can then neither change /brokers nor read
/config/users. A misconfiguration refuses the broker at start with one line."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.security.listeners import SecurityConfigError
from kafkaclone.server.security.zookeeper import resolve_zookeeper_security
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.tools import configs_command
from kafkaclone.tools.zookeeper_install import DEFAULT_JVM_FLAGS
from kafkaclone.zk.zookeeper_client import ZkSaslCredentials

SERVER_JAAS = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_kafka="kafka-secret";
};
"""
CLIENT_JAAS = """
// the broker's side
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka-secret";
};
"""
ZK_CONFIG = {"zookeeper.connect": "127.0.0.1:2181"}


def kafka_opts(path: Path) -> dict[str, str]:
    return {"KAFKA_OPTS": f"-Xmx512m -Djava.security.auth.login.config={path}"}


@pytest.mark.timeout(30)
def test_credentials_come_from_the_client_section(tmp_path: Path) -> None:
    jaas = tmp_path / "kafka_jaas.conf"
    jaas.write_text(SERVER_JAAS + CLIENT_JAAS)
    security = resolve_zookeeper_security(
        KafkaConfig({**ZK_CONFIG, "zookeeper.set.acl": "true"}), kafka_opts(jaas))
    assert security.sasl == ZkSaslCredentials("kafka", "kafka-secret")
    assert security.secure_acls
    assert "kafka-secret" not in repr(security)
    # Without the property: no SASL, and no ACLs asked for is fine.
    assert resolve_zookeeper_security(KafkaConfig(ZK_CONFIG), {}).sasl is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("jaas_text", "set_acl", "reason"), [
    (None, "true", "zookeeper.set.acl is true, but the verification of the JAAS login file"),
    ("", "false", "cannot be read"),
    (SERVER_JAAS, "true", "has no 'Client' section"),
    ("Client { com.example.Krb5LoginModule required; };", "false", "must hold one"),
    ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required; };", "true",
     "has no username and password"),
])
def test_misconfigurations_refuse_to_start(tmp_path: Path, jaas_text: str | None,
                                           set_acl: str, reason: str) -> None:
    environ = {}
    if jaas_text is not None:
        jaas = tmp_path / "jaas.conf"
        if jaas_text:
            jaas.write_text(jaas_text)
        environ = kafka_opts(jaas)  # "": the file is missing
    with pytest.raises(SecurityConfigError) as caught:
        resolve_zookeeper_security(KafkaConfig({**ZK_CONFIG, "zookeeper.set.acl": set_acl}),
                                   environ)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.fixture
def secured_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    server_jaas = tmp_path / "zookeeper_jaas.conf"
    server_jaas.write_text(SERVER_JAAS)
    client_jaas = tmp_path / "kafka_jaas.conf"
    client_jaas.write_text(CLIENT_JAAS)
    monkeypatch.setenv("KAFKA_OPTS", kafka_opts(client_jaas)["KAFKA_OPTS"])
    cluster = LocalCluster(1, base_dir=tmp_path / "cluster",
                           overrides={"zookeeper.set.acl": "true"})
    cluster.zookeeper = ZooKeeperServer(
        data_dir=tmp_path / "cluster" / "zookeeper",
        jvm_flags=(*DEFAULT_JVM_FLAGS, f"-Djava.security.auth.login.config={server_jaas}"),
        extra_config={"authProvider.1":
                      "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"})
    with cluster:  # starts ZooKeeper and the broker, stops both (by PID) on the way out
        yield cluster


def kazoo(cluster: LocalCluster, *, authenticated: bool) -> KazooClient:
    options = {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "kafka",
                                "password": "kafka-secret"}} if authenticated else {}
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10, **options)
    client.start(timeout=30)
    return client


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_brokers_authenticate_and_secure_their_znodes(secured_cluster: LocalCluster) -> None:
    assert secured_cluster.registered_broker_ids() == [1]
    broker_zk = kazoo(secured_cluster, authenticated=True)
    anonymous = kazoo(secured_cluster, authenticated=False)
    try:
        acls, _ = broker_zk.get_acls("/brokers/ids/1")
        by_id = {(acl.id.scheme, acl.id.id): acl.perms for acl in acls}
        assert by_id == {("sasl", "kafka"): Permissions.ALL,
                         ("world", "anyone"): Permissions.READ}
        acls, _ = broker_zk.get_acls("/config/users")
        assert [(acl.id.scheme, acl.id.id, acl.perms) for acl in acls] == [
            ("sasl", "kafka", Permissions.ALL)]
        acls, _ = broker_zk.get_acls("/consumers")
        assert [(acl.id.scheme, acl.id.id) for acl in acls] == [("world", "anyone")]

        # Anyone may read the cluster's layout, nobody else may change it.
        assert anonymous.get_children("/brokers/ids") == ["1"]
        with pytest.raises(NoAuthError):
            anonymous.set("/brokers/ids/1", b"{}")
        with pytest.raises(NoAuthError):
            anonymous.create("/brokers/ids/2", b"{}")
        with pytest.raises(NoAuthError):
            anonymous.delete("/brokers/ids/1")
        with pytest.raises(NoAuthError):
            anonymous.set("/brokers/topics", b"x")
        with pytest.raises(NoAuthError):
            anonymous.get_children("/config/users")
        # The brokers' principal can; kafka-configs.sh --zookeeper authenticates from the
        # same KAFKA_OPTS and writes the user's credentials creator-only, as Kafka's.
        assert broker_zk.get_children("/config/users") == []
        out, err = io.StringIO(), io.StringIO()
        assert configs_command.main(
            ["--zookeeper", secured_cluster.zookeeper_connect, "--alter", "--entity-type",
             "users", "--entity-name", "alice", "--add-config", "SCRAM-SHA-256=[password=a]"],
            out=out, err=err) == 0, err.getvalue()
        acls, _ = broker_zk.get_acls("/config/users/alice")
        assert [(acl.id.scheme, acl.id.id) for acl in acls] == [("sasl", "kafka")]
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/alice")
    finally:
        for client in (broker_zk, anonymous):
            client.stop()
            client.close()
