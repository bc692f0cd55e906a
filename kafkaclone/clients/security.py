"""How the project's clients connect to a secured listener: TLS (stdlib ``ssl``) and SASL
(PLAIN, SCRAM-SHA-256/512), from Kafka's client config keys.

Keys (Java client names, with librdkafka's where they differ, as confluent-kafka users
write them):

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL;
- ``sasl.mechanism``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the user from ``sasl.jaas.config``
  (``...PlainLoginModule required username="alice" password="...";``) or from
  ``sasl.username`` / ``sasl.password`` (librdkafka);
- trust: ``ssl.truststore.location`` (PEM, ``ssl.truststore.type=PEM``) or
  ``ssl.truststore.certificates`` (inline PEM) or ``ssl.ca.location`` (librdkafka); the
  system's CAs when none is given;
- client certificate: ``ssl.keystore.location`` (a PEM file with key and chain,
  ``ssl.keystore.type=PEM``) or ``ssl.certificate.location`` + ``ssl.key.location``
  (librdkafka), with ``ssl.key.password``;
- ``ssl.endpoint.identification.algorithm``: ``https`` (default) checks the broker's host
  name, empty does not.

A setting that cannot be honoured (JKS or PKCS12 stores, GSSAPI, a SASL protocol without
credentials) raises ``ValueError`` with a one-line reason.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.jaas import parse_single_login_module
from kafkaclone.common.scram import SCRAM_MECHANISMS

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", *SCRAM_MECHANISMS)


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:  # never the password
        return f"SaslCredentials({self.mechanism}, {self.username})"


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ClientSecurity:
        """The security of a client config (see the module docstring)."""

        def get(name: str) -> str | None:
            """The value, None if unset or empty."""
            value = props.get(name)
            return None if value is None else str(value).strip() or None

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol={protocol}: must be one of "
                             f"{', '.join(SECURITY_PROTOCOLS)}")
        # Kafka: an empty ssl.endpoint.identification.algorithm turns the check off
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https")
        check_hostname = str(algorithm).strip().lower() == "https"
        context = (_ssl_context(get, check_hostname) if protocol in ("SSL", "SASL_SSL")
                   else None)
        sasl = _sasl(get) if protocol.startswith("SASL_") else None
        return cls(protocol, context, sasl)


PLAINTEXT: Final = ClientSecurity()

_Getter = Callable[[str], "str | None"]


def _store_type(get: _Getter, key: str) -> None:
    store_type = (get(key) or "PEM").upper()
    if store_type != "PEM":
        raise ValueError(f"{key}={store_type} cannot be honoured by this client: use PEM")


def _ssl_context(get: _Getter, check_hostname: bool) -> ssl.SSLContext:
    context = ssl.create_default_context()
    _store_type(get, "ssl.truststore.type")
    ca_file = get("ssl.truststore.location") or get("ssl.ca.location")
    ca_inline = get("ssl.truststore.certificates")
    try:
        if ca_file is not None or ca_inline is not None:
            context = ssl.create_default_context(cafile=ca_file, cadata=ca_inline)
        context.check_hostname = check_hostname
        _store_type(get, "ssl.keystore.type")
        keystore = get("ssl.keystore.location")
        certificate = keystore or get("ssl.certificate.location")
        if certificate is not None:
            context.load_cert_chain(certificate, None if keystore else get("ssl.key.location"),
                                    get("ssl.key.password"))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"TLS material cannot be read: {exc.strerror or exc}") from None
    return context


def _sasl(get: _Getter) -> SaslCredentials:
    mechanism = (get("sasl.mechanism") or "GSSAPI").upper()
    if mechanism not in SASL_MECHANISMS:
        raise ValueError(f"sasl.mechanism={mechanism} cannot be honoured by this client: "
                         f"one of {', '.join(SASL_MECHANISMS)}")
    username, password = get("sasl.username"), get("sasl.password")
    jaas = get("sasl.jaas.config")
    if jaas is not None:
        options = parse_single_login_module(jaas, "sasl.jaas.config").options
        username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise ValueError(f"sasl.mechanism={mechanism} needs a username and password "
                         "(sasl.jaas.config, or sasl.username and sasl.password)")
    return SaslCredentials(mechanism, username, password)
