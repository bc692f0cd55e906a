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
  Kafka's DynamicLogConfig), applied to every hosted log under its topic's overrides.

Notifications older than ``changeExpirationMs`` (15 minutes, Kafka's constant) are deleted
by whichever broker sees them, as Kafka's ZkNodeChangeNotificationListener purges them. At
startup the dynamic broker configs are read and applied once, then every notification
present is processed, so nothing made while the broker was down is missed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from twisted.internet.defer import Deferred

from kafkaclone.common.errors import KafkaError
from kafkaclone.common.security import desanitize
from kafkaclone.log.config import LogConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityType,
    ConfigEntityZNode,
)
from kafkaclone.zk.zookeeper_client import StateChangeHandler, ZNodeChildChangeHandler

logger = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
"""How long a notification stays (Kafka's ZkNodeChangeNotificationListener default)."""
HANDLER_NAME: Final = "dynamic-config"


class DynamicConfigManager:
    """Applies config changes announced under ``/config/changes`` to this broker."""

    def __init__(self, broker_id: int, zk_client: KafkaZkClient, log_manager: LogManager,
                 static_props: Mapping[str, Any], reactor: Any, *,
                 user_config_handler: Callable[[str, dict[str, str]], None] | None = None
                 ) -> None:
        self.broker_id = broker_id
        self._user_config_handler = user_config_handler
        self._zk = zk_client
        self._log_manager = log_manager
        self._static_props = dict(static_props)
        self._reactor = reactor
        self.last_executed_change = -1
        """The sequence number of the last notification processed."""
        self.dynamic_broker_configs: dict[str, str] = {}
        self.dynamic_default_configs: dict[str, str] = {}
        self._running = False
        self._processing: Deferred[None] | None = None
        self._again = False
        outer = self

        class _Changes(ZNodeChildChangeHandler):
            def handle_child_change(self) -> None:
                outer.schedule()

        class _Session(StateChangeHandler):
            def after_initializing_session(self) -> None:
                outer.schedule()

        self._child_handler = _Changes(ConfigEntityChangeNotificationZNode.PATH)
        self._session_handler = _Session(HANDLER_NAME)

    # -- lifecycle -------------------------------------------------------------------------

    async def startup(self) -> None:
        self._running = True
        await self._reload_broker_configs()
        if self._user_config_handler is not None:
            for user in await self._zk.get_all_entities_with_config(ConfigEntityType.USER):
                await self._apply_user_configs(user)
        self._zk.register_znode_child_change_handler(self._child_handler)
        self._zk.register_state_change_handler(self._session_handler)
        await self._process_notifications()

    def shutdown(self) -> None:
        self._running = False
        self._zk.unregister_znode_child_change_handler(self._child_handler.path)
        self._zk.unregister_state_change_handler(HANDLER_NAME)

    # -- notifications ---------------------------------------------------------------------

    def schedule(self) -> None:
        """Process new notifications (coalesced: one pass at a time, another after it if
        more arrived meanwhile)."""
        if not self._running:
            return
        if self._processing is not None:
            self._again = True
            return
        self._processing = Deferred.fromCoroutine(self._process_notifications())

        def done(result: Any) -> None:
            self._processing = None
            if self._again:
                self._again = False
                self.schedule()

        self._processing.addErrback(
            lambda f: logger.error("Processing config changes failed: %s", f.getErrorMessage()))
        self._processing.addBoth(done)

    async def _process_notifications(self) -> None:
        path = ConfigEntityChangeNotificationZNode.PATH
        prefix = ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        children = await self._zk.get_children(path, register_watch=True)
        now_ms = int(self._reactor.seconds() * 1000)
        for child in sorted(children):
            if not child.startswith(prefix):
                continue
            try:
                sequence = int(child[len(prefix):])
            except ValueError:
                continue
            found = await self._zk.get_data_and_stat(f"{path}/{child}")
            if found is None:
                continue
            data, stat = found
            if sequence > self.last_executed_change:
                try:
                    await self._process(ConfigEntityChangeNotificationSequenceZNode.decode(data))
                except (ZNodeDecodeError, KafkaError) as exc:
                    logger.error("Skipping config change notification %s: %s", child, exc)
                self.last_executed_change = sequence
            if int(stat.ctime) < now_ms - CHANGE_EXPIRATION_MS:
                await self._zk.delete_recursive(f"{path}/{child}")

    async def _process(self, entity_path: str) -> None:
        entity_type, _, entity_name = entity_path.partition("/")
        if entity_type == ConfigEntityType.TOPIC:
            await self._apply_topic_configs([entity_name])
        elif entity_type == ConfigEntityType.BROKER and entity_name in (
                str(self.broker_id), ConfigEntityZNode.DEFAULT_ENTITY_NAME):
            await self._reload_broker_configs()
        elif entity_type == ConfigEntityType.USER and self._user_config_handler is not None:
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
