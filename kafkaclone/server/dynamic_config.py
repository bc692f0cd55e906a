"""Config changes made while the broker runs (Kafka's DynamicConfigManager in ZooKeeper mode).

kafka-configs.sh, AlterConfigs and IncrementalAlterConfigs write ``/config/<type>/<name>``
and then a sequential notification ``/config/changes/config_change_<seq>`` naming the entity
(``topics/<t>``, ``brokers/<id>``, ``brokers/<default>``). Every broker watches
``/config/changes`` and, for each notification newer than the last one it processed,
re-reads the entity's configs and applies them:

- ``topics/<t>``: the topic's overrides over the broker's log defaults become the config of
  every log of the topic this broker hosts (retention, segment size, cleanup policy, ... take
  effect at once, as Kafka's TopicConfigHandler does);
- ``brokers/<id>`` for this broker, or ``brokers/<default>``: the dynamic broker configs
  (``/config/brokers/<default>`` under ``/config/brokers/<id>``, both over
  server.properties) give new log defaults (``log.retention.ms``, ``log.segment.bytes``, ...,
  Kafka's DynamicLogConfig), applied to every hosted log under its topic's overrides;
  the effective broker props also go to ``broker_config_handler`` (the socket server's
  connection limits, Kafka's DynamicConnectionQuota);
- ``clients/<c>``, ``users/<u>``, ``users/<u>/clients/<c>`` (any name may be ``<default>``):
  the entity's client quotas (``producer_byte_rate``, ``consumer_byte_rate``,
  ``request_percentage``) go to ``quota_config_handler`` (Kafka's QuotaConfigHandler); a
  user's configs also go to ``user_config_handler`` (its SCRAM credentials).

Notifications older than ``changeExpirationMs`` (15 minutes, Kafka's constant) are deleted
by whichever broker sees them, as Kafka's ZkNodeChangeNotificationListener purges them. At
startup the dynamic broker configs are read and applied once, then every notification
present is processed, so nothing made while the broker was down is missed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kafkaclone.common.errors import KafkaError
from kafkaclone.common.security import desanitize
from kafkaclone.log.config import LogConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.zk.change_notification_listener import ZkNodeChangeNotificationListener
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityType,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
)

logger = logging.getLogger(__name__)



class DynamicConfigManager:
    """Applies config changes announced under ``/config/changes`` to this broker."""

    def __init__(self, broker_id: int, zk_client: KafkaZkClient, log_manager: LogManager,
                 static_props: Mapping[str, Any], reactor: Any, *,
                 user_config_handler: Callable[[str, dict[str, str]], None] | None = None,
                 broker_config_handler: Callable[[Mapping[str, Any]], None] | None = None,
                 quota_config_handler: Callable[[str, dict[str, str]], None] | None = None,
                 ) -> None:
        self._quota_config_handler = quota_config_handler
        self.broker_id = broker_id
        self._broker_config_handler = broker_config_handler
        self._user_config_handler = user_config_handler
        self._zk = zk_client
        self._log_manager = log_manager
        self._static_props = dict(static_props)
        self._reactor = reactor
        self.dynamic_broker_configs: dict[str, str] = {}
        self.dynamic_default_configs: dict[str, str] = {}
        self.notifications = ZkNodeChangeNotificationListener(
            zk_client, reactor, ConfigEntityChangeNotificationZNode.PATH,
            ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX,
            self._process_notification, name="config change notifications")

    # -- lifecycle -------------------------------------------------------------------------

    async def startup(self) -> None:
        await self._reload_broker_configs()
        if self._user_config_handler is not None:
            for user in await self._zk.get_all_entities_with_config(ConfigEntityType.USER):
                await self._apply_user_configs(user)
        if self._quota_config_handler is not None:
            for entity_path in await self._quota_entity_paths():
                await self._apply_quota_configs(entity_path)
        await self.notifications.startup()

    def shutdown(self) -> None:
        self.notifications.shutdown()

    # -- notifications ---------------------------------------------------------------------

    async def _process_notification(self, data: bytes) -> None:
        await self._process(ConfigEntityChangeNotificationSequenceZNode.decode(data))

    async def _process(self, entity_path: str) -> None:
        entity_type, _, entity_name = entity_path.partition("/")
        if entity_type == ConfigEntityType.TOPIC:
            await self._apply_topic_configs([entity_name])
        elif entity_type == ConfigEntityType.BROKER and entity_name in (
                str(self.broker_id), ConfigEntityZNode.DEFAULT_ENTITY_NAME):
            await self._reload_broker_configs()
        elif entity_type in (ConfigEntityType.USER, ConfigEntityType.CLIENT):
            if self._quota_config_handler is not None:
                await self._apply_quota_configs(entity_path)
            if (entity_type == ConfigEntityType.USER and "/" not in entity_name
                    and self._user_config_handler is not None):
                await self._apply_user_configs(entity_name)
        else:
            logger.debug("Config change of %s does not concern this broker", entity_path)

    # -- applying --------------------------------------------------------------------------

    def effective_broker_props(self) -> dict[str, Any]:
        """server.properties, then the cluster-wide dynamic defaults, then this broker's."""
        return {**self._static_props, **self.dynamic_default_configs,
                **self.dynamic_broker_configs}

    async def _reload_broker_configs(self) -> None:
        broker = await self._zk.get_entity_configs(ConfigEntityType.BROKER, str(self.broker_id))
        default = await self._zk.get_entity_configs(ConfigEntityType.BROKER,
                                                    ConfigEntityZNode.DEFAULT_ENTITY_NAME)
        if broker == self.dynamic_broker_configs and default == self.dynamic_default_configs:
            return
        self.dynamic_broker_configs, self.dynamic_default_configs = broker, default
        if self._broker_config_handler is not None:
            self._broker_config_handler(self.effective_broker_props())
        try:
            defaults = LogConfig.from_broker_props(self.effective_broker_props())
        except KafkaError as exc:
            logger.error("Ignoring invalid dynamic broker configs %s / %s: %s", broker,
                         default, exc)
            return
        if defaults == self._log_manager.default_config:
            return
        logger.info("Log defaults changed by dynamic broker configs %s (cluster default %s)",
                    broker, default)
        self._log_manager.update_default_config(defaults)
        await self._apply_topic_configs(
            sorted({tp.topic for tp in self._log_manager.logs_by_topic_partition}))

    async def _apply_user_configs(self, sanitized_user: str) -> None:
        """Hand a user's configs (never logged: they hold SCRAM credentials) to the handler;
        the znode name is the user name as Kafka's Sanitizer URL-encodes it."""
        assert self._user_config_handler is not None
        configs = await self._zk.get_entity_configs(ConfigEntityType.USER, sanitized_user)
        logger.info("Processing config change of user %s", desanitize(sanitized_user))
        self._user_config_handler(desanitize(sanitized_user), configs)

    async def _quota_entity_paths(self) -> list[str]:
        """Every ``clients/<c>``, ``users/<u>`` and ``users/<u>/clients/<c>`` entity."""
        paths = [f"{ConfigEntityType.CLIENT}/{client}" for client in
                 await self._zk.get_all_entities_with_config(ConfigEntityType.CLIENT)]
        for user in await self._zk.get_all_entities_with_config(ConfigEntityType.USER):
            paths.append(f"{ConfigEntityType.USER}/{user}")
            clients_path = f"{ConfigEntityTypeZNode.path(ConfigEntityType.USER)}/{user}/clients"
            paths.extend(f"{ConfigEntityType.USER}/{user}/clients/{client}"
                         for client in sorted(await self._zk.get_children(clients_path)))
        return paths

    async def _apply_quota_configs(self, entity_path: str) -> None:
        """Hand an entity's configs to the quota handler (the SCRAM credentials of a user
        are among them: the handler reads only the quota keys, and they are not logged)."""
        assert self._quota_config_handler is not None
        entity_type, _, entity_name = entity_path.partition("/")
        configs = await self._zk.get_entity_configs(entity_type, entity_name)
        self._quota_config_handler(entity_path, configs)

    async def _apply_topic_configs(self, topics: list[str]) -> None:
        overrides = await self._zk.get_topic_configs(topics)
        defaults = self._log_manager.default_config
        for topic in topics:
            props = overrides.get(topic, {})
            try:
                config = LogConfig.from_topic_overrides(props, defaults)
            except KafkaError as exc:
                logger.error("Invalid config overrides of topic %s, keeping the current "
                             "ones: %s", topic, exc)
                continue
            logger.info("Processing override for topic %s: %s", topic, props)
            self._log_manager.update_topic_config(topic, config)
