"""Broker endpoints (Kafka's org.apache.kafka.common.Endpoint, kafka.cluster.EndPoint and
SecurityProtocol): the ``listeners`` / ``advertised.listeners`` entries of a broker's config,
parsed as Kafka does, and the endpoints it registers in ``/brokers/ids/<id>``.

An endpoint is written ``NAME://host:port``: ``PLAINTEXT://127.0.0.1:9092``,
``CONTROLLER://:9093`` (empty host: the default interface), ``SSL://[::1]:9093`` (an IPv6
address in brackets). The listener name is case-insensitive (Kafka upper-cases it) and
maps to a security protocol through ``listener.security.protocol.map``; a listener named
after a protocol needs no entry in the default map.

Parsing raises ``ValueError`` with a one-line reason; the broker config wraps it into a
``ConfigError`` naming the config key.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kafkaclone.common.config_def import parse_csv_list


class SecurityProtocol(enum.IntEnum):
    """Kafka's security protocols, with the ids UpdateMetadata v0..v3 carry on the wire."""

    PLAINTEXT = 0
    SSL = 1
    SASL_PLAINTEXT = 2
    SASL_SSL = 3

    @classmethod
    def for_name(cls, name: str) -> SecurityProtocol:
        """The protocol called ``name`` (case-insensitive, as Kafka's ``forName``)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            names = ", ".join(protocol.name for protocol in cls)
            raise ValueError(
                f"unknown security protocol {name!r} (one of {names})"
            ) from None


DEFAULT_SECURITY_PROTOCOL_MAP: Final[Mapping[str, SecurityProtocol]] = MappingProxyType(
    {protocol.name: protocol for protocol in SecurityProtocol}
)
"""Each protocol is a listener name of its own: ``PLAINTEXT`` -> PLAINTEXT, ..."""


def normalise_listener_name(name: str) -> str:
    """Listener names compare upper-cased (Kafka's ``ListenerName.normalised``)."""
    return name.strip().upper()


# Kafka's EndPoint.uriParseExp: the name is anything before "://"; an IPv6 host may be
# bracketed; the port may carry a sign so that a negative one is reported as out of range
# rather than as unparseable.
_ENDPOINT_RE: Final = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class EndPoint:
    """One listener of a broker: where it listens (or is advertised) and with which protocol.

    ``host`` is None for an empty host: bind to every interface (and, when advertised,
    Kafka substitutes the machine's canonical host name).
    """

    listener_name: str
    security_protocol: SecurityProtocol
    host: str | None
    port: int

    @classmethod
    def parse(
        cls,
        text: str,
        security_protocol_map: Mapping[str, SecurityProtocol] = DEFAULT_SECURITY_PROTOCOL_MAP,
    ) -> EndPoint:
        """``NAME://host:port`` -> EndPoint; ValueError if it is malformed, its port is out
        of range, or the map has no protocol for its listener name."""
        match = _ENDPOINT_RE.match(text.strip())
        if match is None:
            raise ValueError(f"unable to parse {text!r} as NAME://host:port")
        raw_name, host, raw_port = match.groups()
        listener_name = normalise_listener_name(raw_name)
        if not listener_name:
            raise ValueError(f"{text!r} has no listener name before '://'")
        port = int(raw_port)
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of {text!r} is not in [0, 65535]")
        protocol = security_protocol_map.get(listener_name)
        if protocol is None:
            raise ValueError(
                f"no security protocol defined for listener {listener_name} "
                f"(add it to listener.security.protocol.map)"
            )
        return cls(listener_name, protocol, host or None, port)

    @property
    def connection_string(self) -> str:
        """``NAME://host:port`` as Kafka writes it into ``/brokers/ids/<id>``."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        if ":" in self.host:
            return f"{self.listener_name}://[{self.host}]:{self.port}"
        return f"{self.listener_name}://{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.connection_string


def parse_security_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``NAME:PROTOCOL,NAME:PROTOCOL`` -> {normalised name: protocol}.

    ValueError for an entry without a colon, an unknown protocol, or a listener name that
    appears twice.
    """
    protocol_map: dict[str, SecurityProtocol] = {}
    for entry in parse_csv_list(text):
        raw_name, colon, raw_protocol = entry.rpartition(":")
        if not colon or not raw_name.strip():
            raise ValueError(f"entry {entry!r} is not NAME:PROTOCOL")
        name = normalise_listener_name(raw_name)
        if name in protocol_map:
            raise ValueError(f"listener name {name} appears more than once")
        protocol_map[name] = SecurityProtocol.for_name(raw_protocol)
    return protocol_map


def parse_listeners(
    text: str,
    security_protocol_map: Mapping[str, SecurityProtocol] = DEFAULT_SECURITY_PROTOCOL_MAP,
    *,
    require_distinct_ports: bool = True,
) -> list[EndPoint]:
    """A comma-separated listener list -> endpoints, with Kafka's checks: listener names
    are unique and, unless ``require_distinct_ports`` is False (advertised listeners may
    share a port), so are ports other than 0 (0: an ephemeral port, for tests)."""
    endpoints = [EndPoint.parse(item, security_protocol_map) for item in parse_csv_list(text)]
    _check_unique([endpoint.listener_name for endpoint in endpoints], "listener name")
    if require_distinct_ports:
        _check_unique([str(e.port) for e in endpoints if e.port != 0], "port")
    return endpoints


def _check_unique(items: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            raise ValueError(f"each listener must have a different {what}; {item} is repeated")
        seen.add(item)
