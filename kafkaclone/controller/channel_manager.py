"""How the controller talks to brokers (Kafka's ControllerChannelManager and
ControllerBrokerRequestBatch).

``ControllerChannelManager`` keeps one sender per live broker: a queue of requests sent one
at a time over a ``KafkaClientConnection``, each retried (after a backoff) until the broker
answers or is removed from the live set, as Kafka's RequestSendThread does.

``ControllerBrokerRequestBatch`` collects what a state change has to tell brokers
(LeaderAndIsr, UpdateMetadata, StopReplica) and sends one request of each kind per broker.
Every request carries the controller id, the controller epoch and the target broker's epoch.
"""

from __future__ import annotations

import logging
import operator
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from twisted.internet.defer import CancelledError, Deferred

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.context import ControllerContext
from kafkaclone.network.client import PLAINTEXT_CLIENT, ClientSecurity, KafkaClientConnection
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.zk.znodes import BrokerInfo, LeaderAndIsr, LeaderIsrAndControllerEpoch

logger = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION: Final = 5
UPDATE_METADATA_VERSION: Final = 7
STOP_REPLICA_VERSION: Final = 3
"""The versions Kafka 2.8 sends (inter.broker.protocol.version 2.8), which kafkaclone's
brokers support."""

NO_EPOCH: Final = -1
EPOCH_DURING_DELETE: Final = -2
ZERO_UUID: Final = uuid.UUID(int=0)
RETRY_BACKOFF: Final = 0.1
"""Seconds between attempts to send a request to a broker (Kafka's RequestSendThread)."""

LAI = APIS[ApiKey.LEADER_AND_ISR].request
UM = APIS[ApiKey.UPDATE_METADATA].request
SR = APIS[ApiKey.STOP_REPLICA].request
_LAI_PARTITION_STATE: Final = LAI.structs["LeaderAndIsrPartitionState"]
_UM_PARTITION_STATE: Final = UM.structs["UpdateMetadataPartitionState"]
_BY_PARTITION_INDEX: Final = operator.attrgetter("partition_index")
"""Requests list each topic's partitions in order: sorted by index within a topic (an int
key), not by TopicPartition over the whole request (tuple compares, 10,000 of them)."""

ResponseCallback = Callable[[Any], None]


class ControllerChannel(Protocol):
    """What the controller needs of its channel to brokers (a fake in tests)."""

    def add_broker(self, broker: BrokerInfo) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: ResponseCallback | None = None) -> None:
        """Queue a request for a live broker (dropped, with a warning, for another)."""
        ...

    def shutdown(self) -> None: ...


# -- the real channel ----------------------------------------------------------------------------


@dataclass
class _QueueItem:
    api_key: int
    api_version: int
    body: Any
    callback: ResponseCallback | None


class _BrokerSender:
    """Sends one broker's requests in order, each until it is answered (Kafka's
    RequestSendThread)."""

    def __init__(self, reactor: Any, broker: BrokerInfo, connection: KafkaClientConnection,
                 retry_backoff: float) -> None:
        self._reactor = reactor
        self.broker = broker
        self.connection = connection
        self._retry_backoff = retry_backoff
        self._queue: deque[_QueueItem] = deque()
        self._wakeup: Deferred[None] | None = None
        self._stopped = False
        self._loop: Deferred[None] | None = None

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self._loop = Deferred.fromCoroutine(self._run())
        self._loop.addErrback(lambda f: logger.error(
            "controller sender to broker %s failed: %s", self.broker.broker_id,
            f.getErrorMessage()))

    def enqueue(self, item: _QueueItem) -> None:
        self._queue.append(item)
        self._wake()

    def _wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None and not wakeup.called:
            wakeup.callback(None)

    def stop(self) -> None:
        self._stopped = True
        self._queue.clear()
        self.connection.close()
        self._wake()

    async def _sleep(self, seconds: float) -> None:
        wakeup: Deferred[None] = Deferred()
        self._wakeup = wakeup
        call = self._reactor.callLater(seconds, self._wake)
        await wakeup
        if call.active():
            call.cancel()

    async def _run(self) -> None:
        while not self._stopped:
            if not self._queue:
                wakeup: Deferred[None] = Deferred()
                self._wakeup = wakeup
                await wakeup
                continue
            item = self._queue[0]
            try:
                response = await self.connection.send(item.api_key, item.api_version, item.body)
            except CancelledError:
                return
            except Exception as exc:
                if self._stopped:
                    return
                logger.warning("controller failed to send %s to broker %s (%s): %s; retrying",
                               ApiKey(item.api_key).name, self.broker.broker_id,
                               self.connection, exc)
                await self._sleep(self._retry_backoff)
                continue
            if self._stopped:
                return
            self._queue.popleft()
            if item.callback is not None:
                try:
                    item.callback(response)
                except Exception:
                    logger.exception("controller response callback failed")


class ControllerChannelManager:
    """One sender per live broker; see the module docstring."""

    def __init__(
        self,
        reactor: Any,
        controller_id: int,
        listener_name: str,
        *,
        request_timeout: float = 30.0,
        connect_timeout: float | None = None,
        connect_timeout_max: float | None = None,
        retry_backoff: float = RETRY_BACKOFF,
        connection_factory: Callable[..., KafkaClientConnection] = KafkaClientConnection,
        client_security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self._reactor = reactor
        self._client_security = client_security
        self.controller_id = controller_id
        self.listener_name = listener_name
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._connect_timeout_max = connect_timeout_max
        self._retry_backoff = retry_backoff
        self._connection_factory = connection_factory
        self._senders: dict[int, _BrokerSender] = {}

    @property
    def broker_ids(self) -> set[int]:
        return set(self._senders)

    def queue_size(self, broker_id: int) -> int:
        sender = self._senders.get(broker_id)
        return 0 if sender is None else sender.queue_size

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.broker_id in self._senders:
            return
        endpoint = broker.endpoint(self.listener_name)
        if endpoint is None:
            logger.error("broker %s has no endpoint for listener %s; cannot send it requests",
                         broker.broker_id, self.listener_name)
            return
        connection = self._connection_factory(
            self._reactor, endpoint.host or "127.0.0.1", endpoint.port,
            client_id=f"controller-{self.controller_id}-to-broker-{broker.broker_id}",
            request_timeout=self._request_timeout, connect_timeout=self._connect_timeout,
            connect_timeout_max=self._connect_timeout_max, security=self._client_security)
        sender = _BrokerSender(self._reactor, broker, connection, self._retry_backoff)
        self._senders[broker.broker_id] = sender
        sender.start()

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: ResponseCallback | None = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            logger.warning("Not sending %s to broker %s, since it is offline.",
                           ApiKey(api_key).name, broker_id)
            return
        sender.enqueue(_QueueItem(api_key, api_version, body, callback))

    def shutdown(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)


# -- batching --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LeaderAndIsrEntry:
    state: LeaderIsrAndControllerEpoch
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    is_new: bool


@dataclass(frozen=True)
class _StopReplicaEntry:
    leader_epoch: int
    delete_partition: bool


StopReplicaDeletionCallback = Callable[[int, int, dict[TopicPartition, int]], None]
"""(broker id, request error code, partition -> error code) for partitions being deleted."""

LeaderAndIsrResponseCallback = Callable[[int, int, dict[TopicPartition, int]], None]
"""(broker id, request error code, partition -> error code) of every LeaderAndIsr answer."""


class IllegalBatchStateError(RuntimeError):
    """A new batch was started while the previous one still held requests."""


class ControllerBrokerRequestBatch:
    def __init__(self, controller_id: int, context: ControllerContext,
                 channel: ControllerChannel,
                 on_stop_replica_deletion_response: StopReplicaDeletionCallback | None = None,
                 on_leader_and_isr_response: LeaderAndIsrResponseCallback | None = None
                 ) -> None:
        self.controller_id = controller_id
        self.context = context
        self.channel = channel
        self._on_deletion_response = on_stop_replica_deletion_response
        self._on_leader_and_isr_response = on_leader_and_isr_response
        self.leader_and_isr_requests: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = {}
        self.stop_replica_requests: dict[int, dict[TopicPartition, _StopReplicaEntry]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: dict[TopicPartition, Any] = {}
        self._latest_entries: dict[TopicPartition, _LeaderAndIsrEntry] = {}
        """Each partition's last LeaderAndIsr entry in the batch: the calls for its other
        replicas with the same state share it, so its request state is built once."""
        self._update_metadata_sources: dict[TopicPartition,
                                            tuple[LeaderIsrAndControllerEpoch,
                                                  tuple[int, ...], bool]] = {}
        """What each partition's UpdateMetadata state was built from: built again only when
        that changed (a failover adds each of 10,000 partitions once per replica)."""
        self._depth = 0
        """How many batches are open (nested: an event's, a state machine's)."""

    def new_batch(self) -> None:
        """Start a batch. Batches nest: inside an enclosing one (``begin`` of a whole
        controller event) a state machine's requests join it and go out with it."""
        if self._depth == 0 and (self.leader_and_isr_requests or self.stop_replica_requests
                                 or self.update_metadata_brokers):
            raise IllegalBatchStateError(
                "Controller to broker state change requests batch is not empty while creating "
                f"a new one. Some LeaderAndIsr state changes {self.leader_and_isr_requests}, "
                f"StopReplica {self.stop_replica_requests}, UpdateMetadata to "
                f"{self.update_metadata_brokers} might be lost")
        self._depth += 1

    def clear(self) -> None:
        """End a batch; the outermost one drops what was not sent."""
        self._depth = max(self._depth - 1, 0)
        if self._depth == 0:
            self._clear_requests()

    def _clear_requests(self) -> None:
        self.leader_and_isr_requests.clear()
        self.stop_replica_requests.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self._latest_entries.clear()
        self._update_metadata_sources.clear()

    def _live(self, broker_ids: Iterable[int], live: Collection[int] | None = None
              ) -> list[int]:
        if live is None:
            live = self.context.live_brokers
        return [b for b in broker_ids if b >= 0 and b in live]

    def add_leader_and_isr_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition,
        state: LeaderIsrAndControllerEpoch, is_new: bool,
    ) -> None:
        assignment = self.context.partition_full_replica_assignment(tp)
        live = self.context.live_brokers  # live or shutting down; called per replica: no copy
        # One entry for every broker it goes to (unless one already had it as new), and for
        # the later calls of its other replicas: its partition state is then built once for
        # all of their requests.
        entry = self._latest_entries.get(tp)
        if (entry is None or entry.state is not state or entry.is_new != is_new
                or entry.replicas != assignment.replicas
                or entry.adding_replicas != assignment.adding_replicas
                or entry.removing_replicas != assignment.removing_replicas):
            entry = self._latest_entries[tp] = _LeaderAndIsrEntry(
                state, assignment.replicas, assignment.adding_replicas,
                assignment.removing_replicas, is_new)
        for broker_id in self._live(broker_ids, live):
            requests = self.leader_and_isr_requests.setdefault(broker_id, {})
            previous = requests.get(tp)
            if previous is not None and previous.is_new and not is_new:
                requests[tp] = replace(entry, is_new=True)
            else:
                requests[tp] = entry
        self._add_update_metadata_partition(tp, live)

    def add_stop_replica_request_for_brokers(self, broker_ids: Iterable[int],
                                             tp: TopicPartition, delete_partition: bool) -> None:
        if delete_partition:
            leader_epoch = EPOCH_DURING_DELETE
        else:
            state = self.context.partition_leadership_info.get(tp)
            leader_epoch = NO_EPOCH if state is None else state.leader_and_isr.leader_epoch
        for broker_id in self._live(broker_ids):
            self.stop_replica_requests.setdefault(broker_id, {})[tp] = _StopReplicaEntry(
                leader_epoch, delete_partition)

    def add_update_metadata_request_for_brokers(self, broker_ids: Iterable[int],
                                                partitions: Iterable[TopicPartition]) -> None:
        live = self.context.live_or_shutting_down_broker_ids
        self.update_metadata_brokers.update(self._live(broker_ids, live))
        for tp in partitions:
            self._add_update_metadata_partition(tp, None)

    def _add_update_metadata_partition(self, tp: TopicPartition,
                                       live_or_shutting_down: Collection[int] | None) -> None:
        """``tp``'s state in the UpdateMetadata requests, and with ``live_or_shutting_down``
        (the context's, computed once by the caller) every live broker as their target."""
        context = self.context
        if live_or_shutting_down is not None:
            self.update_metadata_brokers.update(live_or_shutting_down)
        state = context.partition_leadership_info.get(tp)
        if state is None:
            return
        deleting = context.is_topic_queued_up_for_deletion(tp.topic)
        replicas = context.partition_replica_assignment(tp)
        built_from = self._update_metadata_sources.get(tp)
        if (built_from is not None and built_from[0] is state and built_from[1] == replicas
                and built_from[2] == deleting):
            return
        self._update_metadata_sources[tp] = (state, replicas, deleting)
        lai = state.leader_and_isr
        leader = LeaderAndIsr.LEADER_DURING_DELETE if deleting else lai.leader
        self.update_metadata_partitions[tp] = _UM_PARTITION_STATE(
            topic_name=tp.topic, partition_index=tp.partition,
            controller_epoch=state.controller_epoch, leader=leader,
            leader_epoch=lai.leader_epoch, isr=list(lai.isr), zk_version=lai.zk_version,
            replicas=list(replicas), offline_replicas=context.offline_replicas(tp, replicas))

    # -- sending ------------------------------------------------------------------------------

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Send one request of each kind per broker; inside an enclosing batch, nothing
        yet (the outermost batch sends)."""
        if self._depth > 1:
            return
        try:
            self._send_leader_and_isr_requests(controller_epoch)
            self._send_update_metadata_requests(controller_epoch)
            self._send_stop_replica_requests(controller_epoch)
        finally:
            self._clear_requests()

    def _broker_epoch(self, broker_id: int) -> int:
        return self.context.live_broker_epochs.get(broker_id, -1)

    def _topic_id(self, topic: str) -> uuid.UUID:
        return self.context.topic_ids.get(topic, ZERO_UUID)

    def _send_leader_and_isr_requests(self, controller_epoch: int) -> None:
        structs = LAI.structs
        listener = getattr(self.channel, "listener_name", "PLAINTEXT")
        # A partition's state goes to each of its replicas: built once per entry, shared by
        # their requests (encoding only reads it).
        built: dict[int, Any] = {}
        for broker_id, entries in sorted(self.leader_and_isr_requests.items()):
            by_topic: dict[str, list[Any]] = {}
            leaders: set[int] = set()
            for tp, entry in entries.items():
                partition_state = built.get(id(entry))
                if partition_state is None:
                    lai = entry.state.leader_and_isr
                    partition_state = built[id(entry)] = _LAI_PARTITION_STATE(
                        topic_name=tp.topic, partition_index=tp.partition,
                        controller_epoch=entry.state.controller_epoch, leader=lai.leader,
                        leader_epoch=lai.leader_epoch, isr=list(lai.isr),
                        zk_version=lai.zk_version, replicas=list(entry.replicas),
                        adding_replicas=list(entry.adding_replicas),
                        removing_replicas=list(entry.removing_replicas), is_new=entry.is_new)
                leaders.add(partition_state.leader)
                topic_states = by_topic.get(tp.topic)
                if topic_states is None:
                    topic_states = by_topic[tp.topic] = []
                topic_states.append(partition_state)
            live_leaders = []
            for leader in sorted(leaders):
                info = self.context.live_brokers.get(leader)
                endpoint = None if info is None else info.endpoint(listener)
                if endpoint is not None:
                    live_leaders.append(structs["LeaderAndIsrLiveLeader"](
                        broker_id=leader, host_name=endpoint.host or "", port=endpoint.port))
            body = LAI(
                controller_id=self.controller_id, controller_epoch=controller_epoch,
                broker_epoch=self._broker_epoch(broker_id), type=0,
                ungrouped_partition_states=[],
                topic_states=[structs["LeaderAndIsrTopicState"](
                    topic_name=topic, topic_id=self._topic_id(topic),
                    partition_states=sorted(states, key=_BY_PARTITION_INDEX))
                    for topic, states in sorted(by_topic.items())],
                live_leaders=live_leaders)
            callback = (None if self._on_leader_and_isr_response is None
                        else self._leader_and_isr_callback(broker_id))
            self.channel.send_request(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION,
                                      body, callback)

    def _leader_and_isr_callback(self, broker_id: int) -> ResponseCallback:
        on_response = self._on_leader_and_isr_response
        assert on_response is not None
        # v5 answers by topic id; the names are the context's at the time of sending.
        names = {topic_id: topic for topic, topic_id in self.context.topic_ids.items()}

        def callback(response: Any) -> None:
            errors: dict[TopicPartition, int] = {}
            for topic in response.topics:
                name = names.get(topic.topic_id)
                if name is None:
                    continue
                for pe in topic.partition_errors:
                    errors[TopicPartition(name, pe.partition_index)] = pe.error_code
            for pe in response.partition_errors:
                errors[TopicPartition(pe.topic_name, pe.partition_index)] = pe.error_code
            on_response(broker_id, response.error_code, errors)

        return callback

    def _send_update_metadata_requests(self, controller_epoch: int) -> None:
        if not self.update_metadata_brokers:
            return
        structs = UM.structs
        by_topic: dict[str, list[Any]] = {}
        for tp, state in self.update_metadata_partitions.items():
            by_topic.setdefault(tp.topic, []).append(state)
        live_brokers = []
        for broker_id, info in sorted(self.context.live_brokers.items()):
            endpoints = [structs["UpdateMetadataEndpoint"](
                port=ep.port, host=ep.host or "", listener=ep.listener_name,
                security_protocol=int(ep.security_protocol)) for ep in info.endpoints]
            live_brokers.append(structs["UpdateMetadataBroker"](
                id=broker_id, v0_host="", v0_port=0, endpoints=endpoints, rack=info.rack))
        topic_states = [structs["UpdateMetadataTopicState"](
            topic_name=topic, topic_id=self._topic_id(topic),
            partition_states=sorted(states, key=_BY_PARTITION_INDEX))
            for topic, states in sorted(by_topic.items())]
        for broker_id in sorted(self.update_metadata_brokers):
            body = UM(controller_id=self.controller_id, controller_epoch=controller_epoch,
                      broker_epoch=self._broker_epoch(broker_id), ungrouped_partition_states=[],
                      topic_states=topic_states, live_brokers=live_brokers)
            self.channel.send_request(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                                      body)

    def _send_stop_replica_requests(self, controller_epoch: int) -> None:
        structs = SR.structs
        for broker_id, entries in sorted(self.stop_replica_requests.items()):
            by_topic: dict[str, list[Any]] = {}
            for tp, entry in sorted(entries.items()):
                by_topic.setdefault(tp.topic, []).append(structs["StopReplicaPartitionState"](
                    partition_index=tp.partition, leader_epoch=entry.leader_epoch,
                    delete_partition=entry.delete_partition))
            body = SR(controller_id=self.controller_id, controller_epoch=controller_epoch,
                      broker_epoch=self._broker_epoch(broker_id), delete_partitions=False,
                      ungrouped_partitions=[], topics=[],
                      topic_states=[structs["StopReplicaTopicState"](
                          topic_name=topic, partition_states=states)
                          for topic, states in sorted(by_topic.items())])
            deleted = {tp for tp, entry in entries.items() if entry.delete_partition}
            callback = None
            if deleted and self._on_deletion_response is not None:
                callback = self._deletion_callback(broker_id, deleted)
            self.channel.send_request(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, body,
                                      callback)

    def _deletion_callback(self, broker_id: int, deleted: set[TopicPartition]
                           ) -> ResponseCallback:
        on_response = self._on_deletion_response
        assert on_response is not None

        def callback(response: Any) -> None:
            errors: dict[TopicPartition, int] = {}
            for pe in response.partition_errors:
                tp = TopicPartition(pe.topic_name, pe.partition_index)
                if tp in deleted:
                    errors[tp] = pe.error_code
            if response.error_code != 0:
                errors.update(dict.fromkeys(deleted - set(errors), response.error_code))
            if errors:
                on_response(broker_id, response.error_code, errors)

        return callback

