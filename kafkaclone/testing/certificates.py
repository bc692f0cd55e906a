"""Throw-away TLS material for tests and benchmarks: a CA, a broker certificate for
127.0.0.1/localhost and client certificates, written as PEM files (with ``cryptography``).

``make_test_pki(directory)`` returns the paths: ``ca.pem`` (the trust store),
``broker.pem`` (key and certificate chain in one file: ``ssl.keystore.type=PEM``),
``broker.key``/``broker.crt`` and ``client.key``/``client.crt`` (subject
``CN=alice,OU=test,O=kafkaclone``) for clients that take them apart.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca: Path
    broker_keystore: Path
    broker_key: Path
    broker_certificate: Path
    client_key: Path
    client_certificate: Path
    client_subject: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkaclone"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "test"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
           issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool,
           server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    if not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_test_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kafkaclone-test-ca")
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker_cert = _issue(_name("localhost"), broker_key, ca_name, ca_key, ca=False,
                         server=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _issue(_name("alice"), client_key, ca_name, ca_key, ca=False)
    pki = Pki(directory / "ca.pem", directory / "broker.pem", directory / "broker.key",
                  directory / "broker.crt", directory / "client.key", directory / "client.crt",
                  client_cert.subject.rfc4514_string())
    pki.ca.write_bytes(ca_cert.public_bytes(pem))
    pki.broker_key.write_bytes(_pem_key(broker_key))
    pki.broker_certificate.write_bytes(broker_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    pki.broker_keystore.write_bytes(_pem_key(broker_key) + broker_cert.public_bytes(pem)
                                    + ca_cert.public_bytes(pem))
    pki.client_key.write_bytes(_pem_key(client_key))
    pki.client_certificate.write_bytes(client_cert.public_bytes(pem))
    return pki
