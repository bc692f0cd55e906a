"""The broker's view of the cluster, fed by the controller's UpdateMetadata requests.

Kafka's ZooKeeper-mode ``MetadataCache``: every broker keeps the live brokers (with their
endpoints per listener), the controller id, and the state of every partition (leader,
leader epoch, ISR, replicas, offline replicas) as the controller last sent them. Metadata
requests are answered from here, never from ZooKeeper. The cache is owned by the reactor
thread; an update replaces the snapshot in one assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import (
    NONE,
    LeaderNotAvailableError,
    ListenerNotFoundError,
    ReplicaNotAvailableError,
)
from kafkaclone.common.topic import INTERNAL_TOPICS
from kafkaclone.protocol.api import EncodedResponse

NO_LEADER: Final = -1
LEADER_DURING_DELETE: Final = -2
"""The leader id the controller sends for a partition of a topic being deleted."""
MAX_METADATA_ANSWERS: Final = 32
"""Encoded Metadata answers kept per snapshot (distinct requests: version, topics asked,
listener ...); the oldest goes first. A 10,000-partition topic's answer is about 400 kB."""



@dataclass(frozen=True)
class LiveBroker:
    """A live broker as UpdateMetadata describes it (Kafka's kafka.cluster.Broker): its
    endpoints by listener name."""

    id: int
    rack: str | None
    endpoints: dict[str, EndPoint]


@dataclass(frozen=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class PartitionMetadata:
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionMetadata]


@dataclass(frozen=True)
class _Snapshot:
    controller_id: int | None = None
    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    partitions: dict[str, dict[int, UpdateMetadataPartitionState]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._snapshot = _Snapshot()
        self._metadata_answers: dict[Hashable, EncodedResponse] = {}
        """The Metadata handler's encoded answers built from ``_snapshot``, by request."""

    # --- updates -----------------------------------------------------------------------

    def update_metadata(self, request: Any, version: int) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request; returns the partitions it deleted."""
        old = self._snapshot
        brokers = {b.id: _live_broker(b, version) for b in request.live_brokers}
        partitions = {topic: dict(states) for topic, states in old.partitions.items()}
        topic_ids = dict(old.topic_ids)
        deleted: list[tuple[str, int]] = []
        for topic_name, topic_id, state in update_metadata_partition_states(request, version):
            if state.leader == LEADER_DURING_DELETE:
                topic_partitions = partitions.get(topic_name)
                if topic_partitions is not None and topic_partitions.pop(state.partition_index,
                                                                         None) is not None:
                    deleted.append((topic_name, state.partition_index))
                if topic_partitions is not None and not topic_partitions:
                    del partitions[topic_name]
                    topic_ids.pop(topic_name, None)
                continue
            topic_partitions = partitions.setdefault(topic_name, {})
            topic_partitions[state.partition_index] = UpdateMetadataPartitionState(
                topic=topic_name,
                partition=state.partition_index,
                controller_epoch=state.controller_epoch,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=tuple(state.isr),
                zk_version=state.zk_version,
                replicas=tuple(state.replicas),
                offline_replicas=tuple(state.offline_replicas),
            )
            if topic_id is not None and topic_id.int != 0:
                topic_ids[topic_name] = topic_id
        controller_id = request.controller_id if request.controller_id >= 0 else None
        self._snapshot = _Snapshot(controller_id, brokers, partitions, topic_ids)
        self._metadata_answers.clear()
        return deleted

    # --- the Metadata handler's answers --------------------------------------------------

    def metadata_answer(self, request_key: Hashable) -> EncodedResponse | None:
        """The encoded Metadata answer kept for ``request_key`` since the last update."""
        return self._metadata_answers.get(request_key)

    @property
    def generation(self) -> object:
        """What changes with every update: an answer built since this was read may be kept
        only while it is the same."""
        return self._snapshot

    def keep_metadata_answer(self, request_key: Hashable, answer: EncodedResponse,
                             generation: object) -> None:
        """Keep a Metadata answer built from the snapshot of ``generation`` until the next
        update (not at all if an update came while it was built); ``request_key`` must name
        everything besides the snapshot that the answer depends on."""
        if generation is not self._snapshot:
            return
        answers = self._metadata_answers
        if len(answers) >= MAX_METADATA_ANSWERS and request_key not in answers:
            del answers[next(iter(answers))]
        answers[request_key] = answer

    # --- queries -----------------------------------------------------------------------

    @property
    def controller_id(self) -> int | None:
        return self._snapshot.controller_id

    def alive_brokers(self) -> list[LiveBroker]:
        return [b for _, b in sorted(self._snapshot.brokers.items())]

    def alive_endpoints(self, listener: str) -> list[tuple[LiveBroker, EndPoint]]:
        return [(b, b.endpoints[listener]) for b in self.alive_brokers()
                if listener in b.endpoints]

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._snapshot.brokers

    def all_topics(self) -> list[str]:
        return sorted(self._snapshot.partitions)

    def contains(self, topic: str) -> bool:
        return topic in self._snapshot.partitions

    def topic_id(self, topic: str) -> uuid.UUID:
        return self._snapshot.topic_ids.get(topic, uuid.UUID(int=0))

    def partition_state(self, topic: str, partition: int) -> UpdateMetadataPartitionState | None:
        return self._snapshot.partitions.get(topic, {}).get(partition)

    def partition_count(self, topic: str) -> int | None:
        states = self._snapshot.partitions.get(topic)
        return None if states is None else len(states)

    def leader_endpoint(self, topic: str, partition: int,
                        listener: str) -> EndPoint | None:
        state = self.partition_state(topic, partition)
        if state is None:
            return None
        broker = self._snapshot.brokers.get(state.leader)
        return None if broker is None else broker.endpoints.get(listener)

    def partition_replica_endpoints(self, topic: str, partition: int,
                                    listener: str) -> dict[int, LiveBroker]:
        """The partition's replicas that are alive with an endpoint on ``listener``, by
        broker id (Kafka's getPartitionReplicaEndpoints: their nodes carry the racks
        follower fetching selects by)."""
        state = self.partition_state(topic, partition)
        if state is None:
            return {}
        brokers = self._snapshot.brokers
        return {r: brokers[r] for r in state.replicas
                if r in brokers and listener in brokers[r].endpoints}

    def topic_metadata(self, topics: Iterable[str], listener: str, *,
                       error_unavailable_endpoints: bool,
                       error_unavailable_listeners: bool) -> list[TopicMetadata]:
        """Metadata of the known topics among ``topics`` (unknown ones are left out).

        As Kafka: a partition whose leader is not alive, or has no endpoint on this
        listener, answers LEADER_NOT_AVAILABLE (LISTENER_NOT_FOUND from Metadata v6 when the
        leader is alive); with ``error_unavailable_endpoints`` (Metadata v0) dead replicas
        are left out of the replica and ISR lists and flagged REPLICA_NOT_AVAILABLE.
        """
        snapshot = self._snapshot
        live = snapshot.brokers
        reachable = frozenset(b for b, broker in live.items() if listener in broker.endpoints)
        result: list[TopicMetadata] = []
        for topic in topics:
            states = snapshot.partitions.get(topic)
            if states is None:
                continue
            partitions = [
                _partition_metadata(live, reachable, state, error_unavailable_endpoints,
                                    error_unavailable_listeners)
                for _, state in sorted(states.items())
            ]
            result.append(TopicMetadata(topic, snapshot.topic_ids.get(topic, uuid.UUID(int=0)),
                                        topic in INTERNAL_TOPICS, partitions))
        return result


def _partition_metadata(live: dict[int, LiveBroker], reachable: frozenset[int],
                        state: UpdateMetadataPartitionState, error_unavailable_endpoints: bool,
                        error_unavailable_listeners: bool) -> PartitionMetadata:
    """One partition's metadata; ``reachable``: the live brokers with an endpoint on the
    request's listener."""
    replicas = list(state.replicas)
    isr = list(state.isr)
    if error_unavailable_endpoints:
        replicas = [r for r in replicas if r in reachable]
        isr = [r for r in isr if r in reachable]
    if state.leader not in reachable:
        if state.leader in live and error_unavailable_listeners:
            error = ListenerNotFoundError.code
        else:
            error = LeaderNotAvailableError.code
        return PartitionMetadata(error, state.partition, NO_LEADER, state.leader_epoch,
                                 replicas, isr, list(state.offline_replicas))
    if len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
        error = ReplicaNotAvailableError.code
    else:
        error = NONE
    return PartitionMetadata(error, state.partition, state.leader, state.leader_epoch,
                             replicas, isr, list(state.offline_replicas))


def _live_broker(broker: Any, version: int) -> LiveBroker:
    if version == 0:
        endpoints = {"PLAINTEXT": EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, broker.v0_host,
                                           broker.v0_port)}
    else:
        endpoints = {}
        for ep in broker.endpoints:
            protocol = SecurityProtocol(ep.security_protocol)
            # Before v3 an endpoint has no listener name: it is its security protocol's name.
            listener = ep.listener if version >= 3 else protocol.name
            endpoints[listener] = EndPoint(listener, protocol, ep.host, ep.port)
    return LiveBroker(broker.id, broker.rack, endpoints)


def update_metadata_partition_states(request: Any, version: int,
                                     ) -> Iterable[tuple[str, uuid.UUID | None, Any]]:
    """An UpdateMetadata request's partition states with their topic's name and id (None
    before v7), whichever layout its version has."""
    if version <= 4:
        for state in request.ungrouped_partition_states:
            yield state.topic_name, None, state
    else:
        for topic in request.topic_states:
            topic_id = topic.topic_id if version >= 7 else None
            for state in topic.partition_states:
                yield topic.topic_name, topic_id, state
