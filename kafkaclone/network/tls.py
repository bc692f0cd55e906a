"""TLS for the broker's listeners and its connections to other brokers, on Twisted's
``twisted.internet.ssl`` (pyOpenSSL), configured with Kafka's ``ssl.*`` keys.

- :class:`SslConfig`: a listener's (or the inter-broker client's) TLS settings, resolved
  from the broker config by kafkaclone.server.security (``listener.name.<l>.ssl.*`` over
  ``ssl.*``). Key stores are PEM (``ssl.keystore.type=PEM``: a file with the private key and
  the certificate chain, or the inline ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``) or PKCS12 (read with ``cryptography``); JKS cannot be
  read and is refused when the config is resolved.
- :func:`server_tls_options` / :func:`client_tls_options`: the Twisted connection creators.
  ``ssl.client.auth=required`` refuses a client without a certificate signed by the trust
  store, ``requested`` asks for one. The client side checks the broker's host name when
  ``ssl.endpoint.identification.algorithm=https`` (Kafka's default).
- :class:`SslPrincipalMapper`: ``ssl.principal.mapping.rules`` (Kafka's rule syntax) turning
  a client certificate's subject DN (RFC 2253, as Java's ``X500Principal.getName()``) into
  the principal name.

Every problem with the material raises ``ValueError`` with a one-line reason that names
no secret.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from OpenSSL import SSL, crypto
from twisted.internet import interfaces, ssl

CLIENT_AUTH_VALUES: Final = ("none", "requested", "required")
_TLS_VERSIONS: Final = {
    "TLSv1": ssl.TLSVersion.TLSv1_0,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


@dataclass(frozen=True)
class KeyMaterial:
    """A private key, its certificate and the rest of its chain (PEM bytes each)."""

    key_pem: bytes
    certificate_pem: bytes
    chain_pem: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class SslConfig:
    """Resolved TLS settings of one listener (server) or of the inter-broker client."""

    key: KeyMaterial | None
    trusted_certificates: tuple[bytes, ...]
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"


# -- loading key and trust stores ---------------------------------------------------------

_PEM_BLOCK: Final = re.compile(
    rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)


def _pem_blocks(data: bytes) -> list[tuple[str, bytes]]:
    return [(match.group(1).decode("ascii"), match.group(0) + b"\n")
            for match in _PEM_BLOCK.finditer(data)]


def pem_certificates(data: bytes, what: str) -> tuple[bytes, ...]:
    """Every certificate of a PEM text; ValueError if there is none or one is unreadable."""
    certificates = tuple(block for kind, block in _pem_blocks(data) if kind == "CERTIFICATE")
    if not certificates:
        raise ValueError(f"{what} holds no PEM certificate")
    for certificate in certificates:
        try:
            x509.load_pem_x509_certificate(certificate)
        except ValueError:
            raise ValueError(f"{what} holds an unreadable certificate") from None
    return certificates


def pem_key_material(key_text: bytes, chain_text: bytes, password: str | None,
                     what: str) -> KeyMaterial:
    """A PEM private key (encrypted with ``password`` or not) and its certificate chain,
    the key decrypted (Twisted wants it in the clear); ValueError if unreadable or if the
    key does not match the certificate."""
    keys = [block for kind, block in _pem_blocks(key_text) if kind.endswith("PRIVATE KEY")]
    if len(keys) != 1:
        raise ValueError(f"{what} must hold exactly one PEM private key, found {len(keys)}")
    try:
        private_key = serialization.load_pem_private_key(
            keys[0], None if password is None else password.encode("utf-8"))
    except (ValueError, TypeError):
        raise ValueError(f"{what}: the private key cannot be read (wrong or missing "
                         "ssl.key.password?)") from None
    certificates = pem_certificates(chain_text, what)
    leaf = x509.load_pem_x509_certificate(certificates[0])
    public = private_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if leaf.public_key().public_bytes(
            serialization.Encoding.DER,
            serialization.PublicFormat.SubjectPublicKeyInfo) != public:
        raise ValueError(f"{what}: the private key does not match the first certificate")
    clear = private_key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    return KeyMaterial(clear, certificates[0], certificates[1:])


def pkcs12_key_material(data: bytes, password: str | None, what: str) -> KeyMaterial:
    try:
        key, certificate, extra = pkcs12.load_key_and_certificates(
            data, None if password is None else password.encode("utf-8"))
    except ValueError:
        raise ValueError(f"{what} is not a readable PKCS12 file (wrong password?)") from None
    if key is None or certificate is None:
        raise ValueError(f"{what} holds no private key with its certificate")
    pem = serialization.Encoding.PEM
    return KeyMaterial(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()),
        certificate.public_bytes(pem), tuple(c.public_bytes(pem) for c in extra))


def pkcs12_certificates(data: bytes, password: str | None, what: str) -> tuple[bytes, ...]:
    try:
        _, certificate, extra = pkcs12.load_key_and_certificates(
            data, None if password is None else password.encode("utf-8"))
    except ValueError:
        raise ValueError(f"{what} is not a readable PKCS12 file (wrong password?)") from None
    found = ([] if certificate is None else [certificate]) + list(extra)
    if not found:
        raise ValueError(f"{what} holds no certificate")
    return tuple(c.public_bytes(serialization.Encoding.PEM) for c in found)


# -- Twisted connection creators -------------------------------------------------------------


def _version_bounds(protocols: Sequence[str]) -> dict[str, object]:
    versions = []
    for name in protocols:
        version = _TLS_VERSIONS.get(name)
        if version is None:
            raise ValueError(f"ssl.enabled.protocols: unknown protocol {name} "
                             f"(one of {', '.join(_TLS_VERSIONS)})")
        versions.append(version)
    if not versions:
        raise ValueError("ssl.enabled.protocols is empty")
    order = list(_TLS_VERSIONS.values())
    lowest = min(versions, key=order.index)
    highest = max(versions, key=order.index)
    bounds: dict[str, object] = {"insecurelyLowerMinimumTo": lowest}
    if highest != ssl.TLSVersion.TLSv1_3:
        bounds["lowerMaximumSecurityTo"] = highest
    return bounds


def _ciphers(suites: Sequence[str]) -> dict[str, object]:
    if not suites:
        return {}
    ciphers = ssl.AcceptableCiphers.fromOpenSSLCipherString(  # type: ignore[no-untyped-call]
        ":".join(suites))
    return {"acceptableCiphers": ciphers}


def _x509(pem: bytes) -> crypto.X509:
    return crypto.X509.from_cryptography(x509.load_pem_x509_certificate(pem))


def _key_options(key: KeyMaterial) -> dict[str, object]:
    """The key and chain as ``cryptography`` objects: pyOpenSSL takes them directly (its
    own X509/PKey wrappers are deprecated there)."""
    return {
        "privateKey": serialization.load_pem_private_key(key.key_pem, None),
        "certificate": x509.load_pem_x509_certificate(key.certificate_pem),
        "extraCertChain": [x509.load_pem_x509_certificate(pem) for pem in key.chain_pem],
    }


def _options(config: SslConfig, *, server: bool) -> ssl.CertificateOptions:
    extra: dict[str, object] = {**_version_bounds(config.enabled_protocols),
                                **_ciphers(config.cipher_suites)}
    key = config.key
    if key is not None:
        extra.update(_key_options(key))
    verify = not server or config.client_auth != "none"
    if verify:
        if not config.trusted_certificates:
            raise ValueError("no trust store (ssl.truststore.location or "
                             "ssl.truststore.certificates) to verify the peer with")
        extra["verify"] = True
        extra["caCerts"] = [_x509(pem) for pem in config.trusted_certificates]
        extra["requireCertificate"] = not server or config.client_auth == "required"
    elif server and key is None:
        raise ValueError("a TLS listener needs a key store (ssl.keystore.location or "
                         "ssl.keystore.key with ssl.keystore.certificate.chain)")
    options = ssl.CertificateOptions(**extra)  # type: ignore[arg-type]
    options.getContext()  # OpenSSL refuses bad ciphers or protocols here, not at accept
    return options


def server_tls_options(config: SslConfig) -> ssl.CertificateOptions:
    """The context factory of a TLS listener; ValueError for unusable material."""
    try:
        return _options(config, server=True)
    except SSL.Error as exc:
        raise ValueError(f"OpenSSL refused the TLS settings: {_ssl_error(exc)}") from None


ClientTlsOptions = interfaces.IOpenSSLClientConnectionCreator | ssl.CertificateOptions
"""What a TLS client endpoint takes: a connection creator, or a context factory."""


def client_tls_options(config: SslConfig, hostname: str) -> ClientTlsOptions:
    """A connection creator for a TLS connection to ``hostname`` (checked against the
    broker's certificate when ``ssl.endpoint.identification.algorithm=https``)."""
    if config.endpoint_identification_algorithm.lower() == "https":
        trust = ssl.trustRootFromCertificates(  # type: ignore[no-untyped-call]
            [ssl.Certificate.loadPEM(pem) for pem in config.trusted_certificates])
        extra = {**_version_bounds(config.enabled_protocols), **_ciphers(config.cipher_suites)}
        if config.key is not None:
            extra.update(_key_options(config.key))  # the client certificate
        return ssl.optionsForClientTLS(hostname, trustRoot=trust,
                                       extraCertificateOptions=extra)
    return _options(config, server=False)


def _ssl_error(exc: SSL.Error) -> str:
    details = exc.args[0] if exc.args else []
    if isinstance(details, list) and details:
        return "; ".join(str(item[-1]) for item in details)
    return str(exc)


# -- principals from certificates ------------------------------------------------------------

_RULE: Final = re.compile(
    r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)|(.*?))\s*(?:[,\n]\s*|$)")


@dataclass(frozen=True)
class _MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _java_replacement(text: str) -> str:
    """A java.util.regex replacement (``$1``, ``\\x``) as a Python one (``\\g<1>``)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            out.append(text[index + 1].replace("\\", "\\\\"))
            index += 2
        elif char == "$" and index + 1 < len(text) and text[index + 1].isdigit():
            end = index + 1
            while end < len(text) and text[end].isdigit():
                end += 1
            out.append(f"\\g<{text[index + 1:end]}>")
            index = end
        else:
            out.append("\\\\" if char == "\\" else char)
            index += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule that matches the DN names the principal;
    ``DEFAULT`` is the DN itself. No rule matching is an error (the connection fails)."""

    def __init__(self, rules_text: str = "DEFAULT") -> None:
        self.rules: list[_MappingRule] = []
        text = rules_text.strip()
        position = 0
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {position}")
            position = match.end()
            if match.group(5) is not None:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule "
                                 f"{match.group(5)!r}")
            if match.group(1) == "DEFAULT":
                self.rules.append(_MappingRule(None, "", ""))
            else:
                try:
                    pattern = re.compile(match.group(2).replace("\\/", "/"))
                except re.error as exc:
                    raise ValueError(f"ssl.principal.mapping.rules: {exc}") from None
                self.rules.append(_MappingRule(
                    pattern, _java_replacement(match.group(3).replace("\\/", "/")),
                    match.group(4)))
        if not self.rules:
            self.rules.append(_MappingRule(None, "", ""))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise ValueError(f"No rules apply to {distinguished_name}, rules {self.rules}")


def subject_dn(certificate: crypto.X509) -> str:
    """The subject of a certificate in RFC 2253 form (``CN=alice,OU=eng,O=Acme``)."""
    return certificate.to_cryptography().subject.rfc4514_string()
