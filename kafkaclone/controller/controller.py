"""KafkaController: the broker that won the /controller election manages partition leaders,
ISRs and topic lifecycles for the whole cluster (Kafka 2.8's KafkaController, ZooKeeper mode).

Every broker runs one. ``startup()`` registers the /controller watch and tries to win the
election (create the ephemeral /controller and bump /controller_epoch in one multi-op;
losing is normal). The winner (``on_controller_failover``) reads the cluster from
ZooKeeper, watches it, elects leaders and tells every broker. ZooKeeper watches and session
changes only queue events (kafkaclone.controller.events); they are processed one at a time.
Every controller write is guarded by the epoch znode's zkVersion, so a deposed controller
cannot write; it resigns on a /controller change or a session expiry, and after an expiry
it stands for election again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidReplicaAssignmentError,
    InvalidTopicExceptionError,
    KafkaError,
    KafkaStorageError,
    NoReassignmentInProgressError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    StaleBrokerEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.channel_manager import (
    ControllerBrokerRequestBatch,
    ControllerChannel,
    ControllerChannelManager,
)
from kafkaclone.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    PartitionState,
    ReplicaState,
)
from kafkaclone.controller.election import ElectionStrategy
from kafkaclone.controller.events import (
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ControllerEventManager,
    Expire,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    PreferredReplicaLeaderElection,
    Reelect,
    ReplicaLeaderElection,
    RequestEvent,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    ZkPartitionReassignment,
)
from kafkaclone.controller.state_machines import (
    MAX_ZK_WRITE_ATTEMPTS,
    PartitionStateMachine,
    ReplicaStateMachine,
    read_partition_states,
)
from kafkaclone.network.client import PLAINTEXT_CLIENT, ClientSecurity
from kafkaclone.network.pacing import Pacer
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import ControllerMovedError
from kafkaclone.zk.znodes import (
    BrokerIdsZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LogDirEventNotificationZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from kafkaclone.zk.zookeeper_client import (
    StateChangeHandler,
    ZNodeChangeHandler,
    ZNodeChildChangeHandler,
)

logger = logging.getLogger(__name__)

ELECTION_TYPE_PREFERRED = 0
ELECTION_TYPE_UNCLEAN = 1
"""Kafka's ElectionType values (ElectLeaders v1+)."""

_T = TypeVar("_T")

CONTROLLER_PACING_STRETCH_S: Final = 0.05
"""How long an event's loops run between reactor turns. Longer than a LeaderAndIsr's 10 ms
stretch: a failover's events should not wait for many turns of a reactor busy with the
failover's fetches, and the broker's clients then wait tens of ms, not seconds."""
SHUTDOWN_EVENT_GRACE_S = 2.0
"""How long a shutting-down controller lets the event in progress run before cancelling it
(its ZooKeeper writes are each atomic; the next controller takes over from what is there)."""

ChannelFactory = Callable[["KafkaController"], ControllerChannel]
"""Builds the controller's channel to brokers at each failover (a fake in tests)."""


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller uses. The values (and their defaults) come from
    the broker's config table: the broker builds this (kafkaclone.server.broker)."""

    broker_id: int
    unclean_leader_election_enable: bool
    delete_topic_enable: bool
    controller_socket_timeout_ms: int
    listener_name: str
    auto_leader_rebalance_enable: bool
    leader_imbalance_per_broker_percentage: int
    leader_imbalance_check_interval_seconds: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    client_security: ClientSecurity = PLAINTEXT_CLIENT
    """TLS and SASL of the listener the controller sends its requests to."""


# -- ZooKeeper handlers: they only queue events --------------------------------------------------


class _ControllerChangeHandler(ZNodeChangeHandler):
    def __init__(self, events: ControllerEventManager) -> None:
        super().__init__(ControllerZNode.PATH)
        self._events = events

    def handle_creation(self) -> None:
        self._events.put(ControllerChange())

    def handle_deletion(self) -> None:
        self._events.put(Reelect())

    def handle_data_change(self) -> None:
        self._events.put(ControllerChange())


class _ChildHandler(ZNodeChildChangeHandler):
    def __init__(self, path: str, events: ControllerEventManager,
                 event: Callable[[], ControllerEvent]) -> None:
        super().__init__(path)
        self._events = events
        self._event = event

    def handle_child_change(self) -> None:
        self._events.put(self._event())


class _PartitionModificationsHandler(ZNodeChangeHandler):
    def __init__(self, topic: str, events: ControllerEventManager) -> None:
        super().__init__(TopicZNode.path(topic))
        self._topic = topic
        self._events = events

    def handle_data_change(self) -> None:
        self._events.put(PartitionModifications(self._topic))


class _PreferredReplicaElectionHandler(ZNodeChangeHandler):
    def __init__(self, events: ControllerEventManager) -> None:
        super().__init__(PreferredReplicaElectionZNode.PATH)
        self._events = events

    def handle_creation(self) -> None:
        self._events.put(PreferredReplicaLeaderElection())


class _PartitionReassignmentHandler(ZNodeChangeHandler):
    def __init__(self, events: ControllerEventManager) -> None:
        super().__init__(ReassignPartitionsZNode.PATH)
        self._events = events

    def handle_creation(self) -> None:
        self._events.put(ZkPartitionReassignment())


class _PartitionReassignmentIsrChangeHandler(ZNodeChangeHandler):
    def __init__(self, tp: TopicPartition, events: ControllerEventManager) -> None:
        super().__init__(TopicPartitionStateZNode.path(tp))
        self._tp = tp
        self._events = events

    def handle_data_change(self) -> None:
        self._events.put(PartitionReassignmentIsrChange(self._tp))


class _SessionHandler(StateChangeHandler):
    def __init__(self, events: ControllerEventManager) -> None:
        super().__init__("controller-state-change-handler")
        self._events = events

    def before_initializing_session(self) -> None:
        self._events.clear_and_put(Expire())

    def after_initializing_session(self) -> None:
        self._events.put(Reelect())


class KafkaController:
    """One broker's controller (active or standby); implements ControllerService."""

    def __init__(self, config: ControllerConfig, zk_client: KafkaZkClient, broker_id: int,
                 broker_epoch: int, reactor: Any, *,
                 channel_factory: ChannelFactory | None = None) -> None:
        self.config = config
        self.zk_client = zk_client
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.reactor = reactor
        self.pacer = Pacer(reactor, CONTROLLER_PACING_STRETCH_S)
        """The reactor's turns during an event's loops over thousands of partitions: the
        controller runs on the reactor thread, where the broker's clients are served."""
        self._channel_factory = channel_factory or _default_channel_factory
        self.context = ControllerContext()
        self.active_controller_id = -1
        self.events = ControllerEventManager(self._process)
        self.channel: ControllerChannel | None = None
        self.batch: ControllerBrokerRequestBatch | None = None
        self.partition_state_machine: PartitionStateMachine | None = None
        self.replica_state_machine: ReplicaStateMachine | None = None
        self._controller_change_handler = _ControllerChangeHandler(self.events)
        self._session_handler = _SessionHandler(self.events)
        self._child_handlers = [
            _ChildHandler(BrokerIdsZNode.PATH, self.events, BrokerChange),
            _ChildHandler(TopicsZNode.PATH, self.events, TopicChange),
            _ChildHandler(DeleteTopicsZNode.PATH, self.events, TopicDeletion),
            _ChildHandler(IsrChangeNotificationZNode.PATH, self.events, IsrChangeNotification),
            _ChildHandler(LogDirEventNotificationZNode.PATH, self.events,
                          LogDirEventNotification),
        ]
        self._partition_modification_handlers: dict[str, _PartitionModificationsHandler] = {}
        self._preferred_election_handler = _PreferredReplicaElectionHandler(self.events)
        self._partition_reassignment_handler = _PartitionReassignmentHandler(self.events)
        self._reassignment_isr_handlers: dict[str, _PartitionReassignmentIsrChangeHandler] = {}
        self._auto_rebalance_call: Any = None
        self._started = False

    # -- ControllerService -------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def epoch(self) -> int:
        return self.context.epoch

    @property
    def epoch_zk_version(self) -> int:
        return self.context.epoch_zk_version

    async def controlled_shutdown(self, broker_id: int,
                                  broker_epoch: int) -> set[TopicPartition]:
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = ControlledShutdown(broker_id, broker_epoch)
        self.events.put(event)
        return await event.result

    async def elect_leaders(self, partitions: Iterable[TopicPartition] | None,
                            election_type: int) -> dict[TopicPartition, KafkaError | int]:
        """ElectLeaders (admin triggered): each partition's outcome, the new leader's id when
        one was elected; ``partitions`` None means every partition. NotControllerError if this
        broker is not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = ReplicaLeaderElection(None if partitions is None else frozenset(partitions),
                                      election_type)
        self.events.put(event)
        return await event.result

    async def alter_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments: start (target replicas) or cancel (None) each
        partition's reassignment; each partition's error, None when accepted.
        NotControllerError if this broker is not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = ApiPartitionReassignment(dict(reassignments))
        self.events.put(event)
        return await event.result

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the full assignment of each (listed) partition being
        reassigned. NotControllerError if this broker is not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = ListPartitionReassignments(None if partitions is None else frozenset(partitions))
        self.events.put(event)
        return await event.result

    # -- lifecycle -------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Stand for election; returns once the first attempt was processed."""
        self._started = True
        self.zk_client.register_state_change_handler(self._session_handler)
        self.events.put(Startup())
        await self.wait_idle()

    async def wait_idle(self) -> None:
        """Wait until the event queue is empty and nothing is being processed."""
        while not self.events.idle:
            d: Deferred[None] = Deferred()
            self.reactor.callLater(0.01, d.callback, None)
            await d

    async def shutdown(self) -> None:
        """Stop processing events and resign (without deleting /controller: the session
        that owns it ends with the broker)."""
        await self.events.shutdown(self.reactor, SHUTDOWN_EVENT_GRACE_S)
        self.zk_client.unregister_state_change_handler(self._session_handler.name)
        self.zk_client.unregister_znode_change_handler(ControllerZNode.PATH)
        self._on_controller_resignation()
        self.active_controller_id = -1

    # -- event processing -------------------------------------------------------------------

    async def _process(self, event: ControllerEvent) -> None:
        self.pacer.restart()
        try:
            await self._dispatch(event)
        except ControllerMovedError as exc:
            logger.info("Controller moved to another broker when processing %s: %s", event, exc)
            await self._maybe_resign()
            if isinstance(event, RequestEvent) and not event.result.called:
                event.result.errback(NotControllerError(str(exc)))
        except Exception as exc:
            if isinstance(event, RequestEvent) and not event.result.called:
                event.result.errback(exc)
                return
            raise

    async def _dispatch(self, event: ControllerEvent) -> None:
        if isinstance(event, Startup):
            await self.zk_client.register_znode_change_handler_and_check_existence(
                self._controller_change_handler)
            await self._elect()
        elif isinstance(event, ControllerChange):
            await self._maybe_resign()
        elif isinstance(event, Reelect):
            await self._maybe_resign()
            await self._elect()
        elif isinstance(event, Expire):
            self.active_controller_id = -1
            self._on_controller_resignation()
        elif isinstance(event, ControlledShutdown):
            result = await self._process_controlled_shutdown(event.broker_id, event.broker_epoch)
            if not event.result.called:
                event.result.callback(result)
        elif isinstance(event, ReplicaLeaderElection):
            if not self.is_active:
                event.result.errback(NotControllerError(
                    f"broker {self.broker_id} is not the controller"))
                return
            outcome = await self._process_replica_leader_election(event.partitions,
                                                                  event.election_type)
            if not event.result.called:
                event.result.callback(outcome)
        elif isinstance(event, ApiPartitionReassignment | ListPartitionReassignments):
            if not self.is_active:
                event.result.errback(NotControllerError(
                    f"broker {self.broker_id} is not the controller"))
            elif isinstance(event, ApiPartitionReassignment):
                results = await self._process_api_partition_reassignment(event.reassignments)
                if not event.result.called:
                    event.result.callback(results)
            else:
                event.result.callback(self._list_partition_reassignments(event.partitions))
        elif not self.is_active:
            return
        elif isinstance(event, ZkPartitionReassignment):
            await self._process_zk_partition_reassignment()
        elif isinstance(event, PartitionReassignmentIsrChange):
            await self._process_partition_reassignment_isr_change(event.topic_partition)
        elif isinstance(event, BrokerChange):
            await self._process_broker_change()
        elif isinstance(event, TopicChange):
            await self._process_topic_change()
        elif isinstance(event, PartitionModifications):
            await self._process_partition_modifications(event.topic)
        elif isinstance(event, TopicDeletion):
            await self._process_topic_deletion()
        elif isinstance(event, IsrChangeNotification):
            await self._process_isr_change_notification()
        elif isinstance(event, LogDirEventNotification):
            await self._process_log_dir_event_notification()
        elif isinstance(event, LeaderAndIsrResponseReceived):
            await self._process_leader_and_isr_response(event)
        elif isinstance(event, PreferredReplicaLeaderElection):
            await self._process_preferred_replica_election()
        elif isinstance(event, AutoPreferredReplicaLeaderElection):
            try:
                await self._check_and_trigger_auto_leader_rebalance()
            finally:
                self._schedule_auto_leader_rebalance()
        else:
            await self._process_stop_replica_deletion_response(event)

    # -- election and resignation -----------------------------------------------------------

    async def _elect(self) -> None:
        controller_id = await self.zk_client.get_controller_id()
        self.active_controller_id = -1 if controller_id is None else controller_id
        if controller_id is not None:
            logger.debug("Broker %s has been elected as the controller, so stopping the "
                         "election process.", controller_id)
            return
        try:
            epoch, epoch_zk_version = (
                await self.zk_client.register_controller_and_increment_controller_epoch(
                    self.broker_id))
        except ControllerMovedError:
            await self._maybe_resign()
            logger.debug("Lost the controller election; the controller is %s",
                         self.active_controller_id)
            return
        self.context.epoch = epoch
        self.context.epoch_zk_version = epoch_zk_version
        self.active_controller_id = self.broker_id
        logger.info("%s successfully elected as the controller. Epoch incremented to %s and "
                    "epoch zk version is now %s", self.broker_id, epoch, epoch_zk_version)
        try:
            await self._on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            logger.exception("Error during controller failover; resigning")
            await self._trigger_controller_move()

    async def _trigger_controller_move(self) -> None:
        self._on_controller_resignation()
        self.active_controller_id = -1
        await self.zk_client.delete_controller(self.context.epoch_zk_version)

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        controller_id = await self.zk_client.get_controller_id()
        self.active_controller_id = -1 if controller_id is None else controller_id
        if was_active and not self.is_active:
            self._on_controller_resignation()

    def _on_controller_resignation(self) -> None:
        for handler in self._child_handlers:
            self.zk_client.unregister_znode_child_change_handler(handler.path)
        for path in list(self._partition_modification_handlers):
            self.zk_client.unregister_znode_change_handler(path)
        self._partition_modification_handlers.clear()
        self.zk_client.unregister_znode_change_handler(PreferredReplicaElectionZNode.PATH)
        self.zk_client.unregister_znode_change_handler(ReassignPartitionsZNode.PATH)
        for path in list(self._reassignment_isr_handlers):
            self.zk_client.unregister_znode_change_handler(path)
        self._reassignment_isr_handlers.clear()
        if self._auto_rebalance_call is not None and self._auto_rebalance_call.active():
            self._auto_rebalance_call.cancel()
        self._auto_rebalance_call = None
        if self.channel is not None:
            self.channel.shutdown()
            logger.info("Resigned as the controller (epoch %s)", self.context.epoch)
        self.channel = None
        self.batch = None
        self.partition_state_machine = None
        self.replica_state_machine = None
        self.context.reset()

    async def _on_controller_failover(self) -> None:
        zk = self.zk_client
        ctx = self.context
        for handler in self._child_handlers:
            zk.register_znode_child_change_handler(handler)
        await zk.delete_log_dir_event_notifications(None, ctx.epoch_zk_version)
        await zk.delete_isr_change_notifications(None, ctx.epoch_zk_version)
        self.channel = self._channel_factory(self)
        self.batch = ControllerBrokerRequestBatch(
            self.broker_id, ctx, self.channel, self._on_stop_replica_deletion_response,
            self._on_leader_and_isr_response)
        self.partition_state_machine = PartitionStateMachine(
            self.broker_id, ctx, zk, self.batch, self.config.unclean_leader_election_enable,
            self.pacer)
        self.replica_state_machine = ReplicaStateMachine(self.broker_id, ctx, zk, self.batch,
                                                         self.pacer)
        # initializeControllerContext
        brokers = await zk.get_all_broker_and_epochs_in_cluster(register_watch=True)
        ctx.set_live_brokers({int(b): pair for b, pair in brokers.items()})
        ctx.all_topics = await zk.get_all_topics_in_cluster(register_watch=True)
        await self._register_partition_modifications_handlers(ctx.all_topics)
        assignments = await zk.get_replica_assignment_and_topic_id_for_topics(ctx.all_topics)
        for topic, assignment in assignments.items():
            ctx.partition_assignments[topic] = dict(assignment.partitions)
            ctx.partitions_being_reassigned |= {
                TopicPartition(topic, p) for p, a in assignment.partitions.items()
                if a.is_being_reassigned}
            if assignment.topic_id is not None:
                ctx.topic_ids[topic] = assignment.topic_id
        await self._assign_missing_topic_ids(assignments)
        ctx.partition_leadership_info.clear()
        ctx.shutting_down_broker_ids.clear()
        await self._update_leader_and_isr_cache()
        for info in ctx.live_brokers.values():
            self.channel.add_broker(info)
        # topic deletions in progress
        deletions = set(await zk.get_topic_deletions(register_watch=True))
        await zk.get_children(IsrChangeNotificationZNode.PATH, register_watch=True)
        await zk.get_children(LogDirEventNotificationZNode.PATH, register_watch=True)
        missing = deletions - ctx.all_topics
        if missing:
            await zk.delete_topic_deletions(sorted(missing), ctx.epoch_zk_version)
        if self.config.delete_topic_enable:
            ctx.topics_to_be_deleted = deletions & ctx.all_topics
        elif deletions:
            await zk.delete_topic_deletions(sorted(deletions & ctx.all_topics),
                                            ctx.epoch_zk_version)
        self._send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        logger.info("Ready to serve as the new controller with epoch %s", ctx.epoch)
        await self._initialize_partition_reassignments()
        await self._resume_deletions()
        if await zk.register_znode_change_handler_and_check_existence(
                self._preferred_election_handler):
            self.events.put(PreferredReplicaLeaderElection())
        if self.config.auto_leader_rebalance_enable:
            logger.info("Starting the controller scheduler")
            self._schedule_auto_leader_rebalance(
                delay=min(5.0, self.config.leader_imbalance_check_interval_seconds))

    async def _assign_missing_topic_ids(self, assignments: dict[str, Any]) -> None:
        for topic, assignment in assignments.items():
            if assignment.topic_id is None:
                topic_id = uuid.uuid4()
                await self.zk_client.set_topic_assignment(
                    topic, topic_id, assignment.partitions, self.context.epoch_zk_version)
                self.context.topic_ids[topic] = topic_id

    async def _register_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        for topic in sorted(topics):
            handler = _PartitionModificationsHandler(topic, self.events)
            self._partition_modification_handlers[handler.path] = handler
            await self.zk_client.register_znode_change_handler_and_check_existence(handler)

    def _unregister_partition_modifications_handlers(self, topics: Iterable[str]) -> None:
        for topic in topics:
            path = TopicZNode.path(topic)
            self._partition_modification_handlers.pop(path, None)
            self.zk_client.unregister_znode_change_handler(path)

    async def _update_leader_and_isr_cache(
            self, partitions: Iterable[TopicPartition] | None = None) -> None:
        wanted = self.context.all_partitions() if partitions is None else list(partitions)
        states = await self.zk_client.get_topic_partition_states(wanted)
        self.context.partition_leadership_info.update(states)

    def _send_update_metadata_request(self, broker_ids: Iterable[int],
                                      partitions: Iterable[TopicPartition]) -> None:
        assert self.batch is not None
        self.batch.new_batch()
        try:
            self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions)
            self.batch.send_requests_to_brokers(self.context.epoch)
        finally:
            self.batch.clear()

    async def _in_one_batch(self, work: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``work`` with every broker request its state changes imply collected in one
        batch (Kafka sends one per state machine call): one request of each kind per
        broker, sent when ``work`` is done."""
        assert self.batch is not None
        self.batch.new_batch()
        try:
            result = await work()
            self.batch.send_requests_to_brokers(self.context.epoch)
            return result
        finally:
            self.batch.clear()

    @property
    def _psm(self) -> PartitionStateMachine:
        assert self.partition_state_machine is not None
        return self.partition_state_machine

    @property
    def _rsm(self) -> ReplicaStateMachine:
        assert self.replica_state_machine is not None
        return self.replica_state_machine

    # -- brokers -----------------------------------------------------------------------------

    async def _process_broker_change(self) -> None:
        ctx = self.context
        assert self.channel is not None
        found = await self.zk_client.get_all_broker_and_epochs_in_cluster(register_watch=True)
        current = {int(b): pair for b, pair in found.items()}
        current_ids = set(current)
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = sorted(current_ids - known)
        dead_ids = sorted(known - current_ids)
        bounced_ids = sorted(b for b in current_ids & known
                             if current[b][1] > ctx.live_broker_epochs.get(b, -1))
        logger.info("Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all "
                    "live brokers: %s", new_ids, dead_ids, bounced_ids, sorted(current_ids))
        for broker_id in [*new_ids, *bounced_ids, *dead_ids]:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        for broker_id in new_ids:
            self.channel.add_broker(current[broker_id][0])
        for broker_id in bounced_ids:
            self.channel.remove_broker(broker_id)
            self.channel.add_broker(current[broker_id][0])
        for broker_id in dead_ids:
            self.channel.remove_broker(broker_id)
        if new_ids:
            ctx.add_live_brokers({b: current[b] for b in new_ids})
            await self._on_broker_startup(new_ids)
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            await self._on_broker_failure(bounced_ids)
            ctx.add_live_brokers({b: current[b] for b in bounced_ids})
            await self._on_broker_startup(bounced_ids)
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            await self._on_broker_failure(dead_ids)

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        logger.info("New broker startup callback for %s", new_brokers)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        self._send_update_metadata_request(existing, [])
        self._send_update_metadata_request(new_brokers, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(set(new_brokers))
        await self._rsm.handle_state_changes(
            [r for r in replicas
             if not ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)],
            ReplicaState.ONLINE)
        await self._psm.trigger_online_partition_state_change()
        new_set = set(new_brokers)
        for tp in sorted(ctx.partitions_being_reassigned):
            if new_set & set(ctx.partition_replica_assignment(tp)):
                await self._on_partition_reassignment(tp, ctx.partition_full_replica_assignment(tp))
        to_resume = {r.topic_partition.topic for r in replicas
                     if ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)}
        if to_resume:
            await self._resume_deletion_for_topics(to_resume)

    async def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        logger.info("Broker failure callback for %s", dead_brokers)
        for broker_id in dead_brokers:
            ctx.shutting_down_broker_ids.discard(broker_id)
        await self._on_replicas_become_offline(ctx.replicas_on_brokers(set(dead_brokers)))

    # -- log directory failures -------------------------------------------------------------

    async def _process_log_dir_event_notification(self) -> None:
        """Brokers lost log directories: send LeaderAndIsr for all their replicas; the
        answers (KAFKA_STORAGE_ERROR) tell which are offline (Kafka's
        onBrokerLogDirFailure)."""
        zk = self.zk_client
        sequence_numbers = await zk.get_all_log_dir_event_notifications(register_watch=True)
        try:
            broker_ids = await zk.get_broker_ids_from_log_dir_events(sequence_numbers)
            if broker_ids:
                logger.info("Handling log directory failure for brokers %s",
                            ",".join(str(b) for b in sorted(set(broker_ids))))
                replicas = self.context.replicas_on_brokers(set(broker_ids))
                await self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)
        finally:
            await zk.delete_log_dir_event_notifications(sequence_numbers,
                                                        self.context.epoch_zk_version)

    def _on_leader_and_isr_response(self, broker_id: int, error_code: int,
                                    partition_errors: dict[TopicPartition, int]) -> None:
        self.events.put(LeaderAndIsrResponseReceived(broker_id, error_code, partition_errors))

    async def _process_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived
                                               ) -> None:
        """Replicas answered KAFKA_STORAGE_ERROR are offline, those answered NONE online
        again (Kafka's processLeaderAndIsrResponseReceived)."""
        if event.error_code != 0:
            logger.error("Received error %d in LeaderAndIsr response from broker %d",
                         event.error_code, event.broker_id)
            return
        ctx = self.context
        previous = ctx.replicas_on_offline_dirs.get(event.broker_id, set())
        offline = {tp for tp, code in event.partition_errors.items()
                   if code == KafkaStorageError.code}
        online = {tp for tp, code in event.partition_errors.items() if code == 0}
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[event.broker_id] = current
        new_offline = sorted(current - previous)
        if new_offline:
            logger.info("Mark replicas %s on broker %d as offline",
                        ",".join(str(tp) for tp in new_offline), event.broker_id)
            await self._on_replicas_become_offline(
                [PartitionAndReplica(tp, event.broker_id) for tp in new_offline])

    async def _on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        """The partitions led there elect new leaders, the replicas leave the ISRs: one
        LeaderAndIsr and one UpdateMetadata per broker for all of it."""
        await self._in_one_batch(lambda: self._replicas_become_offline(replicas))

    async def _replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for_deletion = [r for r in replicas
                        if ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)]
        not_for_deletion = [r for r in replicas if r not in for_deletion]
        offline_leader = ctx.partitions_with_offline_leader()
        await self._psm.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        await self._psm.trigger_online_partition_state_change()
        await self._rsm.handle_state_changes(not_for_deletion, ReplicaState.OFFLINE)
        if for_deletion:
            await self._fail_replica_deletion(for_deletion)
        if not offline_leader:
            self._send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [])

    # -- topics ----------------------------------------------------------------------------------

    async def _process_topic_change(self) -> None:
        ctx = self.context
        topics = await self.zk_client.get_all_topics_in_cluster(register_watch=True)
        new_topics = topics - ctx.all_topics
        deleted_topics = ctx.all_topics - topics
        ctx.all_topics = set(topics)
        await self._register_partition_modifications_handlers(new_topics)
        assignments = await self.zk_client.get_replica_assignment_and_topic_id_for_topics(
            new_topics)
        for topic in deleted_topics:
            ctx.remove_topic(topic)
        new_partitions: list[TopicPartition] = []
        for topic, assignment in sorted(assignments.items()):
            if assignment.topic_id is not None:
                ctx.topic_ids[topic] = assignment.topic_id
            for partition, replicas in sorted(assignment.partitions.items()):
                tp = TopicPartition(topic, partition)
                ctx.update_partition_full_replica_assignment(tp, replicas)
                new_partitions.append(tp)
        await self._assign_missing_topic_ids(assignments)
        logger.info("New topics: %s, deleted topics: %s", sorted(new_topics),
                    sorted(deleted_topics))
        if new_partitions:
            await self._on_new_partition_creation(new_partitions)

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        logger.info("New partition creation callback for %s", partitions)
        replicas = self.context.replicas_for_partitions(partitions)
        await self._psm.handle_state_changes(partitions, PartitionState.NEW)
        await self._rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await self._psm.handle_state_changes(partitions, PartitionState.ONLINE,
                                             ElectionStrategy.OFFLINE)
        await self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def _process_partition_modifications(self, topic: str) -> None:
        ctx = self.context
        found = await self.zk_client.get_topic_assignment(topic)
        if found is None:
            return
        added = {p: a for p, a in found.value.partitions.items()
                 if not ctx.partition_replica_assignment(TopicPartition(topic, p))}
        if ctx.is_topic_queued_up_for_deletion(topic):
            if added:
                logger.warning("Skipping adding partitions %s for topic %s since it is "
                               "currently being deleted", sorted(added), topic)
            return
        if not added:
            return
        logger.info("New partitions to be added %s", sorted(added))
        partitions = []
        for partition, assignment in sorted(added.items()):
            tp = TopicPartition(topic, partition)
            ctx.update_partition_full_replica_assignment(tp, assignment)
            partitions.append(tp)
        await self._on_new_partition_creation(partitions)

    # -- topic deletion (Kafka's TopicDeletionManager) -----------------------------------------

    async def _process_topic_deletion(self) -> None:
        ctx = self.context
        to_delete = set(await self.zk_client.get_topic_deletions(register_watch=True))
        missing = to_delete - ctx.all_topics
        if missing:
            logger.warning("Ignoring request to delete non-existing topics %s", sorted(missing))
            await self.zk_client.delete_topic_deletions(sorted(missing), ctx.epoch_zk_version)
        to_delete -= missing
        if not self.config.delete_topic_enable:
            if to_delete:
                logger.info("Removing %s since delete topic is disabled", sorted(to_delete))
                await self.zk_client.delete_topic_deletions(sorted(to_delete),
                                                            ctx.epoch_zk_version)
            return
        if to_delete:
            logger.info("Starting topic deletion for topics %s", sorted(to_delete))
            ctx.topics_to_be_deleted |= to_delete
            await self._resume_deletions()

    def _is_topic_eligible_for_deletion(self, topic: str) -> bool:
        ctx = self.context
        return (ctx.is_topic_queued_up_for_deletion(topic)
                and topic not in ctx.topics_with_deletion_started
                and topic not in ctx.topics_ineligible_for_deletion)

    async def _resume_deletions(self) -> None:
        ctx = self.context
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(ctx.topics_to_be_deleted):
            if ctx.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                continue
            if (not ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED)
                    and ctx.is_any_replica_in_state(topic, ReplicaState.DELETION_INELIGIBLE)):
                retry.add(topic)
            if self._is_topic_eligible_for_deletion(topic):
                eligible.add(topic)
        if retry:
            failed = [r for topic in sorted(retry)
                      for r in ctx.replicas_in_state(topic, ReplicaState.DELETION_INELIGIBLE)]
            await self._rsm.handle_state_changes(failed, ReplicaState.OFFLINE)
            ctx.topics_ineligible_for_deletion -= retry
            eligible |= {t for t in retry if self._is_topic_eligible_for_deletion(t)}
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _resume_deletion_for_topics(self, topics: set[str]) -> None:
        queued = topics & self.context.topics_to_be_deleted
        if queued:
            self.context.topics_ineligible_for_deletion -= queued
            await self._resume_deletions()

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self.context
        logger.info("Topic deletion callback for %s", sorted(topics))
        unseen = topics - ctx.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in ctx.partitions_for_topic(t)]
            await self._psm.handle_state_changes(partitions, PartitionState.OFFLINE)
            await self._psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            ctx.topics_with_deletion_started |= unseen
        self._send_update_metadata_request(
            ctx.live_or_shutting_down_broker_ids,
            [tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)])
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: set[str]) -> None:
        ctx = self.context
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        ineligible: set[str] = set()
        for topic in sorted(topics):
            replicas = ctx.replicas_for_topic(topic)
            alive = [r for r in replicas if ctx.is_replica_online(r.replica, r.topic_partition)]
            dead_here = [r for r in replicas if r not in alive]
            done = set(ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL))
            dead.extend(dead_here)
            retry.extend(r for r in alive if r not in done)
            if dead_here:
                ineligible.add(topic)
        await self._rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        await self._rsm.handle_state_changes(retry, ReplicaState.OFFLINE)
        await self._rsm.handle_state_changes(retry, ReplicaState.DELETION_STARTED)
        if ineligible:
            logger.info("Halted deletion of topics %s: some replicas are offline",
                        sorted(ineligible))
            ctx.topics_ineligible_for_deletion |= ineligible & ctx.topics_to_be_deleted

    def _on_stop_replica_deletion_response(self, broker_id: int, error_code: int,
                                           partition_errors: dict[TopicPartition, int]) -> None:
        self.events.put(TopicDeletionStopReplicaResponseReceived(broker_id, error_code,
                                                                 partition_errors))

    async def _process_stop_replica_deletion_response(
            self, event: TopicDeletionStopReplicaResponseReceived) -> None:
        ctx = self.context
        relevant = {tp: code for tp, code in event.partition_errors.items()
                    if tp.topic in ctx.topics_with_deletion_started}
        if event.error_code != 0:
            in_error = set(relevant)
        else:
            in_error = {tp for tp, code in relevant.items() if code != 0}
        failed = [PartitionAndReplica(tp, event.broker_id) for tp in sorted(in_error)]
        deleted = [PartitionAndReplica(tp, event.broker_id) for tp in sorted(relevant)
                   if tp not in in_error]
        if failed:
            await self._fail_replica_deletion(failed)
        if deleted:
            await self._rsm.handle_state_changes(deleted, ReplicaState.DELETION_SUCCESSFUL)
            await self._resume_deletions()

    async def _fail_replica_deletion(self, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        started = [r for r in replicas
                   if ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)]
        if not started:
            return
        topics = {r.topic_partition.topic for r in started}
        logger.info("Deletion for replicas %s failed; marking them ineligible",
                    ", ".join(map(str, started)))
        await self._rsm.handle_state_changes(started, ReplicaState.DELETION_INELIGIBLE)
        ctx.topics_ineligible_for_deletion |= topics
        await self._resume_deletions()

    async def _complete_delete_topic(self, topic: str) -> None:
        ctx = self.context
        self._unregister_partition_modifications_handlers([topic])
        replicas = ctx.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL)
        await self._rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)
        await self.zk_client.delete_topic_znode(topic, ctx.epoch_zk_version)
        await self.zk_client.delete_topic_configs([topic], ctx.epoch_zk_version)
        await self.zk_client.delete_topic_deletions([topic], ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        logger.info("Deletion of topic %s successfully completed", topic)

    # -- partition reassignment (Kafka's onPartitionReassignment, KIP-455) -------------------

    async def _initialize_partition_reassignments(self) -> None:
        """At failover: the reassignments requested through /admin/reassign_partitions
        meanwhile, then those in progress in the topic znodes (adding / removing)."""
        resumed = await self._process_zk_partition_reassignment()
        for tp in sorted(self.context.partitions_being_reassigned - resumed):
            await self._on_partition_reassignment(
                tp, self.context.partition_full_replica_assignment(tp))

    async def _process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """/admin/reassign_partitions was created: start what it asks; the partitions that
        failed leave the znode at once. The partitions started."""
        if not self.is_active:
            return set()
        if not await self.zk_client.register_znode_change_handler_and_check_existence(
                self._partition_reassignment_handler):
            return set()
        results: dict[TopicPartition, KafkaError | None] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted((await self.zk_client.get_partition_reassignment()).items()):
            reassignment = self._maybe_build_reassignment(tp, target)
            if reassignment is None:
                results[tp] = NoReassignmentInProgressError()
            else:
                to_reassign[tp] = reassignment
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp: error for tp, error in results.items() if error is not None}
        if failed:
            logger.warning("Failed reassignment through zk with the following errors: %s",
                           {str(tp): error.name for tp, error in failed.items()})
            await self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in failed)
        return {tp for tp, error in results.items() if error is None}

    async def _process_api_partition_reassignment(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        results: dict[TopicPartition, KafkaError | None] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in sorted(reassignments.items()):
            error = None if target is None else self._validate_replicas(tp, target)
            if error is not None:
                results[tp] = error
                continue
            reassignment = self._maybe_build_reassignment(tp, target)
            if reassignment is None:
                results[tp] = NoReassignmentInProgressError()
            else:
                to_reassign[tp] = reassignment
        # The latest reassignment, by API or ZooKeeper, wins: it leaves the znode.
        await self._maybe_remove_from_zk_reassignment(lambda tp, _: tp in to_reassign)
        results.update(await self._maybe_trigger_partition_reassignment(to_reassign))
        return results

    def _list_partition_reassignments(
        self, partitions: frozenset[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        ctx = self.context
        wanted = ctx.partitions_being_reassigned if partitions is None else partitions
        result = {}
        for tp in sorted(wanted):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                result[tp] = assignment
        return result

    def _validate_replicas(self, tp: TopicPartition,
                           replicas: tuple[int, ...]) -> KafkaError | None:
        if not replicas:
            return InvalidReplicaAssignmentError(
                "Empty replica list specified in partition reassignment.")
        if len(set(replicas)) != len(replicas):
            return InvalidReplicaAssignmentError(
                "Duplicate replica ids in partition reassignment replica list: "
                f"{list(replicas)}")
        if any(r < 0 for r in replicas):
            return InvalidReplicaAssignmentError(
                f"Invalid broker id in replica list: {list(replicas)}")
        adding = self.context.partition_full_replica_assignment(tp).reassign_to(
            replicas).adding_replicas
        if not set(adding) <= self.context.live_broker_ids:
            return InvalidReplicaAssignmentError(
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"{list(adding)}, live broker list: {sorted(self.context.live_broker_ids)}")
        return None

    def _maybe_build_reassignment(self, tp: TopicPartition,
                                  target: tuple[int, ...] | None) -> ReplicaAssignment | None:
        """The reassignment to ``target``; None (no target) cancels the one in progress,
        back to the original replicas, and is None itself when there is none."""
        current = self.context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        return None if target is None else current.reassign_to(target)

    async def _maybe_trigger_partition_reassignment(
        self, reassignments: dict[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, KafkaError | None]:
        ctx = self.context
        results: dict[TopicPartition, KafkaError | None] = {}
        for tp, reassignment in sorted(reassignments.items()):
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                logger.info("Skipping reassignment of %s since the topic is currently being "
                            "deleted", tp)
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif not ctx.partition_replica_assignment(tp):
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            else:
                try:
                    await self._on_partition_reassignment(tp, reassignment)
                except ControllerMovedError:
                    logger.info("Failed completing reassignment of partition %s because "
                                "controller has moved to another broker", tp)
                    raise
                except Exception:
                    logger.exception("Error completing reassignment of partition %s", tp)
                    results[tp] = UnknownServerError()
                else:
                    results[tp] = None
        return results

    async def _process_partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        ctx = self.context
        if tp not in ctx.partitions_being_reassigned:
            return
        reassignment = ctx.partition_full_replica_assignment(tp)
        if await self._is_reassignment_complete(tp, reassignment):
            logger.info("Target replicas %s have all caught up with the leader for "
                        "reassigning partition %s", list(reassignment.target_replicas), tp)
            await self._on_partition_reassignment(tp, reassignment)

    async def _on_partition_reassignment(self, tp: TopicPartition,
                                         reassignment: ReplicaAssignment) -> None:
        """Kafka's onPartitionReassignment, with RS = ORS + TRS, AR = TRS - ORS and
        RR = ORS - TRS. Until every target replica is in the ISR: the replica set in
        ZooKeeper becomes RS (with AR and RR), every replica gets a LeaderAndIsr with a new
        leader epoch, AR start as new replicas. Once they are: AR online, the leader moved
        into TRS if it is not there (or is offline), RR offline and deleted, the topic znode
        written with RS = TRS, the partition out of the reassignments in progress."""
        ctx = self.context
        if ctx.is_topic_queued_up_for_deletion(tp.topic):
            ctx.topics_ineligible_for_deletion.add(tp.topic)
        await self._update_current_reassignment(tp, reassignment)
        adding = [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas]
        if not await self._is_reassignment_complete(tp, reassignment):
            await self._update_leader_epoch_and_send_request(tp, reassignment)
            await self._rsm.handle_state_changes(adding, ReplicaState.NEW)
            return
        await self._rsm.handle_state_changes(adding, ReplicaState.ONLINE)
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_full_replica_assignment(tp, completed)
        await self._move_reassigned_partition_leader_if_required(tp, completed)
        await self._stop_removed_replicas_of_reassigned_partition(
            tp, reassignment.removing_replicas)
        await self._update_replica_assignment_for_partition(tp, completed)
        await self._remove_partition_from_reassigning_partitions(tp, completed)
        self._send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [tp])
        logger.info("Completed reassignment of partition %s to replicas %s", tp,
                    list(completed.replicas))
        await self._resume_deletion_for_topics({tp.topic})

    async def _update_current_reassignment(self, tp: TopicPartition,
                                           reassignment: ReplicaAssignment) -> None:
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            await self._update_replica_assignment_for_partition(tp, reassignment)
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            # A replica being added by the reassignment this one replaces may be unneeded now.
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas_of_reassigned_partition(tp, unneeded)
        handler = _PartitionReassignmentIsrChangeHandler(tp, self.events)
        self._reassignment_isr_handlers[handler.path] = handler
        self.zk_client.register_znode_change_handler(handler)
        ctx.partitions_being_reassigned.add(tp)

    async def _is_reassignment_complete(self, tp: TopicPartition,
                                        assignment: ReplicaAssignment) -> bool:
        """No reassignment, or every target replica is in the ISR (read from ZooKeeper,
        which also arms the watch on the partition's state)."""
        if not assignment.is_being_reassigned:
            return True
        state = (await self.zk_client.get_topic_partition_states([tp])).get(tp)
        return state is not None and set(assignment.target_replicas) <= set(
            state.leader_and_isr.isr)

    async def _update_leader_epoch(self, tp: TopicPartition
                                   ) -> LeaderIsrAndControllerEpoch | None:
        """Bump the partition's leader epoch (same leader and ISR) in ZooKeeper."""
        ctx = self.context
        for _ in range(MAX_ZK_WRITE_ATTEMPTS):
            failures: dict[TopicPartition, LeaderAndIsr | Exception] = {}
            current = await read_partition_states(ctx, self.zk_client, [tp], failures)
            if tp not in current:
                logger.error("Failed to update the leader epoch of %s: %s", tp, failures.get(tp))
                return None
            lai = current[tp]
            update = await self.zk_client.update_leader_and_isr(
                {tp: lai.new_leader_and_isr(lai.leader, lai.isr)}, ctx.epoch,
                ctx.epoch_zk_version)
            outcome = update.finished_partitions.get(tp)
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                state = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.partition_leadership_info[tp] = state
                return state
        return None

    async def _update_leader_epoch_and_send_request(self, tp: TopicPartition,
                                                    assignment: ReplicaAssignment) -> None:
        state = await self._update_leader_epoch(tp)
        if state is None:
            return
        assert self.batch is not None
        self.batch.new_batch()
        try:
            self.batch.add_leader_and_isr_request_for_brokers(assignment.origin_replicas, tp,
                                                              state, is_new=False)
            self.batch.add_leader_and_isr_request_for_brokers(assignment.adding_replicas, tp,
                                                              state, is_new=True)
            self.batch.send_requests_to_brokers(self.context.epoch)
        finally:
            self.batch.clear()

    async def _move_reassigned_partition_leader_if_required(
            self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        info = ctx.partition_leadership_info.get(tp)
        leader = -1 if info is None else info.leader_and_isr.leader
        if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
            # The leader stays: a new leader epoch tells every replica the new replica set.
            await self._update_leader_epoch_and_send_request(tp, assignment)
            return
        logger.info("Leader %s for partition %s being reassigned is not in the new replicas "
                    "%s or is offline; electing a new leader", leader, tp,
                    list(assignment.replicas))
        await self._psm.handle_state_changes([tp], PartitionState.ONLINE,
                                             ElectionStrategy.REASSIGN)

    async def _stop_removed_replicas_of_reassigned_partition(
            self, tp: TopicPartition, removed: Iterable[int]) -> None:
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        if not replicas:
            return
        await self._rsm.handle_state_changes(replicas, ReplicaState.OFFLINE)
        await self._rsm.handle_state_changes(replicas, ReplicaState.DELETION_STARTED)
        await self._rsm.handle_state_changes(replicas, ReplicaState.DELETION_SUCCESSFUL)
        await self._rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT)

    async def _update_replica_assignment_for_partition(self, tp: TopicPartition,
                                                       assignment: ReplicaAssignment) -> None:
        ctx = self.context
        topic_assignment = dict(ctx.partition_assignments.get(tp.topic, {}))
        topic_assignment[tp.partition] = assignment
        await self.zk_client.set_topic_assignment(tp.topic, ctx.topic_ids.get(tp.topic),
                                                  topic_assignment, ctx.epoch_zk_version)

    async def _remove_partition_from_reassigning_partitions(
            self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.context
        if tp not in ctx.partitions_being_reassigned:
            return
        path = TopicPartitionStateZNode.path(tp)
        self._reassignment_isr_handlers.pop(path, None)
        self.zk_client.unregister_znode_change_handler(path)
        await self._maybe_remove_from_zk_reassignment(
            lambda p, replicas: p == tp and tuple(replicas) == assignment.replicas)
        ctx.partitions_being_reassigned.discard(tp)

    async def _maybe_remove_from_zk_reassignment(
            self, should_remove: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        zk = self.zk_client
        if not await zk.reassign_partitions_in_progress():
            return
        requested = await zk.get_partition_reassignment()
        remaining = {tp: r for tp, r in requested.items() if not should_remove(tp, r)}
        if len(remaining) == len(requested):
            return
        if remaining:
            await zk.set_or_create_partition_reassignment(remaining,
                                                          self.context.epoch_zk_version)
        else:
            logger.info("No more partitions need to be reassigned. Deleting zk path %s",
                        ReassignPartitionsZNode.PATH)
            await zk.delete_partition_reassignment(self.context.epoch_zk_version)
            # Watch for the next one.
            self.events.put(ZkPartitionReassignment())

    # -- ISR changes -----------------------------------------------------------------------------

    async def _process_isr_change_notification(self) -> None:
        ctx = self.context
        sequence_numbers = await self.zk_client.get_all_isr_change_notifications(
            register_watch=True)
        try:
            partitions = await self.zk_client.get_partitions_from_isr_change_notifications(
                sequence_numbers)
            known = [tp for tp in sorted(partitions)
                     if ctx.partition_replica_assignment(tp)]
            if known:
                await self._update_leader_and_isr_cache(known)
                self._send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, known)
        finally:
            await self.zk_client.delete_isr_change_notifications(sequence_numbers,
                                                                 ctx.epoch_zk_version)

    # -- controlled shutdown ----------------------------------------------------------------------

    # -- preferred replica election ----------------------------------------------------------

    async def _process_preferred_replica_election(self) -> None:
        """Elect the preferred replica of each partition named in
        /admin/preferred_replica_election, then delete the znode (Kafka's
        ReplicaLeaderElection with ZkTriggered)."""
        ctx = self.context
        requested = await self.zk_client.get_preferred_replica_election()
        valid = {tp for tp in requested
                 if tp.topic in ctx.all_topics
                 and tp.partition in ctx.partition_assignments.get(tp.topic, {})}
        for tp in sorted(requested - valid):
            logger.warning("Skipping preferred replica election for %s: it does not exist", tp)
        try:
            await self._on_replica_election(valid, "ZkTriggered")
        finally:
            await self.zk_client.delete_preferred_replica_election(ctx.epoch_zk_version)

    async def _on_replica_election(self, partitions: Iterable[TopicPartition],
                                   trigger: str) -> dict[TopicPartition, Any]:
        """Move leadership to the preferred replica where it is not the leader yet, is live
        and in the ISR; partitions of topics being deleted are skipped."""
        ctx = self.context
        deleting = sorted(tp for tp in partitions if ctx.is_topic_queued_up_for_deletion(tp.topic))
        if deleting:
            logger.warning("Skipping preferred replica election for partitions %s since the "
                           "respective topics are being deleted", deleting)
        candidates = []
        for tp in sorted(partitions):
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                continue
            preferred = ctx.partition_replica_assignment(tp)[:1]
            info = ctx.partition_leadership_info.get(tp)
            if not preferred or info is None:
                continue
            if info.leader_and_isr.leader == preferred[0]:
                logger.info("Partition %s is already led by its preferred replica %d", tp,
                            preferred[0])
                continue
            candidates.append(tp)
        if not candidates:
            return {}
        logger.info("Starting replica leader election (PREFERRED) for partitions %s "
                    "triggered by %s", candidates, trigger)
        return await self._psm.handle_state_changes(candidates, PartitionState.ONLINE,
                                                    ElectionStrategy.PREFERRED)

    async def _process_replica_leader_election(
        self, partitions: frozenset[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, KafkaError | int]:
        """Kafka's processReplicaLeaderElection for an AdminClientTriggered election."""
        ctx = self.context
        wanted = set(ctx.all_partitions()) if partitions is None else set(partitions)
        outcome: dict[TopicPartition, KafkaError | int] = {}
        electable: list[TopicPartition] = []
        unclean = election_type == ELECTION_TYPE_UNCLEAN
        for tp in sorted(wanted):
            if tp.topic not in ctx.all_topics or tp.partition not in ctx.partition_assignments.get(
                    tp.topic, {}):
                outcome[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif ctx.is_topic_queued_up_for_deletion(tp.topic):
                outcome[tp] = InvalidTopicExceptionError("The topic is being deleted")
            else:
                info = ctx.partition_leadership_info.get(tp)
                leader = -1 if info is None else info.leader_and_isr.leader
                if unclean:
                    needed = leader == -1 or leader not in ctx.live_broker_ids
                else:
                    needed = leader != ctx.partition_replica_assignment(tp)[0]
                if needed:
                    electable.append(tp)
                else:
                    outcome[tp] = ElectionNotNeededError(
                        "Leader election not needed for topic partition.")
        if electable:
            strategy = (ElectionStrategy.OFFLINE_UNCLEAN if unclean
                        else ElectionStrategy.PREFERRED)
            logger.info("Starting replica leader election (%s) for partitions %s triggered "
                        "by AdminClientTriggered", "UNCLEAN" if unclean else "PREFERRED",
                        electable)
            results = await self._psm.handle_state_changes(electable, PartitionState.ONLINE,
                                                           strategy)
            for tp in electable:
                result = results.get(tp)
                if result is None or isinstance(result, Exception):
                    message = str(result) if result is not None else "no election was made"
                    outcome[tp] = (EligibleLeadersNotAvailableError(message) if unclean
                                   else PreferredLeaderNotAvailableError(message))
                else:
                    outcome[tp] = result.leader
        return outcome

    def _schedule_auto_leader_rebalance(self, delay: float | None = None) -> None:
        if not self.is_active or not self.config.auto_leader_rebalance_enable:
            return
        if self._auto_rebalance_call is not None and self._auto_rebalance_call.active():
            return
        seconds = (self.config.leader_imbalance_check_interval_seconds
                   if delay is None else delay)
        self._auto_rebalance_call = self.reactor.callLater(
            seconds, self.events.put, AutoPreferredReplicaLeaderElection())

    def leader_imbalance(self) -> dict[int, tuple[list[TopicPartition], int]]:
        """Per live broker: the partitions it is the preferred replica of but does not
        lead, and how many it is the preferred replica of (topics being deleted aside)."""
        ctx = self.context
        preferred_of: dict[int, list[TopicPartition]] = {}
        for topic, assignment in ctx.partition_assignments.items():
            if ctx.is_topic_queued_up_for_deletion(topic):
                continue
            for partition, replicas in assignment.items():
                if replicas.replicas:
                    preferred_of.setdefault(replicas.replicas[0], []).append(
                        TopicPartition(topic, partition))
        result = {}
        for broker_id, tps in preferred_of.items():
            if broker_id not in ctx.live_broker_ids:
                continue
            not_led = [tp for tp in tps
                       if (info := ctx.partition_leadership_info.get(tp)) is not None
                       and info.leader_and_isr.leader != broker_id]
            result[broker_id] = (sorted(not_led), len(tps))
        return result

    async def _check_and_trigger_auto_leader_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: for each broker whose share of
        partitions not led by it (of those it is preferred for) is above
        leader.imbalance.per.broker.percentage, elect it where it is live and in the ISR."""
        ctx = self.context
        threshold = self.config.leader_imbalance_per_broker_percentage / 100.0
        for broker_id, (not_led, total) in sorted(self.leader_imbalance().items()):
            ratio = len(not_led) / total if total else 0.0
            logger.debug("Leader imbalance ratio for broker %d is %.3f", broker_id, ratio)
            if ratio <= threshold:
                continue
            eligible = [tp for tp in not_led
                        if broker_id not in ctx.shutting_down_broker_ids
                        and (info := ctx.partition_leadership_info.get(tp)) is not None
                        and broker_id in info.leader_and_isr.isr]
            if eligible:
                await self._on_replica_election(eligible, "AutoTriggered")

    async def _process_controlled_shutdown(self, broker_id: int,
                                           broker_epoch: int) -> set[TopicPartition]:
        ctx = self.context
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        cached_epoch = ctx.live_broker_epochs.get(broker_id)
        if cached_epoch is not None and broker_epoch < cached_epoch:
            raise StaleBrokerEpochError(
                f"Received controlled shutdown request from an old broker epoch {broker_epoch} "
                f"for broker {broker_id}. Current broker epoch is {cached_epoch}.")
        logger.info("Shutting down broker %s", broker_id)
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise NotControllerError(f"Broker id {broker_id} does not exist.")
        ctx.shutting_down_broker_ids.add(broker_id)
        partitions = [
            tp for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        ]
        led: list[TopicPartition] = []
        followed: list[TopicPartition] = []
        for tp in partitions:
            leader = ctx.partition_leadership_info[tp].leader_and_isr.leader
            (led if leader == broker_id else followed).append(tp)

        async def move_leadership_and_replicas() -> None:
            await self._psm.handle_state_changes(led, PartitionState.ONLINE,
                                                 ElectionStrategy.CONTROLLED_SHUTDOWN)
            await self._rsm.handle_state_changes(
                [PartitionAndReplica(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)

        await self._in_one_batch(move_leadership_and_replicas)
        still_led = {
            tp for tp in ctx.partitions_led_by(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
        }
        logger.info("Broker %s still leads %d partitions after controlled shutdown",
                    broker_id, len(still_led))
        return still_led


def _default_channel_factory(controller: KafkaController) -> ControllerChannel:
    return ControllerChannelManager(
        controller.reactor, controller.broker_id, controller.config.listener_name,
        request_timeout=controller.config.controller_socket_timeout_ms / 1000.0,
        connect_timeout=controller.config.socket_connection_setup_timeout_ms / 1000.0,
        connect_timeout_max=controller.config.socket_connection_setup_timeout_max_ms / 1000.0,
        client_security=controller.config.client_security)
