"""The broker's TLS and SASL config keys (Kafka 2.8's names, types and defaults).

Each ``ssl.*`` and ``sasl.*`` key may also be given per listener as
``listener.name.<listener>.<key>`` (lower-case listener name), which wins for that
listener; a listener's JAAS config is ``listener.name.<listener>.<mechanism>.sasl.jaas.config``
(``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``). Password-typed keys are never
logged and DescribeConfigs reports them as null and sensitive.
"""

from __future__ import annotations

import re
from typing import Final

from kafkaclone.common.config_def import ConfigKey, ConfigType, Importance

_S: Final = ConfigType.STRING
_L: Final = ConfigType.LIST
_P: Final = ConfigType.PASSWORD
_I: Final = ConfigType.INT
_LONG: Final = ConfigType.LONG
_H: Final = Importance.HIGH
_M: Final = Importance.MEDIUM
_LOW: Final = Importance.LOW

SSL_CONFIG_KEYS: Final = (
    ConfigKey("ssl.keystore.type", _S, "JKS", _M,
              "The key store format: PEM or PKCS12 (JKS cannot be read and is refused)."),
    ConfigKey("ssl.keystore.location", _S, None, _H,
              "The key store file: for PEM, the private key and its certificate chain."),
    ConfigKey("ssl.keystore.password", _P, None, _H,
              "The key store's password (PKCS12)."),
    ConfigKey("ssl.keystore.key", _P, None, _H,
              "The private key in PEM, inline (ssl.keystore.type=PEM)."),
    ConfigKey("ssl.keystore.certificate.chain", _P, None, _H,
              "The certificate chain in PEM, inline (ssl.keystore.type=PEM)."),
    ConfigKey("ssl.key.password", _P, None, _H,
              "The password of an encrypted private key."),
    ConfigKey("ssl.truststore.type", _S, "JKS", _M,
              "The trust store format: PEM or PKCS12 (JKS cannot be read and is refused)."),
    ConfigKey("ssl.truststore.location", _S, None, _H, "The trust store file."),
    ConfigKey("ssl.truststore.password", _P, None, _H,
              "The trust store's password (PKCS12)."),
    ConfigKey("ssl.truststore.certificates", _P, None, _H,
              "Trusted certificates in PEM, inline (ssl.truststore.type=PEM)."),
    ConfigKey("ssl.client.auth", _S, "none", _M,
              "Client authentication on SSL listeners: required, requested or none."),
    ConfigKey("ssl.enabled.protocols", _L, ("TLSv1.2", "TLSv1.3"), _M,
              "The TLS versions accepted."),
    ConfigKey("ssl.protocol", _S, "TLSv1.3", _M,
              "The TLS protocol of the context (the highest of ssl.enabled.protocols is "
              "what counts here)."),
    ConfigKey("ssl.cipher.suites", _L, (), _LOW,
              "The cipher suites allowed, as OpenSSL names (empty: OpenSSL's defaults)."),
    ConfigKey("ssl.endpoint.identification.algorithm", _S, "https", _LOW,
              "https: check the broker's host name against its certificate on inter-broker "
              "connections; empty: do not."),
    ConfigKey("ssl.principal.mapping.rules", _S, "DEFAULT", _LOW,
              "Rules mapping a client certificate's subject DN to a principal name: "
              "RULE:pattern/replacement/[LU] or DEFAULT (the DN), separated by commas."),
    ConfigKey("ssl.provider", _S, None, _M, "Not used: the provider is OpenSSL."),
    ConfigKey("ssl.keymanager.algorithm", _S, "SunX509", _LOW,
              "Accepted for compatibility; no effect."),
    ConfigKey("ssl.trustmanager.algorithm", _S, "PKIX", _LOW,
              "Accepted for compatibility; no effect."),
    ConfigKey("ssl.secure.random.implementation", _S, None, _LOW,
              "Not used: OpenSSL's random source."),
    ConfigKey("ssl.engine.factory.class", _S, None, _LOW,
              "A Java SSL engine factory; cannot be honoured (refused if set)."),
)

SASL_CONFIG_KEYS: Final = (
    ConfigKey("sasl.enabled.mechanisms", _L, ("GSSAPI",), _M,
              "The SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
              "(GSSAPI and OAUTHBEARER are refused)."),
    ConfigKey("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI", _M,
              "The SASL mechanism brokers authenticate to each other with."),
    ConfigKey("sasl.jaas.config", _P, None, _M,
              "A JAAS login module config; on a broker, give it per listener and mechanism "
              "as listener.name.<l>.<mechanism>.sasl.jaas.config."),
    ConfigKey("sasl.server.callback.handler.class", _S, None, _M,
              "A Java callback handler; cannot be honoured (refused if set)."),
    ConfigKey("sasl.client.callback.handler.class", _S, None, _M,
              "A Java callback handler; cannot be honoured (refused if set)."),
    ConfigKey("sasl.login.callback.handler.class", _S, None, _M,
              "A Java callback handler; cannot be honoured (refused if set)."),
    ConfigKey("sasl.login.class", _S, None, _M,
              "A Java login class; cannot be honoured (refused if set)."),
    ConfigKey("sasl.kerberos.service.name", _S, None, _M, "GSSAPI is not built."),
    ConfigKey("principal.builder.class", _S, None, _M,
              "A Java principal builder; cannot be honoured (refused if set)."),
    ConfigKey("connections.max.reauth.ms", _LONG, 0, _M,
              "Re-authentication of SASL connections: not built, only 0 is accepted."),
)

SECURITY_CONFIG_KEYS: Final = SSL_CONFIG_KEYS + SASL_CONFIG_KEYS
_LISTENER_KEYS: Final = frozenset(key.name for key in SECURITY_CONFIG_KEYS)
_PREFIXED: Final = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")
_JAAS: Final = re.compile(r"^[a-z0-9-]+\.sasl\.jaas\.config$")


def listener_prefixed_key(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<key>`` -> (listener, key) if ``key`` is a per-listener security
    key (or a ``<mechanism>.sasl.jaas.config``), else None."""
    match = _PREFIXED.match(name)
    if match is None:
        return None
    key = match.group(2)
    if key in _LISTENER_KEYS or _JAAS.match(key):
        return match.group(1), key
    return None


def is_sensitive_key(name: str) -> bool:
    """Whether a (possibly listener-prefixed) key holds a secret."""
    prefixed = listener_prefixed_key(name)
    key = name if prefixed is None else prefixed[1]
    return key.endswith("sasl.jaas.config") or any(
        k.name == key and k.sensitive for k in SECURITY_CONFIG_KEYS)
