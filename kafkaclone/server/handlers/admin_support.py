"""What the admin handlers share (Kafka 2.8's ZkAdminManager and ConfigHelper, ZooKeeper mode).

- waiting in the broker's topic purgatory until the controller's UpdateMetadata shows a
  leader for every partition CreateTopics or CreatePartitions created
  (DelayedCreatePartitions);
- config entries as DescribeConfigs and CreateTopics v5+ report them: the value, its
  source and its synonyms, from the topic's overrides (``/config/topics/<t>``), this
  broker's dynamic configs (``/config/brokers/<id>``), the cluster-wide dynamic defaults
  (``/config/brokers/<default>``), server.properties and the built-in defaults;
- the checks Kafka makes before writing dynamic broker configs.

This module registers no handler (the registry imports it like the others, harmlessly).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from twisted.internet.defer import Deferred

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.acl import ResourceType as AclResourceType
from kafkaclone.common.config_def import ConfigError, ConfigKey
from kafkaclone.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    TopicAuthorizationFailedError,
    UnknownServerError,
)
from kafkaclone.log.cleaner import CleanerConfig, LogCleaner
from kafkaclone.log.config import LOG_CONFIG_KEYS, TOPIC_CONFIG_SYNONYMS, LogConfig
from kafkaclone.server.config import BROKER_CONFIG, KafkaConfig, broker_config_synonyms
from kafkaclone.server.config import cleaner_config as cleaner_config_of
from kafkaclone.server.delayed.admin import DelayedCreatePartitions
from kafkaclone.server.handlers.registry import RequestContext
from kafkaclone.server.services import BrokerServices
from kafkaclone.zk.znodes import ConfigEntityType, ConfigEntityZNode

NO_NUM_PARTITIONS: Final = -1
NO_REPLICATION_FACTOR: Final = -1


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


# Kafka 2.8's DynamicBrokerConfig.AllDynamicConfigs, limited to the keys kafkaclone declares:
# the broker defaults of topic configs (DynamicLogConfig, but not the message format
# version), the thread pools, the log cleaner, the socket server limits and the listeners.
_THREAD_POOLS: Final = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                        "num.recovery.threads.per.data.dir", "background.threads")
_LOG_CLEANER: Final = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                       "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
                       "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms")
_SOCKET_SERVER: Final = ("max.connections.per.ip", "max.connections.per.ip.overrides",
                         "max.connections", "max.connection.creation.rate")
_REPLICATION_THROTTLES: Final = ("leader.replication.throttled.rate",
                                 "follower.replication.throttled.rate",
                                 "replica.alter.log.dirs.io.max.bytes.per.second")
PER_BROKER_CONFIGS: Final = frozenset(name for name in (
    "listeners", "advertised.listeners", "listener.security.protocol.map")
    if name in BROKER_CONFIG)
"""Dynamic configs that only a single broker may have (never the cluster default)."""
DYNAMIC_BROKER_CONFIGS: Final = frozenset(
    name for name in (
        *(set(TOPIC_CONFIG_SYNONYMS.values()) - {"log.message.format.version"}),
        *_THREAD_POOLS, *_LOG_CLEANER, *_SOCKET_SERVER, *_REPLICATION_THROTTLES,
        *PER_BROKER_CONFIGS,
    ) if name in BROKER_CONFIG
)


def error_of(exc: BaseException) -> tuple[int, str | None]:
    """(error code, message) to answer with for a failure; an unexpected exception is
    UNKNOWN_SERVER_ERROR without its message (it might say too much)."""
    if isinstance(exc, KafkaError):
        return exc.code, exc.message
    return UnknownServerError.code, None


def is_active_controller(broker: BrokerServices) -> bool:
    controller = broker.controller
    return controller is not None and controller.is_active


NOT_CONTROLLER: Final = NotControllerError.code


async def wait_for_leaders(broker: BrokerServices, partitions: Mapping[str, Collection[int]],
                           timeout_ms: int) -> set[str]:
    """The topics of ``partitions`` (topic -> new partition ids) still without a leader for
    every partition once DelayedCreatePartitions completed or expired after ``timeout_ms``;
    all of them for a timeout <= 0 (Kafka answers REQUEST_TIMED_OUT at once: the topics are
    created all the same)."""
    if timeout_ms <= 0:
        return set(partitions)
    answered: Deferred[set[str]] = Deferred()
    broker.topic_purgatory.try_complete_else_watch(
        DelayedCreatePartitions(timeout_ms, partitions, broker.metadata_cache,
                                answered.callback), partitions)
    return await answered


# --- config entries --------------------------------------------------------------------------


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: int
    documentation: str | None
    synonyms: list[Synonym] = field(default_factory=list)


@dataclass(frozen=True)
class BrokerConfigLayers:
    """The broker-level config sources, highest priority first."""

    dynamic_broker: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    static: Mapping[str, str | None]
    defaults: Mapping[str, str | None]

    def by_source(self) -> list[tuple[ConfigSource, Mapping[str, str | None]]]:
        return [(ConfigSource.DYNAMIC_BROKER_CONFIG, self.dynamic_broker),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                (ConfigSource.STATIC_BROKER_CONFIG, self.static),
                (ConfigSource.DEFAULT_CONFIG, self.defaults)]

    def effective_broker_props(self) -> dict[str, object]:
        """server.properties with the dynamic configs on top (what the broker runs with once
        it has applied them)."""
        props: dict[str, object] = {k: v for k, v in self.static.items() if v is not None}
        props.update(self.dynamic_default)
        props.update(self.dynamic_broker)
        return props


def _string(key: ConfigKey | None, value: object) -> str | None:
    if value is None:
        return None
    if key is None or isinstance(value, str):
        return str(value)
    return key.format(value)  # type: ignore[arg-type]


async def broker_config_layers(broker: BrokerServices) -> BrokerConfigLayers:
    zk = broker.zk_client
    dynamic_broker = await zk.get_entity_configs(ConfigEntityType.BROKER, str(broker.broker_id))
    dynamic_default = await zk.get_entity_configs(ConfigEntityType.BROKER,
                                                  ConfigEntityZNode.DEFAULT_ENTITY_NAME)
    config = broker.config
    static = {name: _string(BROKER_CONFIG.get(name), value)
              for name, value in config.originals.items()}
    # Kafka's staticDefaultConfigs leave out the keys whose default is null.
    defaults = {key.name: key.format(key.default) for key in BROKER_CONFIG
                if key.default is not None}
    return BrokerConfigLayers(dynamic_broker, dynamic_default, static, defaults)


def _config_synonyms(layers: BrokerConfigLayers, name: str, chain: Iterable[str],
                     sensitive: bool, *, per_broker: bool = True) -> list[Synonym]:
    """Kafka's ConfigHelper.configSynonyms: every source holding one of ``chain``, by source
    then chain order, starting at the first entry for ``name`` itself."""
    found: list[Synonym] = []
    chain = list(chain)
    for source, values in layers.by_source():
        found.extend(Synonym(synonym, None if sensitive else values[synonym], source)
                     for synonym in chain if synonym in values)
    while found and found[0].name != name:
        found.pop(0)
    if not per_broker:
        found = [s for s in found if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    return found


def topic_log_config(layers: BrokerConfigLayers, topic_props: Mapping[str, str]) -> LogConfig:
    """A topic's LogConfig: its overrides over the broker's topic defaults, dynamic ones
    included."""
    defaults = LogConfig.from_broker_props(layers.effective_broker_props())
    return LogConfig.from_topic_overrides(topic_props, defaults)


def topic_config_entries(layers: BrokerConfigLayers, topic_props: Mapping[str, str],
                         keys: Iterable[str] | None = None, *,
                         include_synonyms: bool = False,
                         include_documentation: bool = False) -> list[ConfigEntry]:
    """Kafka's ConfigHelper.createTopicConfigEntry for every topic config (or ``keys``)."""
    log_config = topic_log_config(layers, topic_props)
    wanted = None if keys is None else set(keys)
    entries: list[ConfigEntry] = []
    for key in LOG_CONFIG_KEYS:
        if wanted is not None and key.name not in wanted:
            continue
        sensitive = key.sensitive
        value = None if sensitive else key.format(log_config.get(key.name))
        broker_name = TOPIC_CONFIG_SYNONYMS.get(key.name)
        synonyms = ([] if broker_name is None else
                    _config_synonyms(layers, broker_name, broker_config_synonyms(broker_name),
                                     sensitive))
        if key.name in topic_props:
            synonyms.insert(0, Synonym(key.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=key.name, value=value, source=source, read_only=False,
            is_sensitive=sensitive, config_type=int(key.type),
            documentation=key.doc if include_documentation else None,
            synonyms=synonyms if include_synonyms else []))
    return entries


def broker_config_entries(layers: BrokerConfigLayers, config: Any, *, per_broker: bool,
                          keys: Iterable[str] | None = None, include_synonyms: bool = False,
                          include_documentation: bool = False) -> list[ConfigEntry]:
    """Kafka's ConfigHelper.createBrokerConfigEntry: for a broker id every broker config;
    for the cluster default (empty name) only the dynamic default configs."""
    wanted = None if keys is None else set(keys)
    if per_broker:
        names = [key.name for key in BROKER_CONFIG]
    else:
        names = list(layers.dynamic_default)
    entries: list[ConfigEntry] = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        key = BROKER_CONFIG.get(name)
        sensitive = key is not None and key.sensitive
        synonyms = _config_synonyms(layers, name, broker_config_synonyms(name), sensitive,
                                    per_broker=per_broker)
        if synonyms and synonyms[0].name == name:
            value = synonyms[0].value
        elif per_broker and key is not None:
            value = config.string_value(name)
        else:
            value = layers.dynamic_default.get(name)
        entries.append(ConfigEntry(
            name=name, value=None if sensitive else value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=name not in DYNAMIC_BROKER_CONFIGS, is_sensitive=sensitive,
            config_type=0 if key is None else int(key.type),
            documentation=(key.doc if include_documentation and key is not None else None),
            synonyms=synonyms if include_synonyms else []))
    return entries


# --- validation --------------------------------------------------------------------------------


def validate_topic_configs(props: Mapping[str, str]) -> None:
    """Kafka's LogConfig.validate: InvalidConfigError for an unknown name, ConfigError (a kind
    of InvalidConfigError) for a bad value."""
    LogConfig.from_props(props)


class BrokerConfigRejectedError(InvalidRequestError):
    """Broker configs that may not be set dynamically (Kafka's ConfigException there)."""


def validate_dynamic_broker_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs; ConfigError for what may not be set."""
    static_only = sorted(n for n in props if n in BROKER_CONFIG and n not in
                         DYNAMIC_BROKER_CONFIGS)
    if static_only:
        raise BrokerConfigRejectedError(
            f"Cannot update these configs dynamically: {', '.join(static_only)}")
    for name, value in props.items():
        key = BROKER_CONFIG.get(name)
        if key is not None:
            key.parse(value)
    if not per_broker:
        per_broker_only = sorted(n for n in props if n in PER_BROKER_CONFIGS)
        if per_broker_only:
            raise BrokerConfigRejectedError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {', '.join(per_broker_only)}")


def new_broker_props(broker: BrokerServices, layers: BrokerConfigLayers, broker_id: int | None,
                     props: Mapping[str, str]) -> dict[str, object]:
    """The props this broker (its config ``layers`` now) would run with once ``props``
    replace the dynamic configs of ``broker_id`` (None: the cluster default), as Kafka's
    validatedKafkaProps builds them."""
    merged: dict[str, object] = dict(broker.config.originals)
    if broker_id is not None:
        merged.update(layers.dynamic_default)
        merged.update(props)
    else:
        merged.update(props)
        merged.update(layers.dynamic_broker)
    return merged


def validate_log_cleaner_reconfiguration(current: CleanerConfig,
                                         props: Mapping[str, object]) -> None:
    """Kafka's KafkaConfig and LogCleaner.validateReconfiguration over the props the broker
    would run with; Kafka wraps the failure in "Invalid dynamic configuration"."""
    try:
        LogCleaner.validate_reconfiguration(current, cleaner_config_of(KafkaConfig(props)))
    except (ConfigError, ValueError) as exc:
        inner = exc.message if isinstance(exc, ConfigError) else str(exc)
        raise BrokerConfigRejectedError(
            f"Invalid value org.apache.kafka.common.config.ConfigException: {inner} for "
            "configuration Invalid dynamic configuration") from exc


def validate_thread_pool_reconfiguration(current: Mapping[str, object],
                                         props: Mapping[str, object]) -> None:
    """Kafka's DynamicThreadPool.validateReconfiguration: a thread count that changes goes
    to at least 1, at least half and at most double its current value. ``current`` and
    ``props``: what the broker runs with now and would run with."""
    now, then = KafkaConfig(current), KafkaConfig(props)
    for name in _THREAD_POOLS:
        old_value, new_value = now.get_int(name), then.get_int(name)
        if new_value == old_value:
            continue
        failed = f"Dynamic thread count update validation failed for {name}={new_value}"
        if new_value <= 0:
            raise BrokerConfigRejectedError(f"{failed}, value should be at least 1")
        if new_value < old_value // 2:
            raise BrokerConfigRejectedError(
                f"{failed}, value should be at least half the current value {old_value}")
        if new_value > old_value * 2:
            raise BrokerConfigRejectedError(
                f"{failed}, value should not be greater than double the current value "
                f"{old_value}")


LISTENER_CHANGE_REFUSED: Final = (
    "listeners cannot be changed at runtime on kafkaclone; restart the broker with the new "
    "value")


def refuse_listener_changes(props: Mapping[str, str], running: Mapping[str, object]) -> None:
    """Kafka applies a per-broker listener change at runtime (a new listener is started and
    the registration updated); kafkaclone does not, so a change is INVALID_REQUEST rather
    than an OK that does nothing. The running value itself is accepted (an AlterConfigs
    that restates it)."""
    changed = sorted(name for name in PER_BROKER_CONFIGS
                     if name in props and props[name] != running.get(name))
    if changed:
        raise BrokerConfigRejectedError(f"{LISTENER_CHANGE_REFUSED} ({', '.join(changed)})")


def broker_id_of_resource(broker: BrokerServices, name: str) -> int | None:
    """The broker a BROKER resource names (None: the cluster-wide default); a resource
    naming another broker is INVALID_REQUEST, as in Kafka."""
    if not name:
        return None
    try:
        broker_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if broker_id != broker.broker_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {broker.broker_id} or empty string, but "
            f"received {name}")
    return broker_id


def alter_config_error(exc: BaseException, resource_type: int,
                       resource_name: str) -> tuple[int, str | None]:
    """Kafka's answer to a failed config alteration: a bad value (ConfigException) is
    INVALID_REQUEST naming the resource; other errors keep their code."""
    if isinstance(exc, ConfigError | BrokerConfigRejectedError):
        try:
            type_name = ResourceType(resource_type).name
        except ValueError:
            type_name = str(resource_type)
        return (InvalidRequestError.code,
                f"Invalid config value for resource ConfigResource(type={type_name}, "
                f"name='{resource_name}'): {exc.message}")
    return error_of(exc)



def config_resource_refusal(ctx: RequestContext, operation: AclOperation, resource_type: int,
                            resource_name: str) -> KafkaError | None:
    """The error for a config resource the principal may not ``operation`` (DescribeConfigs /
    AlterConfigs): a topic needs it on the topic, a broker or broker logger on the cluster
    (KafkaApis.authorizeConfigResource); None when allowed."""
    if resource_type == ResourceType.TOPIC:
        if ctx.authorize(operation, AclResourceType.TOPIC, resource_name):
            return None
        return TopicAuthorizationFailedError()
    if resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        return None if ctx.authorize_cluster(operation) else ClusterAuthorizationFailedError()
    return None
