"""The project's clients read Kafka's security keys (Java and librdkafka names) and refuse
what they cannot honour."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaclone.clients.config import PRODUCER_CONFIG, ClientConfig, ConfigException
from kafkaclone.clients.security import ClientSecurity
from kafkaclone.testing.certificates import make_test_pki


def test_plaintext_by_default() -> None:
    security = ClientSecurity.from_properties({})
    assert security.security_protocol == "PLAINTEXT"
    assert security.ssl_context is None and security.sasl is None


def test_sasl_credentials_from_jaas_or_librdkafka_names() -> None:
    jaas = ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="alice" password="pw";'})
    assert jaas.sasl is not None
    assert (jaas.sasl.mechanism, jaas.sasl.username, jaas.sasl.password) == \
        ("SCRAM-SHA-256", "alice", "pw")
    assert "pw" not in repr(jaas)
    plain = ClientSecurity.from_properties({
        "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
        "sasl.username": "bob", "sasl.password": "x"})
    assert plain.sasl is not None and plain.sasl.username == "bob"


@pytest.mark.parametrize(("props", "reason"), [
    ({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI cannot be honoured"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     "needs a username and password"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "JKS cannot be honoured"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
     "cannot be read"),
    ({"security.protocol": "KERBEROS"}, "must be one of"),
])
def test_refusals(props: dict[str, str], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ClientSecurity.from_properties(props)


def test_tls_context_with_client_certificate(tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path)
    librdkafka = ClientSecurity.from_properties({
        "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_certificate),
        "ssl.key.location": str(pki.client_key)})
    assert librdkafka.ssl_context is not None and librdkafka.ssl_context.check_hostname
    java = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a",
        "sasl.password": "b", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca), "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.endpoint.identification.algorithm": ""})
    assert java.ssl_context is not None and not java.ssl_context.check_hostname


def test_client_config_reports_bad_security_as_config_exception() -> None:
    with pytest.raises(ConfigException, match="GSSAPI"):
        ClientConfig(PRODUCER_CONFIG, {"bootstrap.servers": "h:1",
                                       "security.protocol": "SASL_SSL"}, what="producer")
