"""Client configuration: Kafka's producer and consumer config keys, declared once.

A client takes a dict of Kafka's dotted names (``{"bootstrap.servers": "h:9092",
"linger.ms": 5}``), as confluent-kafka does. Values may be given as strings (as in a
properties file) or as Python values; each is converted to its declared type and checked,
and a bad value raises :class:`ConfigException` naming the key, as Kafka's ConfigDef does.
Keys the client does not know are logged and ignored (Kafka's "was supplied but isn't a
known config" warning).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

logger = logging.getLogger(__name__)


class ConfigException(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    """"int", "long", "double", "bool", "string", "list", "class" (a callable or a name)."""
    default: Any
    validator: Callable[[Any], str | None] | None = None
    """Returns a message when the (converted) value is invalid."""
    doc: str = ""


def at_least(low: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value is None or value >= low else f"Value must be at least {low}"
    return check


def between(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"Value must be in [{low}, {high}]"
    return check


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"String must be one of: {', '.join(choices)}"
    return check


MAX_INT: Final = 2**31 - 1


def _common() -> list[ConfigKey]:
    return [
        ConfigKey("bootstrap.servers", "list", None, doc="host:port pairs to bootstrap from"),
        ConfigKey("client.id", "string", ""),
        ConfigKey("request.timeout.ms", "int", 30000, at_least(0)),
        ConfigKey("retry.backoff.ms", "long", 100, at_least(0)),
        ConfigKey("reconnect.backoff.ms", "long", 50, at_least(0)),
        ConfigKey("reconnect.backoff.max.ms", "long", 1000, at_least(0)),
        ConfigKey("metadata.max.age.ms", "long", 300000, at_least(0)),
        ConfigKey("connections.max.idle.ms", "long", 540000),
        ConfigKey("socket.connection.setup.timeout.ms", "long", 10000, at_least(0)),
        ConfigKey("security.protocol", "string", "PLAINTEXT", one_of("PLAINTEXT")),
        ConfigKey("client.dns.lookup", "string", "use_all_dns_ips"),
        ConfigKey("send.buffer.bytes", "int", 131072, at_least(-1)),
        ConfigKey("receive.buffer.bytes", "int", 65536, at_least(-1)),
        ConfigKey("allow.auto.create.topics", "bool", True),
    ]


PRODUCER_CONFIG: Final[dict[str, ConfigKey]] = {k.name: k for k in [
    *_common(),
    ConfigKey("acks", "string", "all", one_of("all", "-1", "0", "1")),
    ConfigKey("batch.size", "int", 16384, at_least(0)),
    ConfigKey("linger.ms", "long", 0, at_least(0)),
    ConfigKey("buffer.memory", "long", 33554432, at_least(0)),
    ConfigKey("max.block.ms", "long", 60000, at_least(0)),
    ConfigKey("max.request.size", "int", 1048576, at_least(0)),
    ConfigKey("compression.type", "string", "none",
              one_of("none", "gzip", "snappy", "lz4", "zstd")),
    ConfigKey("retries", "int", MAX_INT, between(0, MAX_INT)),
    ConfigKey("delivery.timeout.ms", "int", 120000, at_least(0)),
    ConfigKey("max.in.flight.requests.per.connection", "int", 5, at_least(1)),
    ConfigKey("enable.idempotence", "bool", True,
              doc="On unless set false or a conflicting acks/retries/max.in.flight is set "
                  "(Kafka 3.x)"),
    ConfigKey("partitioner", "class", "murmur2_random",
              doc="murmur2_random (Kafka's default), murmur2, round_robin, "
                  "consistent_random, random, or a callable (key, count, available)"),
    ConfigKey("partitioner.class", "class", None),
    ConfigKey("interceptor.classes", "list", []),
    ConfigKey("key.serializer", "class", None),
    ConfigKey("value.serializer", "class", None),
    ConfigKey("transactional.id", "string", None),
]}
"""Kafka 2.8's ProducerConfig keys the client reads, with Kafka's defaults, except acks=all
and enable.idempotence=true: the defaults of Kafka 3.0 and later (Kafka 2.8's were 1 and
false)."""


CONSUMER_CONFIG: Final[dict[str, ConfigKey]] = {k.name: k for k in [
    *_common(),
    ConfigKey("group.id", "string", None),
    ConfigKey("group.instance.id", "string", None),
    ConfigKey("session.timeout.ms", "int", 10000, at_least(1)),
    ConfigKey("heartbeat.interval.ms", "int", 3000, at_least(1)),
    ConfigKey("max.poll.interval.ms", "int", 300000, at_least(1)),
    ConfigKey("max.poll.records", "int", 500, at_least(1)),
    ConfigKey("enable.auto.commit", "bool", True),
    ConfigKey("auto.commit.interval.ms", "int", 5000, at_least(0)),
    ConfigKey("auto.offset.reset", "string", "latest", one_of("latest", "earliest", "none")),
    ConfigKey("fetch.min.bytes", "int", 1, at_least(0)),
    ConfigKey("fetch.max.bytes", "int", 52428800, at_least(0)),
    ConfigKey("fetch.max.wait.ms", "int", 500, at_least(0)),
    ConfigKey("max.partition.fetch.bytes", "int", 1048576, at_least(0)),
    ConfigKey("check.crcs", "bool", True),
    ConfigKey("isolation.level", "string", "read_uncommitted",
              one_of("read_uncommitted", "read_committed")),
    ConfigKey("partition.assignment.strategy", "list", ["range"]),
    ConfigKey("interceptor.classes", "list", []),
    ConfigKey("exclude.internal.topics", "bool", True),
    ConfigKey("default.api.timeout.ms", "int", 60000, at_least(0)),
    ConfigKey("client.rack", "string", ""),
    ConfigKey("key.deserializer", "class", None),
    ConfigKey("value.deserializer", "class", None),
]}
"""Kafka 2.8's ConsumerConfig keys the client reads, with Kafka's defaults."""


def _convert(key: ConfigKey, value: Any) -> Any:
    if value is None:
        return None
    kind = key.type
    try:
        if kind in ("int", "long"):
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, str):
                value = value.strip()
            converted = int(value)
            if isinstance(value, float) and value != converted:
                raise ValueError
            if kind == "int" and not -(2**31) <= converted <= MAX_INT:
                raise ValueError
            return converted
        if kind == "double":
            return float(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "false"):
                return text == "true"
            raise ValueError
        if kind == "string":
            if not isinstance(value, str | int):
                raise ValueError
            return str(value).strip()
        if kind == "list":
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, list | tuple):
                return list(value)
            raise ValueError
        return value  # "class": a callable, an object or a name
    except (TypeError, ValueError):
        raise ConfigException(
            f"Invalid value {value!r} for configuration {key.name}: "
            f"expected a value of type {kind}") from None


def parse_config(conf: Mapping[str, Any] | None, table: Mapping[str, ConfigKey],
                 *, what: str) -> dict[str, Any]:
    """Every key of ``table`` with its value from ``conf`` (converted and checked) or its
    default."""
    if conf is not None and not isinstance(conf, Mapping):
        raise ConfigException(f"The {what} configuration must be a dict of Kafka config keys")
    given = dict(conf or {})
    values: dict[str, Any] = {}
    for name, key in table.items():
        raw = given.pop(name, key.default)
        value = _convert(key, raw)
        if value is not None and key.validator is not None:
            problem = key.validator(value)
            if problem:
                raise ConfigException(f"Invalid value {raw!r} for configuration {name}: "
                                      f"{problem}")
        values[name] = value
    for name in given:
        logger.warning("The configuration '%s' was supplied but isn't a known %s config.",
                       name, what)
    if not values.get("bootstrap.servers"):
        raise ConfigException(
            'Missing required configuration "bootstrap.servers" which has no default value.')
    return values
