"""Client configuration: Kafka's producer and consumer config keys, declared once.

A client takes a dict of Kafka's dotted names (``{"bootstrap.servers": "h:9092",
"linger.ms": 5}``), as confluent-kafka does. Values may be given as strings (as in a
properties file) or as Python values (numbers, booleans, lists; a class, function or object
for the plugin keys such as ``partitioner`` and ``interceptor.classes``); each is parsed by
the project's ConfigDef (kafkaclone.common.config_def), and a bad value raises
:class:`ConfigException` naming the key, as Kafka's ConfigDef does. Keys the client does
not know are logged and ignored (Kafka's "was supplied but isn't a known config" warning).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Final

from kafkaclone.clients.security import ClientSecurity
from kafkaclone.common.config_def import (
    INT_MAX,
    AbstractConfig,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    Validator,
    at_least,
    between,
    one_of,
)

logger = logging.getLogger(__name__)

BOOLEAN: Final = ConfigType.BOOLEAN
STRING: Final = ConfigType.STRING
INT: Final = ConfigType.INT
LONG: Final = ConfigType.LONG
LIST: Final = ConfigType.LIST
CLASS: Final = ConfigType.CLASS
PASSWORD: Final = ConfigType.PASSWORD
HIGH: Final = Importance.HIGH
MEDIUM: Final = Importance.MEDIUM
LOW: Final = Importance.LOW


class ConfigException(ValueError):
    """A configuration value is missing, of the wrong type or out of range (Kafka's
    ConfigException; an invalid value's ConfigError is its cause)."""


def _key(name: str, config_type: ConfigType, default: ConfigValue,
         validator: Validator | None = None, *, importance: Importance = MEDIUM,
         doc: str = "", item_type: ConfigType = STRING) -> ConfigKey:
    return ConfigKey(name, config_type, default, importance, doc, validator,
                     item_type=item_type)


def _common() -> list[ConfigKey]:
    return [
        _key("bootstrap.servers", LIST, None, importance=HIGH,
             doc="host:port pairs to bootstrap from"),
        _key("client.id", STRING, ""),
        _key("request.timeout.ms", INT, 30000, at_least(0)),
        _key("retry.backoff.ms", LONG, 100, at_least(0), importance=LOW),
        _key("reconnect.backoff.ms", LONG, 50, at_least(0), importance=LOW),
        _key("reconnect.backoff.max.ms", LONG, 1000, at_least(0), importance=LOW),
        _key("metadata.max.age.ms", LONG, 300000, at_least(0), importance=LOW),
        _key("connections.max.idle.ms", LONG, 540000),
        _key("socket.connection.setup.timeout.ms", LONG, 10000, at_least(0)),
        _key("security.protocol", STRING, "PLAINTEXT",
             one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
        _key("sasl.mechanism", STRING, "GSSAPI"),
        _key("sasl.jaas.config", PASSWORD, None),
        _key("sasl.username", STRING, None, doc="librdkafka's name"),
        _key("sasl.password", PASSWORD, None, doc="librdkafka's name"),
        _key("ssl.truststore.type", STRING, "PEM"),
        _key("ssl.truststore.location", STRING, None),
        _key("ssl.truststore.certificates", PASSWORD, None),
        _key("ssl.keystore.type", STRING, "PEM"),
        _key("ssl.keystore.location", STRING, None),
        _key("ssl.key.password", PASSWORD, None),
        _key("ssl.ca.location", STRING, None, doc="librdkafka's name"),
        _key("ssl.certificate.location", STRING, None, doc="librdkafka's name"),
        _key("ssl.key.location", STRING, None, doc="librdkafka's name"),
        _key("ssl.endpoint.identification.algorithm", STRING, "https"),
        _key("client.dns.lookup", STRING, "use_all_dns_ips"),
        _key("send.buffer.bytes", INT, 131072, at_least(-1)),
        _key("receive.buffer.bytes", INT, 65536, at_least(-1)),
        _key("allow.auto.create.topics", BOOLEAN, True),
    ]


PRODUCER_CONFIG: Final = ConfigDef([
    *_common(),
    _key("acks", STRING, "all", one_of("all", "-1", "0", "1"), importance=HIGH),
    _key("batch.size", INT, 16384, at_least(0)),
    _key("linger.ms", LONG, 0, at_least(0)),
    _key("buffer.memory", LONG, 33554432, at_least(0), importance=HIGH),
    _key("max.block.ms", LONG, 60000, at_least(0)),
    _key("max.request.size", INT, 1048576, at_least(0)),
    _key("compression.type", STRING, "none", one_of("none", "gzip", "snappy", "lz4", "zstd"),
         importance=HIGH),
    _key("retries", INT, INT_MAX, between(0, INT_MAX), importance=HIGH),
    _key("delivery.timeout.ms", INT, 120000, at_least(0)),
    _key("max.in.flight.requests.per.connection", INT, 5, at_least(1), importance=LOW),
    _key("enable.idempotence", BOOLEAN, True, importance=LOW,
         doc="On unless set false, or left unset with a conflicting acks, retries or "
             "max.in.flight.requests.per.connection (Kafka 3.2's rule)"),
    _key("partitioner", CLASS, "murmur2_random",
         doc="murmur2_random (Kafka's default), murmur2, round_robin, "
             "consistent_random, random, or a callable (key, count, available)"),
    _key("partitioner.class", CLASS, None),
    _key("interceptor.classes", LIST, (), importance=LOW, item_type=CLASS),
    _key("key.serializer", CLASS, None, importance=HIGH),
    _key("value.serializer", CLASS, None, importance=HIGH),
    _key("transactional.id", STRING, None, importance=LOW,
         doc="Makes the producer transactional (and idempotent): init_transactions, "
             "begin_transaction, send_offsets_to_transaction, commit_transaction, "
             "abort_transaction"),
    _key("transaction.timeout.ms", INT, 60000, importance=LOW,
         doc="How long the transaction coordinator waits for a transaction's end before "
             "aborting it (at most the broker's transaction.max.timeout.ms)"),
], strings_from_numbers=True)
"""Kafka 2.8's ProducerConfig keys the client reads, with Kafka's defaults, except acks=all
and enable.idempotence=true: the defaults of Kafka 3.0 and later (Kafka 2.8's were 1 and
false)."""


CONSUMER_CONFIG: Final = ConfigDef([
    *_common(),
    _key("group.id", STRING, None, importance=HIGH),
    _key("group.instance.id", STRING, None),
    _key("session.timeout.ms", INT, 10000, at_least(1), importance=HIGH),
    _key("heartbeat.interval.ms", INT, 3000, at_least(1), importance=HIGH),
    _key("max.poll.interval.ms", INT, 300000, at_least(1)),
    _key("max.poll.records", INT, 500, at_least(1)),
    _key("enable.auto.commit", BOOLEAN, True),
    _key("auto.commit.interval.ms", INT, 5000, at_least(0), importance=LOW),
    _key("auto.offset.reset", STRING, "latest", one_of("latest", "earliest", "none")),
    _key("fetch.min.bytes", INT, 1, at_least(0), importance=HIGH),
    _key("fetch.max.bytes", INT, 52428800, at_least(0)),
    _key("fetch.max.wait.ms", INT, 500, at_least(0), importance=LOW),
    _key("max.partition.fetch.bytes", INT, 1048576, at_least(0), importance=HIGH),
    _key("check.crcs", BOOLEAN, True, importance=LOW),
    _key("isolation.level", STRING, "read_uncommitted",
         one_of("read_uncommitted", "read_committed")),
    _key("partition.assignment.strategy", LIST, ("range",)),
    _key("interceptor.classes", LIST, (), importance=LOW, item_type=CLASS),
    _key("exclude.internal.topics", BOOLEAN, True),
    _key("default.api.timeout.ms", INT, 60000, at_least(0)),
    _key("client.rack", STRING, "", importance=LOW),
    _key("key.deserializer", CLASS, None, importance=HIGH),
    _key("value.deserializer", CLASS, None, importance=HIGH),
], strings_from_numbers=True)
"""Kafka 2.8's ConsumerConfig keys the client reads, with Kafka's defaults."""


def configured_instance(spec: object) -> object:
    """An object from a CLASS config item: an instance or a function as given, a class
    instantiated, a dotted name imported (and instantiated if it names a class)."""
    if isinstance(spec, str):
        module_name, _, attr = spec.rpartition(".")
        try:
            spec = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError):
            raise ConfigException(f"Cannot load {spec!r}") from None
    if isinstance(spec, type):
        return spec()
    return spec


class ClientConfig(AbstractConfig):
    """A client's parsed configuration (Kafka's ProducerConfig / ConsumerConfig)."""

    def __init__(self, definition: ConfigDef, conf: Mapping[str, object] | None, *,
                 what: str) -> None:
        if conf is not None and not isinstance(conf, Mapping):
            raise ConfigException(f"The {what} configuration must be a dict of Kafka "
                                  f"config keys")
        try:
            super().__init__(definition, conf or {})
        except ConfigError as exc:
            raise ConfigException(str(exc)) from exc
        for name in self.unknown_keys:
            logger.warning("The configuration '%s' was supplied but isn't a known %s config.",
                           name, what)
        if not self.get("bootstrap.servers"):
            raise ConfigException(
                'Missing required configuration "bootstrap.servers" which has no default '
                'value.')
        try:
            self.security = ClientSecurity.from_properties(self.originals)
        except ValueError as exc:
            raise ConfigException(str(exc)) from None

    def get_configured_instances(self, name: str) -> list[object]:
        """Kafka's ``getConfiguredInstances``: every item of a class list, loaded."""
        return [configured_instance(item) for item in self.get_classes(name)]

    def get_callable(self, name: str) -> Callable[..., object] | None:
        """A CLASS key's value loaded as a callable (a serializer), None when unset."""
        items = self.get_configured_instances(name)
        if not items:
            return None
        if not callable(items[0]):
            raise ConfigException(f"Invalid value {items[0]!r} for configuration {name}: "
                                  f"a callable is required")
        return items[0]


class ProducerConfig(ClientConfig):
    def __init__(self, conf: Mapping[str, object] | None) -> None:
        super().__init__(PRODUCER_CONFIG, conf, what="producer")


class ConsumerConfig(ClientConfig):
    def __init__(self, conf: Mapping[str, object] | None) -> None:
        super().__init__(CONSUMER_CONFIG, conf, what="consumer")
