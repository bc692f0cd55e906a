"""Log configuration: Kafka's topic-level log configs, declared once as a table.

``LOG_CONFIG_KEYS`` is Kafka 2.8's ``LogConfig`` definition (name, type, default, validator,
doc, broker-level synonym). ``LogConfig`` is the typed, immutable view a ``Log`` reads;
it is built from a mapping of string values (what ZooKeeper's ``/config/topics/<t>`` and
CreateTopics carry) and every invalid value is an ``InvalidConfigError`` naming its key.

``LOG_MANAGER_CONFIG_KEYS`` declares the broker-level settings the ``LogManager`` itself
reads (``log.dirs``, check intervals), in the same form, so a broker config layer can reuse
both tables.
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafkaclone.protocol.errors import InvalidConfigError

INT_MAX: Final = 2**31 - 1
INT_MIN: Final = -(2**31)
LONG_MAX: Final = 2**63 - 1
LONG_MIN: Final = -(2**63)

COMPACT: Final = "compact"
DELETE: Final = "delete"

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"

BROKER_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigType(enum.Enum):
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"


Validator = Callable[[Any], str | None]
"""Returns None if the parsed value is acceptable, else the reason it is not."""


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"Value must be at least {minimum}"

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> str | None:
        if low <= value <= high:
            return None
        return f"Value must be no less than {low} and no more than {high}"

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"String must be one of: {', '.join(allowed)}"

    return check


def each_one_of(*allowed: str) -> Validator:
    def check(value: Any) -> str | None:
        for item in value:
            if item not in allowed:
                return f"Invalid value {item}; must be one of [{', '.join(allowed)}]"
        return None

    return check


@dataclass(frozen=True)
class ConfigKey:
    """One row of a config table."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None
    doc: str
    server_name: str | None = None
    """The broker-level (server.properties) config that supplies the default."""

    @property
    def attribute(self) -> str:
        """The Python attribute holding the value: ``segment.bytes`` -> ``segment_bytes``."""
        return self.name.replace(".", "_")

    def parse(self, raw: Any) -> Any:
        """The typed value of ``raw`` (a string, or an already typed value), validated."""
        try:
            value = _parse_typed(self.type, raw)
        except ValueError as exc:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {self.name}: {exc}"
            ) from None
        if self.validator is not None:
            reason = self.validator(value)
            if reason is not None:
                raise InvalidConfigError(
                    f"Invalid value {raw} for configuration {self.name}: {reason}"
                )
        return value

    def format(self, value: Any) -> str:
        """The string form of a typed value, as a config entry carries it."""
        if self.type is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self.type is ConfigType.LIST:
            return ",".join(value)
        return str(value)


def _parse_typed(config_type: ConfigType, raw: Any) -> Any:
    if config_type in (ConfigType.INT, ConfigType.LONG):
        if isinstance(raw, bool):
            raise ValueError("Expected value to be a number")
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str):
            try:
                value = int(raw.strip())
            except ValueError:
                raise ValueError("Not a number of type " + config_type.name) from None
        else:
            raise ValueError("Expected value to be a number")
        low, high = (INT_MIN, INT_MAX) if config_type is ConfigType.INT else (LONG_MIN, LONG_MAX)
        if not low <= value <= high:
            raise ValueError("Not a number of type " + config_type.name)
        return value
    if config_type is ConfigType.DOUBLE:
        if isinstance(raw, bool):
            raise ValueError("Expected value to be a double")
        if isinstance(raw, int | float):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                raise ValueError("Not a number of type DOUBLE") from None
        raise ValueError("Expected value to be a double")
    if config_type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            text = raw.strip().lower()
            if text in ("true", "false"):
                return text == "true"
        raise ValueError("Expected value to be either true or false")
    if config_type is ConfigType.STRING:
        if isinstance(raw, str):
            return raw.strip()
        raise ValueError("Expected value to be a string")
    # LIST
    if isinstance(raw, str):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    if isinstance(raw, list | tuple):
        return tuple(str(item).strip() for item in raw)
    raise ValueError("Expected a comma separated list")


DAY_MS: Final = 24 * 60 * 60 * 1000

# Kafka 2.8's kafka.log.LogConfig, in its order. Docs are abridged from Kafka's.
LOG_CONFIG_KEYS: Final[tuple[ConfigKey, ...]] = (
    ConfigKey("segment.bytes", ConfigType.INT, 1024 * 1024 * 1024, at_least(14),
              "The segment file size for the log; retention and cleaning are always done a "
              "file at a time.", "log.segment.bytes"),
    ConfigKey("segment.ms", ConfigType.LONG, 7 * DAY_MS, at_least(1),
              "The period of time after which a segment is rolled even if it is not full, so "
              "that retention can delete or compact old data.", "log.roll.ms"),
    ConfigKey("segment.jitter.ms", ConfigType.LONG, 0, at_least(0),
              "The maximum random jitter subtracted from segment.ms to avoid thundering herds "
              "of segment rolling.", "log.roll.jitter.ms"),
    ConfigKey("segment.index.bytes", ConfigType.INT, 10 * 1024 * 1024, at_least(0),
              "The size of the index that maps offsets to file positions.",
              "log.index.size.max.bytes"),
    ConfigKey("flush.messages", ConfigType.LONG, LONG_MAX, at_least(0),
              "Force an fsync of the log after this many messages (default: leave flushing "
              "to the OS).", "log.flush.interval.messages"),
    ConfigKey("flush.ms", ConfigType.LONG, LONG_MAX, at_least(0),
              "Force an fsync of the log after this much time.", "log.flush.interval.ms"),
    ConfigKey("retention.bytes", ConfigType.LONG, -1, None,
              "The maximum size a partition can grow to before old segments are discarded "
              "(-1: no limit).", "log.retention.bytes"),
    ConfigKey("retention.ms", ConfigType.LONG, 7 * DAY_MS, at_least(-1),
              "The maximum time a segment is retained before it is discarded (-1: no limit).",
              "log.retention.ms"),
    ConfigKey("max.message.bytes", ConfigType.INT, 1024 * 1024 + 12, at_least(0),
              "The largest record batch size allowed.", "message.max.bytes"),
    ConfigKey("index.interval.bytes", ConfigType.INT, 4096, at_least(0),
              "How often an entry is added to the offset index.", "log.index.interval.bytes"),
    ConfigKey("delete.retention.ms", ConfigType.LONG, DAY_MS, at_least(0),
              "How long delete tombstones are retained on compacted topics.",
              "log.cleaner.delete.retention.ms"),
    ConfigKey("min.compaction.lag.ms", ConfigType.LONG, 0, at_least(0),
              "The minimum time a message remains uncompacted.",
              "log.cleaner.min.compaction.lag.ms"),
    ConfigKey("max.compaction.lag.ms", ConfigType.LONG, LONG_MAX, at_least(1),
              "The maximum time a message remains ineligible for compaction.",
              "log.cleaner.max.compaction.lag.ms"),
    ConfigKey("file.delete.delay.ms", ConfigType.LONG, 60000, at_least(0),
              "The time to wait before deleting a file from the filesystem.",
              "log.segment.delete.delay.ms"),
    ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, 0.5, between(0, 1),
              "How frequently the log compactor attempts to clean the log.",
              "log.cleaner.min.cleanable.ratio"),
    ConfigKey("cleanup.policy", ConfigType.LIST, (DELETE,), each_one_of(COMPACT, DELETE),
              "'delete' discards old segments by time or size, 'compact' keeps the latest "
              "value per key.", "log.cleanup.policy"),
    ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, False, None,
              "Whether replicas not in the ISR may be elected leader as a last resort.",
              "unclean.leader.election.enable"),
    ConfigKey("min.insync.replicas", ConfigType.INT, 1, at_least(1),
              "The minimum number of in-sync replicas for an acks=all produce to succeed.",
              "min.insync.replicas"),
    ConfigKey("compression.type", ConfigType.STRING, "producer",
              one_of(*BROKER_COMPRESSION_TYPES),
              "The final compression type for the topic; 'producer' keeps the producer's.",
              "compression.type"),
    ConfigKey("preallocate", ConfigType.BOOLEAN, False, None,
              "Preallocate the file on disk when creating a new segment.", "log.preallocate"),
    ConfigKey("message.format.version", ConfigType.STRING, "2.8-IV1", None,
              "The message format version the broker uses to append messages.",
              "log.message.format.version"),
    ConfigKey("message.timestamp.type", ConfigType.STRING, CREATE_TIME,
              one_of(CREATE_TIME, LOG_APPEND_TIME),
              "Whether the timestamp in the message is the create time or the log append "
              "time.", "log.message.timestamp.type"),
    ConfigKey("message.timestamp.difference.max.ms", ConfigType.LONG, LONG_MAX, at_least(0),
              "The maximum difference allowed between a CreateTime timestamp and the broker's "
              "clock.", "log.message.timestamp.difference.max.ms"),
    ConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, (), None,
              "Replicas whose log replication is throttled on the leader side.", None),
    ConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, (), None,
              "Replicas whose log replication is throttled on the follower side.", None),
    ConfigKey("message.downconversion.enable", ConfigType.BOOLEAN, True, None,
              "Whether down-conversion of the message format is enabled for consumers.",
              "log.message.downconversion.enable"),
)

LOG_CONFIG_BY_NAME: Final[Mapping[str, ConfigKey]] = {key.name: key for key in LOG_CONFIG_KEYS}


def _default(name: str) -> Any:
    return LOG_CONFIG_BY_NAME[name].default


def _parse_all(
    keys: Mapping[str, ConfigKey], props: Mapping[str, Any], *, ignore_unknown: bool
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
        values = _parse_all(LOG_CONFIG_BY_NAME, props, ignore_unknown=ignore_unknown)
        base = defaults if defaults is not None else cls()
        overridden = base.overridden | {name for name in props if name in LOG_CONFIG_BY_NAME}
        config = dataclasses.replace(base, overridden=frozenset(overridden), **values)
        config.validate()
        return config

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """The broker-wide defaults from server.properties names (``log.segment.bytes``,
        ``log.retention.hours`` ...), with Kafka's precedence between the ms / minutes /
        hours variants. Unknown broker keys are ignored."""
        values: dict[str, Any] = {}
        for key in LOG_CONFIG_KEYS:
            if key.server_name is not None and key.server_name in props:
                values[key.name] = props[key.server_name]
        for topic_name, variants in _BROKER_TIME_VARIANTS.items():
            if topic_name in values:
                continue
            for broker_name, factor in variants:
                if broker_name in props:
                    hours_or_minutes = _parse_typed(ConfigType.LONG, props[broker_name])
                    values[topic_name] = hours_or_minutes * factor
                    break
        if "flush.ms" not in values and "log.flush.scheduler.interval.ms" in props:
            values["flush.ms"] = props["log.flush.scheduler.interval.ms"]
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
        return {key.name: key.format(getattr(self, key.attribute)) for key in LOG_CONFIG_KEYS}

    def get(self, name: str) -> Any:
        """The typed value of a config by its Kafka name."""
        key = LOG_CONFIG_BY_NAME.get(name)
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


# The broker settings whose value is given in one of several units; the first present wins
# (Kafka: log.retention.ms over .minutes over .hours; log.roll.ms over log.roll.hours).
_BROKER_TIME_VARIANTS: Final[Mapping[str, Sequence[tuple[str, int]]]] = {
    "retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.hours", 3_600_000),),
    "segment.jitter.ms": (("log.roll.jitter.hours", 3_600_000),),
}


# -- broker-level settings of the log manager ---------------------------------------------

LOG_MANAGER_CONFIG_KEYS: Final[tuple[ConfigKey, ...]] = (
    ConfigKey("log.dirs", ConfigType.LIST, None, None,
              "The directories in which the log data is kept; log.dir if not set."),
    ConfigKey("log.dir", ConfigType.STRING, "/tmp/kafka-logs", None,
              "The directory in which the log data is kept (supplemental for log.dirs)."),
    ConfigKey("log.retention.check.interval.ms", ConfigType.LONG, 5 * 60 * 1000, at_least(1),
              "How often the log cleaner checks whether any log is eligible for deletion."),
    ConfigKey("log.flush.scheduler.interval.ms", ConfigType.LONG, LONG_MAX, None,
              "How often the log flusher checks whether any log needs flushing."),
    ConfigKey("log.flush.offset.checkpoint.interval.ms", ConfigType.INT, 60000, at_least(0),
              "How often the recovery point checkpoint is written."),
    ConfigKey("log.flush.start.offset.checkpoint.interval.ms", ConfigType.INT, 60000,
              at_least(0), "How often the log start offset checkpoint is written."),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", ConfigType.LONG, 5000, None,
              "How often the high watermark checkpoint (replication-offset-checkpoint) is "
              "written."),
    ConfigKey("num.recovery.threads.per.data.dir", ConfigType.INT, 1, at_least(1),
              "Threads per data directory for log recovery (accepted; recovery here runs "
              "in the calling thread)."),
    ConfigKey("broker.id", ConfigType.INT, -1, None, "The broker id of this server."),
)

LOG_MANAGER_CONFIG_BY_NAME: Final[Mapping[str, ConfigKey]] = {
    key.name: key for key in LOG_MANAGER_CONFIG_KEYS
}


def _manager_default(name: str) -> Any:
    return LOG_MANAGER_CONFIG_BY_NAME[name].default


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
    default_log_config: LogConfig = field(default_factory=LogConfig)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> LogManagerConfig:
        """From server.properties names; keys this table does not know are ignored (the
        topic-level defaults among them are read by ``LogConfig.from_broker_props``)."""
        values = _parse_all(LOG_MANAGER_CONFIG_BY_NAME, props, ignore_unknown=True)
        log_dirs = values.pop("log_dirs", None)
        log_dir = values.pop("log_dir", None)
        if not log_dirs:
            log_dirs = (log_dir or _manager_default("log.dir"),)
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
            f"| {key.name} | {key.type.value} | {default} | {key.server_name or ''} | {key.doc} |"
        )
    return "\n".join(lines)
