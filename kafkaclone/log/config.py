"""Log configuration: Kafka's topic-level log configs, declared once as a table.

``LOG_CONFIG_KEYS`` is Kafka 2.8's ``LogConfig`` definition (name, type, default, validator,
doc, and the broker-level config supplying the default: ``server_default_config``, from
which ``TOPIC_CONFIG_SYNONYMS`` is derived). ``LogConfig`` is the typed, immutable view a
``Log`` reads; it is built from a mapping of string values (what ZooKeeper's
``/config/topics/<t>`` and CreateTopics carry) and every invalid value is an
``InvalidConfigError`` naming its key.

``LOG_MANAGER_CONFIG_KEYS`` declares the broker-level settings the ``LogManager`` itself
reads (``log.dirs``, check intervals); the broker's table (``kafkaclone.server.config``)
places these rows in its sections and takes the defaults of the topic configs' broker
synonyms from ``LOG_CONFIG_KEYS``, so each default is declared once, here.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from kafkaclone.common.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Importance,
    at_least,
    between,
    each_one_of,
    one_of,
    parse_csv_list,
    parse_typed,
)
from kafkaclone.common.errors import InvalidConfigError

__all__ = [
    "BROKER_COMPRESSION_TYPES",
    "BROKER_CONFIG_VARIANTS",
    "COMPACT",
    "CREATE_TIME",
    "DELETE",
    "LOG_APPEND_TIME",
    "LOG_CONFIG_KEYS",
    "LOG_MANAGER_CONFIG_KEYS",
    "LONG_MAX",
    "TOPIC_CONFIG_SYNONYMS",
    "LogConfig",
    "LogManagerConfig",
    "config_docs",
]

COMPACT: Final = "compact"
DELETE: Final = "delete"

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"

BROKER_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

MINUTE_MS: Final = 60 * 1000
HOUR_MS: Final = 60 * MINUTE_MS
DAY_MS: Final = 24 * HOUR_MS

INT: Final = ConfigType.INT
LONG: Final = ConfigType.LONG
DOUBLE: Final = ConfigType.DOUBLE
BOOLEAN: Final = ConfigType.BOOLEAN
STRING: Final = ConfigType.STRING
LIST: Final = ConfigType.LIST
HIGH: Final = Importance.HIGH
MEDIUM: Final = Importance.MEDIUM
LOW: Final = Importance.LOW

# Kafka 2.8's kafka.log.LogConfig, in its order, with its importance. Docs are abridged
# from Kafka's.
LOG_CONFIG_KEYS: Final = ConfigDef([
    ConfigKey("segment.bytes", INT, 1024 * 1024 * 1024, MEDIUM,
              "The segment file size for the log; retention and cleaning are always done a "
              "file at a time.",
              validator=at_least(14), server_default_config="log.segment.bytes"),
    ConfigKey("segment.ms", LONG, 7 * DAY_MS, MEDIUM,
              "The period of time after which a segment is rolled even if it is not full, so "
              "that retention can delete or compact old data.",
              validator=at_least(1), server_default_config="log.roll.ms"),
    ConfigKey("segment.jitter.ms", LONG, 0, MEDIUM,
              "The maximum random jitter subtracted from segment.ms to avoid thundering herds "
              "of segment rolling.",
              validator=at_least(0), server_default_config="log.roll.jitter.ms"),
    ConfigKey("segment.index.bytes", INT, 10 * 1024 * 1024, MEDIUM,
              "The size of the index that maps offsets to file positions.",
              validator=at_least(0), server_default_config="log.index.size.max.bytes"),
    ConfigKey("flush.messages", LONG, LONG_MAX, MEDIUM,
              "Force an fsync of the log after this many messages (default: leave flushing "
              "to the OS).",
              validator=at_least(0), server_default_config="log.flush.interval.messages"),
    ConfigKey("flush.ms", LONG, LONG_MAX, MEDIUM,
              "Force an fsync of the log after this much time.",
              validator=at_least(0), server_default_config="log.flush.interval.ms"),
    ConfigKey("retention.bytes", LONG, -1, MEDIUM,
              "The maximum size a partition can grow to before old segments are discarded "
              "(-1: no limit).",
              server_default_config="log.retention.bytes"),
    ConfigKey("retention.ms", LONG, 7 * DAY_MS, MEDIUM,
              "The maximum time a segment is retained before it is discarded (-1: no limit).",
              validator=at_least(-1), server_default_config="log.retention.ms"),
    ConfigKey("max.message.bytes", INT, 1024 * 1024 + 12, MEDIUM,
              "The largest record batch size allowed.",
              validator=at_least(0), server_default_config="message.max.bytes"),
    ConfigKey("index.interval.bytes", INT, 4096, MEDIUM,
              "How often an entry is added to the offset index.",
              validator=at_least(0), server_default_config="log.index.interval.bytes"),
    ConfigKey("delete.retention.ms", LONG, DAY_MS, MEDIUM,
              "How long delete tombstones are retained on compacted topics.",
              validator=at_least(0), server_default_config="log.cleaner.delete.retention.ms"),
    ConfigKey("min.compaction.lag.ms", LONG, 0, MEDIUM,
              "The minimum time a message remains uncompacted.",
              validator=at_least(0), server_default_config="log.cleaner.min.compaction.lag.ms"),
    ConfigKey("max.compaction.lag.ms", LONG, LONG_MAX, MEDIUM,
              "The maximum time a message remains ineligible for compaction.",
              validator=at_least(1), server_default_config="log.cleaner.max.compaction.lag.ms"),
    ConfigKey("file.delete.delay.ms", LONG, 60000, MEDIUM,
              "The time to wait before deleting a file from the filesystem.",
              validator=at_least(0), server_default_config="log.segment.delete.delay.ms"),
    ConfigKey("min.cleanable.dirty.ratio", DOUBLE, 0.5, MEDIUM,
              "How frequently the log compactor attempts to clean the log.",
              validator=between(0, 1), server_default_config="log.cleaner.min.cleanable.ratio"),
    ConfigKey("cleanup.policy", LIST, (DELETE,), MEDIUM,
              "'delete' discards old segments by time or size, 'compact' keeps the latest "
              "value per key.",
              validator=each_one_of(COMPACT, DELETE), server_default_config="log.cleanup.policy"),
    ConfigKey("unclean.leader.election.enable", BOOLEAN, False, MEDIUM,
              "Whether replicas not in the ISR may be elected leader as a last resort.",
              server_default_config="unclean.leader.election.enable"),
    ConfigKey("min.insync.replicas", INT, 1, MEDIUM,
              "The minimum number of in-sync replicas for an acks=all produce to succeed.",
              validator=at_least(1), server_default_config="min.insync.replicas"),
    ConfigKey("compression.type", STRING, "producer", MEDIUM,
              "The final compression type for the topic; 'producer' keeps the producer's.",
              validator=one_of(*BROKER_COMPRESSION_TYPES),
              server_default_config="compression.type"),
    ConfigKey("preallocate", BOOLEAN, False, MEDIUM,
              "Preallocate the file on disk when creating a new segment.",
              server_default_config="log.preallocate"),
    ConfigKey("message.format.version", STRING, "2.8-IV1", MEDIUM,
              "The message format version the broker uses to append messages.",
              server_default_config="log.message.format.version"),
    ConfigKey("message.timestamp.type", STRING, CREATE_TIME, MEDIUM,
              "Whether the timestamp in the message is the create time or the log append "
              "time.",
              validator=one_of(CREATE_TIME, LOG_APPEND_TIME),
              server_default_config="log.message.timestamp.type"),
    ConfigKey("message.timestamp.difference.max.ms", LONG, LONG_MAX, MEDIUM,
              "The maximum difference allowed between a CreateTime timestamp and the broker's "
              "clock.",
              validator=at_least(0),
              server_default_config="log.message.timestamp.difference.max.ms"),
    ConfigKey("leader.replication.throttled.replicas", LIST, (), MEDIUM,
              "Replicas whose log replication is throttled on the leader side."),
    ConfigKey("follower.replication.throttled.replicas", LIST, (), MEDIUM,
              "Replicas whose log replication is throttled on the follower side."),
    ConfigKey("message.downconversion.enable", BOOLEAN, True, LOW,
              "Whether down-conversion of the message format is enabled for consumers.",
              server_default_config="log.message.downconversion.enable"),
])  # fmt: skip

TOPIC_CONFIG_SYNONYMS: Final[Mapping[str, str]] = MappingProxyType({
    key.name: key.server_default_config
    for key in LOG_CONFIG_KEYS
    if key.server_default_config is not None
})
"""Topic-level config -> the broker config that supplies its default, the highest-priority
one where several do (Kafka's ``LogConfig.TopicConfigSynonyms``)."""

BROKER_CONFIG_VARIANTS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = MappingProxyType({
    "log.roll.ms": (("log.roll.hours", HOUR_MS),),
    "log.roll.jitter.ms": (("log.roll.jitter.hours", HOUR_MS),),
    "log.flush.interval.ms": (("log.flush.scheduler.interval.ms", 1),),
    "log.retention.ms": (("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)),
})
"""The broker configs that other, lower-priority broker configs stand in for when they are
not set, each with the factor turning its value into the first's unit; the first set wins
(Kafka: log.retention.ms over .minutes over .hours; log.roll.ms over log.roll.hours;
log.flush.interval.ms over log.flush.scheduler.interval.ms)."""


def _default(name: str) -> Any:
    return LOG_CONFIG_KEYS[name].default


def _parse_all(
    keys: ConfigDef, props: Mapping[str, Any], *, ignore_unknown: bool
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, raw in props.items():
        key = keys.get(name)
        if key is None:
            if ignore_unknown:
                continue
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        values[key.attribute] = key.parse(raw)
    return values


@dataclass(frozen=True)
class LogConfig:
    """The configuration of one partition log (a topic's configs over the broker defaults).

    ``LogConfig()`` has Kafka's defaults; ``LogConfig.from_props({"segment.bytes": "1024"})``
    parses and validates string values.
    """

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    retention_bytes: int = _default("retention.bytes")
    retention_ms: int = _default("retention.ms")
    max_message_bytes: int = _default("max.message.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    min_insync_replicas: int = _default("min.insync.replicas")
    compression_type: str = _default("compression.type")
    preallocate: bool = _default("preallocate")
    message_format_version: str = _default("message.format.version")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_difference_max_ms: int = _default("message.timestamp.difference.max.ms")
    leader_replication_throttled_replicas: tuple[str, ...] = _default(
        "leader.replication.throttled.replicas"
    )
    follower_replication_throttled_replicas: tuple[str, ...] = _default(
        "follower.replication.throttled.replicas"
    )
    message_downconversion_enable: bool = _default("message.downconversion.enable")
    overridden: frozenset[str] = field(default=frozenset(), compare=False)
    """The names set explicitly (topic overrides), as Kafka's LogConfig tracks them."""

    @classmethod
    def from_props(
        cls,
        props: Mapping[str, Any] | None = None,
        *,
        defaults: LogConfig | None = None,
        ignore_unknown: bool = False,
    ) -> LogConfig:
        """``defaults`` (or Kafka's defaults) overridden by ``props`` (topic config name ->
        string or typed value). InvalidConfigError for an unknown name (unless
        ``ignore_unknown``) or an invalid value, naming the key."""
        props = props or {}
        values = _parse_all(LOG_CONFIG_KEYS, props, ignore_unknown=ignore_unknown)
        base = defaults if defaults is not None else cls()
        overridden = base.overridden | {name for name in props if name in LOG_CONFIG_KEYS}
        config = dataclasses.replace(base, overridden=frozenset(overridden), **values)
        config.validate()
        return config

    @classmethod
    def from_topic_overrides(cls, overrides: Mapping[str, str],
                             defaults: LogConfig) -> LogConfig:
        """A topic's config: its overrides (``/config/topics/<t>``, CreateTopics' configs)
        over the broker's topic defaults (``from_broker_props``), as Kafka's
        ``LogConfig.fromProps(defaults, overrides)``. Unknown names are ignored: they were
        refused when written, or belong to a newer broker. InvalidConfigError for an
        invalid value."""
        return cls.from_props(overrides, defaults=defaults, ignore_unknown=True)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """The broker-wide defaults from server.properties names (``log.segment.bytes``,
        ``log.retention.hours`` ...), with Kafka's precedence between the ms / minutes /
        hours variants (``BROKER_CONFIG_VARIANTS``). Unknown broker keys are ignored."""
        values: dict[str, Any] = {}
        for topic_name, broker_name in TOPIC_CONFIG_SYNONYMS.items():
            if broker_name in props:
                values[topic_name] = props[broker_name]
                continue
            for variant, factor in BROKER_CONFIG_VARIANTS.get(broker_name, ()):
                if variant in props:
                    values[topic_name] = _parse_long(variant, props[variant]) * factor
                    break
        config = cls.from_props(values)
        return dataclasses.replace(config, overridden=frozenset())

    def validate(self) -> None:
        """The cross-key checks Kafka makes (LogConfig.validateValues)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})"
            )

    def to_props(self) -> dict[str, str]:
        """Every config as its string value, keyed by Kafka's name."""
        return {key.name: _format(key, getattr(self, key.attribute)) for key in LOG_CONFIG_KEYS}

    def get(self, name: str) -> Any:
        """The typed value of a config by its Kafka name."""
        key = LOG_CONFIG_KEYS.get(name)
        if key is None:
            raise KeyError(name)
        return getattr(self, key.attribute)

    @property
    def delete(self) -> bool:
        """cleanup.policy includes delete: retention applies."""
        return DELETE in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """A segment's roll jitter: uniform in [0, min(segment.jitter.ms, segment.ms))."""
        if self.segment_jitter_ms == 0:
            return 0
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return (rng or random).randrange(bound)


def _parse_long(name: str, raw: object) -> int:
    try:
        value = parse_typed(LONG, raw)
    except ValueError as exc:
        raise ConfigError(name, raw, str(exc)) from None
    assert isinstance(value, int)
    return value


def _format(key: ConfigKey, value: Any) -> str:
    text = key.format(value)
    assert text is not None, f"{key.name} has no null value"
    return text


# -- broker-level settings of the log manager ---------------------------------------------

# Declared here, with the broker's docs, because the log layer reads them itself; the
# broker's table (kafkaclone.server.config.BROKER_CONFIG) places each row in its section.
LOG_MANAGER_CONFIG_KEYS: Final = ConfigDef([
    ConfigKey("broker.id", INT, -1, HIGH,
              "This broker's id, unique in the cluster. If -1 an id is generated through "
              "ZooKeeper, above reserved.broker.max.id so that it cannot clash with "
              "configured ids."),
    ConfigKey("log.dirs", STRING, None, HIGH,
              "The directories partition logs are kept in, separated by commas; "
              "log.dir if not set."),
    ConfigKey("log.dir", STRING, "/tmp/kafka-logs", HIGH,
              "The directory partition logs are kept in, when log.dirs is not set."),
    ConfigKey("num.recovery.threads.per.data.dir", INT, 1, HIGH,
              "Threads per log directory recovering logs at startup and flushing them at "
              "shutdown.",
              validator=at_least(1),
              note="Each directory's logs are opened (and recovered after an unclean "
              "shutdown) at start, and flushed and closed at shutdown, on a pool of this "
              "many threads; dynamic (from the next shutdown on). Python threads overlap "
              "the file work, not the CPU work."),
    ConfigKey("log.retention.check.interval.ms", LONG, 5 * MINUTE_MS, MEDIUM,
              "How often logs are checked for segments to delete.",
              validator=at_least(1)),
    ConfigKey("log.flush.scheduler.interval.ms", LONG, _default("flush.ms"), HIGH,
              "How often logs are checked for a time-based flush."),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", INT, 60000, HIGH,
              "How often the recovery points (recovery-point-offset-checkpoint) are "
              "written.",
              validator=at_least(0)),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, HIGH,
              "How often the log start offsets (log-start-offset-checkpoint) are "
              "written.",
              validator=at_least(0)),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, HIGH,
              "How often the high watermarks (replication-offset-checkpoint) are "
              "written."),
    ConfigKey("transactional.id.expiration.ms", INT, 7 * 24 * 60 * MINUTE_MS, HIGH,
              "Forget a transactional id (and expire a producer id) after this long "
              "without a transaction status update. A partition forgets an idempotent "
              "producer that has not written to it for this long (Kafka 2.8).",
              validator=at_least(1)),
    ConfigKey("producer.id.expiration.check.interval.ms", INT, 10 * MINUTE_MS, LOW,
              "How often partitions forget their expired producer ids.",
              validator=at_least(1),
              note="Kafka's internal setting (a constant in Kafka 2.8)."),
])  # fmt: skip


def _manager_default(name: str) -> Any:
    return LOG_MANAGER_CONFIG_KEYS[name].default


@dataclass(frozen=True)
class LogManagerConfig:
    """The broker settings a LogManager reads, plus the default LogConfig for new logs."""

    log_dirs: tuple[str, ...] = (_manager_default("log.dir"),)
    log_retention_check_interval_ms: int = _manager_default("log.retention.check.interval.ms")
    log_flush_scheduler_interval_ms: int = _manager_default("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _manager_default(
        "log.flush.offset.checkpoint.interval.ms"
    )
    log_flush_start_offset_checkpoint_interval_ms: int = _manager_default(
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    replica_high_watermark_checkpoint_interval_ms: int = _manager_default(
        "replica.high.watermark.checkpoint.interval.ms"
    )
    num_recovery_threads_per_data_dir: int = _manager_default("num.recovery.threads.per.data.dir")
    broker_id: int = _manager_default("broker.id")
    transactional_id_expiration_ms: int = _manager_default("transactional.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = _manager_default(
        "producer.id.expiration.check.interval.ms"
    )
    default_log_config: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> LogManagerConfig:
        """From server.properties names; keys this table does not know are ignored (the
        topic-level defaults among them are read by ``LogConfig.from_broker_props``)."""
        values = _parse_all(LOG_MANAGER_CONFIG_KEYS, props, ignore_unknown=True)
        log_dirs = parse_csv_list(values.pop("log_dirs", None) or "")
        log_dir = values.pop("log_dir", None)
        if not log_dirs:
            log_dirs = [log_dir or _manager_default("log.dir")]
        return cls(
            log_dirs=tuple(log_dirs),
            default_log_config=LogConfig.from_broker_props(props),
            **values,
        )


def config_docs(keys: Iterable[ConfigKey] = LOG_CONFIG_KEYS) -> str:
    """A Markdown table of a config table, for docs/."""
    lines = ["| name | type | default | server default property | description |",
             "|---|---|---|---|---|"]
    for key in keys:
        default = "" if key.default is None else key.format(key.default)
        lines.append(
            f"| {key.name} | {key.type.name.lower()} | {default} "
            f"| {key.server_default_config or ''} | {key.doc} |"
        )
    return "\n".join(lines)
