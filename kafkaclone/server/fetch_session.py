"""Fetch sessions (KIP-227), as Kafka 2.8's ``FetchSession.scala``.

A client may ask for a session with a full fetch at epoch 0 (INITIAL); the broker then
remembers the partitions and what it last told the client about each (high watermark, last
stable offset, log start offset). Later fetches at the session's epoch are incremental:
they name only partitions that changed (a new fetch offset, a new one, or ``forgotten``
ones to drop), and the answer carries only partitions with something new (records, an
error, a moved high watermark, last stable offset or log start offset). Epoch -1 (FINAL) is
a full fetch without a session (and closes the one named).

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions. When it is full a
new session may evict the least recently used one if that was idle for more than
``MIN_EVICTION_MS``, or any client session if the newcomer is a follower (privileged);
otherwise the fetch is answered without a session (session id 0), which clients accept.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import (
    NONE,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.fetch import LogReadResult, PartitionFetchInfo

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
MIN_EVICTION_MS: Final = 120_000
_INT32_MAX: Final = 0x7FFFFFFF


@dataclass
class CachedPartition:
    """A session's partition: the client's fetch position and what it was last told."""

    info: PartitionFetchInfo
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: LogReadResult) -> bool:
        """Whether an incremental answer includes this partition; remembers what it says."""
        changed = (result.error_code != NONE or result.size > 0
                   or result.diverging_epoch is not None
                   or result.preferred_read_replica >= 0
                   or result.high_watermark != self.high_watermark
                   or result.last_stable_offset != self.last_stable_offset
                   or result.log_start_offset != self.log_start_offset)
        self.remember(result)
        return changed

    def remember(self, result: LogReadResult) -> None:
        self.high_watermark = result.high_watermark
        self.last_stable_offset = result.last_stable_offset
        self.log_start_offset = result.log_start_offset


@dataclass
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[TopicPartition, CachedPartition]
    epoch: int
    last_used_ms: int


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _INT32_MAX else epoch + 1


class FetchSessionCache:
    """The broker's sessions (Kafka's FetchSessionCache)."""

    def __init__(self, max_slots: int, clock: Scheduler,
                 min_eviction_ms: int = MIN_EVICTION_MS) -> None:
        self.max_slots = max_slots
        self._clock = clock
        self.min_eviction_ms = min_eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._random = random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_used_ms = now_ms(self._clock)
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def maybe_create(self, privileged: bool,
                     partitions: dict[TopicPartition, CachedPartition]) -> int:
        """A new session's id, or INVALID_SESSION_ID if there is no room for it."""
        now = now_ms(self._clock)
        if len(self.sessions) >= self.max_slots and not self._evict_one(privileged, now):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._random.randint(1, _INT32_MAX)
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions,
                                                 next_epoch(INITIAL_EPOCH), now)
        return session_id

    def _evict_one(self, privileged: bool, now: int) -> bool:
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - oldest.last_used_ms > self.min_eviction_ms:
            del self.sessions[oldest.id]
            return True
        if privileged:
            unprivileged = [s for s in self.sessions.values() if not s.privileged]
            if unprivileged:
                victim = min(unprivileged, key=lambda s: s.last_used_ms)
                del self.sessions[victim.id]
                return True
        return False


@dataclass
class FetchContext:
    """How one fetch request is read and answered (Kafka's FetchContext kinds)."""

    error_code: int = NONE
    partitions: list[tuple[TopicPartition, PartitionFetchInfo]] = field(default_factory=list)
    session: FetchSession | None = None
    create_session: bool = False
    privileged: bool = False

    def respond(self, cache: FetchSessionCache,
                results: list[tuple[TopicPartition, LogReadResult]]
                ) -> tuple[int, list[tuple[TopicPartition, LogReadResult]]]:
        """The session id to answer with and the partitions to include."""
        if self.session is not None:  # incremental
            cached = self.session.partitions
            return self.session.id, [(tp, result) for tp, result in results
                                     if tp not in cached or cached[tp].must_respond(result)]
        if self.create_session:
            partitions = {tp: CachedPartition(info) for tp, info in self.partitions}
            for tp, result in results:
                partitions[tp].remember(result)
            return cache.maybe_create(self.privileged, partitions), results
        return INVALID_SESSION_ID, results


def new_context(cache: FetchSessionCache, session_id: int, epoch: int,
                infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
                forgotten: Sequence[TopicPartition], privileged: bool) -> FetchContext:
    """The context of a fetch request (Kafka's FetchManager.newContext)."""
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        return FetchContext(partitions=list(infos), create_session=epoch == INITIAL_EPOCH,
                            privileged=privileged)
    session = cache.get(session_id)
    if session is None:
        return FetchContext(error_code=FetchSessionIdNotFoundError.code)
    if session.epoch != epoch:
        return FetchContext(error_code=InvalidFetchSessionEpochError.code)
    for tp in forgotten:
        session.partitions.pop(tp, None)
    for tp, info in infos:
        cached = session.partitions.get(tp)
        if cached is None:
            session.partitions[tp] = CachedPartition(info)
        else:
            cached.info = info
    session.epoch = next_epoch(session.epoch)
    return FetchContext(partitions=[(tp, c.info) for tp, c in session.partitions.items()],
                        session=session, privileged=privileged)
