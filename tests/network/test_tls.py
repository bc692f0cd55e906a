"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapper examples) and the TLS options
built from PEM and PKCS12 material."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from OpenSSL import crypto
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport

from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.network.socket_server import (
    ConnectionInfo,
    KafkaServerFactory,
    KafkaServerProtocol,
    ListenerSecurity,
)
from kafkaclone.network.tls import (
    SslConfig,
    SslPrincipalMapper,
    pem_certificates,
    pem_key_material,
    pkcs12_key_material,
    server_tls_options,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ApiVersionsRequest
from kafkaclone.testing.certificates import make_test_pki


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("DEFAULT", "CN=alice,OU=test,O=kafkaclone", "CN=alice,OU=test,O=kafkaclone"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1/", "CN=alice,OU=test,O=kafkaclone", "alice"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/U", "CN=alice,OU=test,O=kafkaclone",
     "ALICE@TEST"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", "CN=Kafka,OU=ServiceUsers,O=Org",
     "kafka"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT", "CN=bob,OU=People,O=Org",
     "CN=bob,OU=People,O=Org"),
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "CN=Duke,OU=JavaSoft,O=Sun", "duke"),
])
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_rule_matching_is_an_error() -> None:
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper("RULE:^CN=(.*),O=x$/$1/").name("CN=a,O=y")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*)$/$1", "SOMETHING", "RULE:([/$1/"])
def test_malformed_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper(rules)


def test_pem_and_pkcs12_key_material(tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path)
    keystore = pki.broker_keystore.read_bytes()
    material = pem_key_material(keystore, keystore, None, "ssl.keystore.location")
    assert len(material.chain_pem) == 1  # the CA after the leaf
    key = serialization.load_pem_private_key(pki.broker_key.read_bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-pass"))
    chain = pki.broker_certificate.read_bytes()
    assert pem_key_material(encrypted, chain, "key-pass", "k").certificate_pem == \
        material.certificate_pem
    with pytest.raises(ValueError, match=r"ssl\.key\.password"):
        pem_key_material(encrypted, chain, "wrong", "k")
    with pytest.raises(ValueError, match="does not match"):
        pem_key_material(pki.client_key.read_bytes(), chain, None, "k")

    certificate = x509.load_pem_x509_certificate(chain)
    p12 = pkcs12.serialize_key_and_certificates(
        b"broker", key, certificate, None,  # type: ignore[arg-type]
        serialization.BestAvailableEncryption(b"store-pass"))
    assert pkcs12_key_material(p12, "store-pass", "k").certificate_pem == \
        material.certificate_pem

    options = server_tls_options(SslConfig(material, pem_certificates(
        pki.ca.read_bytes(), "ca"), client_auth="required"))
    assert options.getContext() is not None


def test_client_auth_needs_a_trust_store(tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path)
    keystore = pki.broker_keystore.read_bytes()
    material = pem_key_material(keystore, keystore, None, "ks")
    with pytest.raises(ValueError, match="trust store"):
        server_tls_options(SslConfig(material, (), client_auth="required"))
    with pytest.raises(ValueError, match=r"ssl\.enabled\.protocols"):
        server_tls_options(SslConfig(material, (), enabled_protocols=("SSLv3",)))


class _TlsTransport(StringTransport):
    def __init__(self, certificate: crypto.X509 | None) -> None:
        super().__init__()
        self._certificate = certificate

    def getPeerCertificate(self) -> crypto.X509 | None:
        return self._certificate


class _Recorder:
    def __init__(self) -> None:
        self.principals: list[str] = []

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        self.principals.append(str(connection.principal))
        return succeed(b"ok")


def _ssl_connection(certificate: crypto.X509 | None, rules: str
                    ) -> tuple[KafkaServerProtocol, _TlsTransport, _Recorder]:
    recorder = _Recorder()
    factory = KafkaServerFactory(recorder, 1 << 20, "SSL", ListenerSecurity(
        SecurityProtocol.SSL, SslPrincipalMapper(rules), None))
    conn = factory.buildProtocol(None)
    transport = _TlsTransport(certificate)
    conn.makeConnection(transport)
    return conn, transport, recorder


def _request() -> bytes:
    frame = api.encode_request(ApiKey.API_VERSIONS, 0, 1, "t", ApiVersionsRequest())
    return len(frame).to_bytes(4, "big") + frame


def test_ssl_principal_is_the_mapped_certificate_subject(tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path)
    certificate = crypto.X509.from_cryptography(
        x509.load_pem_x509_certificate(pki.client_certificate.read_bytes()))
    conn, _, recorder = _ssl_connection(certificate, "DEFAULT")
    conn.dataReceived(_request())
    assert recorder.principals == ["User:CN=alice,OU=test,O=kafkaclone"]
    conn, _, recorder = _ssl_connection(certificate, "RULE:^CN=(.*?),.*$/$1/U")
    conn.dataReceived(_request())
    assert recorder.principals == ["User:ALICE"]
    conn, _, recorder = _ssl_connection(None, "DEFAULT")
    conn.dataReceived(_request())
    assert recorder.principals == ["User:ANONYMOUS"]


def test_ssl_certificate_no_rule_matches_closes(tmp_path: Path) -> None:
    pki = make_test_pki(tmp_path)
    certificate = crypto.X509.from_cryptography(
        x509.load_pem_x509_certificate(pki.client_certificate.read_bytes()))
    conn, transport, recorder = _ssl_connection(certificate, "RULE:^CN=bob,.*$/bob/")
    conn.dataReceived(_request())
    assert recorder.principals == []
    assert transport.disconnecting
