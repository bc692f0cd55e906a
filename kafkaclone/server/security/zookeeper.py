"""The broker's ZooKeeper security, as Kafka 2.8 reads it at start (JaasUtils, KafkaServer).

- SASL: the JVM system property ``java.security.auth.login.config`` names a JAAS file (for
  a broker started by ``kafka-server-start.sh`` it comes in ``KAFKA_OPTS`` as
  ``-Djava.security.auth.login.config=/path``); its ``Client`` section (another name with
  ``-Dzookeeper.sasl.clientconfig=Name``) holds the
  ``org.apache.zookeeper.server.auth.DigestLoginModule`` with ``username`` and ``password``,
  and the session authenticates with DIGEST-MD5. ``-Dzookeeper.sasl.client=false`` turns it
  off.
- ``zookeeper.set.acl=true``: every znode is created with Kafka's secure ACLs, and needs
  an authenticated session.

A misconfiguration (the file missing or unreadable, no such section, another login module,
no credentials, set.acl without SASL) raises :class:`SecurityConfigError` with one line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkaclone.common.jaas import parse_jaas_file
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.security.listeners import SecurityConfigError
from kafkaclone.zk.zookeeper_client import ZkSaslCredentials

JAAS_PROPERTY: Final = "java.security.auth.login.config"
CLIENT_SECTION_PROPERTY: Final = "zookeeper.sasl.clientconfig"
SASL_CLIENT_PROPERTY: Final = "zookeeper.sasl.client"
DEFAULT_CLIENT_SECTION: Final = "Client"
DIGEST_LOGIN_MODULE: Final = "org.apache.zookeeper.server.auth.DigestLoginModule"
_PROPERTY: Final = re.compile(r"-D([^=]+)=(.*)")


@dataclass(frozen=True)
class ZkSecurity:
    sasl: ZkSaslCredentials | None = None
    secure_acls: bool = False


def system_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``-Dname=value`` flags of ``KAFKA_OPTS`` (the JVM's system properties)."""
    properties: dict[str, str] = {}
    for word in shlex.split(environ.get("KAFKA_OPTS", "")):
        match = _PROPERTY.fullmatch(word)
        if match is not None:
            properties[match.group(1)] = match.group(2)
    return properties


def zookeeper_sasl_from_environment(environ: Mapping[str, str]) -> ZkSaslCredentials | None:
    """The SASL credentials of the JAAS file KAFKA_OPTS names (None without one), as
    ZooKeeper's client reads them (Kafka's JaasUtils.isZkSaslEnabled); the tools with
    ``--zookeeper`` use them too, and then create znodes with the secure ACLs as Kafka's."""
    properties = system_properties(environ)
    jaas_path = properties.get(JAAS_PROPERTY)
    sasl_enabled = properties.get(SASL_CLIENT_PROPERTY, "true").lower() != "false"
    if jaas_path is None or not sasl_enabled:
        return None
    return _client_credentials(Path(jaas_path), properties.get(CLIENT_SECTION_PROPERTY,
                                                               DEFAULT_CLIENT_SECTION))


def resolve_zookeeper_security(config: KafkaConfig, environ: Mapping[str, str]) -> ZkSecurity:
    credentials = zookeeper_sasl_from_environment(environ)
    if config.zookeeper_set_acl and credentials is None:
        raise SecurityConfigError(
            f"zookeeper.set.acl is true, but the verification of the JAAS login file failed: "
            f"no -D{JAAS_PROPERTY}=<file> with a {DEFAULT_CLIENT_SECTION} section in "
            "KAFKA_OPTS (the broker would create znodes nobody can secure)")
    return ZkSecurity(credentials, config.zookeeper_set_acl)


def _client_credentials(path: Path, section: str) -> ZkSaslCredentials:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SecurityConfigError(
            f"JAAS file {path} ({JAAS_PROPERTY}) cannot be read: {exc.strerror}") from exc
    try:
        sections = parse_jaas_file(text)
    except ValueError as exc:
        raise SecurityConfigError(f"JAAS file {path} cannot be read: {exc}") from exc
    modules = sections.get(section)
    if modules is None:
        raise SecurityConfigError(
            f"JAAS file {path} has no '{section}' section for the ZooKeeper client")
    module = modules[0]
    if len(modules) != 1 or module.class_name != DIGEST_LOGIN_MODULE:
        raise SecurityConfigError(
            f"JAAS section '{section}' of {path} must hold one {DIGEST_LOGIN_MODULE} "
            "(SASL DIGEST-MD5; Kerberos to ZooKeeper is not built)")
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise SecurityConfigError(
            f"JAAS section '{section}' of {path} has no username and password")
    return ZkSaslCredentials(username, password)
