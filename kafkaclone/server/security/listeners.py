"""Each listener's authentication, resolved from the broker config at start (Kafka's
ChannelBuilders, SslFactory and JaasContext), and the inter-broker client's.

``resolve_broker_security`` reads every key and key store the listeners need and raises
:class:`SecurityConfigError` with a one-line reason for anything that cannot be honoured,
so a broker never serves a listener with less security than configured:

- a SASL mechanism other than PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (GSSAPI, OAUTHBEARER:
  not built), a PLAIN listener without its JAAS config, a JAAS config that does not parse;
- a TLS listener without a key store, an unreadable or JKS key or trust store, a key that
  does not match its certificate, ``ssl.client.auth`` other than none/requested/required;
- Java plug-ins (``sasl.server.callback.handler.class``, ``principal.builder.class``,
  ``ssl.engine.factory.class``, ...) and ``connections.max.reauth.ms`` > 0;
- an inter-broker listener whose credentials (the JAAS ``username``/``password`` of
  ``sasl.mechanism.inter.broker.protocol``) or trust store are missing.

Per-listener keys ``listener.name.<l>.<key>`` win over the plain key, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from twisted.internet.ssl import CertificateOptions

from kafkaclone.common.config_def import parse_csv_list
from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    LoginModule,
    parse_single_login_module,
)
from kafkaclone.network.authenticator import (
    PLAIN,
    SERVED_MECHANISMS,
    SaslServerConfig,
    ScramCredentialCache,
)
from kafkaclone.network.client import ClientSecurity, SaslClientCredentials
from kafkaclone.network.socket_server import ListenerSecurity
from kafkaclone.network.tls import (
    CLIENT_AUTH_VALUES,
    KeyMaterial,
    SslConfig,
    SslPrincipalMapper,
    pem_certificates,
    pem_key_material,
    pkcs12_certificates,
    pkcs12_key_material,
    server_tls_options,
)
from kafkaclone.server.config import KafkaConfig

_UNSUPPORTED_PLUGINS: Final = (
    "sasl.server.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "principal.builder.class",
    "ssl.engine.factory.class",
)
_SASL_PROTOCOLS: Final = (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
_TLS_PROTOCOLS: Final = (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


class SecurityConfigError(ValueError):
    """A security setting that cannot be honoured; the message is the one-line reason."""


@dataclass(frozen=True)
class ResolvedListener:
    """A listener ready to serve: how it authenticates, and its TLS context factory."""

    endpoint: EndPoint
    security: ListenerSecurity
    tls: CertificateOptions | None


@dataclass(frozen=True)
class BrokerSecurity:
    listeners: dict[str, ResolvedListener]
    """Listener name -> its resolved security."""
    inter_broker: ClientSecurity
    """How this broker connects to the inter-broker listener of the others."""
    control_plane: ClientSecurity
    """How the controller connects to the brokers (the control plane listener if any)."""
    credential_cache: ScramCredentialCache


def resolve_broker_security(config: KafkaConfig,
                            cache: ScramCredentialCache | None = None) -> BrokerSecurity:
    """Every listener's security and the inter-broker client's; SecurityConfigError if any
    setting cannot be honoured."""
    cache = ScramCredentialCache() if cache is None else cache
    _check_global(config)
    listeners = {endpoint.listener_name: _resolve_listener(config, endpoint, cache)
                 for endpoint in config.listeners}
    inter_broker = client_security(config, config.inter_broker_listener_name)
    control_plane_name = config.control_plane_listener_name
    control_plane = (inter_broker if control_plane_name is None
                     else client_security(config, control_plane_name))
    return BrokerSecurity(listeners, inter_broker, control_plane, cache)


def _check_global(config: KafkaConfig) -> None:
    reauth = config.get_int("connections.max.reauth.ms")
    if reauth != 0:
        raise SecurityConfigError(
            f"connections.max.reauth.ms={reauth} cannot be honoured: re-authentication of "
            "SASL connections is not built (use 0)")
    for name, value in config.originals.items():
        for plugin in _UNSUPPORTED_PLUGINS:
            if (name == plugin or name.endswith("." + plugin)) and value not in (None, ""):
                raise SecurityConfigError(
                    f"{name} cannot be honoured: Java plug-in classes cannot be loaded")


# -- config lookup --------------------------------------------------------------------------


def _prefixed(listener: str, key: str) -> str:
    return f"listener.name.{listener.lower()}.{key}"


def _str(config: KafkaConfig, listener: str, key: str) -> tuple[str, str | None]:
    """(the key the value came from, the value): the listener's own, else the plain key."""
    prefixed = _prefixed(listener, key)
    raw = config.originals.get(prefixed)
    if raw is not None:
        text = str(raw).strip()
        return prefixed, text or None
    value = config.get(key)
    if isinstance(value, tuple):
        return key, ",".join(str(item) for item in value)
    return key, None if value is None else str(value)


def _list(config: KafkaConfig, listener: str, key: str) -> tuple[str, list[str]]:
    name, text = _str(config, listener, key)
    return name, [] if text is None else parse_csv_list(text)


def _read(name: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise SecurityConfigError(
            f"{name}={location} cannot be read: {exc.strerror or exc}") from None


# -- TLS ------------------------------------------------------------------------------------


def ssl_config(config: KafkaConfig, listener: str) -> SslConfig:
    """A listener's TLS settings (key and trust stores read and checked)."""
    try:
        key = _key_store(config, listener)
        trusted = _trust_store(config, listener)
    except ValueError as exc:
        if isinstance(exc, SecurityConfigError):
            raise
        raise SecurityConfigError(f"listener {listener}: {exc}") from None
    client_auth_key, client_auth = _str(config, listener, "ssl.client.auth")
    client_auth = (client_auth or "none").lower()
    if client_auth not in CLIENT_AUTH_VALUES:
        raise SecurityConfigError(f"{client_auth_key}={client_auth}: must be one of "
                                  f"{', '.join(CLIENT_AUTH_VALUES)}")
    _, protocols = _list(config, listener, "ssl.enabled.protocols")
    _, suites = _list(config, listener, "ssl.cipher.suites")
    _, algorithm = _str(config, listener, "ssl.endpoint.identification.algorithm")
    return SslConfig(key, trusted, client_auth, tuple(protocols), tuple(suites),
                     algorithm or "")


def _store_type(config: KafkaConfig, listener: str, key: str) -> tuple[str, str]:
    name, value = _str(config, listener, key)
    store_type = (value or "JKS").upper()
    if store_type == "JKS":
        raise SecurityConfigError(
            f"{name}=JKS cannot be honoured: Java key stores cannot be read; use PEM or "
            "PKCS12")
    if store_type not in ("PEM", "PKCS12"):
        raise SecurityConfigError(f"{name}={store_type}: must be PEM or PKCS12")
    return name, store_type


def _key_store(config: KafkaConfig, listener: str) -> KeyMaterial | None:
    location_key, location = _str(config, listener, "ssl.keystore.location")
    inline_key_name, inline_key = _str(config, listener, "ssl.keystore.key")
    _, chain = _str(config, listener, "ssl.keystore.certificate.chain")
    if location is None and inline_key is None:
        return None
    _, store_type = _store_type(config, listener, "ssl.keystore.type")
    _, key_password = _str(config, listener, "ssl.key.password")
    _, store_password = _str(config, listener, "ssl.keystore.password")
    if location is not None and inline_key is not None:
        raise SecurityConfigError(f"set either {location_key} or {inline_key_name}, not both")
    if location is not None:
        data = _read(location_key, location)
        if store_type == "PKCS12":
            return pkcs12_key_material(data, store_password, location_key)
        return pem_key_material(data, data, key_password, location_key)
    assert inline_key is not None
    if store_type != "PEM":
        raise SecurityConfigError(f"{inline_key_name} needs ssl.keystore.type=PEM")
    if chain is None:
        raise SecurityConfigError(f"{inline_key_name} needs ssl.keystore.certificate.chain")
    return pem_key_material(inline_key.encode(), chain.encode(), key_password, inline_key_name)


def _trust_store(config: KafkaConfig, listener: str) -> tuple[bytes, ...]:
    location_key, location = _str(config, listener, "ssl.truststore.location")
    inline_name, inline = _str(config, listener, "ssl.truststore.certificates")
    if location is None and inline is None:
        return ()
    _, store_type = _store_type(config, listener, "ssl.truststore.type")
    if location is not None and inline is not None:
        raise SecurityConfigError(f"set either {location_key} or {inline_name}, not both")
    if location is not None:
        data = _read(location_key, location)
        if store_type == "PKCS12":
            _, password = _str(config, listener, "ssl.truststore.password")
            return pkcs12_certificates(data, password, location_key)
        return pem_certificates(data, location_key)
    assert inline is not None
    if store_type != "PEM":
        raise SecurityConfigError(f"{inline_name} needs ssl.truststore.type=PEM")
    return pem_certificates(inline.encode(), inline_name)


# -- SASL -----------------------------------------------------------------------------------


def enabled_mechanisms(config: KafkaConfig, listener: str) -> list[str]:
    name, mechanisms = _list(config, listener, "sasl.enabled.mechanisms")
    for mechanism in mechanisms:
        if mechanism not in SERVED_MECHANISMS:
            raise SecurityConfigError(
                f"{name} lists {mechanism}, which cannot be honoured on listener {listener}: "
                f"only {', '.join(SERVED_MECHANISMS)} are built")
    if not mechanisms:
        raise SecurityConfigError(f"{name} is empty for the SASL listener {listener}")
    return mechanisms


def jaas_login_module(config: KafkaConfig, listener: str, mechanism: str) -> LoginModule | None:
    """``listener.name.<l>.<mechanism>.sasl.jaas.config``, parsed (None if not set)."""
    key = _prefixed(listener, f"{mechanism.lower()}.sasl.jaas.config")
    raw = config.originals.get(key)
    if raw is None:
        return None
    try:
        module = parse_single_login_module(str(raw), key)
    except ValueError as exc:
        raise SecurityConfigError(f"{key} cannot be read: {exc}") from None
    expected = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if module.class_name != expected:
        raise SecurityConfigError(f"{key}: login module {module.class_name} cannot be "
                                  f"honoured for {mechanism} (use {expected})")
    return module


def sasl_server_config(config: KafkaConfig, listener: str,
                       cache: ScramCredentialCache) -> SaslServerConfig:
    mechanisms = enabled_mechanisms(config, listener)
    plain_users: dict[str, str] = {}
    for mechanism in mechanisms:
        module = jaas_login_module(config, listener, mechanism)
        if mechanism == PLAIN:
            if module is None:
                raise SecurityConfigError(
                    f"listener {listener} enables PLAIN but has no JAAS config: set "
                    f"{_prefixed(listener, 'plain.sasl.jaas.config')}")
            plain_users = {name[len("user_"):]: password
                           for name, password in module.options.items()
                           if name.startswith("user_")}
    return SaslServerConfig(tuple(mechanisms), plain_users, cache)


def _resolve_listener(config: KafkaConfig, endpoint: EndPoint,
                      cache: ScramCredentialCache) -> ResolvedListener:
    listener = endpoint.listener_name
    protocol = endpoint.security_protocol
    tls: CertificateOptions | None = None
    mapper: SslPrincipalMapper | None = None
    sasl: SaslServerConfig | None = None
    if protocol in _TLS_PROTOCOLS:
        settings = ssl_config(config, listener)
        if settings.key is None:
            raise SecurityConfigError(
                f"listener {listener} ({protocol.name}) has no key store: set "
                "ssl.keystore.location or ssl.keystore.key and ssl.keystore.certificate.chain")
        try:
            tls = server_tls_options(settings)
        except ValueError as exc:
            raise SecurityConfigError(f"listener {listener}: {exc}") from None
        if protocol is SecurityProtocol.SSL:
            rules_key, rules = _str(config, listener, "ssl.principal.mapping.rules")
            try:
                mapper = SslPrincipalMapper(rules or "DEFAULT")
            except ValueError as exc:
                raise SecurityConfigError(f"{rules_key}: {exc}") from None
    if protocol in _SASL_PROTOCOLS:
        sasl = sasl_server_config(config, listener, cache)
    return ResolvedListener(endpoint, ListenerSecurity(protocol, mapper, sasl), tls)


def client_security(config: KafkaConfig, listener: str) -> ClientSecurity:
    """How a broker connects to ``listener`` of the others: the listener's TLS settings
    (its key store doubles as the client certificate) and the JAAS credentials of
    ``sasl.mechanism.inter.broker.protocol``."""
    protocol = config.listener_security_protocol_map.get(listener)
    if protocol is None:
        protocol = SecurityProtocol.for_name(listener)
    tls: SslConfig | None = None
    sasl: SaslClientCredentials | None = None
    if protocol in _TLS_PROTOCOLS:
        tls = ssl_config(config, listener)
        if not tls.trusted_certificates:
            raise SecurityConfigError(
                f"the inter-broker listener {listener} uses TLS but has no trust store to "
                "verify other brokers with: set ssl.truststore.location or "
                "ssl.truststore.certificates")
    if protocol in _SASL_PROTOCOLS:
        mechanism = config.get_str("sasl.mechanism.inter.broker.protocol")
        if mechanism not in SERVED_MECHANISMS:
            raise SecurityConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism} cannot be honoured: only "
                f"{', '.join(SERVED_MECHANISMS)} are built")
        if mechanism not in enabled_mechanisms(config, listener):
            raise SecurityConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism} is not among the "
                f"sasl.enabled.mechanisms of the inter-broker listener {listener}")
        module = jaas_login_module(config, listener, mechanism)
        key = _prefixed(listener, f"{mechanism.lower()}.sasl.jaas.config")
        if module is None or "username" not in module.options \
                or "password" not in module.options:
            raise SecurityConfigError(
                f"the inter-broker listener {listener} uses {mechanism} but {key} gives no "
                "username and password for brokers to authenticate with")
        sasl = SaslClientCredentials(mechanism, module.options["username"],
                                     module.options["password"])
    return ClientSecurity(protocol, tls, sasl)
