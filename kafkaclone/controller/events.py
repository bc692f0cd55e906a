"""The controller's events and their queue (Kafka's ControllerEvent and
ControllerEventManager).

ZooKeeper watches, session changes and requests only put events on the queue; the controller
processes them one at a time, in order, on the reactor thread, so its state needs no locks.
The set of event types is closed: ``ControllerEvent`` is their union.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import CancelledError, Deferred

from kafkaclone.common.clock import Scheduler
from kafkaclone.common.errors import KafkaError, NotControllerError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.zk.znodes import ReplicaAssignment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Startup:
    """Register the /controller watch and try to become controller."""


@dataclass(frozen=True)
class ControllerChange:
    """/controller was created or changed: resign if another broker holds it now."""


@dataclass(frozen=True)
class Reelect:
    """/controller was deleted, or a new session started: resign if needed, then elect."""


@dataclass(frozen=True)
class Expire:
    """The ZooKeeper session expired: resign (the /controller znode is gone with it)."""


@dataclass(frozen=True)
class BrokerChange:
    """/brokers/ids children changed."""


@dataclass(frozen=True)
class TopicChange:
    """/brokers/topics children changed."""


@dataclass(frozen=True)
class PartitionModifications:
    """/brokers/topics/<topic> changed (partitions added)."""

    topic: str


@dataclass(frozen=True)
class TopicDeletion:
    """/admin/delete_topics children changed."""


@dataclass(frozen=True)
class IsrChangeNotification:
    """/isr_change_notification children changed."""


@dataclass(frozen=True)
class LogDirEventNotification:
    """/log_dir_event_notification children changed: a broker lost a log directory."""


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    """A broker answered a LeaderAndIsr: KAFKA_STORAGE_ERROR marks a replica offline."""

    broker_id: int
    error_code: int
    partition_errors: dict[TopicPartition, int]


@dataclass(frozen=True)
class PreferredReplicaLeaderElection:
    """/admin/preferred_replica_election was created (kafka-preferred-replica-election.sh)."""


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection:
    """The periodic leader-imbalance check (auto.leader.rebalance.enable) is due."""


@dataclass(frozen=True, eq=False)
class ReplicaLeaderElection:
    """An admin asked for leader elections (ElectLeaders); ``result`` fires with each
    partition's outcome: the elected leader's id, or the error to report."""

    partitions: frozenset[TopicPartition] | None
    """None: every partition."""
    election_type: int
    """ElectionType: 0 preferred, 1 unclean."""
    result: Deferred[dict[TopicPartition, KafkaError | int]] = field(
        default_factory=Deferred)


@dataclass(frozen=True)
class ZkPartitionReassignment:
    """/admin/reassign_partitions was created (a legacy reassignment request)."""


@dataclass(frozen=True)
class PartitionReassignmentIsrChange:
    """The state znode of a partition being reassigned changed: its target replicas may
    all be in the ISR now."""

    topic_partition: TopicPartition


@dataclass(frozen=True, eq=False)
class ApiPartitionReassignment:
    """AlterPartitionReassignments: per partition its target replicas, None to cancel;
    ``result`` fires with each partition's error (None when accepted)."""

    reassignments: dict[TopicPartition, tuple[int, ...] | None]
    result: Deferred[dict[TopicPartition, KafkaError | None]] = field(default_factory=Deferred)


@dataclass(frozen=True, eq=False)
class ListPartitionReassignments:
    """ListPartitionReassignments; ``result`` fires with the assignment (replicas, adding,
    removing) of each listed partition being reassigned."""

    partitions: frozenset[TopicPartition] | None
    """None: every partition being reassigned."""
    result: Deferred[dict[TopicPartition, ReplicaAssignment]] = field(default_factory=Deferred)


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived:
    broker_id: int
    error_code: int
    partition_errors: dict[TopicPartition, int]


@dataclass(frozen=True, eq=False)
class ControlledShutdown:
    """A broker asks to shut down; ``result`` fires with the partitions it still leads."""

    broker_id: int
    broker_epoch: int
    result: Deferred[set[TopicPartition]] = field(default_factory=Deferred)


ControllerEvent = (
    Startup | ControllerChange | Reelect | Expire | BrokerChange | TopicChange
    | PartitionModifications | TopicDeletion | IsrChangeNotification | LogDirEventNotification
    | LeaderAndIsrResponseReceived
    | PreferredReplicaLeaderElection | AutoPreferredReplicaLeaderElection | ReplicaLeaderElection
    | TopicDeletionStopReplicaResponseReceived | ControlledShutdown | ZkPartitionReassignment
    | PartitionReassignmentIsrChange | ApiPartitionReassignment | ListPartitionReassignments
)

RequestEvent = (ControlledShutdown | ReplicaLeaderElection | ApiPartitionReassignment
                | ListPartitionReassignments)
"""The events a request waits on through their ``result``."""


class ControllerEventManager:
    """One queue of events, processed one at a time by ``process``."""

    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]]) -> None:
        self._process = process
        self._queue: deque[tuple[ControllerEvent, float]] = deque()
        """Each event with its ``time.perf_counter()`` when queued."""
        self.queue_time_listener: Callable[[float], None] | None = None
        """Told how long each event waited, in ms (Kafka's EventQueueTimeMs)."""
        self._draining: Deferred[None] | None = None
        self._stopped = False

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being processed."""
        return self._draining is None and not self._queue

    def put(self, event: ControllerEvent) -> None:
        if self._stopped:
            _abandon(event)
            return
        self._queue.append((event, time.perf_counter()))
        if self._draining is None:
            draining = Deferred.fromCoroutine(self._drain())
            # _drain may have finished synchronously (and reset _draining) already.
            self._draining = None if draining.called else draining

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drop what is queued (a session expiry makes it moot), then queue ``event``."""
        for dropped, _ in self._queue:
            _abandon(dropped)
        self._queue.clear()
        self.put(event)

    async def _drain(self) -> None:
        try:
            while self._queue and not self._stopped:
                event, queued_at = self._queue.popleft()
                if self.queue_time_listener is not None:
                    self.queue_time_listener((time.perf_counter() - queued_at) * 1000.0)
                try:
                    await self._process(event)
                except CancelledError:
                    logger.info("Controller event %s cancelled by the shutdown", event)
                except Exception:
                    logger.exception("Error processing controller event %s", event)
        finally:
            self._draining = None

    async def shutdown(self, clock: Scheduler, grace_s: float) -> None:
        """Stop after the event being processed, or cancel it (CancelledError where it
        waits) if it runs ``grace_s`` longer: a broker shutting down does not wait for a
        long event (thousands of partitions). Queued events are dropped."""
        self._stopped = True
        for dropped, _ in self._queue:
            _abandon(dropped)
        self._queue.clear()
        draining = self._draining
        if draining is not None:
            timer = clock.callLater(grace_s, draining.cancel)
            await _quietly(draining)
            if timer.active():
                timer.cancel()


async def _quietly(d: Deferred[Any]) -> None:
    done: Deferred[None] = Deferred()
    d.addBoth(lambda _: done.callback(None))
    await done


def _abandon(event: ControllerEvent) -> None:
    if isinstance(event, RequestEvent) and not event.result.called:
        event.result.errback(NotControllerError("the controller is shutting down"))
