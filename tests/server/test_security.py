"""Authentication on a broker's listeners, with clients nobody here wrote: confluent-kafka
and kcat over SASL_SSL/SCRAM-SHA-512, SASL_PLAINTEXT/PLAIN and SSL with client
certificates; kafka-python over SASL_PLAINTEXT/SCRAM-SHA-256; a wrong password or an
unknown user gets SASL_AUTHENTICATION_FAILED and nothing else; an SSL client without a
certificate is refused when ``ssl.client.auth=required``.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from kafkaclone.testing.certificates import Pki, make_test_pki
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')


def security_overrides(pki: Pki) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required",
    }


def add_scram_user(cluster: LocalCluster, user: str, password: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkaclone.tools.configs_command", "--zookeeper",
         cluster.zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name", user,
         "--add-config",
         f"SCRAM-SHA-256=[iterations=8192,password={password}],"
         f"SCRAM-SHA-512=[password={password}]"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"Completed updating config for entity: user-principal '{user}'." in done.stdout


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides=security_overrides(pki),
                      extra_listeners=["SASL_SSL", "SASL_PLAINTEXT", "SSL"]) as local:
        add_scram_user(local, "alice", "alice-secret")
        time.sleep(1.0)  # the change notification reaches the broker
        yield local


def sasl_ssl_scram(pki: Pki, password: str = "alice-secret",
                   user: str = "alice") -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(pki.ca)}


def client_configs(pki: Pki) -> dict[str, dict[str, str]]:
    return {
        "SASL_SSL": sasl_ssl_scram(pki),
        "SASL_PLAINTEXT": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.username": "alice", "sasl.password": "alice-secret"},
        "SSL": {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                "ssl.certificate.location": str(pki.client_certificate),
                "ssl.key.location": str(pki.client_key)},
    }


def produce_and_consume(bootstrap: str, conf: dict[str, str], topic: str,
                        count: int = 20) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **conf})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
def test_confluent_kafka_round_trip(cluster: LocalCluster, pki: Pki,
                                    listener: str) -> None:
    topic = f"ck-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    values = produce_and_consume(cluster.bootstrap_servers_for(listener),
                                 client_configs(pki)[listener], topic)
    assert values == [f"value-{i}".encode() for i in range(20)]


def _kcat_args(conf: dict[str, str]) -> list[str]:
    args: list[str] = []
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    return args


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
def test_kcat_round_trip(cluster: LocalCluster, pki: Pki, listener: str) -> None:
    topic = f"kcat-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    common = ["kcat", "-b", cluster.bootstrap_servers_for(listener),
              *_kcat_args(client_configs(pki)[listener]), "-t", topic]
    produced = subprocess.run([*common, "-P", "-X", "acks=all"], input="one\ntwo\nthree\n",
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([*common, "-C", "-o", "beginning", "-e", "-c", "3"],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two", "three"]


def test_kafka_python_scram_sha_256(cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf: dict[str, Any] = {
        "bootstrap_servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    topic = f"kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(acks="all", enable_idempotence=False, **conf)
    for i in range(5):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **conf)
    values = [message.value for _, message in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(5)]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "x")])
def test_bad_credentials_get_authentication_failure_only(
        cluster: LocalCluster, pki: Pki, user: str, password: str) -> None:
    errors: list[KafkaError] = []
    delivered: list[object] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers_for("SASL_SSL"),
                         **sasl_ssl_scram(pki, password, user),
                         "error_cb": errors.append, "message.timeout.ms": 5000,
                         "reconnect.backoff.ms": 1000})
    producer.produce("secured", b"must-not-arrive",
                     on_delivery=lambda err, msg: delivered.append((err, msg)))
    producer.flush(15)
    assert errors
    assert errors[0].code() == KafkaError._AUTHENTICATION
    # then librdkafka only reports the broker down: the broker answered nothing else
    assert {e.code() for e in errors} <= {KafkaError._AUTHENTICATION,
                                          KafkaError._ALL_BROKERS_DOWN}
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512") in errors[0].str()
    assert all(err is not None for err, _ in delivered)  # nothing was accepted


def test_ssl_client_without_certificate_is_refused(cluster: LocalCluster,
                                                   pki: Pki) -> None:
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers_for("SSL"),
                         "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                         "error_cb": errors.append, "message.timeout.ms": 5000,
                         "reconnect.backoff.ms": 1000})
    outcomes: list[object] = []
    producer.produce("secured", b"must-not-arrive",
                     on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(15)
    assert errors
    assert len(outcomes) == 1 and outcomes[0] is not None  # timed out, never delivered


def test_scram_user_deleted_cannot_authenticate(cluster: LocalCluster, pki: Pki,
                                                tmp_path: Path) -> None:
    add_scram_user(cluster, "bob", "bob-secret")
    time.sleep(1.0)
    bootstrap = cluster.bootstrap_servers_for("SASL_SSL")
    assert produce_and_consume(bootstrap, sasl_ssl_scram(pki, "bob-secret", "bob"),
                               f"bob-{uuid.uuid4().hex[:6]}", count=1) == [b"value-0"]
    done = subprocess.run(
        [sys.executable, "-m", "kafkaclone.tools.configs_command", "--zookeeper",
         cluster.zookeeper_connect, "--alter", "--entity-type", "users", "--entity-name",
         "bob", "--delete-config", "SCRAM-SHA-512"], capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 0, done.stderr
    described = subprocess.run(
        [sys.executable, "-m", "kafkaclone.tools.configs_command", "--zookeeper",
         cluster.zookeeper_connect, "--describe", "--entity-type", "users", "--entity-name",
         "bob"], capture_output=True, text=True, timeout=60)
    assert described.stdout.strip() == (
        "Configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192")
    time.sleep(1.0)
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap,
                         **sasl_ssl_scram(pki, "bob-secret", "bob"),
                         "error_cb": errors.append, "message.timeout.ms": 5000,
                         "reconnect.backoff.ms": 1000})
    producer.produce("secured", b"must-not-arrive")
    producer.flush(10)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
def test_project_clients_round_trip(cluster: LocalCluster, pki: Pki, listener: str) -> None:
    from kafkaclone.clients.consumer import Consumer as OwnConsumer
    from kafkaclone.clients.producer import Producer as OwnProducer

    conf: dict[str, str] = {
        "SASL_SSL": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config":
                         "org.apache.kafka.common.security.scram.ScramLoginModule required "
                         'username="alice" password="alice-secret";',
                     "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)},
        "SASL_PLAINTEXT": client_configs(pki)["SASL_PLAINTEXT"],
        "SSL": client_configs(pki)["SSL"],
    }[listener]
    topic = f"own-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    bootstrap = cluster.bootstrap_servers_for(listener)
    producer = OwnProducer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    for i in range(10):
        producer.send(topic, f"own-{i}".encode())
    assert producer.flush(30) == 0
    producer.close()
    consumer = OwnConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                            "auto.offset.reset": "earliest", **conf})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        values += [record.value for record in consumer.poll(1.0)]
    consumer.close()
    assert values == [f"own-{i}".encode() for i in range(10)]


def test_tools_pass_command_config_through(cluster: LocalCluster, pki: Pki,
                                           tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    topic = f"tool-{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [sys.executable, "-m", "kafkaclone.tools.topic_command", "--bootstrap-server",
         cluster.bootstrap_servers_for("SASL_SSL"), "--command-config", str(properties),
         "--create", "--topic", topic, "--partitions", "2"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"Created topic {topic}." in done.stdout
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(properties.read_text().replace("alice-secret", "nope"))
    refused = subprocess.run(
        [sys.executable, "-m", "kafkaclone.tools.topic_command", "--bootstrap-server",
         cluster.bootstrap_servers_for("SASL_SSL"), "--command-config", str(wrong), "--list"],
        capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stdout + refused.stderr


def test_user_scram_credential_apis(cluster: LocalCluster, pki: Pki, tmp_path: Path) -> None:
    """kafka-configs.sh --bootstrap-server (AlterUserScramCredentials) creates a user who
    can then log in; confluent-kafka's admin describes it (DescribeUserScramCredentials)."""
    from confluent_kafka.admin import AdminClient as CkAdmin
    from confluent_kafka.admin import ScramMechanism

    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
        f"sasl.password=alice-secret\nssl.ca.location={pki.ca}\n")
    bootstrap = cluster.bootstrap_servers_for("SASL_SSL")
    base = [sys.executable, "-m", "kafkaclone.tools.configs_command", "--bootstrap-server",
            bootstrap, "--command-config", str(properties), "--entity-type", "users",
            "--entity-name", "carol"]
    added = subprocess.run(
        [*base, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-pw]"],
        capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "Completed updating config for user carol."
    described = subprocess.run([*base, "--describe"], capture_output=True, text=True,
                               timeout=60)
    assert described.stdout.strip() == (
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192")

    admin = CkAdmin({"bootstrap.servers": bootstrap, **sasl_ssl_scram(pki)})
    description = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    infos = description.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]

    time.sleep(1.0)  # the change notification reaches the broker
    assert produce_and_consume(bootstrap, sasl_ssl_scram(pki, "carol-pw", "carol"),
                               f"carol-{uuid.uuid4().hex[:6]}", count=1) == [b"value-0"]
    too_few = subprocess.run(
        [*base, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"],
        capture_output=True, text=True, timeout=60)
    assert too_few.returncode != 0
    assert "Iterations 100 is less than the minimum 4096" in too_few.stderr


def test_kafka_python_pre_kip152_raw_tokens(cluster: LocalCluster) -> None:
    """kafka-python told the broker is 0.10.1 authenticates PLAIN with SaslHandshake v0
    and raw tokens (no SaslAuthenticate), as clients from before KIP-152 do."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_plain_username="alice", sasl_plain_password="alice-secret",
        api_version=(0, 10, 1), acks="all", enable_idempotence=False)
    metadata = producer.send(f"raw-{uuid.uuid4().hex[:6]}", b"v0").get(timeout=30)
    producer.close()
    assert metadata.offset == 0
