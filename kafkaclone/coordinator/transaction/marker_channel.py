"""TransactionMarkerChannelManager: WriteTxnMarkers from the transaction coordinator to the
partition leaders (Kafka 2.8's kafka.coordinator.transaction.TransactionMarkerChannelManager
and TransactionMarkerRequestCompletionHandler).

A transaction's partitions are grouped by their current leader; each destination broker has
one queue, and everything queued for a broker when it is free goes out in one
WriteTxnMarkers request (one marker per transaction). Per partition in the answer:

- NONE: written;
- UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, COORDINATOR_LOAD_IN_PROGRESS and a failed
  connection: retried after ``retry_backoff`` against the leader the metadata names then;
- INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer
  epoch exists; the transaction's markers stop here (NotCoordinatorError);
- any other error: logged, the partition is given up (Kafka throws there);
- a partition whose topic no longer exists is skipped, as Kafka does.

A transaction's :meth:`send_markers` returns once none of its partitions is left.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from twisted.internet.defer import Deferred

from kafkaclone.common.clock import Scheduler
from kafkaclone.common.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    InvalidProducerEpochError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.coordinator import TxnMarkerEntry
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

logger = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION: Final = 1
RETRIABLE_ERRORS: Final = frozenset({
    UnknownTopicOrPartitionError.code, NotLeaderOrFollowerError.code,
    NotEnoughReplicasError.code, NotEnoughReplicasAfterAppendError.code,
    RequestTimedOutError.code, KafkaStorageError.code, CoordinatorLoadInProgressError.code,
})
FENCED_ERRORS: Final = frozenset({InvalidProducerEpochError.code,
                                  TransactionCoordinatorFencedError.code})

_Marker = WriteTxnMarkersRequest.WritableTxnMarker
_MarkerTopic = WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic


@dataclass(frozen=True)
class MarkerDestination:
    broker_id: int
    host: str
    port: int


class MarkerDestinationLookup(Protocol):
    """Where a partition's leader is, from the broker's metadata cache."""

    def leader_of(self, tp: TopicPartition) -> MarkerDestination | None:
        """None while the partition has no live leader."""
        ...

    def partition_exists(self, tp: TopicPartition) -> bool: ...


class MarkerConnection(Protocol):
    async def send(self, api_key: int, api_version: int, body: Any) -> Any: ...

    def close(self) -> None: ...


ConnectionFactory = Callable[[MarkerDestination], MarkerConnection]


@dataclass(eq=False)
class _PendingTxn:
    entry: TxnMarkerEntry
    remaining: set[TopicPartition]
    done: Deferred[None] = field(default_factory=Deferred)
    cancelled: bool = False

    def finish(self, error: Exception | None = None) -> None:
        if self.done.called:
            return
        if error is None:
            self.done.callback(None)
        else:
            self.done.errback(error)


@dataclass
class _BrokerQueue:
    destination: MarkerDestination
    connection: MarkerConnection
    queue: deque[tuple[_PendingTxn, frozenset[TopicPartition]]] = field(default_factory=deque)
    sending: bool = False


class TransactionMarkerChannelManager:
    """See the module docstring. Reactor thread only."""

    def __init__(self, clock: Scheduler, lookup: MarkerDestinationLookup,
                 connect: ConnectionFactory, *, retry_backoff: float = 0.1) -> None:
        self.clock = clock
        self.lookup = lookup
        self._connect = connect
        self.retry_backoff = retry_backoff
        self._brokers: dict[int, _BrokerQueue] = {}
        self._pending: set[_PendingTxn] = set()
        self._stopped = False

    def queue_size(self, broker_id: int) -> int:
        queue = self._brokers.get(broker_id)
        return 0 if queue is None else len(queue.queue)

    async def send_markers(self, entry: TxnMarkerEntry) -> None:
        pending = _PendingTxn(entry, set(entry.partitions))
        self._pending.add(pending)
        self._route(pending, entry.partitions)
        try:
            await pending.done
        finally:
            self._pending.discard(pending)

    def remove_markers_for_txn_partition(self, txn_partition: int) -> None:
        for pending in [p for p in self._pending if p.entry.txn_partition == txn_partition]:
            pending.cancelled = True
            pending.finish(NotCoordinatorError(
                f"No longer the coordinator of {pending.entry.transactional_id}"))

    def shutdown(self) -> None:
        self._stopped = True
        for pending in list(self._pending):
            pending.cancelled = True
            pending.finish(NotCoordinatorError("The transaction coordinator is shutting down"))
        for queue in self._brokers.values():
            queue.connection.close()
        self._brokers.clear()

    # -- routing ----------------------------------------------------------------------------

    def _route(self, pending: _PendingTxn, partitions: frozenset[TopicPartition]) -> None:
        if pending.cancelled or self._stopped:
            return
        by_broker: dict[MarkerDestination, set[TopicPartition]] = defaultdict(set)
        unroutable: set[TopicPartition] = set()
        for tp in partitions:
            if tp not in pending.remaining:
                continue
            if not self.lookup.partition_exists(tp):
                logger.info("Skipping the marker of %s for %s: the partition no longer exists",
                            pending.entry.transactional_id, tp)
                pending.remaining.discard(tp)
                continue
            destination = self.lookup.leader_of(tp)
            if destination is None:
                unroutable.add(tp)
            else:
                by_broker[destination].add(tp)
        if not pending.remaining:
            pending.finish()
            return
        for destination, tps in by_broker.items():
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("Queueing the markers of %s for %s to broker %d",
                             pending.entry.transactional_id, sorted(map(str, tps)),
                             destination.broker_id)
            queue = self._queue_for(destination)
            queue.queue.append((pending, frozenset(tps)))
            self._drain_soon(queue)
        if unroutable:
            self._retry_later(pending, frozenset(unroutable))

    def _retry_later(self, pending: _PendingTxn, partitions: frozenset[TopicPartition]) -> None:
        self.clock.callLater(self.retry_backoff, self._route, pending, partitions)

    def _queue_for(self, destination: MarkerDestination) -> _BrokerQueue:
        queue = self._brokers.get(destination.broker_id)
        if queue is not None and queue.destination != destination:
            queue.connection.close()
            queue = None
        if queue is None:
            queue = _BrokerQueue(destination, self._connect(destination))
            self._brokers[destination.broker_id] = queue
        return queue

    def _drain_soon(self, queue: _BrokerQueue) -> None:
        if queue.sending:
            return
        queue.sending = True
        Deferred.fromCoroutine(self._drain(queue)).addErrback(
            lambda failure: logger.error("Sending markers to broker %d failed: %s",
                                         queue.destination.broker_id,
                                         failure.getErrorMessage()))

    # -- sending ----------------------------------------------------------------------------

    async def _drain(self, queue: _BrokerQueue) -> None:
        try:
            while queue.queue and not self._stopped:
                batch = [(p, tps) for p, tps in queue.queue if not p.cancelled]
                queue.queue.clear()
                if batch:
                    await self._send(queue, batch)
        finally:
            queue.sending = False

    async def _send(self, queue: _BrokerQueue,
                    batch: list[tuple[_PendingTxn, frozenset[TopicPartition]]]) -> None:
        request = WriteTxnMarkersRequest(markers=[_marker(p.entry, tps) for p, tps in batch])
        try:
            response = await queue.connection.send(ApiKey.WRITE_TXN_MARKERS,
                                                   WRITE_TXN_MARKERS_VERSION, request)
            if not isinstance(response, WriteTxnMarkersResponse):
                raise TypeError(f"unexpected response {type(response).__name__}")
        except Exception as exc:
            logger.info("Sending WriteTxnMarkers to broker %d failed (%s); retrying",
                        queue.destination.broker_id, exc)
            for pending, tps in batch:
                self._retry_later(pending, tps)
            return
        results: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for marker in response.markers:
            for topic in marker.topics:
                for partition in topic.partitions:
                    results[marker.producer_id][TopicPartition(topic.name,
                                                               partition.partition_index)] = (
                        partition.error_code)
        for pending, tps in batch:
            self._complete(pending, tps, results.get(pending.entry.producer_id, {}),
                           queue.destination.broker_id)

    def _complete(self, pending: _PendingTxn, partitions: frozenset[TopicPartition],
                  errors: dict[TopicPartition, int], broker_id: int) -> None:
        if pending.cancelled:
            return
        retry: set[TopicPartition] = set()
        for tp in partitions:
            code = errors.get(tp, NotLeaderOrFollowerError.code)
            if code == NONE:
                pending.remaining.discard(tp)
            elif code in RETRIABLE_ERRORS:
                logger.debug("Broker %d could not write the marker of %s for %s yet (error "
                             "%d); retrying", broker_id, pending.entry.transactional_id, tp,
                             code)
                retry.add(tp)
            elif code in FENCED_ERRORS:
                logger.warning("Markers of %s fenced by broker %d (error %d)",
                               pending.entry.transactional_id, broker_id, code)
                pending.cancelled = True
                pending.finish(NotCoordinatorError(
                    f"The markers of {pending.entry.transactional_id} were fenced"))
                return
            else:
                logger.error("Broker %d could not write the marker of %s for %s (error %d); "
                             "giving up on that partition", broker_id,
                             pending.entry.transactional_id, tp, code)
                pending.remaining.discard(tp)
        if retry:
            self._retry_later(pending, frozenset(retry))
        elif not pending.remaining:
            pending.finish()


def _marker(entry: TxnMarkerEntry, partitions: frozenset[TopicPartition]) -> _Marker:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(partitions):
        by_topic[tp.topic].append(tp.partition)
    return _Marker(producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                   transaction_result=entry.commit,
                   topics=[_MarkerTopic(name=t, partition_indexes=ps)
                           for t, ps in by_topic.items()],
                   coordinator_epoch=entry.coordinator_epoch)
