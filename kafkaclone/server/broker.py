"""KafkaBroker: one broker process, the root service of its tree.

Startup follows Kafka 2.8's ``KafkaServer.startup``; each step is a child service, started
in order and stopped in reverse:

0. ``security``: resolve every listener's TLS and SASL settings and the inter-broker
   client's (kafkaclone.server.security.listeners); anything that cannot be honoured
   refuses to start, before anything else happens;
1. ``zookeeper``: create the chroot of ``zookeeper.connect`` if missing, open the session,
   create Kafka's top-level paths, read or create ``/cluster/id`` (created once);
2. ``log-manager``: resolve ``broker.id`` (generated from ``/brokers/seqid`` when -1),
   check ``meta.properties`` in every log dir (a different cluster id refuses to start),
   load the logs with their topics' config overrides;
3. ``replica-manager`` (then ``dynamic-config``, and ``group-coordinator``:
   kafkaclone.coordinator.group, which follows this broker's leadership of
   ``__consumer_offsets`` partitions through the replica manager, ``producer-id-manager``
   and ``transaction-coordinator``: kafkaclone.coordinator.transaction, which follows this
   broker's leadership of ``__transaction_state`` partitions the same way);
4. ``socket-server``: listen on every ``listeners`` entry (port 0: the OS picks one, and
   the bound port is what gets advertised), with TLS on SSL and SASL_SSL listeners and the
   SASL exchange in front of the dispatcher on SASL ones; then ``metrics``: Prometheus text
   on ``metrics.prometheus.port`` when it is not -1 (kafkaclone.server.metrics);
5. ``registration``: the ephemeral ``/brokers/ids/<id>`` with the advertised listeners; its
   czxid is the broker epoch. After a session expiry the broker registers again. If the id
   is still registered by another session (this broker killed -9 a moment ago, its session
   not expired yet), the broker waits for that registration to go, at most
   ``zookeeper.session.timeout.ms`` plus REGISTRATION_WAIT_MARGIN_MS, saying so in its log;
6. ``controller``: the controller candidacy
   (``kafkaclone.controller.controller.KafkaController``).

``shutdown`` first asks the controller to move this broker's leaders away (Kafka's
controlled shutdown: ControlledShutdown v3, ``controlled.shutdown.max.retries`` attempts
``controlled.shutdown.retry.backoff.ms`` apart), then stops the steps in reverse: the
controller, the registration, the socket server, the replica manager, the logs (clean
shutdown marker written), the ZooKeeper session.

A step that cannot start raises :class:`BrokerStartupError` with a one-line reason (the
start script prints it and exits non-zero).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from twisted.application.service import MultiService, Service
from twisted.internet import error as twisted_error
from twisted.internet import threads
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.web.server import Site

from kafkaclone.cluster.partition import Partition
from kafkaclone.common.endpoint import EndPoint
from kafkaclone.common.errors import (
    NONE,
    CoordinatorNotAvailableError,
    InconsistentClusterIdError,
    KafkaError,
    KafkaStorageError,
    LeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnknownServerError,
)
from kafkaclone.common.topic import (
    GROUP_METADATA_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from kafkaclone.controller.controller import ControllerConfig, KafkaController
from kafkaclone.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from kafkaclone.coordinator.group.store import ZkGroupStore
from kafkaclone.coordinator.transaction.coordinator import (
    TransactionConfig,
    TransactionCoordinator,
)
from kafkaclone.coordinator.transaction.marker_channel import (
    MarkerDestination,
    TransactionMarkerChannelManager,
)
from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkaclone.coordinator.transaction.state_manager import TransactionStateManager
from kafkaclone.log.checkpoints import META_PROPERTIES, BrokerMetadataCheckpoint
from kafkaclone.log.cleaner import LogCleaner
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.manager import LogIoThreads, LogManager
from kafkaclone.network.authenticator import ScramCredentialCache
from kafkaclone.network.client import PLAINTEXT_CLIENT, ClientSecurity, KafkaClientConnection
from kafkaclone.network.request_metrics import RequestMetrics
from kafkaclone.network.socket_server import (
    ConnectionQuotas,
    KafkaServerFactory,
    RequestQueue,
)
from kafkaclone.server.authorizer.acl_authorizer import AclAuthorizer, parse_super_users
from kafkaclone.server.broker_requests import send_controlled_shutdown
from kafkaclone.server.config import KafkaConfig, cleaner_config
from kafkaclone.server.delayed.admin import DelayedElectLeader
from kafkaclone.server.delayed.purgatory import DelayedOperation, DelayedOperationPurgatory
from kafkaclone.server.dynamic_config import DynamicConfigManager
from kafkaclone.server.group_metadata_log import ReplicaGroupMetadataLog
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.metrics import (
    BrokerMetrics,
    ControllerCollector,
    GroupLagCollector,
    MetricsResource,
    ReplicaManagerCollector,
    register_collectors,
)
from kafkaclone.server.quota import QuotaManagers, QuotaWindow
from kafkaclone.server.quota import entity_from_path as quota_entity_from_path
from kafkaclone.server.replica_fetcher import ReplicaFetcherConfig
from kafkaclone.server.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkaclone.server.replication_quota import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    LEADER_REPLICATION_THROTTLED_RATE,
    REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND,
    quota_of,
)
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.server.security.listeners import (
    BrokerSecurity,
    SecurityConfigError,
    resolve_broker_security,
)
from kafkaclone.server.security.zookeeper import resolve_zookeeper_security
from kafkaclone.server.services import ControllerService
from kafkaclone.server.transaction_state_log import (
    MetadataCacheMarkerDestinations,
    ReplicaTransactionStateLog,
)
from kafkaclone.zk.admin import AdminZkClient, RackAwareMode
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import BrokerIdAlreadyRegisteredError, ZooKeeperClientError
from kafkaclone.zk.znodes import BrokerId, BrokerIdZNode, BrokerInfo, ClusterIdZNode
from kafkaclone.zk.zookeeper_client import StateChangeHandler

logger = logging.getLogger(__name__)

BROKER_INFO_HANDLER: Final = "broker-info"
REGISTRATION_WAIT_MARGIN_MS: Final = 5000
"""How long past zookeeper.session.timeout.ms a starting broker waits for an old
registration of its id to expire (ZooKeeper notices an expiry on its next tick)."""
REGISTRATION_RETRY_S: Final = 0.5
_T = TypeVar("_T")


class BrokerStartupError(Exception):
    """The broker cannot start; the message is the one-line reason."""


class ControllerLike(ControllerService, Protocol):
    """What the broker needs of its controller besides the handlers' view."""

    broker_epoch: int
    """The broker epoch the controller registers under (renewed after a session expiry)."""

    async def startup(self) -> None: ...

    async def shutdown(self) -> None: ...


ControllerFactory = Callable[[KafkaConfig, KafkaZkClient, int, int, Any], ControllerLike]
"""(config, zk_client, broker_id, broker_epoch, reactor) -> a controller not started yet:
KafkaController, or a stand-in in tests of the broker alone."""


class _Step(Service):
    """One child of the broker: an async start and stop."""

    def __init__(self, name: str, start: Callable[[], Awaitable[None]],
                 stop: Callable[[], Awaitable[None]]) -> None:
        self.name = name
        self._start = start
        self._stop = stop

    async def start(self) -> None:
        await self._start()
        self.running = 1

    async def stop(self) -> None:
        self.running = 0
        await self._stop()


class _SessionHandler(StateChangeHandler):
    def __init__(self, broker: KafkaBroker) -> None:
        super().__init__(BROKER_INFO_HANDLER)
        self._broker = broker

    def before_initializing_session(self) -> None:
        logger.info("ZooKeeper session expired: broker %d is no longer registered",
                    self._broker.broker_id)

    def after_initializing_session(self) -> None:
        Deferred.fromCoroutine(self._broker.reregister()).addErrback(
            _log_failure, "re-registering the broker after a ZooKeeper session expiry")


def controller_config(config: KafkaConfig,
                      client_security: ClientSecurity = PLAINTEXT_CLIENT) -> ControllerConfig:
    """The controller's settings from the broker's config."""
    listener = config.control_plane_listener_name or config.inter_broker_listener_name
    return ControllerConfig(
        client_security=client_security,
        socket_connection_setup_timeout_ms=config.get_int(
            "socket.connection.setup.timeout.ms"),
        socket_connection_setup_timeout_max_ms=config.get_int(
            "socket.connection.setup.timeout.max.ms"),
        broker_id=config.get_int("broker.id"),
        unclean_leader_election_enable=config.get_bool("unclean.leader.election.enable"),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        controller_socket_timeout_ms=config.get_int("controller.socket.timeout.ms"),
        listener_name=str(listener),
        auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_per_broker_percentage=config.get_int(
            "leader.imbalance.per.broker.percentage"),
        leader_imbalance_check_interval_seconds=config.get_int(
            "leader.imbalance.check.interval.seconds"),
    )


def group_config(config: KafkaConfig) -> GroupConfig:
    """The group coordinator's settings from the broker's config."""
    return GroupConfig(
        group_min_session_timeout_ms=config.group_min_session_timeout_ms,
        group_max_session_timeout_ms=config.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        group_max_size=config.group_max_size,
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
        offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
        offsets_topic_compression_codec=config.offsets_topic_compression_codec,
    )


def transaction_config(config: KafkaConfig) -> TransactionConfig:
    """The transaction coordinator's settings from the broker's config."""
    return TransactionConfig(
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
        abort_timed_out_transactions_interval_ms=config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_transactional_ids_interval_ms=config.get_int(
            "transaction.remove.expired.transaction.cleanup.interval.ms"),
        request_timeout_ms=config.request_timeout_ms,
    )


class KafkaBroker(MultiService):
    """A broker (kafkaclone.server.services.BrokerServices for its handlers)."""

    def __init__(self, config: KafkaConfig, reactor: Any, *,
                 controller_factory: ControllerFactory | None = None) -> None:
        MultiService.__init__(self)  # type: ignore[no-untyped-call]
        self.config = config
        self.reactor = reactor
        self.broker_id: int = config.broker_id
        self.cluster_id: str | None = None
        self.broker_epoch: int = -1
        self.auto_create_topics_enable: bool = config.auto_create_topics_enable
        self.metadata_cache = MetadataCache(self.broker_id)
        self.topic_purgatory: DelayedOperationPurgatory[DelayedOperation] = (
            DelayedOperationPurgatory("topic", reactor))
        self.elect_leader_purgatory: DelayedOperationPurgatory[DelayedElectLeader] = (
            DelayedOperationPurgatory("ElectLeader", reactor))
        self.metrics: BrokerMetrics | None = (
            BrokerMetrics() if config.metrics_prometheus_port >= 0 else None)
        self._controller_factory: ControllerFactory = controller_factory or self._new_controller
        self.credential_cache = ScramCredentialCache()
        self.quotas = QuotaManagers(QuotaWindow(config.quota_window_num,
                                                config.quota_window_size_seconds))
        self.request_handler = RequestHandler(broker=self, metrics=self.metrics,
                                              quotas=self.quotas)
        self._security: BrokerSecurity | None = None
        self._zk_client: KafkaZkClient | None = None
        self._admin_zk: AdminZkClient | None = None
        self._log_manager: LogManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self._replica_manager: ReplicaManager | None = None
        self.dynamic_config_manager: DynamicConfigManager | None = None
        self.authorizer: AclAuthorizer | None = None
        self._group_coordinator: GroupCoordinator | None = None
        self._producer_id_manager: ProducerIdManager | None = None
        self._transaction_coordinator: TransactionCoordinator | None = None
        self._txn_marker_channel: TransactionMarkerChannelManager | None = None
        self._group_store: ZkGroupStore | None = None
        self._controller: ControllerLike | None = None
        self._controller_epoch = 0
        self._ports: dict[str, Any] = {}
        self._factories: list[KafkaServerFactory] = []
        self._metrics_port: Any = None
        self.connection_quotas: ConnectionQuotas | None = None
        self.request_metrics = RequestMetrics()
        """Request timing per API (RequestQueueTimeMs, LocalTimeMs, ...), for the metrics."""
        self._scheduler_thread: ThreadPoolExecutor | None = None
        self._log_io_threads: LogIoThreads | None = None
        self.registered_endpoints: tuple[EndPoint, ...] = ()
        self._started: list[_Step] = []
        self._shutdown: Deferred[None] | None = None
        for step in (
            _Step("security", self._resolve_security, _nothing),
            _Step("zookeeper", self._start_zookeeper, self._stop_zookeeper),
            _Step("log-manager", self._start_log_manager, self._stop_log_manager),
            _Step("log-cleaner", self._start_log_cleaner, self._stop_log_cleaner),
            _Step("replica-manager", self._start_replica_manager, self._stop_replica_manager),
            _Step("dynamic-config", self._start_dynamic_config, self._stop_dynamic_config),
            _Step("authorizer", self._start_authorizer, self._stop_authorizer),
            _Step("group-coordinator", self._start_group_coordinator,
                  self._stop_group_coordinator),
            _Step("producer-id-manager", self._start_producer_id_manager,
                  self._stop_producer_id_manager),
            _Step("transaction-coordinator", self._start_transaction_coordinator,
                  self._stop_transaction_coordinator),
            _Step("socket-server", self._start_socket_server, self._stop_socket_server),
            _Step("metrics", self._start_metrics, self._stop_metrics),
            _Step("registration", self._register, self._deregister),
            _Step("controller", self._start_controller, self._stop_controller),
        ):
            self.addService(step)  # type: ignore[no-untyped-call]

    def _new_controller(self, config: KafkaConfig, zk_client: KafkaZkClient, broker_id: int,
                        broker_epoch: int, reactor: Any) -> ControllerLike:
        return KafkaController(controller_config(config, self.security.control_plane),
                               zk_client, broker_id, broker_epoch, reactor)

    # -- BrokerServices ----------------------------------------------------------------------

    @property
    def security(self) -> BrokerSecurity:
        return _started(self._security, "security settings")

    @property
    def zk_client(self) -> KafkaZkClient:
        return _started(self._zk_client, "ZooKeeper session")

    @property
    def admin_zk(self) -> AdminZkClient:
        return _started(self._admin_zk, "ZooKeeper session")

    @property
    def log_manager(self) -> LogManager:
        return _started(self._log_manager, "log manager")

    @property
    def replica_manager(self) -> ReplicaManager:
        return _started(self._replica_manager, "replica manager")

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return _started(self._group_coordinator, "group coordinator")

    @property
    def producer_id_manager(self) -> ProducerIdManager:
        return _started(self._producer_id_manager, "producer id manager")

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        return _started(self._transaction_coordinator, "transaction coordinator")

    @property
    def controller(self) -> ControllerLike | None:
        return self._controller

    @property
    def controller_epoch(self) -> int:
        """The highest controller epoch seen in a controller request (kept by the
        ReplicaManager, as in Kafka, once it exists)."""
        if self._replica_manager is not None:
            return self._replica_manager.controller_epoch
        return self._controller_epoch

    @controller_epoch.setter
    def controller_epoch(self, epoch: int) -> None:
        self._controller_epoch = epoch
        if self._replica_manager is not None:
            self._replica_manager.controller_epoch = epoch

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics a Metadata request named (Kafka's ``autoTopicCreation``): plain
        topics with ``num.partitions`` x ``default.replication.factor``, the internal ones
        with their own settings, placed rack-aware if every broker has a rack
        (RackAwareMode.SAFE). LEADER_NOT_AVAILABLE once creation is under way (or
        another request created it first), the creation's error otherwise."""
        errors: dict[str, int] = {}
        for name in names:
            try:
                await self._create_topic(name)
                errors[name] = LeaderNotAvailableError.code
            except TopicAlreadyExistsError:
                errors[name] = LeaderNotAvailableError.code
            except KafkaError as exc:
                logger.info("Auto-creation of topic %s failed: %s", name, exc)
                errors[name] = exc.code if exc.code != NONE else UnknownServerError.code
            except ZooKeeperClientError as exc:
                logger.warning("Auto-creation of topic %s failed: %s", name, exc)
                errors[name] = UnknownServerError.code
        return errors

    async def _create_topic(self, name: str) -> None:
        config = self.config
        if name == GROUP_METADATA_TOPIC_NAME:
            await self._create_internal_topic(
                name, config.offsets_topic_num_partitions,
                config.offsets_topic_replication_factor,
                {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(config.offsets_topic_segment_bytes)})
        elif name == TRANSACTION_STATE_TOPIC_NAME:
            await self._create_internal_topic(
                name, config.transaction_state_log_num_partitions,
                config.transaction_state_log_replication_factor,
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "min.insync.replicas": str(config.transaction_state_log_min_isr),
                 "segment.bytes": str(config.transaction_state_log_segment_bytes),
                 "unclean.leader.election.enable": "false"})
        else:
            await self.admin_zk.create_topic(name, config.num_partitions,
                                             config.default_replication_factor,
                                             rack_aware_mode=RackAwareMode.SAFE)

    async def _create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                     configs: dict[str, str]) -> None:
        live = len(await self.admin_zk.get_broker_ids())
        if live < replication_factor:
            # Kafka: the internal topic waits for enough brokers; clients retry.
            raise CoordinatorNotAvailableError(
                f"Number of alive brokers '{live}' does not meet the required replication "
                f"factor '{replication_factor}' for the internal topic {name}")
        await self.admin_zk.create_topic(name, partitions, replication_factor, configs,
                                         rack_aware_mode=RackAwareMode.SAFE)

    # -- lifecycle ----------------------------------------------------------------------------

    def startService(self) -> Deferred[None]:
        """Start every step in order (see :meth:`startup`)."""
        Service.startService(self)  # type: ignore[no-untyped-call]
        return Deferred.fromCoroutine(self.startup())

    def stopService(self) -> Deferred[None]:
        """Shut down (see :meth:`shutdown`)."""
        Service.stopService(self)  # type: ignore[no-untyped-call]
        return Deferred.fromCoroutine(self.shutdown())

    async def startup(self) -> None:
        """Start the steps in order. BrokerStartupError (one-line reason) if one fails: what
        that step did is undone, the steps started before it run until :meth:`shutdown`."""
        for step in self:
            assert isinstance(step, _Step)
            if step in self._started:
                continue
            logger.debug("starting %s", step.name)
            try:
                await step.start()
            except BaseException:
                # Undo what the step did before it failed (a session opened, ports bound).
                try:
                    await step.stop()
                except Exception:
                    logger.exception("error while undoing the failed start of %s", step.name)
                raise
            self._started.append(step)
        logger.info("[KafkaServer id=%d] started", self.broker_id)

    async def shutdown(self) -> None:
        """Controlled shutdown (if this broker registered), then stop the started steps in
        reverse. Safe to call more than once."""
        if self._shutdown is not None:
            await _wait(self._shutdown)
            return
        self._shutdown = Deferred.fromCoroutine(self._shutdown_steps())
        await _wait(self._shutdown)

    async def _shutdown_steps(self) -> None:
        logger.info("[KafkaServer id=%d] shutting down", self.broker_id)
        if any(step.name == "registration" for step in self._started):
            try:
                await self.controlled_shutdown()
            except Exception:
                logger.exception("controlled shutdown failed")
        while self._started:
            step = self._started.pop()
            try:
                await step.stop()
            except Exception:
                logger.exception("error while stopping %s", step.name)
        logger.info("[KafkaServer id=%d] shut down completed", self.broker_id)

    # -- steps -----------------------------------------------------------------------------------

    async def _resolve_security(self) -> None:
        try:
            self._security = resolve_broker_security(self.config, self.credential_cache)
        except SecurityConfigError as exc:
            raise BrokerStartupError(str(exc)) from exc

    async def _start_zookeeper(self) -> None:
        config = self.config
        connect = config.zookeeper_connect
        timeout = config.zookeeper_connection_timeout_ms / 1000.0
        logger.info("Connecting to zookeeper on %s", connect)
        try:
            zk_security = resolve_zookeeper_security(config, os.environ)
        except SecurityConfigError as exc:
            raise BrokerStartupError(str(exc)) from exc
        if zk_security.sasl is not None:
            logger.info("Authenticating to ZooKeeper with SASL DIGEST-MD5 as %s%s",
                        zk_security.sasl.username,
                        " (znodes with secure ACLs)" if zk_security.secure_acls else "")
        try:
            await KafkaZkClient.create_chroot_if_necessary(
                connect, self.reactor, timeout, sasl=zk_security.sasl,
                secure_acls=zk_security.secure_acls)
            client = KafkaZkClient.from_connect_string(
                connect, self.reactor, session_timeout_ms=config.zookeeper_session_timeout_ms,
                sasl=zk_security.sasl, secure_acls=zk_security.secure_acls)
            self._zk_client = client
            await client.start(connection_timeout=timeout)
        except ZooKeeperClientError as exc:
            self._zk_client = None
            raise BrokerStartupError(
                f"Timed out waiting for connection to ZooKeeper at {connect}: {exc}") from exc
        self._admin_zk = AdminZkClient(client)
        await client.create_top_level_paths()
        self.cluster_id = await client.create_or_get_cluster_id(ClusterIdZNode.generate())
        logger.info("Cluster ID = %s", self.cluster_id)

    async def _stop_zookeeper(self) -> None:
        if self._zk_client is not None:
            self._zk_client.unregister_state_change_handler(BROKER_INFO_HANDLER)
            await self._zk_client.close()

    async def _start_log_manager(self) -> None:
        config = self.config
        zk = self.zk_client
        manager_config = LogManagerConfig.from_props(dict(config.originals))
        if self.broker_id < 0:
            self.broker_id = await self._generate_broker_id(manager_config)
            self.metadata_cache = MetadataCache(self.broker_id)
        manager_config = dataclasses.replace(manager_config, broker_id=self.broker_id)
        topics = await zk.get_all_topics_in_cluster()
        overrides = await zk.get_topic_configs(topics)
        topic_configs: dict[str, LogConfig] = {}
        for topic, props in overrides.items():
            if props:
                try:
                    topic_configs[topic] = LogConfig.from_topic_overrides(
                        props, manager_config.default_log_config)
                except KafkaError as exc:
                    logger.error("Invalid config overrides of topic %s: %s", topic, exc)
        self._log_io_threads = LogIoThreads(self.config.num_io_threads,
                                            self.reactor.callFromThread,
                                            f"kafka-io-{self.broker_id}")
        manager = LogManager(manager_config, clock=self.reactor, topic_configs=topic_configs,
                             cluster_id=self.cluster_id, background=self._in_thread,
                             io_threads=self._log_io_threads)
        if self.metrics is not None:
            manager.flush_time_listener = self.metrics.record_log_flush
        try:
            manager.startup()
        except InconsistentClusterIdError as exc:
            raise BrokerStartupError(exc.message) from exc
        except KafkaStorageError as exc:
            raise BrokerStartupError(exc.message) from exc
        self._log_manager = manager

    async def _generate_broker_id(self, manager_config: LogManagerConfig) -> int:
        """broker.id=-1: the id in meta.properties, else a new one above
        reserved.broker.max.id from /brokers/seqid (Kafka's getOrGenerateBrokerId)."""
        for directory in manager_config.log_dirs:
            props = BrokerMetadataCheckpoint(Path(directory) / META_PROPERTIES).read()
            if props is not None and "broker.id" in props:
                return int(props["broker.id"])
        if not self.config.broker_id_generation_enable:
            raise BrokerStartupError("broker.id is not set and broker.id.generation.enable=false")
        sequence = await self.zk_client.generate_broker_sequence_id()
        return self.config.reserved_broker_max_id + sequence

    async def _stop_log_manager(self) -> None:
        if self._log_io_threads is not None:
            self._log_io_threads.shutdown()
            self._log_io_threads = None
        if self._log_manager is not None:
            self._log_manager.shutdown()
        if self._scheduler_thread is not None:
            self._scheduler_thread.shutdown(wait=True)
            self._scheduler_thread = None

    async def _start_log_cleaner(self) -> None:
        config = self.config
        if not config.log_cleaner_enable:
            return
        reactor = self.reactor

        def run_on_reactor(function: Callable[[], _T]) -> _T:
            result: _T = threads.blockingCallFromThread(reactor, function)
            return result

        self.log_cleaner = LogCleaner(cleaner_config(config), self.log_manager, reactor,
                                      run_on_reactor)
        self.log_cleaner.startup()

    def _reconfigure_log_cleaner(self, props: Mapping[str, Any]) -> None:
        """The dynamic log.cleaner.* configs (Kafka's LogCleaner as a BrokerReconfigurable):
        new cleaner threads with the new settings, when they changed."""
        if self.log_cleaner is None:
            return
        try:
            new = cleaner_config(KafkaConfig(props))
            LogCleaner.validate_reconfiguration(self.log_cleaner.config, new)
        except (KafkaError, ValueError) as exc:
            logger.error("Ignoring invalid dynamic log cleaner configs: %s", exc)
            return
        if new != self.log_cleaner.config:
            logger.info("Reconfiguring the log cleaner: %s", new)
            self.log_cleaner.reconfigure(new)

    async def _stop_log_cleaner(self) -> None:
        if self.log_cleaner is not None:
            self.log_cleaner.shutdown()

    async def _start_replica_manager(self) -> None:
        manager = ReplicaManager(self.broker_id, self.log_manager, self.zk_client,
                                 clock=self.reactor,
                                 config=ReplicaManagerConfig.from_kafka_config(self.config),
                                 isr_zk_client=self.zk_client,
                                 metadata_cache=self.metadata_cache,
                                 fetcher_config=dataclasses.replace(
                                     ReplicaFetcherConfig.from_kafka_config(self.config),
                                     client_security=self.security.inter_broker),
                                 metrics=self.metrics,
                                 log_dir_event_zk_client=self.zk_client,
                                 halt=_halt)
        manager.controller_epoch = self._controller_epoch
        manager.startup()
        self._replica_manager = manager
        # A failed directory may be reported from the checkpoint thread: handled on the
        # reactor. Directories that failed at startup are handed over now.
        self.log_manager.log_dir_failure_channel.set_listener(
            lambda directory: self.reactor.callFromThread(manager.handle_log_dir_failure,
                                                          directory))

    async def _stop_replica_manager(self) -> None:
        if self._replica_manager is not None:
            await _wait(self._replica_manager.shutdown())

    async def _start_dynamic_config(self) -> None:
        manager = DynamicConfigManager(self.broker_id, self.zk_client, self.log_manager,
                                       self.config.originals, self.reactor,
                                       user_config_handler=self.credential_cache.update_user,
                                       quota_config_handler=self._update_quotas,
                                       broker_config_handler=self._on_broker_config_change)
        await manager.startup()
        self.dynamic_config_manager = manager

    async def _stop_dynamic_config(self) -> None:
        if self.dynamic_config_manager is not None:
            self.dynamic_config_manager.shutdown()
            self.dynamic_config_manager = None

    async def _start_authorizer(self) -> None:
        """Kafka's ``authorizer.class.name``: none (everyone may do everything) or the
        AclAuthorizer, whose ACLs are loaded before the socket server accepts a request."""
        config = self.config
        if not config.authorizer_class_name:
            return
        authorizer = AclAuthorizer(
            self.zk_client, self.reactor, super_users=parse_super_users(config.super_users),
            allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)
        await authorizer.startup()
        self.authorizer = authorizer

    async def _stop_authorizer(self) -> None:
        if self.authorizer is not None:
            self.authorizer.shutdown()
            self.authorizer = None

    async def _start_group_coordinator(self) -> None:
        if self.config.offsets_storage != "zookeeper":
            raise BrokerStartupError(
                f"offsets.storage={self.config.offsets_storage} is not supported: committed "
                "offsets are kept in ZooKeeper only (offsets.storage=zookeeper)")
        self._group_store = ZkGroupStore(self.zk_client)
        metadata_log = ReplicaGroupMetadataLog(
            self.replica_manager, required_acks=self.config.offsets_commit_required_acks,
            timeout_ms=self.config.offsets_commit_timeout_ms,
            load_buffer_size=self.config.offsets_load_buffer_size)
        coordinator = GroupCoordinator(self.broker_id, group_config(self.config),
                                       self._group_store, metadata_log, self.reactor)
        self.replica_manager.leadership_listeners.append(coordinator.on_leadership_change)
        coordinator.startup()
        self._group_coordinator = coordinator

    async def _stop_group_coordinator(self) -> None:
        coordinator = self._group_coordinator
        if coordinator is not None:
            if self._replica_manager is not None:
                listeners = self._replica_manager.leadership_listeners
                if coordinator.on_leadership_change in listeners:
                    listeners.remove(coordinator.on_leadership_change)
            coordinator.shutdown()
        if self._group_store is not None:
            self._group_store.close()

    async def _start_producer_id_manager(self) -> None:
        self._producer_id_manager = ProducerIdManager(self.broker_id, self.zk_client)

    async def _stop_producer_id_manager(self) -> None:
        self._producer_id_manager = None

    async def _start_transaction_coordinator(self) -> None:
        config = self.config
        timeout_s = config.request_timeout_ms / 1000.0
        setup_timeout_s = config.socket_connection_setup_timeout_ms / 1000.0
        setup_timeout_max_s = config.socket_connection_setup_timeout_max_ms / 1000.0
        client_id = f"broker-{self.broker_id}-txn-marker-sender"

        def connect(destination: MarkerDestination) -> KafkaClientConnection:
            return KafkaClientConnection(self.reactor, destination.host, destination.port,
                                         client_id=client_id, request_timeout=timeout_s,
                                         connect_timeout=setup_timeout_s,
                                         connect_timeout_max=setup_timeout_max_s,
                                         security=self.security.inter_broker)

        channel = TransactionMarkerChannelManager(
            self.reactor,
            MetadataCacheMarkerDestinations(self.metadata_cache,
                                            config.inter_broker_listener_name),
            connect)
        state_manager = TransactionStateManager(
            config.transaction_state_log_num_partitions,
            ReplicaTransactionStateLog(
                self.replica_manager,
                load_buffer_size=config.transaction_state_log_load_buffer_size),
            request_timeout_ms=config.request_timeout_ms)
        coordinator = TransactionCoordinator(self.broker_id, transaction_config(config),
                                             state_manager, self.producer_id_manager, channel,
                                             self.reactor)
        self.replica_manager.leadership_listeners.append(self._on_txn_leadership_change)
        coordinator.startup()
        self._txn_marker_channel = channel
        self._transaction_coordinator = coordinator

    def _on_txn_leadership_change(self, new_leaders: Sequence[Partition],
                                  new_followers: Sequence[Partition]) -> None:
        """Load the ``__transaction_state`` partitions this broker now leads (coordinator
        epoch: the partition's leader epoch), unload the ones it follows."""
        coordinator = self._transaction_coordinator
        if coordinator is None:
            return
        for partition in new_followers:
            if partition.topic_partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                coordinator.on_resignation(partition.topic_partition.partition)
        for partition in new_leaders:
            if partition.topic_partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                coordinator.on_election(partition.topic_partition.partition,
                                        partition.leader_epoch)

    async def _stop_transaction_coordinator(self) -> None:
        if self._replica_manager is not None:
            listeners = self._replica_manager.leadership_listeners
            if self._on_txn_leadership_change in listeners:
                listeners.remove(self._on_txn_leadership_change)
        if self._transaction_coordinator is not None:
            self._transaction_coordinator.shutdown()
            self._transaction_coordinator = None
        if self._txn_marker_channel is not None:
            self._txn_marker_channel.shutdown()
            self._txn_marker_channel = None

    async def _start_socket_server(self) -> None:
        config = self.config
        request_queue = RequestQueue(config.queued_max_requests)
        self.connection_quotas = ConnectionQuotas(
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
            max_connection_creation_rate=config.max_connection_creation_rate)
        for endpoint in config.listeners:
            resolved = self.security.listeners[endpoint.listener_name]
            factory = KafkaServerFactory(
                self.request_handler, config.socket_request_max_bytes,
                endpoint.listener_name, resolved.security, request_queue=request_queue,
                quotas=self.connection_quotas,
                connections_max_idle_ms=config.connections_max_idle_ms, clock=self.reactor,
                request_metrics=self.request_metrics)
            try:
                if resolved.tls is None:
                    port = self.reactor.listenTCP(endpoint.port, factory,
                                                  interface=endpoint.host or "")
                else:
                    port = self.reactor.listenSSL(endpoint.port, factory, resolved.tls,
                                                  interface=endpoint.host or "")
            except twisted_error.CannotListenError as exc:
                raise BrokerStartupError(
                    f"Socket server failed to bind to {endpoint.host or '0.0.0.0'}:"
                    f"{endpoint.port}: {_bind_reason(exc)}.") from exc
            self._ports[endpoint.listener_name] = port
            self._factories.append(factory)
            logger.info("Awaiting socket connections on %s:%d (%s, %s)",
                        endpoint.host or "0.0.0.0", port.getHost().port, endpoint.listener_name,
                        endpoint.security_protocol.name)

    def _in_thread(self, work: Callable[[], None], done: Callable[[], None]) -> None:
        """The log manager's background runner: ``work`` on the broker's scheduler thread
        (the periodic checkpoint writes, Kafka's kafka-scheduler), then ``done`` back on the
        reactor. Its own executor, not the reactor's thread pool: that one starts only with
        ``reactor.run``, and tests iterate the reactor instead."""
        if self._scheduler_thread is None:
            self._scheduler_thread = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"kafka-scheduler-{self.broker_id}")
        future = self._scheduler_thread.submit(work)

        def finished(future: Future[None]) -> None:
            exc = future.exception()
            if exc is not None:
                logger.error("Background log task failed: %s", exc)
            else:
                self.reactor.callFromThread(done)

        future.add_done_callback(finished)

    def _update_quotas(self, entity_path: str, configs: dict[str, str]) -> None:
        entity = quota_entity_from_path(entity_path)
        if entity is not None:
            self.quotas.update(entity, configs)

    def _on_broker_config_change(self, props: Mapping[str, Any]) -> None:
        self._reconfigure_socket_server(props)
        self._reconfigure_replication_quotas(props)
        self._reconfigure_log_cleaner(props)
        self._reconfigure_io_threads(props)
        self._reconfigure_recovery_threads(props)

    def _reconfigure_recovery_threads(self, props: Mapping[str, Any]) -> None:
        """The dynamic ``num.recovery.threads.per.data.dir``: the log manager's pool size
        for its next shutdown."""
        if self._log_manager is None:
            return
        try:
            threads = KafkaConfig(props).num_recovery_threads_per_data_dir
        except (KafkaError, ValueError) as exc:
            logger.error("Ignoring an invalid dynamic num.recovery.threads.per.data.dir: %s",
                         exc)
            return
        if threads != self._log_manager.config.num_recovery_threads_per_data_dir:
            logger.info("Log recovery and shutdown threads per data dir: %d", threads)
            self._log_manager.set_recovery_threads(threads)

    def _reconfigure_io_threads(self, props: Mapping[str, Any]) -> None:
        """The dynamic ``num.io.threads``: the I/O threads' pool resized."""
        if self._log_io_threads is None:
            return
        try:
            threads = KafkaConfig(props).num_io_threads
        except (KafkaError, ValueError) as exc:
            logger.error("Ignoring an invalid dynamic num.io.threads: %s", exc)
            return
        if threads != self._log_io_threads.threads:
            logger.info("Resizing the I/O threads from %d to %d", self._log_io_threads.threads,
                        threads)
            self._log_io_threads.resize(threads)

    def _reconfigure_replication_quotas(self, props: Mapping[str, Any]) -> None:
        """The replication throttle rates (Kafka's DynamicConfig.Broker throttles)."""
        if self._replica_manager is None:
            return
        leader = quota_of(dict(props), LEADER_REPLICATION_THROTTLED_RATE)
        follower = quota_of(dict(props), FOLLOWER_REPLICATION_THROTTLED_RATE)
        manager = self._replica_manager
        if (leader, follower) != (manager.leader_quota.quota, manager.follower_quota.quota):
            logger.info("Replication throttles: leader %s B/s, follower %s B/s", leader,
                        follower)
        manager.leader_quota.update_quota(leader)
        manager.follower_quota.update_quota(follower)
        alter_log_dirs = quota_of(dict(props), REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND)
        if alter_log_dirs != manager.alter_log_dirs_quota.quota:
            logger.info("Log directory moves throttled to %s B/s", alter_log_dirs)
        manager.alter_log_dirs_quota.update_quota(alter_log_dirs)

    def _reconfigure_socket_server(self, props: Mapping[str, Any]) -> None:
        """The dynamic connection limits (Kafka's DynamicConnectionQuota): new limits for
        new connections; those open stay."""
        if self.connection_quotas is None:
            return
        try:
            config = KafkaConfig(props)
        except KafkaError as exc:
            logger.error("Ignoring invalid dynamic socket server configs: %s", exc)
            return
        self.connection_quotas.reconfigure(
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
            max_connection_creation_rate=config.max_connection_creation_rate)

    async def _stop_socket_server(self) -> None:
        if self.request_metrics.histograms:
            logger.info("Request timing (ms) since start:\n%s", self.request_metrics.summary())
        ports, self._ports = self._ports, {}
        stopping = [port.stopListening() for port in ports.values()]
        for factory in self._factories:
            for connection in list(factory.connections):
                transport: Any = connection.transport
                if transport is not None:
                    transport.loseConnection()
        self._factories = []
        for d in stopping:
            if isinstance(d, Deferred):
                await d

    def bound_port(self, listener_name: str = "PLAINTEXT") -> int:
        """The port a listener is bound to (what port 0 became)."""
        return int(self._ports[listener_name.upper()].getHost().port)

    def advertised_endpoints(self) -> tuple[EndPoint, ...]:
        """``advertised.listeners`` with port 0 replaced by the bound port and an empty host
        by this machine's name, as Kafka registers them."""
        return tuple(self._advertised(endpoint) for endpoint in self.config.advertised_listeners)

    def _advertised(self, endpoint: EndPoint) -> EndPoint:
        port = endpoint.port
        if port == 0 and endpoint.listener_name in self._ports:
            port = self.bound_port(endpoint.listener_name)
        host = endpoint.host if endpoint.host is not None else socket.getfqdn()
        return EndPoint(endpoint.listener_name, endpoint.security_protocol, host, port)

    async def _start_metrics(self) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        register_collectors(metrics, [
            ReplicaManagerCollector(lambda: self._replica_manager),
            ControllerCollector(lambda: self._controller),
            GroupLagCollector(lambda: self._group_coordinator, lambda: self._replica_manager),
        ])
        host = self.config.metrics_prometheus_host
        try:
            self._metrics_port = self.reactor.listenTCP(
                self.config.metrics_prometheus_port,
                Site(MetricsResource(metrics)),  # type: ignore[no-untyped-call]
                interface=host)
        except twisted_error.CannotListenError as exc:
            raise BrokerStartupError(
                f"Metrics server failed to bind to {host}:{self.config.metrics_prometheus_port}"
                f": {_bind_reason(exc)}.") from exc
        logger.info("Serving Prometheus metrics on http://%s:%d/metrics", host,
                    self.metrics_port())

    async def _stop_metrics(self) -> None:
        port, self._metrics_port = self._metrics_port, None
        if port is not None:
            await _wait(port.stopListening())

    def metrics_port(self) -> int:
        """The port metrics are served on (what port 0 became)."""
        if self._metrics_port is None:
            raise RuntimeError("the broker does not serve metrics")
        return int(self._metrics_port.getHost().port)

    async def _register(self) -> None:
        zk = self.zk_client
        self.registered_endpoints = self.advertised_endpoints()
        info = self._broker_info()
        wait_ms = self.config.zookeeper_session_timeout_ms + REGISTRATION_WAIT_MARGIN_MS
        deadline = self.reactor.seconds() + wait_ms / 1000.0
        waiting = False
        while True:
            try:
                self.broker_epoch = await zk.register_broker(info)
                break
            except BrokerIdAlreadyRegisteredError as exc:
                if self.reactor.seconds() >= deadline:
                    raise BrokerStartupError(str(exc)) from exc
                if not waiting:
                    waiting = True
                    logger.warning(
                        "broker.id %d is still registered by another ZooKeeper session (a "
                        "previous run of this broker whose session has not expired yet?): "
                        "waiting up to %d ms for that registration to go", self.broker_id,
                        wait_ms)
            await _sleep(self.reactor, REGISTRATION_RETRY_S)
        if waiting:
            logger.info("The old registration of broker.id %d expired: registered",
                        self.broker_id)
        zk.register_state_change_handler(_SessionHandler(self))

    def _broker_info(self) -> BrokerInfo:
        return BrokerInfo(BrokerId(self.broker_id), self.registered_endpoints,
                          rack=self.config.broker_rack)

    async def reregister(self) -> None:
        """After a session expiry: register again (a new broker epoch), check the cluster id."""
        zk = self.zk_client
        self.broker_epoch = await zk.register_broker(self._broker_info())
        if self._controller is not None:
            self._controller.broker_epoch = self.broker_epoch  # its own registration, now
        cluster_id = await zk.get_cluster_id()
        if cluster_id != self.cluster_id:
            logger.error("/cluster/id is now %s, this broker joined cluster %s", cluster_id,
                         self.cluster_id)

    async def _deregister(self) -> None:
        zk = self._zk_client
        if zk is None or not zk.connected:
            return
        zk.unregister_state_change_handler(BROKER_INFO_HANDLER)
        found = await zk.get_data_and_stat(BrokerIdZNode.path(self.broker_id))
        if found is not None and int(found[1].ephemeralOwner) == zk.session_id:
            await zk.delete_path(BrokerIdZNode.path(self.broker_id))

    async def _start_controller(self) -> None:
        controller = self._controller_factory(self.config, self.zk_client, self.broker_id,
                                              self.broker_epoch, self.reactor)
        self._controller = controller
        if self.metrics is not None and isinstance(controller, KafkaController):
            controller.events.queue_time_listener = self.metrics.record_event_queue_time
        await controller.startup()

    async def _stop_controller(self) -> None:
        if self._controller is not None:
            await self._controller.shutdown()

    # -- controlled shutdown ---------------------------------------------------------------------

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership away from this broker (Kafka's
        ``KafkaServer.controlledShutdown``); whether it succeeded. Never raises for the
        controller's answers: after the last attempt the broker shuts down uncleanly."""
        config = self.config
        if not config.controlled_shutdown_enable:
            return False
        remaining_retries = config.controlled_shutdown_max_retries
        while remaining_retries > 0:
            remaining_retries -= 1
            try:
                if await self._controlled_shutdown_attempt():
                    logger.info("Controlled shutdown request returned successfully")
                    return True
            except Exception as exc:  # a network or ZooKeeper failure: retry, as Kafka
                logger.warning("Error during controlled shutdown, possibly because leader "
                               "movement took longer than the configured "
                               "controller.socket.timeout.ms and/or request.timeout.ms: %s",
                               exc)
            if remaining_retries > 0:
                await _sleep(self.reactor, config.controlled_shutdown_retry_backoff_ms / 1000.0)
                logger.info("Retrying controlled shutdown (%d retries remaining)",
                            remaining_retries)
        logger.warning("Proceeding to do an unclean shutdown as all the controlled shutdown "
                       "attempts failed")
        return False

    async def _controlled_shutdown_attempt(self) -> bool:
        zk = self.zk_client
        controller_id = await zk.get_controller_id()
        if controller_id is None:
            logger.info("No controller registered in ZooKeeper")
            return False
        controller = await zk.get_broker(controller_id)
        endpoint = None if controller is None else controller.endpoint(
            self.config.inter_broker_listener_name)
        if endpoint is None or endpoint.host is None:
            logger.info("Controller %d has no endpoint on listener %s", controller_id,
                        self.config.inter_broker_listener_name)
            return False
        error_code, remaining = await send_controlled_shutdown(
            self.reactor, endpoint.host, endpoint.port, self.broker_id, self.broker_epoch,
            timeout_s=self.config.request_timeout_ms / 1000.0,
            connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000.0,
            security=self.security.inter_broker)
        if error_code == NONE and not remaining:
            return True
        if remaining:
            logger.info("Remaining partitions to move: %s",
                        ",".join(str(tp) for tp in sorted(remaining)))
        logger.info("Error from controller: %s", error_code)
        return False


async def _nothing() -> None:
    return None


def _bind_reason(exc: twisted_error.CannotListenError) -> str:
    cause = exc.socketError
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(cause)


def _halt() -> None:
    """Exit at once, as Kafka's Exit.halt(1): no shutdown steps run (they would write to the
    failed directories); the ZooKeeper session expires and the controller moves leaders."""
    logging.shutdown()
    os._exit(1)


def _started(part: _T | None, what: str) -> _T:
    """A part of the broker that exists once its step has started."""
    if part is None:
        raise RuntimeError(f"the broker's {what} is not started")
    return part


async def _sleep(reactor: Any, seconds: float) -> None:
    d: Deferred[None] = Deferred()
    reactor.callLater(seconds, d.callback, None)
    await d


async def _wait(d: Deferred[None]) -> None:
    """Await a Deferred that others may await too (without consuming its result)."""
    waiter: Deferred[None] = Deferred()

    def fire(result: Any) -> Any:
        if isinstance(result, Failure):
            waiter.errback(result)
        else:
            waiter.callback(None)
        return None

    d.addBoth(fire)
    await waiter


def _log_failure(failure: Failure, what: str) -> None:
    logger.error("%s failed: %s", what, failure.getErrorMessage())
