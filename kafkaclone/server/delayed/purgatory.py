"""DelayedOperationPurgatory: requests that wait for something, on the reactor clock.

Kafka's ``DelayedOperation`` / ``DelayedOperationPurgatory``, without threads: an operation
(a produce waiting for the ISR, a fetch waiting for bytes) is first tried at once; if it
cannot complete yet it is watched under keys (its partitions) and given a timer. Whoever
changes a partition (an append, a high watermark move, a leader change) calls
:meth:`DelayedOperationPurgatory.check_and_complete` with its key, which retries the
operations watching it. An operation completes exactly once: by ``try_complete`` succeeding,
by ``force_complete``, or by its timer expiring (``on_expiration`` then ``on_complete``).

Everything runs on the reactor thread, so there are no locks.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kafkaclone.common.clock import Scheduler

if TYPE_CHECKING:
    from kafkaclone.cluster.partition import Partition
    from kafkaclone.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class PartitionSource(Protocol):
    """Where delayed operations look up the partitions they wait on (the ReplicaManager)."""

    def get_partition(self, tp: TopicPartition) -> Partition | None: ...

    def missing_partition_error(self, tp: TopicPartition) -> int:
        """Why ``tp`` is not hosted: KAFKA_STORAGE_ERROR if its log directory failed,
        UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        ...


class DelayedOperation:
    """An operation that completes later: subclasses implement ``try_complete``,
    ``on_complete`` and ``on_expiration``."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = max(0, delay_ms)
        self.completed = False
        self._timer: Any = None

    def try_complete(self) -> bool:
        """Complete now (through :meth:`force_complete`) if the operation can; whether it
        completed."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Send the answer (called exactly once)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """The timer ran out before the operation could complete (before on_complete)."""

    def force_complete(self) -> bool:
        """Complete the operation if nobody did yet; whether this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        try:
            self.on_complete()
        except Exception:
            logger.exception("delayed operation %r failed to complete", self)
        return True

    def _expire(self) -> None:
        if self.completed:
            return
        try:
            self.on_expiration()
        except Exception:
            logger.exception("delayed operation %r failed on expiration", self)
        self.force_complete()


Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    """Operations of one kind waiting on keys, with timers on ``clock``."""

    def __init__(self, name: str, clock: Scheduler, purge_interval: int = 1000) -> None:
        self.name = name
        self._clock = clock
        self._watchers: dict[Hashable, list[Op]] = {}
        self._purge_interval = max(1, purge_interval)
        self._added_since_purge = 0

    @property
    def watched(self) -> int:
        """Operations watched, counted once per key (completed ones until purged)."""
        return sum(len(ops) for ops in self._watchers.values())

    @property
    def delayed(self) -> int:
        """Distinct operations not completed yet."""
        seen = {id(op) for ops in self._watchers.values() for op in ops if not op.completed}
        return len(seen)

    def try_complete_else_watch(self, operation: Op, keys: Iterable[Hashable]) -> bool:
        """Try to complete ``operation`` now; otherwise watch it under every key and start
        its timer. Whether it completed now."""
        if operation.try_complete():
            return True
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, []).append(operation)
        # A key may have changed between the try and the watch only through this same
        # reactor turn, which cannot happen: one try is enough.
        if not operation.completed:
            operation._timer = self._clock.callLater(operation.delay_ms / 1000.0,
                                                     self._expired, operation, keys)
        self._added_since_purge += 1
        if self._added_since_purge >= self._purge_interval:
            self.purge_completed()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        snapshot = list(ops)
        remaining: list[Op] = []
        for op in snapshot:
            if op.completed:
                continue
            if op.try_complete():
                completed += 1
            else:
                remaining.append(op)
        # Operations watched on this key while we were trying (none in practice) stay.
        current = self._watchers.get(key)
        if current is ops:
            remaining.extend(op for op in ops[len(snapshot):] if not op.completed)
            if remaining:
                self._watchers[key] = remaining
            else:
                del self._watchers[key]
        return completed

    def check_and_complete_all(self, keys: Iterable[Hashable]) -> int:
        """``check_and_complete`` of each key, each waiting operation tried once however
        many of the keys it watches (a follower's fetch watches thousands of partitions; a
        LeaderAndIsr touching all of them would otherwise try it once per partition)."""
        keys = [key for key in dict.fromkeys(keys) if key in self._watchers]
        tried: dict[int, bool] = {}
        completed = 0
        for key in keys:
            for op in list(self._watchers.get(key, ())):
                if id(op) in tried or op.completed:
                    continue
                tried[id(op)] = done = op.try_complete()
                completed += done
        for key in keys:
            ops = self._watchers.get(key)
            if ops is None:
                continue
            kept = [op for op in ops if not op.completed]
            if kept:
                self._watchers[key] = kept
            else:
                del self._watchers[key]
        return completed

    def _expired(self, operation: Op, keys: list[Hashable]) -> None:
        operation._timer = None
        operation._expire()
        self._unwatch(operation, keys)

    def _unwatch(self, operation: Op, keys: Iterable[Hashable]) -> None:
        for key in keys:
            ops = self._watchers.get(key)
            if ops is None:
                continue
            kept = [op for op in ops if op is not operation and not op.completed]
            if kept:
                self._watchers[key] = kept
            else:
                del self._watchers[key]

    def purge_completed(self) -> int:
        """Drop completed operations from the watch lists; how many entries were dropped."""
        self._added_since_purge = 0
        dropped = 0
        for key in list(self._watchers):
            ops = self._watchers[key]
            kept = [op for op in ops if not op.completed]
            dropped += len(ops) - len(kept)
            if kept:
                self._watchers[key] = kept
            else:
                del self._watchers[key]
        return dropped

    def shutdown(self) -> None:
        """Expire every waiting operation now: it answers as at its timeout (an acks=-1
        produce still waiting says REQUEST_TIMED_OUT, never success)."""
        pending = {id(op): op for ops in self._watchers.values() for op in ops}
        self._watchers.clear()
        for op in pending.values():
            op._expire()
