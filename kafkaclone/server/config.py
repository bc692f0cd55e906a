"""Broker configuration: Kafka 2.8's server.properties keys, declared once as a table.

``BROKER_CONFIG`` is the table: one ``ConfigKey`` per key with Kafka's name, type, default,
validator, importance and doc (``docs/configuration.md`` is generated from it by
``python -m kafkaclone.tools.config_doc --write``). ``KafkaConfig`` is the parsed, validated,
read-only view the broker reads::

    config = KafkaConfig.from_properties_file("config/server.properties", ["broker.id=2"])
    config.broker_id, config.log_dirs, config.advertised_listeners, config.get("num.partitions")

Loading follows Kafka: a Java properties file, then ``--override k=v`` on top; a key the
table does not know is logged as a warning and ignored; a value of the wrong type or out
of range, or settings that contradict each other, raise ``ConfigError`` with a one-line
message naming the key, the value and what is allowed (the broker prints it and exits).

The units variants keep Kafka's precedence: ``log.retention.ms`` over
``log.retention.minutes`` over ``log.retention.hours``; ``log.roll.ms`` over
``log.roll.hours`` (and the same for jitter); ``log.flush.interval.ms`` over
``log.flush.scheduler.interval.ms``; ``log.dirs`` over ``log.dir``; ``listeners`` over the
deprecated ``host.name``/``port``.

``TOPIC_CONFIG_SYNONYMS`` maps each topic-level config to the broker config supplying its
default (``retention.ms`` -> ``log.retention.ms``), and ``topic_config_synonyms`` /
``broker_config_synonyms`` list the full synonym chains DescribeConfigs reports.

The generic machinery (``ConfigDef``, ``ConfigKey``, types, validators, ``ConfigError``)
is ``kafkaclone.common.config_def``'s. What the log layer reads is declared in
``kafkaclone.log.config`` and used here: the topic configs with their broker synonyms
(``TOPIC_CONFIG_SYNONYMS`` and the defaults of those broker configs come from there), the
units variants, and the rows of the LogManager's own settings (``log.dirs``, checkpoint
intervals, ...).
"""

from __future__ import annotations

import logging
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Final, Generic, TypeVar, overload

from kafkaclone.common.config_def import (
    INT_MAX,
    LONG_MAX,
    AbstractConfig,
    EachOneOf,
    OneOf,
    Validator,
    parse_csv_list,
    parse_integer,
)

# The config machinery is kafkaclone.common.config_def's; these names are importable from here too.
from kafkaclone.common.config_def import ConfigDef as ConfigDef
from kafkaclone.common.config_def import ConfigError as ConfigError
from kafkaclone.common.config_def import ConfigKey as ConfigKey
from kafkaclone.common.config_def import ConfigType as ConfigType
from kafkaclone.common.config_def import ConfigValue as ConfigValue
from kafkaclone.common.config_def import Importance as Importance
from kafkaclone.common.config_def import at_least as at_least
from kafkaclone.common.config_def import between as between
from kafkaclone.common.endpoint import (
    EndPoint,
    SecurityProtocol,
    normalise_listener_name,
    parse_listeners,
    parse_security_protocol_map,
)
from kafkaclone.common.properties import parse_properties
from kafkaclone.log.cleaner import CleanerConfig
from kafkaclone.log.config import (
    BROKER_COMPRESSION_TYPES,
    BROKER_CONFIG_VARIANTS,
    COMPACT,
    CREATE_TIME,
    DELETE,
    LOG_APPEND_TIME,
    LOG_CONFIG_KEYS,
    LOG_MANAGER_CONFIG_KEYS,
)
from kafkaclone.log.config import TOPIC_CONFIG_SYNONYMS as TOPIC_CONFIG_SYNONYMS
from kafkaclone.server.authorizer import ACL_AUTHORIZER_CLASS_NAMES
from kafkaclone.server.replica_selector import REPLICA_SELECTORS
from kafkaclone.server.security.keys import (
    SASL_CONFIG_KEYS,
    SSL_CONFIG_KEYS,
    listener_prefixed_key,
)

logger = logging.getLogger(__name__)

DOUBLE_MAX: Final = sys.float_info.max

_MINUTE_MS: Final = 60 * 1000
_HOUR_MS: Final = 60 * _MINUTE_MS


KAFKA_VERSIONS: Final = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0",
    "2.0-IV0", "2.0-IV1", "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1",
    "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1", "2.5-IV0", "2.6-IV0",
    "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1",
)  # fmt: skip
"""Kafka 2.8's ApiVersion list, oldest first: the valid inter.broker.protocol.version and
log.message.format.version values (a release without its -IV suffix means its last one)."""

LATEST_KAFKA_VERSION: Final = KAFKA_VERSIONS[-1]

_VERSION_LOOKUP: Final[Mapping[str, str]] = {
    **{version.split("-")[0]: version for version in KAFKA_VERSIONS},
    **{version: version for version in KAFKA_VERSIONS},
}


def canonical_kafka_version(text: str) -> str | None:
    """``"2.8"`` / ``"2.8.0"`` -> ``"2.8-IV1"``, ``"0.10.2.1"`` -> ``"0.10.2-IV0"``; None if
    unknown. Like Kafka's ``ApiVersion.apply``, 0.x versions are read to three segments and
    later ones to two."""
    segments = text.strip().split(".")
    significant = 3 if text.strip().startswith("0.") else 2
    return _VERSION_LOOKUP.get(".".join(segments[:significant]))


def record_format_version(kafka_version: str) -> int:
    """The record batch magic a canonical Kafka version writes: 0 before 0.10.0, 1 before
    0.11.0, 2 since."""
    index = KAFKA_VERSIONS.index(kafka_version)
    if index < KAFKA_VERSIONS.index("0.10.0-IV0"):
        return 0
    if index < KAFKA_VERSIONS.index("0.11.0-IV0"):
        return 1
    return 2


@dataclass(frozen=True)
class KafkaVersion(Validator):
    """A Kafka release / inter-broker protocol version up to 2.8."""

    def problem(self, value: ConfigValue) -> str | None:
        if isinstance(value, str) and canonical_kafka_version(value) is not None:
            return None
        return f"must be a Kafka version from {KAFKA_VERSIONS[0]} to {LATEST_KAFKA_VERSION}"

    def describe(self) -> str:
        return f"[{KAFKA_VERSIONS[0]},...,{LATEST_KAFKA_VERSION}]"


class AuthorizerClassName(Validator):
    """``authorizer.class.name``: empty or one of Kafka's ACL authorizer classes."""

    def problem(self, value: ConfigValue) -> str | None:
        if value in ("", None, *ACL_AUTHORIZER_CLASS_NAMES):
            return None
        return (f"kafkaclone cannot load {value}: the only authorizer it provides is "
                f"{ACL_AUTHORIZER_CLASS_NAMES[0]} (empty for none)")

    def describe(self) -> str:
        return f"[\"\", {', '.join(ACL_AUTHORIZER_CLASS_NAMES)}]"


class PrincipalList(Validator):
    """``super.users``: principals ``type:name`` separated by semicolons."""

    def problem(self, value: ConfigValue) -> str | None:
        items = [item.strip() for item in str(value).split(";") if item.strip()]
        bad = [item for item in items if not _is_principal(item)]
        if bad:
            return (f"expected principals as type:name separated by semicolons "
                    f"(User:admin;User:broker), not {', '.join(bad)}")
        return None

    def describe(self) -> str:
        return "User:name;User:other"


def _is_principal(text: str) -> bool:
    principal_type, sep, name = text.partition(":")
    return bool(sep and principal_type and name)


# --- the table ----------------------------------------------------------------------------


def _section(group: str, *keys: ConfigKey) -> list[ConfigKey]:
    return [replace(key, group=group) for key in keys]


HIGH: Final = Importance.HIGH
MEDIUM: Final = Importance.MEDIUM
LOW: Final = Importance.LOW
BOOLEAN: Final = ConfigType.BOOLEAN
STRING: Final = ConfigType.STRING
INT: Final = ConfigType.INT
SHORT: Final = ConfigType.SHORT
LONG: Final = ConfigType.LONG
DOUBLE: Final = ConfigType.DOUBLE
LIST: Final = ConfigType.LIST

COMPRESSION_TYPES: Final = BROKER_COMPRESSION_TYPES
CLEANUP_POLICIES: Final = (COMPACT, DELETE)
TIMESTAMP_TYPES: Final = (CREATE_TIME, LOG_APPEND_TIME)
OFFSETS_STORAGES: Final = ("zookeeper", "kafka")

_ONE_REACTOR: Final = (
    "Accepted for compatibility: a kafkaclone broker does this work on its one reactor "
    "thread, so the value has no effect."
)

def _topic_default(topic_config: str) -> ConfigValue:
    """The default of the broker config behind ``topic_config``: the topic config's own,
    declared once in kafkaclone.log.config (as Kafka's LogConfig defaults are the broker's)."""
    return LOG_CONFIG_KEYS[topic_config].default


def _topic_default_in(topic_config: str, unit_ms: int) -> int:
    """``_topic_default`` of a time config, in a coarser unit (for ``log.roll.hours`` ...)."""
    default = LOG_CONFIG_KEYS[topic_config].default
    assert isinstance(default, int) and default % unit_ms == 0, topic_config
    return default // unit_ms


# Kafka 2.8 names, types, defaults, validators and importance (core/.../KafkaConfig.scala,
# Defaults). Docs are kafkaclone's own wording. The log layer declares what it reads itself:
# LOG_MANAGER_CONFIG_KEYS rows are placed here in their sections, and the broker configs
# supplying topic-level defaults take their defaults from LOG_CONFIG_KEYS.
BROKER_CONFIG: Final = ConfigDef([
    *_section(
        "ZooKeeper",
        ConfigKey("zookeeper.connect", STRING, None, HIGH,
                  "The ZooKeeper ensemble as host:port[,host:port...], optionally followed by "
                  "a chroot path (localhost:2181/kafka) under which every znode of the "
                  "cluster lives. Required."),
        ConfigKey("zookeeper.session.timeout.ms", INT, 18000, HIGH,
                  "The ZooKeeper session timeout. A broker that cannot reach ZooKeeper for "
                  "this long loses its registration (and its controllership)."),
        ConfigKey("zookeeper.connection.timeout.ms", INT, None, HIGH,
                  "How long the broker waits to establish its ZooKeeper connection; "
                  "zookeeper.session.timeout.ms if not set."),
        ConfigKey("zookeeper.sync.time.ms", INT, 2000, LOW,
                  "How far a ZooKeeper follower may lag behind its leader."),
        ConfigKey("zookeeper.set.acl", BOOLEAN, False, HIGH,
                  "Create znodes with secure ACLs.",
                  note="Needs SASL to ZooKeeper: a JAAS file with a Client section named by "
                       "-Djava.security.auth.login.config in KAFKA_OPTS, else the broker "
                       "refuses to start (docs/security.md)."),
        ConfigKey("zookeeper.max.in.flight.requests", INT, 10, HIGH,
                  "The most ZooKeeper requests the broker keeps unanswered before waiting.",
                  validator=at_least(1)),
    ),
    *_section("TLS", *SSL_CONFIG_KEYS),
    *_section("SASL", *SASL_CONFIG_KEYS),
    *_section(
        "General",
        LOG_MANAGER_CONFIG_KEYS["broker.id"],
        ConfigKey("broker.id.generation.enable", BOOLEAN, True, MEDIUM,
                  "Allow broker.id=-1 to generate an id on startup."),
        ConfigKey("reserved.broker.max.id", INT, 1000, MEDIUM,
                  "The largest id that may be configured in broker.id.",
                  validator=at_least(0)),
        ConfigKey("broker.rack", STRING, None, MEDIUM,
                  "The rack of this broker (RACK1, us-east-1d), used to spread replicas "
                  "across racks."),
        ConfigKey("message.max.bytes", INT, _topic_default("max.message.bytes"), HIGH,
                  "The largest record batch the broker accepts, after compression. The "
                  "topic-level max.message.bytes overrides it per topic.",
                  validator=at_least(0)),
        ConfigKey("num.network.threads", INT, 3, HIGH,
                  "Threads receiving requests from and sending responses to the network.",
                  validator=at_least(1), note=_ONE_REACTOR),
        ConfigKey("num.io.threads", INT, 8, HIGH,
                  "Threads processing requests, disk I/O included.",
                  validator=at_least(1),
                  note="Requests are processed on the broker's one reactor thread; this many "
                  "threads do the file work of a LeaderAndIsr in parallel: opening new logs "
                  "and writing new leaders' leader-epoch checkpoints (a dynamic change "
                  "resizes the pool). A dynamic change of any thread count must keep it "
                  "between half and double the current value, as in Kafka."),
        ConfigKey("background.threads", INT, 10, HIGH,
                  "Threads for background tasks.",
                  validator=at_least(1), note=_ONE_REACTOR),
        ConfigKey("queued.max.requests", INT, 500, HIGH,
                  "How many requests may wait for processing before the network stops "
                  "reading more.",
                  validator=at_least(1),
                  note="Bounds the requests being processed broker-wide: at the bound every "
                       "connection stops reading until one completes. Each connection is "
                       "also muted while it has 100 requests unanswered or its unsent "
                       "responses fill the socket's write buffer."),
        ConfigKey("queued.max.request.bytes", LONG, -1, MEDIUM,
                  "How many request bytes may wait for processing before no more are read "
                  "(-1: no limit)."),
        ConfigKey("request.timeout.ms", INT, 30000, HIGH,
                  "How long the broker, as a client of other brokers, waits for a response "
                  "before giving up on a request."),
        ConfigKey("socket.connection.setup.timeout.ms", LONG, 10000, MEDIUM,
                  "How long the broker, as a client of other brokers (controller channel, "
                  "replica fetchers, transaction markers, controlled shutdown), waits for a "
                  "connection to be set up before giving up on it. After each failed "
                  "attempt to the same broker it doubles, up to "
                  "socket.connection.setup.timeout.max.ms, with a random factor of +-20 %.",
                  validator=at_least(0)),
        ConfigKey("socket.connection.setup.timeout.max.ms", LONG, 30000, MEDIUM,
                  "The most socket.connection.setup.timeout.ms grows to after repeated "
                  "connection failures.", validator=at_least(0)),
        ConfigKey("delete.topic.enable", BOOLEAN, True, HIGH,
                  "Allow topics to be deleted. If false, deletions through the admin tools "
                  "and DeleteTopics have no effect."),
        ConfigKey("auto.create.topics.enable", BOOLEAN, True, HIGH,
                  "Create a topic when a client asks for the metadata of one that does not "
                  "exist, with num.partitions and default.replication.factor."),
        ConfigKey("compression.type", STRING, _topic_default("compression.type"), HIGH,
                  "The compression of the batches the broker stores: a codec (gzip, snappy, "
                  "lz4, zstd), uncompressed, or producer to keep the producer's.",
                  validator=OneOf(COMPRESSION_TYPES)),
    ),
    *_section(
        "Socket server",
        ConfigKey("listeners", STRING, None, HIGH,
                  "The listeners to accept connections on, as NAME://host:port separated by "
                  "commas (PLAINTEXT://myhost:9092,CONTROLLER://:9093). Names and ports must "
                  "be unique; an empty host binds the default interface and 0.0.0.0 every "
                  "interface. A name that is not a security protocol needs an entry in "
                  "listener.security.protocol.map. If not set: PLAINTEXT://host.name:port."),
        ConfigKey("advertised.listeners", STRING, None, HIGH,
                  "The listeners published in ZooKeeper for clients and other brokers, if "
                  "they differ from listeners (behind NAT, in containers). Listener names "
                  "must be among those of listeners; ports may repeat; 0.0.0.0 is not "
                  "allowed. If not set: listeners."),
        ConfigKey("listener.security.protocol.map", STRING,
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  LOW,
                  "The security protocol of each listener name, as NAME:PROTOCOL separated "
                  "by commas (INTERNAL:PLAINTEXT,EXTERNAL:SSL). Each name appears once."),
        ConfigKey("inter.broker.listener.name", STRING, None, MEDIUM,
                  "The listener brokers use to talk to each other; it must be one of "
                  "advertised.listeners. If not set, the listener named after "
                  "security.inter.broker.protocol. Setting both is an error."),
        ConfigKey("security.inter.broker.protocol", STRING, "PLAINTEXT", MEDIUM,
                  "The security protocol between brokers, when inter.broker.listener.name "
                  "is not set.",
                  validator=OneOf(tuple(protocol.name for protocol in SecurityProtocol))),
        ConfigKey("inter.broker.protocol.version", STRING, LATEST_KAFKA_VERSION, MEDIUM,
                  "The inter-broker protocol version; raised after every broker of the "
                  "cluster runs the new release.",
                  validator=KafkaVersion()),
        ConfigKey("control.plane.listener.name", STRING, None, HIGH,
                  "A listener dedicated to controller-to-broker requests, so that they do "
                  "not queue behind client traffic. It must be one of advertised.listeners "
                  "and differ from the inter-broker listener. Not set: no dedicated "
                  "listener."),
        ConfigKey("host.name", STRING, "", HIGH,
                  "DEPRECATED: use listeners. The host to bind when listeners is not set; "
                  "empty for all interfaces.",
                  deprecated=True),
        ConfigKey("port", INT, 9092, HIGH,
                  "DEPRECATED: use listeners. The port to listen on when listeners is not "
                  "set.",
                  deprecated=True),
        ConfigKey("advertised.host.name", STRING, None, HIGH,
                  "DEPRECATED: use advertised.listeners. The host published in ZooKeeper "
                  "when advertised.listeners is not set; host.name if not set.",
                  deprecated=True),
        ConfigKey("advertised.port", INT, None, HIGH,
                  "DEPRECATED: use advertised.listeners. The port published in ZooKeeper "
                  "when advertised.listeners is not set; port if not set.",
                  deprecated=True),
        ConfigKey("socket.send.buffer.bytes", INT, 100 * 1024, HIGH,
                  "SO_SNDBUF of the server's sockets (-1: the OS default)."),
        ConfigKey("socket.receive.buffer.bytes", INT, 100 * 1024, HIGH,
                  "SO_RCVBUF of the server's sockets (-1: the OS default)."),
        ConfigKey("socket.request.max.bytes", INT, 100 * 1024 * 1024, HIGH,
                  "The largest request the broker reads; a bigger frame closes the "
                  "connection.",
                  validator=at_least(1)),
        ConfigKey("max.connections.per.ip", INT, INT_MAX, MEDIUM,
                  "The most connections accepted from one address; 0 is allowed only with "
                  "overrides in max.connections.per.ip.overrides.",
                  validator=at_least(0),
                  note="A connection over the limit is closed at once and logged at INFO "
                       "(Rejected connection from ...). Dynamic."),
        ConfigKey("max.connections.per.ip.overrides", STRING, "", MEDIUM,
                  "Per-address or per-host exceptions to max.connections.per.ip, as "
                  "host:count separated by commas (hostName:100,127.0.0.1:200)."),
        ConfigKey("max.connections", INT, INT_MAX, MEDIUM,
                  "The most connections the broker accepts in all.",
                  validator=at_least(0),
                  note="Over all listeners; a connection over it is closed at once (Kafka's "
                       "acceptor waits for a free slot instead). Dynamic."),
        ConfigKey("max.connection.creation.rate", INT, INT_MAX, MEDIUM,
                  "The most new connections the broker accepts per second.",
                  validator=at_least(0),
                  note="Counted per whole second; connections over it are closed at once "
                       "(Kafka delays the accept instead). Dynamic."),
        ConfigKey("connections.max.idle.ms", LONG, 10 * _MINUTE_MS, MEDIUM,
                  "Close connections idle for longer than this.",
                  note="A connection with a request in flight is not idle."),

    ),
    *_section(
        "Client quotas",
        ConfigKey("quota.window.num", INT, 11, LOW,
                  "The number of samples to retain in memory for client quotas.",
                  validator=at_least(1)),
        ConfigKey("quota.window.size.seconds", INT, 1, LOW,
                  "The time span of each sample for client quotas.",
                  validator=at_least(1),
                  note="Quotas themselves are set per user and client id with "
                       "kafka-configs.sh (docs/security.md)."),
    ),
    *_section(
        "Log",
        LOG_MANAGER_CONFIG_KEYS["log.dirs"],
        LOG_MANAGER_CONFIG_KEYS["log.dir"],
        ConfigKey("num.partitions", INT, 1, MEDIUM,
                  "The partition count of automatically created topics (and of CreateTopics "
                  "requests that leave it to the broker).",
                  validator=at_least(1)),
        ConfigKey("default.replication.factor", INT, 1, MEDIUM,
                  "The replication factor of automatically created topics (and of "
                  "CreateTopics requests that leave it to the broker)."),
        LOG_MANAGER_CONFIG_KEYS["num.recovery.threads.per.data.dir"],
        ConfigKey("log.segment.bytes", INT, _topic_default("segment.bytes"), HIGH,
                  "The largest size of a segment file before a new one is rolled.",
                  validator=at_least(14)),
        ConfigKey("log.roll.ms", LONG, None, HIGH,
                  "Roll a new segment after this long even if the active one is not full; "
                  "log.roll.hours if not set."),
        ConfigKey("log.roll.hours", INT, _topic_default_in("segment.ms", _HOUR_MS), HIGH,
                  "log.roll.ms in hours, when log.roll.ms is not set.",
                  validator=at_least(1)),
        ConfigKey("log.roll.jitter.ms", LONG, None, HIGH,
                  "The largest random time subtracted from the roll time, so that segments "
                  "of many partitions do not roll together; log.roll.jitter.hours if not "
                  "set."),
        ConfigKey("log.roll.jitter.hours", INT,
                  _topic_default_in("segment.jitter.ms", _HOUR_MS), HIGH,
                  "log.roll.jitter.ms in hours, when log.roll.jitter.ms is not set.",
                  validator=at_least(0)),
        ConfigKey("log.retention.ms", LONG, None, HIGH,
                  "Delete a closed segment once its newest record is older than this (-1: "
                  "no time limit); log.retention.minutes if not set."),
        ConfigKey("log.retention.minutes", INT, None, HIGH,
                  "log.retention.ms in minutes, when log.retention.ms is not set; "
                  "log.retention.hours if not set either."),
        ConfigKey("log.retention.hours", INT, _topic_default_in("retention.ms", _HOUR_MS), HIGH,
                  "log.retention.ms in hours, when neither log.retention.ms nor "
                  "log.retention.minutes is set."),
        ConfigKey("log.retention.bytes", LONG, _topic_default("retention.bytes"), HIGH,
                  "Delete the oldest segments of a partition while it is larger than this "
                  "(-1: no size limit)."),
        LOG_MANAGER_CONFIG_KEYS["log.retention.check.interval.ms"],
        ConfigKey("log.cleanup.policy", LIST, _topic_default("cleanup.policy"), MEDIUM,
                  "What happens to segments past retention: delete removes them, compact "
                  "keeps the latest record of each key; both may be listed.",
                  validator=EachOneOf(CLEANUP_POLICIES)),
        ConfigKey("log.index.size.max.bytes", INT, _topic_default("segment.index.bytes"), MEDIUM,
                  "The largest size of an offset index; a full index rolls the segment.",
                  validator=at_least(4)),
        ConfigKey("log.index.interval.bytes", INT, _topic_default("index.interval.bytes"), MEDIUM,
                  "How many bytes of records lie between two entries of the offset index.",
                  validator=at_least(0)),
        ConfigKey("log.flush.interval.messages", LONG, _topic_default("flush.messages"), HIGH,
                  "fsync a partition after this many records (default: leave it to the OS "
                  "and to replication).",
                  validator=at_least(1)),
        ConfigKey("log.flush.interval.ms", LONG, None, HIGH,
                  "fsync a partition when its oldest unflushed record is this old; "
                  "log.flush.scheduler.interval.ms if not set."),
        LOG_MANAGER_CONFIG_KEYS["log.flush.scheduler.interval.ms"],
        LOG_MANAGER_CONFIG_KEYS["log.flush.offset.checkpoint.interval.ms"],
        LOG_MANAGER_CONFIG_KEYS["log.flush.start.offset.checkpoint.interval.ms"],
        ConfigKey("log.segment.delete.delay.ms", LONG, _topic_default("file.delete.delay.ms"), HIGH,
                  "How long a deleted segment's files stay on disk (renamed .deleted) before "
                  "they are removed.",
                  validator=at_least(0)),
        ConfigKey("log.preallocate", BOOLEAN, _topic_default("preallocate"), MEDIUM,
                  "Preallocate segment files when they are created."),
        ConfigKey("log.message.format.version", STRING,
                  _topic_default("message.format.version"), MEDIUM,
                  "The record format the broker writes, named by the Kafka version that "
                  "introduced it; older formats let old consumers read without "
                  "down-conversion. It cannot be newer than inter.broker.protocol.version.",
                  validator=KafkaVersion()),
        ConfigKey("log.message.timestamp.type", STRING,
                  _topic_default("message.timestamp.type"), MEDIUM,
                  "Whether a record's timestamp is the producer's (CreateTime) or the "
                  "broker's append time (LogAppendTime).",
                  validator=OneOf(TIMESTAMP_TYPES)),
        ConfigKey("log.message.timestamp.difference.max.ms", LONG,
                  _topic_default("message.timestamp.difference.max.ms"), MEDIUM,
                  "With CreateTime, reject a batch whose timestamp differs from the broker's "
                  "clock by more than this."),
        ConfigKey("log.message.downconversion.enable", BOOLEAN,
                  _topic_default("message.downconversion.enable"), LOW,
                  "Convert records to an older format for fetch requests of old consumers. "
                  "If false, such fetches get UNSUPPORTED_VERSION."),
        ConfigKey("min.insync.replicas", INT, _topic_default("min.insync.replicas"), HIGH,
                  "With acks=all, the fewest in-sync replicas (leader included) that must "
                  "have a batch for the produce to succeed; fewer gives NOT_ENOUGH_REPLICAS.",
                  validator=at_least(1)),
    ),
    *_section(
        "Log cleaner",
        ConfigKey("log.cleaner.enable", BOOLEAN, True, MEDIUM,
                  "Run the log cleaner, which compacts topics with cleanup.policy=compact "
                  "(the offsets topic among them)."),
        ConfigKey("log.cleaner.threads", INT, 1, MEDIUM,
                  "Threads cleaning logs.",
                  validator=at_least(0),
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, MEDIUM,
                  "Throttle the cleaner's reads and writes to this rate.",
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.dedupe.buffer.size", LONG, 128 * 1024 * 1024, MEDIUM,
                  "Memory for the key maps of all cleaner threads; at least 1 MiB per "
                  "thread.",
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.io.buffer.size", INT, 512 * 1024, MEDIUM,
                  "Memory for the I/O buffers of all cleaner threads.",
                  validator=at_least(0),
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, MEDIUM,
                  "How full the key map may get before a cleaning pass stops.",
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.backoff.ms", LONG, 15000, MEDIUM,
                  "How long the cleaner sleeps when no log needs cleaning.",
                  validator=at_least(0),
                  note="Dynamic: a change restarts the cleaner threads."),
        ConfigKey("log.cleaner.min.cleanable.ratio", DOUBLE,
                  _topic_default("min.cleanable.dirty.ratio"), MEDIUM,
                  "Clean a log once this share of it is dirty (not yet compacted).",
                  validator=between(0, 1)),
        ConfigKey("log.cleaner.delete.retention.ms", LONG,
                  _topic_default("delete.retention.ms"), MEDIUM,
                  "How long tombstones (records with a null value) survive compaction.",
                  validator=at_least(0)),
        ConfigKey("log.cleaner.min.compaction.lag.ms", LONG,
                  _topic_default("min.compaction.lag.ms"), MEDIUM,
                  "The youngest a record can be and still be compacted.",
                  validator=at_least(0)),
        ConfigKey("log.cleaner.max.compaction.lag.ms", LONG,
                  _topic_default("max.compaction.lag.ms"), MEDIUM,
                  "The oldest a record can get without being eligible for compaction.",
                  validator=at_least(1)),
    ),
    *_section(
        "Replication",
        ConfigKey("unclean.leader.election.enable", BOOLEAN,
                  _topic_default("unclean.leader.election.enable"), HIGH,
                  "When no in-sync replica is alive, elect a live out-of-sync replica as "
                  "leader, accepting the loss of the records it lacks."),
        ConfigKey("leader.replication.throttled.rate", LONG, LONG_MAX, MEDIUM,
                  "Dynamic only: the bytes/s this broker serves to followers of the replicas "
                  "a topic's leader.replication.throttled.replicas names (KIP-73)."),
        ConfigKey("follower.replication.throttled.rate", LONG, LONG_MAX, MEDIUM,
                  "Dynamic only: the bytes/s this broker's replica fetchers read for the "
                  "replicas a topic's follower.replication.throttled.replicas names "
                  "(KIP-73)."),
        ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", LONG, LONG_MAX, MEDIUM,
                  "Dynamic only: the bytes/s this broker copies for the replicas it moves "
                  "between its log directories (AlterReplicaLogDirs)."),
        ConfigKey("replica.lag.time.max.ms", LONG, 30000, HIGH,
                  "A follower that has not fetched, or not caught up to the leader's log "
                  "end, for this long is removed from the ISR."),
        ConfigKey("replica.socket.timeout.ms", INT, 30000, HIGH,
                  "The socket timeout of follower fetches; at least replica.fetch.wait.max.ms."),
        ConfigKey("replica.socket.receive.buffer.bytes", INT, 64 * 1024, HIGH,
                  "SO_RCVBUF of follower fetch connections."),
        ConfigKey("replica.fetch.max.bytes", INT, 1024 * 1024, MEDIUM,
                  "How many bytes a follower asks for per partition (a larger first batch "
                  "is still returned, so that replication progresses).",
                  validator=at_least(0)),
        ConfigKey("replica.fetch.wait.max.ms", INT, 500, HIGH,
                  "How long a follower fetch waits for data at the leader; at most "
                  "replica.lag.time.max.ms."),
        ConfigKey("replica.fetch.min.bytes", INT, 1, HIGH,
                  "How many bytes a follower fetch waits for, up to replica.fetch.wait.max.ms."),
        ConfigKey("replica.fetch.response.max.bytes", INT, 10 * 1024 * 1024, MEDIUM,
                  "How many bytes a follower asks for per fetch in all.",
                  validator=at_least(0)),
        ConfigKey("replica.fetch.backoff.ms", INT, 1000, MEDIUM,
                  "How long a follower waits after a fetch error.",
                  validator=at_least(0)),
        ConfigKey("num.replica.fetchers", INT, 1, HIGH,
                  "Fetcher threads per source broker.",
                  note="Fetchers per source broker, each its own connection and fetch loop "
                       "on the reactor thread; a partition goes to fetcher abs(31 * "
                       "topic hash + partition) % n, as Kafka. Read at startup: a dynamic "
                       "change applies at the next restart."),
        ConfigKey("replica.selector.class", STRING, None, MEDIUM,
                  "The fully qualified class name that implements ReplicaSelector. This is "
                  "used by the broker to find the preferred read replica. By default, we use "
                  "an implementation that returns the leader.",
                  validator=OneOf(tuple(REPLICA_SELECTORS)),
                  note="Only Kafka's org.apache.kafka.common.replica.RackAwareReplicaSelector "
                       "(consumers with client.rack read from a replica in their rack); any "
                       "other class name stops the broker at startup."),
        LOG_MANAGER_CONFIG_KEYS["replica.high.watermark.checkpoint.interval.ms"],
        ConfigKey("fetch.purgatory.purge.interval.requests", INT, 1000, MEDIUM,
                  "Purge completed delayed fetches every this many requests."),
        ConfigKey("producer.purgatory.purge.interval.requests", INT, 1000, MEDIUM,
                  "Purge completed delayed produces every this many requests."),
        ConfigKey("delete.records.purgatory.purge.interval.requests", INT, 1, MEDIUM,
                  "Purge completed delayed DeleteRecords every this many requests."),
        ConfigKey("controller.socket.timeout.ms", INT, 30000, MEDIUM,
                  "The socket timeout of controller-to-broker requests."),
        ConfigKey("auto.leader.rebalance.enable", BOOLEAN, True, HIGH,
                  "Periodically move leadership back to each partition's preferred replica "
                  "(the first of its assignment) when a broker's imbalance exceeds "
                  "leader.imbalance.per.broker.percentage."),
        ConfigKey("leader.imbalance.per.broker.percentage", INT, 10, HIGH,
                  "The share of a broker's partitions, in percent, that may be led elsewhere "
                  "before a preferred-leader election is triggered."),
        ConfigKey("leader.imbalance.check.interval.seconds", LONG, 300, HIGH,
                  "How often the controller checks leader imbalance."),
    ),
    *_section(
        "Controlled shutdown",
        ConfigKey("controlled.shutdown.enable", BOOLEAN, True, MEDIUM,
                  "On shutdown, ask the controller to move leadership away first."),
        ConfigKey("controlled.shutdown.max.retries", INT, 3, MEDIUM,
                  "How many times a failed controlled shutdown is retried."),
        ConfigKey("controlled.shutdown.retry.backoff.ms", LONG, 5000, MEDIUM,
                  "How long to wait between controlled shutdown attempts."),
    ),
    *_section(
        "Group coordinator",
        ConfigKey("group.min.session.timeout.ms", INT, 6000, MEDIUM,
                  "The shortest session timeout a consumer may ask for."),
        ConfigKey("group.max.session.timeout.ms", INT, 1800000, MEDIUM,
                  "The longest session timeout a consumer may ask for."),
        ConfigKey("group.initial.rebalance.delay.ms", INT, 3000, MEDIUM,
                  "How long a new group waits for more members before its first rebalance."),
        ConfigKey("group.max.size", INT, INT_MAX, MEDIUM,
                  "The most members a consumer group may have.",
                  validator=at_least(1)),
    ),
    *_section(
        "Offset management",
        ConfigKey("offsets.storage", STRING, "zookeeper", HIGH,
                  "Where the group coordinator keeps committed offsets: zookeeper (under "
                  "/consumers/<group>/offsets/<topic>/<partition>) or kafka (the "
                  "__consumer_offsets topic).",
                  validator=OneOf(OFFSETS_STORAGES), kafkaclone_only=True,
                  note="kafkaclone's own key, mirroring offsets.storage of Kafka's old "
                  "Scala consumer (0.8.2 to 1.1); Kafka 2.8 brokers always use the offsets "
                  "topic."),
        ConfigKey("offsets.topic.num.partitions", INT, 50, HIGH,
                  "The partition count of the __consumer_offsets topic; it also places "
                  "group coordinators, so do not change it once the cluster runs.",
                  validator=at_least(1)),
        ConfigKey("offsets.topic.replication.factor", SHORT, 3, HIGH,
                  "The replication factor of the __consumer_offsets topic; it is not "
                  "created until that many brokers are alive.",
                  validator=at_least(1)),
        ConfigKey("offsets.topic.segment.bytes", INT, 100 * 1024 * 1024, HIGH,
                  "The segment size of the __consumer_offsets topic, small so that "
                  "compaction and loading stay fast.",
                  validator=at_least(1)),
        ConfigKey("offsets.topic.compression.codec", INT, 0, HIGH,
                  "The compression of offset commits (0 none, 1 gzip, 2 snappy, 3 lz4, "
                  "4 zstd)."),
        ConfigKey("offsets.retention.minutes", INT, 7 * 24 * 60, HIGH,
                  "Committed offsets of a group without members are dropped after this "
                  "long (for standalone consumers, this long after their last commit).",
                  validator=at_least(1)),
        ConfigKey("offsets.retention.check.interval.ms", LONG, 600000, HIGH,
                  "How often expired offsets are looked for.",
                  validator=at_least(1)),
        ConfigKey("offsets.commit.timeout.ms", INT, 5000, HIGH,
                  "How long an offset commit waits for the offsets topic's replicas.",
                  validator=at_least(1)),
        ConfigKey("offsets.commit.required.acks", SHORT, -1, HIGH,
                  "The acks an offset commit needs; leave it at -1."),
        ConfigKey("offsets.load.buffer.size", INT, 5 * 1024 * 1024, HIGH,
                  "The read size when loading offsets into the coordinator's cache.",
                  validator=at_least(1)),
        ConfigKey("offset.metadata.max.bytes", INT, 4096, HIGH,
                  "The largest metadata string an offset commit may carry."),
    ),
    *_section(
        "Transactions",
        LOG_MANAGER_CONFIG_KEYS["transactional.id.expiration.ms"],
        LOG_MANAGER_CONFIG_KEYS["producer.id.expiration.check.interval.ms"],
        ConfigKey("transaction.max.timeout.ms", INT, 15 * _MINUTE_MS, HIGH,
                  "The longest transaction timeout a producer may ask for in InitProducerId.",
                  validator=at_least(1)),
        ConfigKey("transaction.state.log.num.partitions", INT, 50, HIGH,
                  "The partition count of the __transaction_state topic; do not change it "
                  "once the cluster runs.",
                  validator=at_least(1)),
        ConfigKey("transaction.state.log.replication.factor", SHORT, 3, HIGH,
                  "The replication factor of the __transaction_state topic; it is not "
                  "created until that many brokers are alive.",
                  validator=at_least(1)),
        ConfigKey("transaction.state.log.min.isr", INT, 2, HIGH,
                  "min.insync.replicas of the __transaction_state topic.",
                  validator=at_least(1)),
        ConfigKey("transaction.state.log.segment.bytes", INT, 100 * 1024 * 1024, HIGH,
                  "The segment size of the __transaction_state topic.",
                  validator=at_least(1)),
        ConfigKey("transaction.state.log.load.buffer.size", INT, 5 * 1024 * 1024, HIGH,
                  "The read size when loading transactions into the coordinator's cache.",
                  validator=at_least(1)),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000,
                  LOW,
                  "How often timed-out transactions are rolled back.",
                  validator=at_least(1)),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", INT,
                  _HOUR_MS, LOW,
                  "How often expired transactional ids are removed.",
                  validator=at_least(1)),
    ),
    *_section(
        "Authorizer",
        ConfigKey("authorizer.class.name", STRING, "", LOW,
                  "The authorizer: empty (no authorization, every request is allowed) or "
                  "kafka.security.authorizer.AclAuthorizer (kafka.security.auth."
                  "SimpleAclAuthorizer is the same), Kafka's ACLs stored in ZooKeeper. Any "
                  "other class stops the broker at start.",
                  validator=AuthorizerClassName()),
        ConfigKey("super.users", STRING, None, LOW,
                  "Principals the AclAuthorizer allows everything, separated by semicolons "
                  "(User:admin;User:broker). With a PLAINTEXT inter-broker listener the "
                  "brokers are User:ANONYMOUS, which must then be listed here.",
                  validator=PrincipalList()),
        ConfigKey("allow.everyone.if.no.acl.found", BOOLEAN, False, LOW,
                  "Whether the AclAuthorizer allows a request on a resource that has no ACL "
                  "at all."),
    ),
    *_section(
        "Fetch",
        ConfigKey("fetch.max.bytes", INT, 55 * 1024 * 1024, MEDIUM,
                  "The most bytes the broker returns for one fetch request.",
                  validator=at_least(1024)),
        ConfigKey("max.incremental.fetch.session.cache.slots", INT, 1000, MEDIUM,
                  "The most incremental fetch sessions (KIP-227) the broker keeps.",
                  validator=at_least(0)),
    ),
    *_section(
        "Metrics",
        ConfigKey("metrics.prometheus.port", INT, -1, MEDIUM,
                  "kafkaclone's own (Kafka exposes JMX instead): the port on which the broker "
                  "serves its metrics in Prometheus text format at /metrics. -1 turns it off; "
                  "0 lets the OS pick a port (logged at startup).",
                  validator=between(-1, 65535)),
        ConfigKey("metrics.prometheus.host", STRING, "127.0.0.1", MEDIUM,
                  "kafkaclone's own: the address the metrics port binds to (0.0.0.0 for "
                  "every interface)."),
    ),
])  # fmt: skip


def default_int(name: str) -> int:
    """The table's default of an INT or LONG broker config: what the config dataclasses of
    the broker's parts (ReplicaManagerConfig, ReplicaFetcherConfig, ...) default to, so
    that each default is declared once."""
    default = BROKER_CONFIG[name].default
    assert isinstance(default, int) and not isinstance(default, bool), name
    return default


def default_str(name: str) -> str:
    """The table's default of a STRING broker config that has one (see ``default_int``)."""
    default = BROKER_CONFIG[name].default
    assert isinstance(default, str), name
    return default


# --- topic-level synonyms -----------------------------------------------------------------

# TOPIC_CONFIG_SYNONYMS (topic-level config -> the broker config supplying its default) is
# derived from LOG_CONFIG_KEYS in kafkaclone.log.config and importable from here.

_SYNONYM_CHAINS: Final[tuple[tuple[str, ...], ...]] = tuple(
    (name, *(variant for variant, _factor in variants))
    for name, variants in BROKER_CONFIG_VARIANTS.items()
)


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """The broker configs that set the same thing as ``name``, highest priority first
    (Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms``): ``log.retention.hours`` ->
    (log.retention.ms, log.retention.minutes, log.retention.hours); most keys -> (name,)."""
    for chain in _SYNONYM_CHAINS:
        # log.flush.scheduler.interval.ms supplies the default of log.flush.interval.ms
        # but has no synonyms of its own.
        if name in chain and name != "log.flush.scheduler.interval.ms":
            return chain
    return (name,)


def topic_config_synonyms(topic_config: str) -> tuple[str, ...]:
    """The broker configs behind a topic-level config, highest priority first
    (``retention.ms`` -> log.retention.ms, log.retention.minutes, log.retention.hours);
    () for a topic config without a broker default."""
    broker_name = TOPIC_CONFIG_SYNONYMS.get(topic_config)
    return () if broker_name is None else broker_config_synonyms(broker_name)


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A properties file's keys and values. Read as UTF-8 (Java reads ISO-8859-1; the two
    agree on ASCII files), falling back to ISO-8859-1 for bytes that are not UTF-8.
    ConfigError if the file cannot be read or parsed."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError("properties file", os.fspath(path), exc.strerror or str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    try:
        return parse_properties(text)
    except ValueError as exc:
        raise ConfigError("properties file", os.fspath(path), str(exc)) from None


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` (``kafka-server-start.sh --override k=v``) -> dict; the value is
    everything after the first ``=`` and may be empty. ConfigError without an ``=``."""
    props: dict[str, str] = {}
    for override in overrides:
        key, equals, value = override.partition("=")
        if not equals or not key.strip():
            raise ConfigError("--override", override, "expected key=value")
        props[key.strip()] = value
    return props


# --- KafkaConfig --------------------------------------------------------------------------

T = TypeVar("T")
S = TypeVar("S", bound="_Setting[Any]")


class _Setting(ABC, Generic[T]):
    """A typed KafkaConfig attribute reading one key of BROKER_CONFIG.

    ``num_partitions = _Int("num.partitions")`` reads like a field and types as ``int``;
    declaring it checks that the key exists and that its type fits.
    """

    types: ClassVar[tuple[ConfigType, ...]]
    optional: ClassVar[bool] = False

    def __init__(self, name: str) -> None:
        self.name = name

    def __set_name__(self, owner: type, attribute: str) -> None:
        key = BROKER_CONFIG.get(self.name)
        if key is None or key.type not in self.types:
            types = "/".join(config_type.name for config_type in self.types)
            raise TypeError(f"{owner.__name__}.{attribute}: no {types} config {self.name}")
        if key.default is None and not self.optional:
            raise TypeError(f"{owner.__name__}.{attribute}: {self.name} may be null")

    @overload
    def __get__(self: S, config: None, owner: type) -> S: ...
    @overload
    def __get__(self, config: KafkaConfig, owner: type) -> T: ...
    def __get__(self: S, config: KafkaConfig | None, owner: type) -> S | Any:
        if config is None:
            return self
        return self.read(config)

    @abstractmethod
    def read(self, config: KafkaConfig) -> T: ...


class _Int(_Setting[int]):
    types = (INT, SHORT, LONG)

    def read(self, config: KafkaConfig) -> int:
        return config.get_int(self.name)


class _Bool(_Setting[bool]):
    types = (BOOLEAN,)

    def read(self, config: KafkaConfig) -> bool:
        return config.get_bool(self.name)


class _Float(_Setting[float]):
    types = (DOUBLE,)

    def read(self, config: KafkaConfig) -> float:
        return config.get_float(self.name)


class _Str(_Setting[str]):
    types = (STRING,)

    def read(self, config: KafkaConfig) -> str:
        return config.get_str(self.name)


class _OptionalStr(_Setting["str | None"]):
    types = (STRING,)
    optional = True

    def read(self, config: KafkaConfig) -> str | None:
        return config.get_optional_str(self.name)


class _StrList(_Setting[list[str]]):
    types = (LIST,)

    def read(self, config: KafkaConfig) -> list[str]:
        return config.get_list(self.name)


@dataclass(frozen=True)
class _Listeners:
    protocol_map: dict[str, SecurityProtocol]
    listeners: list[EndPoint]
    advertised: list[EndPoint]
    inter_broker_name: str
    inter_broker_protocol: SecurityProtocol
    control_plane_name: str | None


class KafkaConfig(AbstractConfig):
    """A broker's configuration: BROKER_CONFIG's defaults overridden by the supplied keys,
    parsed and validated. Read-only; build a new one to change it."""

    def __init__(self, props: Mapping[str, object]) -> None:
        """``props``: config name -> string (or typed) value. ConfigError on a bad value;
        unknown names are logged as warnings."""
        super().__init__(BROKER_CONFIG, props)
        for name in self.unknown_keys:
            if listener_prefixed_key(name) is not None:
                continue  # a per-listener security key (kafkaclone.server.security)
            logger.warning("Ignoring unknown configuration %s: kafkaclone does not know it", name)
        for key in BROKER_CONFIG:
            if key.deprecated and key.name in self._originals:
                replacement = "advertised.listeners" if "advertised" in key.name else "listeners"
                logger.warning("Configuration %s is deprecated: use %s", key.name, replacement)
        self._validate_values()
        self._listener_config = self._parse_listeners()
        self._validate_versions()

    @classmethod
    def from_dict(cls, props: Mapping[str, object]) -> KafkaConfig:
        return cls(props)

    @classmethod
    def from_properties_file(
        cls, path: str | os.PathLike[str], overrides: Sequence[str] = ()
    ) -> KafkaConfig:
        """The properties file at ``path`` with ``overrides`` (``"k=v"``) on top."""
        props: dict[str, object] = dict(load_properties(path))
        props.update(parse_overrides(overrides))
        return cls(props)

    # --- generic access (the typed getters are AbstractConfig's) ---

    def string_value(self, name: str) -> str | None:
        """The value as a config entry carries it (``"true"``, ``"compact,delete"``); None
        for a null value."""
        return BROKER_CONFIG[name].format(self._values[name])

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was supplied (STATIC_BROKER_CONFIG) rather than defaulted."""
        return name in self._originals

    def __repr__(self) -> str:
        supplied = ", ".join(
            f"{name}={'[hidden]' if BROKER_CONFIG[name].sensitive else self.string_value(name)}"
            for name in self._originals
            if name in BROKER_CONFIG
        )
        return f"KafkaConfig({supplied})"

    # --- ZooKeeper ---

    zookeeper_session_timeout_ms = _Int("zookeeper.session.timeout.ms")
    zookeeper_sync_time_ms = _Int("zookeeper.sync.time.ms")
    zookeeper_set_acl = _Bool("zookeeper.set.acl")
    zookeeper_max_in_flight_requests = _Int("zookeeper.max.in.flight.requests")

    @property
    def zookeeper_connect(self) -> str:
        return self.get_str("zookeeper.connect")

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """``zookeeper.connection.timeout.ms``, else ``zookeeper.session.timeout.ms``."""
        if self.get("zookeeper.connection.timeout.ms") is None:
            return self.zookeeper_session_timeout_ms
        return self.get_int("zookeeper.connection.timeout.ms")

    # --- general ---

    broker_id = _Int("broker.id")
    broker_id_generation_enable = _Bool("broker.id.generation.enable")
    reserved_broker_max_id = _Int("reserved.broker.max.id")
    broker_rack = _OptionalStr("broker.rack")
    message_max_bytes = _Int("message.max.bytes")
    num_network_threads = _Int("num.network.threads")
    num_io_threads = _Int("num.io.threads")
    background_threads = _Int("background.threads")
    queued_max_requests = _Int("queued.max.requests")
    queued_max_request_bytes = _Int("queued.max.request.bytes")
    request_timeout_ms = _Int("request.timeout.ms")
    socket_connection_setup_timeout_ms = _Int("socket.connection.setup.timeout.ms")
    socket_connection_setup_timeout_max_ms = _Int("socket.connection.setup.timeout.max.ms")
    delete_topic_enable = _Bool("delete.topic.enable")
    auto_create_topics_enable = _Bool("auto.create.topics.enable")
    authorizer_class_name = _Str("authorizer.class.name")
    super_users = _OptionalStr("super.users")
    allow_everyone_if_no_acl_found = _Bool("allow.everyone.if.no.acl.found")
    compression_type = _Str("compression.type")

    # --- socket server ---

    socket_send_buffer_bytes = _Int("socket.send.buffer.bytes")
    socket_receive_buffer_bytes = _Int("socket.receive.buffer.bytes")
    socket_request_max_bytes = _Int("socket.request.max.bytes")
    max_connections_per_ip = _Int("max.connections.per.ip")
    max_connections = _Int("max.connections")
    max_connection_creation_rate = _Int("max.connection.creation.rate")
    connections_max_idle_ms = _Int("connections.max.idle.ms")
    quota_window_num = _Int("quota.window.num")
    quota_window_size_seconds = _Int("quota.window.size.seconds")

    @property
    def listeners(self) -> list[EndPoint]:
        """What the broker listens on: ``listeners``, else PLAINTEXT://host.name:port."""
        return list(self._listener_config.listeners)

    @property
    def advertised_listeners(self) -> list[EndPoint]:
        """What the broker registers in ZooKeeper: ``advertised.listeners``, else (as Kafka)
        the deprecated advertised.host.name/advertised.port if set, else ``listeners``."""
        return list(self._listener_config.advertised)

    @property
    def listener_security_protocol_map(self) -> dict[str, SecurityProtocol]:
        return dict(self._listener_config.protocol_map)

    @property
    def inter_broker_listener_name(self) -> str:
        return self._listener_config.inter_broker_name

    @property
    def inter_broker_security_protocol(self) -> SecurityProtocol:
        return self._listener_config.inter_broker_protocol

    @property
    def control_plane_listener_name(self) -> str | None:
        return self._listener_config.control_plane_name

    @property
    def control_plane_listener(self) -> EndPoint | None:
        """The listener of ``control.plane.listener.name``, if one is configured."""
        name = self.control_plane_listener_name
        return next((e for e in self._listener_config.listeners if e.listener_name == name), None)

    @property
    def data_plane_listeners(self) -> list[EndPoint]:
        """The listeners serving clients and replication: all but the control plane's."""
        name = self.control_plane_listener_name
        return [e for e in self._listener_config.listeners if e.listener_name != name]

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        return _parse_connection_overrides(self.get_str("max.connections.per.ip.overrides"))

    # --- log ---

    num_partitions = _Int("num.partitions")
    default_replication_factor = _Int("default.replication.factor")
    num_recovery_threads_per_data_dir = _Int("num.recovery.threads.per.data.dir")
    log_segment_bytes = _Int("log.segment.bytes")
    log_retention_bytes = _Int("log.retention.bytes")
    log_retention_check_interval_ms = _Int("log.retention.check.interval.ms")
    log_cleanup_policy = _StrList("log.cleanup.policy")
    log_index_size_max_bytes = _Int("log.index.size.max.bytes")
    log_index_interval_bytes = _Int("log.index.interval.bytes")
    log_flush_interval_messages = _Int("log.flush.interval.messages")
    log_flush_scheduler_interval_ms = _Int("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms = _Int("log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms = _Int(
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    log_segment_delete_delay_ms = _Int("log.segment.delete.delay.ms")
    log_preallocate = _Bool("log.preallocate")
    log_message_timestamp_type = _Str("log.message.timestamp.type")
    log_message_timestamp_difference_max_ms = _Int("log.message.timestamp.difference.max.ms")
    log_message_downconversion_enable = _Bool("log.message.downconversion.enable")
    min_insync_replicas = _Int("min.insync.replicas")

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs``, else ``log.dir``, split on commas."""
        return parse_csv_list(self._log_dirs_text()[1])

    @property
    def log_roll_ms(self) -> int:
        """``log.roll.ms``, else ``log.roll.hours`` in ms."""
        return self._with_variants("log.roll.ms")

    @property
    def log_roll_jitter_ms(self) -> int:
        """``log.roll.jitter.ms``, else ``log.roll.jitter.hours`` in ms."""
        return self._with_variants("log.roll.jitter.ms")

    @property
    def log_retention_ms(self) -> int:
        """``log.retention.ms``, else ``.minutes``, else ``.hours``, in ms; -1 (no limit)
        for any negative value."""
        millis = self._with_variants("log.retention.ms")
        return -1 if millis < 0 else millis

    @property
    def log_flush_interval_ms(self) -> int:
        """``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms``."""
        return self._with_variants("log.flush.interval.ms")

    @property
    def log_message_format_version(self) -> str:
        """The canonical form of ``log.message.format.version`` (``"2.8"`` -> 2.8-IV1)."""
        return _canonical(self.get_str("log.message.format.version"))

    # --- log cleaner ---

    log_cleaner_enable = _Bool("log.cleaner.enable")
    log_cleaner_threads = _Int("log.cleaner.threads")
    log_cleaner_io_max_bytes_per_second = _Float("log.cleaner.io.max.bytes.per.second")
    log_cleaner_dedupe_buffer_size = _Int("log.cleaner.dedupe.buffer.size")
    log_cleaner_io_buffer_size = _Int("log.cleaner.io.buffer.size")
    log_cleaner_io_buffer_load_factor = _Float("log.cleaner.io.buffer.load.factor")
    log_cleaner_backoff_ms = _Int("log.cleaner.backoff.ms")
    log_cleaner_min_cleanable_ratio = _Float("log.cleaner.min.cleanable.ratio")
    log_cleaner_delete_retention_ms = _Int("log.cleaner.delete.retention.ms")
    log_cleaner_min_compaction_lag_ms = _Int("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms = _Int("log.cleaner.max.compaction.lag.ms")

    # --- replication ---

    unclean_leader_election_enable = _Bool("unclean.leader.election.enable")
    replica_lag_time_max_ms = _Int("replica.lag.time.max.ms")
    replica_socket_timeout_ms = _Int("replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes = _Int("replica.socket.receive.buffer.bytes")
    replica_fetch_max_bytes = _Int("replica.fetch.max.bytes")
    replica_fetch_wait_max_ms = _Int("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes = _Int("replica.fetch.min.bytes")
    replica_fetch_response_max_bytes = _Int("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms = _Int("replica.fetch.backoff.ms")
    num_replica_fetchers = _Int("num.replica.fetchers")
    replica_selector_class = _OptionalStr("replica.selector.class")
    replica_high_watermark_checkpoint_interval_ms = _Int(
        "replica.high.watermark.checkpoint.interval.ms"
    )
    fetch_purgatory_purge_interval_requests = _Int("fetch.purgatory.purge.interval.requests")
    producer_purgatory_purge_interval_requests = _Int("producer.purgatory.purge.interval.requests")
    delete_records_purgatory_purge_interval_requests = _Int(
        "delete.records.purgatory.purge.interval.requests"
    )
    controller_socket_timeout_ms = _Int("controller.socket.timeout.ms")
    auto_leader_rebalance_enable = _Bool("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage = _Int("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds = _Int("leader.imbalance.check.interval.seconds")

    @property
    def inter_broker_protocol_version(self) -> str:
        """The canonical form of ``inter.broker.protocol.version``."""
        return _canonical(self.get_str("inter.broker.protocol.version"))

    # --- metrics ---

    metrics_prometheus_port = _Int("metrics.prometheus.port")
    metrics_prometheus_host = _Str("metrics.prometheus.host")

    # --- controlled shutdown ---

    controlled_shutdown_enable = _Bool("controlled.shutdown.enable")
    controlled_shutdown_max_retries = _Int("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms = _Int("controlled.shutdown.retry.backoff.ms")

    # --- group coordinator and offsets ---

    group_min_session_timeout_ms = _Int("group.min.session.timeout.ms")
    group_max_session_timeout_ms = _Int("group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms = _Int("group.initial.rebalance.delay.ms")
    group_max_size = _Int("group.max.size")
    offsets_storage = _Str("offsets.storage")
    offsets_topic_num_partitions = _Int("offsets.topic.num.partitions")
    offsets_topic_replication_factor = _Int("offsets.topic.replication.factor")
    offsets_topic_segment_bytes = _Int("offsets.topic.segment.bytes")
    offsets_topic_compression_codec = _Int("offsets.topic.compression.codec")
    offsets_retention_minutes = _Int("offsets.retention.minutes")
    offsets_retention_check_interval_ms = _Int("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms = _Int("offsets.commit.timeout.ms")
    offsets_commit_required_acks = _Int("offsets.commit.required.acks")
    offsets_load_buffer_size = _Int("offsets.load.buffer.size")
    offset_metadata_max_bytes = _Int("offset.metadata.max.bytes")

    # --- transactions and fetch ---

    transactional_id_expiration_ms = _Int("transactional.id.expiration.ms")
    transaction_max_timeout_ms = _Int("transaction.max.timeout.ms")
    transaction_state_log_num_partitions = _Int("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor = _Int("transaction.state.log.replication.factor")
    transaction_state_log_min_isr = _Int("transaction.state.log.min.isr")
    transaction_state_log_segment_bytes = _Int("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size = _Int("transaction.state.log.load.buffer.size")
    fetch_max_bytes = _Int("fetch.max.bytes")
    max_incremental_fetch_session_cache_slots = _Int("max.incremental.fetch.session.cache.slots")

    # --- topic defaults ---

    def log_config_props(self) -> dict[str, ConfigValue]:
        """The broker-wide default of every topic-level config, keyed by its topic name
        (``retention.ms`` -> log_retention_ms, ...): what a topic without overrides gets
        (Kafka's ``copyKafkaConfigToLog``)."""
        derived: dict[str, ConfigValue] = {
            "log.roll.ms": self.log_roll_ms,
            "log.roll.jitter.ms": self.log_roll_jitter_ms,
            "log.retention.ms": self.log_retention_ms,
            "log.flush.interval.ms": self.log_flush_interval_ms,
        }
        return {
            topic_name: derived[broker_name] if broker_name in derived else self.get(broker_name)
            for topic_name, broker_name in TOPIC_CONFIG_SYNONYMS.items()
        }

    # --- validation (Kafka's KafkaConfig.validateValues) ---

    def _validate_values(self) -> None:
        connect = self.get("zookeeper.connect")
        if not connect:
            raise ConfigError(
                "zookeeper.connect", connect, "required: host:port[,host:port...][/chroot]"
            )
        broker_id = self.broker_id
        if self.broker_id_generation_enable:
            if not -1 <= broker_id <= self.reserved_broker_max_id:
                raise ConfigError(
                    "broker.id", broker_id,
                    f"must be in [-1, {self.reserved_broker_max_id}] (reserved.broker.max.id; "
                    f"-1 generates one)",
                )
        elif broker_id < 0:
            raise ConfigError(
                "broker.id", broker_id, "must be >= 0 when broker.id.generation.enable=false"
            )
        self._check(self.log_roll_ms >= 1, "log.roll.ms", self.log_roll_ms, "must be at least 1")
        self._check(
            self.log_roll_jitter_ms >= 0, "log.roll.jitter.ms", self.log_roll_jitter_ms,
            "must be at least 0",
        )
        retention = self.log_retention_ms
        self._check(
            retention >= 1 or retention == -1, "log.retention.ms", retention,
            "must be -1 (no limit) or at least 1",
        )
        log_dirs_key, log_dirs_text = self._log_dirs_text()
        self._check(
            bool(parse_csv_list(log_dirs_text)), log_dirs_key, log_dirs_text,
            "at least one log directory is required",
        )
        if self.log_cleaner_threads > 0:
            per_thread = self.log_cleaner_dedupe_buffer_size // self.log_cleaner_threads
            self._check(
                per_thread > 1024 * 1024, "log.cleaner.dedupe.buffer.size",
                self.log_cleaner_dedupe_buffer_size,
                f"must be more than 1 MiB per cleaner thread ({self.log_cleaner_threads})",
            )
        fetch_wait = self.replica_fetch_wait_max_ms
        self._check(
            fetch_wait <= self.replica_socket_timeout_ms, "replica.fetch.wait.max.ms", fetch_wait,
            f"must be at most replica.socket.timeout.ms ({self.replica_socket_timeout_ms})",
        )
        self._check(
            fetch_wait <= self.replica_lag_time_max_ms, "replica.fetch.wait.max.ms", fetch_wait,
            f"must be at most replica.lag.time.max.ms ({self.replica_lag_time_max_ms})",
        )
        acks = self.offsets_commit_required_acks
        self._check(
            -1 <= acks <= self.offsets_topic_replication_factor,
            "offsets.commit.required.acks", acks,
            f"must be in [-1, offsets.topic.replication.factor "
            f"({self.offsets_topic_replication_factor})]",
        )
        queued_bytes = self.queued_max_request_bytes
        self._check(
            queued_bytes <= 0 or queued_bytes >= self.socket_request_max_bytes,
            "queued.max.request.bytes", queued_bytes,
            f"must be <= 0 or at least socket.request.max.bytes ({self.socket_request_max_bytes})",
        )
        try:
            overrides = self.max_connections_per_ip_overrides
        except ValueError as exc:
            raise ConfigError(
                "max.connections.per.ip.overrides",
                self.get_str("max.connections.per.ip.overrides"), str(exc),
            ) from None
        self._check(
            self.max_connections_per_ip > 0 or bool(overrides), "max.connections.per.ip", 0,
            "may be 0 only with max.connections.per.ip.overrides set",
        )

    def _parse_listeners(self) -> _Listeners:
        map_text = self.get_str("listener.security.protocol.map")
        protocol_map = self._parsed("listener.security.protocol.map", map_text,
                                    lambda: parse_security_protocol_map(map_text))
        listeners_text = self.get_optional_str("listeners")
        if listeners_text is None:
            listeners_key = "host.name/port"
            listeners_text = f"PLAINTEXT://{self.get_str('host.name')}:{self.get_int('port')}"
        else:
            listeners_key = "listeners"
        listeners = self._parsed(listeners_key, listeners_text,
                                 lambda: parse_listeners(listeners_text, protocol_map))
        if not listeners:
            raise ConfigError(
                "listeners", listeners_text, "at least one NAME://host:port is required"
            )
        advertised_key, advertised_text = self._advertised_listeners_text()
        if advertised_text is None:
            advertised = listeners
        else:
            advertised = self._parsed(
                advertised_key, advertised_text,
                lambda: parse_listeners(advertised_text, protocol_map,
                                        require_distinct_ports=False),
            )
        listener_names = [endpoint.listener_name for endpoint in listeners]
        advertised_names = [endpoint.listener_name for endpoint in advertised]
        for name in advertised_names:
            self._check(
                name in listener_names, advertised_key, advertised_text,
                f"listener {name} is not among those of listeners ({', '.join(listener_names)})",
            )
        for endpoint in advertised:
            self._check(
                endpoint.host != "0.0.0.0", advertised_key, endpoint.connection_string,
                "cannot advertise the non-routable meta-address 0.0.0.0",
            )

        inter_broker_name = self.get_optional_str("inter.broker.listener.name")
        if inter_broker_name is not None:
            self._check(
                not self.is_set("security.inter.broker.protocol"), "inter.broker.listener.name",
                inter_broker_name, "set either it or security.inter.broker.protocol, not both",
            )
            inter_broker_name = normalise_listener_name(inter_broker_name)
            inter_broker_protocol = protocol_map.get(inter_broker_name)
            if inter_broker_protocol is None:
                raise ConfigError(
                    "inter.broker.listener.name", inter_broker_name,
                    "must be a listener name of listener.security.protocol.map",
                )
            inter_broker_key = "inter.broker.listener.name"
        else:
            protocol_name = self.get_str("security.inter.broker.protocol")
            inter_broker_protocol = SecurityProtocol.for_name(protocol_name)
            inter_broker_name = inter_broker_protocol.name
            inter_broker_key = "security.inter.broker.protocol"
        self._check(
            inter_broker_name in advertised_names, inter_broker_key, inter_broker_name,
            f"the inter-broker listener {inter_broker_name} must be one of advertised.listeners "
            f"({', '.join(advertised_names)})",
        )

        control_plane_name = self.get_optional_str("control.plane.listener.name")
        if control_plane_name is not None:
            control_plane_name = normalise_listener_name(control_plane_name)
            self._check(
                control_plane_name in protocol_map, "control.plane.listener.name",
                control_plane_name, "must be a listener name of listener.security.protocol.map",
            )
            self._check(
                control_plane_name in advertised_names, "control.plane.listener.name",
                control_plane_name,
                f"must be one of advertised.listeners ({', '.join(advertised_names)})",
            )
            self._check(
                control_plane_name != inter_broker_name, "control.plane.listener.name",
                control_plane_name, "must differ from the inter-broker listener name",
            )
        return _Listeners(protocol_map, listeners, advertised, inter_broker_name,
                          inter_broker_protocol, control_plane_name)

    def _validate_versions(self) -> None:
        message_format = self.log_message_format_version
        protocol = self.inter_broker_protocol_version
        self._check(
            record_format_version(message_format) <= record_format_version(protocol),
            "log.message.format.version", self.get_str("log.message.format.version"),
            f"its record format is newer than inter.broker.protocol.version ({protocol}) allows",
        )

    def _advertised_listeners_text(self) -> tuple[str, str | None]:
        text = self.get_optional_str("advertised.listeners")
        if text is not None:
            return "advertised.listeners", text
        host = self.get_optional_str("advertised.host.name")
        port = self.get("advertised.port")
        if host is None and port is None:
            return "advertised.listeners", None
        host = self.get_str("host.name") if host is None else host
        port = self.get_int("port") if port is None else port
        return "advertised.host.name/advertised.port", f"PLAINTEXT://{host}:{port}"

    def _log_dirs_text(self) -> tuple[str, str]:
        log_dirs = self.get_optional_str("log.dirs")
        if log_dirs is not None:
            return "log.dirs", log_dirs
        return "log.dir", self.get_str("log.dir")

    def _with_variants(self, name: str) -> int:
        """``name``'s value, else that of the first of its BROKER_CONFIG_VARIANTS set (the
        last has a default), in ``name``'s unit."""
        *preferred, (fallback, fallback_factor) = ((name, 1), *BROKER_CONFIG_VARIANTS[name])
        for variant, factor in preferred:
            if self.get(variant) is not None:
                return self.get_int(variant) * factor
        return self.get_int(fallback) * fallback_factor

    @staticmethod
    def _check(ok: bool, key: str, value: object, allowed: str) -> None:
        if not ok:
            raise ConfigError(key, value, allowed)

    @staticmethod
    def _parsed(key: str, text: str, parse: Callable[[], T]) -> T:
        try:
            return parse()
        except ValueError as exc:
            raise ConfigError(key, text, str(exc)) from None


def _canonical(version: str) -> str:
    canonical = canonical_kafka_version(version)
    assert canonical is not None, "validated by KafkaVersion"
    return canonical


def _parse_connection_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's ``parseCsvMap``: split at the last colon)."""
    overrides: dict[str, int] = {}
    for entry in parse_csv_list(text):
        host, colon, count = entry.rpartition(":")
        number = parse_integer(count)
        if not colon or not host.strip() or number is None:
            raise ValueError(f"entry {entry!r} is not host:count")
        overrides[host.strip()] = number
    return overrides


def cleaner_config(config: KafkaConfig) -> CleanerConfig:
    """Kafka's LogCleaner.cleanerConfig: the log.cleaner.* settings of a broker config."""
    return CleanerConfig(
        num_threads=config.log_cleaner_threads,
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
        dedupe_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
        io_buffer_size=config.log_cleaner_io_buffer_size,
        max_message_size=config.message_max_bytes,
        max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        backoff_ms=config.log_cleaner_backoff_ms,
        enable_cleaner=True,
        use_process=True,
    )
