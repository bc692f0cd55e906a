"""Each security setting that cannot be honoured refuses to start with its one-line reason;
what can be honoured resolves (kafkaclone.server.security.listeners)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.security.keys import is_sensitive_key
from kafkaclone.server.security.listeners import SecurityConfigError, resolve_broker_security
from kafkaclone.testing.certificates import Pki, make_test_pki

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


def tls(pki: Pki) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}


def config(**props: str) -> KafkaConfig:
    return KafkaConfig({"zookeeper.connect": "localhost:2181",
                        **{k.replace("__", "."): v for k, v in props.items()}})


def refused(props: dict[str, str]) -> str:
    props = dict(props)
    listeners = props.get("listeners", "")
    if listeners and "security.inter.broker.protocol" not in props:
        props["security.inter.broker.protocol"] = listeners.partition(":")[0]
    with pytest.raises(SecurityConfigError) as caught:
        resolve_broker_security(KafkaConfig({"zookeeper.connect": "localhost:2181", **props}))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_secure_cluster_resolves(pki: Pki) -> None:
    security = resolve_broker_security(KafkaConfig({
        "zookeeper.connect": "localhost:2181",
        "listeners": "PLAINTEXT://:9092,SSL://:9093,SASL_SSL://:9094,SASL_PLAINTEXT://:9095",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L",
        **tls(pki)}))
    listeners = security.listeners
    assert listeners["PLAINTEXT"].tls is None and listeners["PLAINTEXT"].security.sasl is None
    assert listeners["SSL"].tls is not None
    mapper = listeners["SSL"].security.principal_mapper
    assert mapper is not None and mapper.name("CN=Alice,O=x") == "alice"
    sasl = listeners["SASL_SSL"].security.sasl
    assert sasl is not None and sasl.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert sasl.plain_users == {"admin": "admin-secret"}
    plaintext_sasl = listeners["SASL_PLAINTEXT"].security.sasl
    assert plaintext_sasl is not None and plaintext_sasl.enabled_mechanisms == ("SCRAM-SHA-512",)
    assert security.inter_broker.security_protocol is SecurityProtocol.SASL_SSL
    assert security.inter_broker.sasl is not None
    assert security.inter_broker.sasl.username == "admin"
    assert "admin-secret" not in repr(security.inter_broker)


@pytest.mark.parametrize(("props", "reason"), [
    ({"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT"},
     "lists GSSAPI, which cannot be honoured"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "OAUTHBEARER"},
     "lists OAUTHBEARER, which cannot be honoured"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN"},
     "enables PLAIN but has no JAAS config"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required x"},
     "cannot be read"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config":
          "com.example.Custom required user_a=b;"},
     "cannot be honoured for PLAIN"),
    ({"listeners": "SSL://:9092", "security.inter.broker.protocol": "SSL"},
     "has no key store"),
    ({"sasl.server.callback.handler.class": "com.example.Handler"},
     "Java plug-in classes cannot be loaded"),
    ({"listener.name.sasl_ssl.plain.sasl.server.callback.handler.class": "com.example.H"},
     "Java plug-in classes cannot be loaded"),
    ({"principal.builder.class": "com.example.Builder"}, "cannot be honoured"),
    ({"connections.max.reauth.ms": "60000"}, "re-authentication"),
])
def test_refusals(props: dict[str, str], reason: str) -> None:
    assert reason in refused(props)


def test_key_store_refusals(pki: Pki, tmp_path: Path) -> None:
    base = {"listeners": "SSL://:9092", "security.inter.broker.protocol": "SSL"}
    assert "JKS cannot be honoured" in refused(
        {**base, "ssl.keystore.location": str(tmp_path / "broker.jks")})
    assert "cannot be read" in refused(
        {**base, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "none")})
    assert "no trust store" in refused(
        {**base, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore)})
    assert "must be one of none, requested, required" in refused(
        {**base, **tls(pki), "ssl.client.auth": "always"})
    wrong_key = tmp_path / "mismatch.pem"
    wrong_key.write_bytes(pki.client_key.read_bytes() + pki.broker_certificate.read_bytes())
    assert "does not match" in refused(
        {**base, **tls(pki), "ssl.keystore.location": str(wrong_key)})


def test_inter_broker_sasl_needs_credentials(pki: Pki) -> None:
    base = {"listeners": "SASL_SSL://:9092", "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", **tls(pki)}
    assert "gives no username and password" in refused(
        {**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
    assert "not among the sasl.enabled.mechanisms" in refused(
        {**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})


def test_sensitive_keys() -> None:
    assert is_sensitive_key("ssl.keystore.password")
    assert is_sensitive_key("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config")
    assert is_sensitive_key("listener.name.ssl.ssl.key.password")
    assert not is_sensitive_key("ssl.client.auth")
    text = repr(config(ssl__key__password="hunter2"))
    assert "hunter2" not in text
