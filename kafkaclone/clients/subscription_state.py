"""The consumer's subscription state: Kafka's SubscriptionState.

What the consumer subscribed to (topic names or a pattern) and its rebalance listener; the
partitions assigned to it (by its group, or by hand) in fetch order, each with its fetch
state: the position (the next offset to return), the watermarks last seen, whether it is
paused, and the offset reset it waits for. The consumer (fetching, seeking) and its group
coordinator (joining, committing) share one instance; neither reaches into the other.
Every change of the assignment bumps ``assignment_id`` (as Kafka's does), so the fetcher
can tell that what it buffered may no longer belong.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from kafkaclone.clients.common import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TopicPartition,
)

logger = logging.getLogger(__name__)

EARLIEST: Final = -2
LATEST: Final = -1
"""ListOffsets timestamps: the offset resets a partition may wait for."""

PartitionsCallback = Callable[[list[TopicPartition]], None]


class TopicPartitionState:
    """One assigned partition's fetch state (Kafka's TopicPartitionState)."""

    __slots__ = ("high_watermark", "last_stable_offset", "log_start_offset", "paused",
                 "position", "preferred_read_replica", "preferred_read_replica_expires",
                 "reset_to")

    def __init__(self) -> None:
        self.position: int | None = None
        self.paused = False
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        self.reset_to: int | None = None
        """EARLIEST / LATEST when the position must be looked up, or None (the committed
        offset, else the reset policy)."""
        self.preferred_read_replica: int | None = None
        """The replica the leader told this consumer to fetch from (KIP-392), until
        ``preferred_read_replica_expires`` (monotonic seconds), an error, or a metadata
        change."""
        self.preferred_read_replica_expires = 0.0

    def clear_preferred_read_replica(self) -> None:
        self.preferred_read_replica = None
        self.preferred_read_replica_expires = 0.0


class RebalanceListener:
    """The user's rebalance callbacks: an object with Kafka's ConsumerRebalanceListener
    methods (``on_partitions_revoked`` / ``on_partitions_assigned`` /
    ``on_partitions_lost``), or confluent-kafka style ``on_assign`` / ``on_revoke`` /
    ``on_lost`` functions (bound to their consumer by the caller). Kafka's default
    ``on_partitions_lost`` is ``on_partitions_revoked``. A callback that raises is logged;
    the rebalance goes on."""

    def __init__(self, listener: object | None = None, *,
                 on_assign: PartitionsCallback | None = None,
                 on_revoke: PartitionsCallback | None = None,
                 on_lost: PartitionsCallback | None = None) -> None:
        self._listener = listener
        self._callbacks = {"on_partitions_assigned": on_assign,
                           "on_partitions_revoked": on_revoke,
                           "on_partitions_lost": on_lost}

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._call("on_partitions_assigned", partitions)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._call("on_partitions_revoked", partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        if self._callbacks["on_partitions_lost"] is None and not self._has("on_partitions_lost"):
            self._call("on_partitions_revoked", partitions)
        else:
            self._call("on_partitions_lost", partitions)

    def _has(self, method: str) -> bool:
        return self._listener is not None and hasattr(self._listener, method)

    def _call(self, method: str, partitions: list[TopicPartition]) -> None:
        callback = self._callbacks[method]
        try:
            if self._has(method):
                getattr(self._listener, method)(partitions)
            elif callback is not None:
                callback(partitions)
        except Exception:
            logger.exception("The rebalance listener's %s failed", method)


class SubscriptionState:
    """See the module docstring. ``auto_offset_reset``: earliest, latest or none."""

    def __init__(self, auto_offset_reset: str) -> None:
        self.auto_offset_reset = auto_offset_reset
        self.subscribed = False
        """Whether partitions come from the group (``subscribe``) rather than by hand."""
        self.topics: list[str] = []
        self.pattern: re.Pattern[str] | None = None
        self.listener = RebalanceListener()
        self.assignment: dict[tuple[str, int], TopicPartitionState] = {}
        """The assigned partitions in fetch order; change it only through the methods."""
        self.assignment_id = 0

    # --- subscription -----------------------------------------------------------------------

    def subscribe(self, topics: str | Sequence[str] | re.Pattern[str],
                  listener: RebalanceListener) -> None:
        """Names, or a regex: a compiled pattern or names starting with ``^``."""
        pattern: re.Pattern[str] | None
        names: list[str]
        if isinstance(topics, re.Pattern):
            pattern, names = topics, []
        elif isinstance(topics, str):
            pattern, names = (re.compile(topics), []) if topics.startswith("^") \
                else (None, [topics])
        else:
            given = list(topics)
            patterns = [t for t in given if t.startswith("^")]
            pattern = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
            names = [t for t in given if not t.startswith("^")]
        if not names and pattern is None:
            raise ValueError("subscribe() needs at least one topic")
        self.topics, self.pattern = names, pattern
        self.listener = listener
        self.subscribed = True

    def unsubscribe(self) -> None:
        self.subscribed = False
        self.topics, self.pattern = [], None

    # --- assignment ---------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions replace the assignment; a partition kept keeps its state. A
        partition's offset says where reading starts (see ``seek``)."""
        new: dict[tuple[str, int], TopicPartitionState] = {}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            state = self.assignment.get(key) or TopicPartitionState()
            _apply_offset(state, tp.offset)
            new[key] = state
        self.assignment = new
        self.assignment_id += 1

    def assigned(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.assignment]

    def assigned_with_positions(self) -> list[TopicPartition]:
        """The assignment, each partition's offset its position (OFFSET_INVALID if none)."""
        return [TopicPartition(t, p, OFFSET_INVALID if s.position is None else s.position)
                for (t, p), s in self.assignment.items()]

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        state = self.assignment.get((tp.topic, tp.partition))
        if state is None:
            raise ValueError(f"No current assignment for partition {tp.topic}-{tp.partition}")
        return state

    def move_partition_to_end(self, key: tuple[str, int]) -> None:
        """Fetch this partition last from now on (it just returned data)."""
        self.assignment[key] = self.assignment.pop(key)

    # --- positions ----------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read from ``offset``: an offset, OFFSET_BEGINNING, OFFSET_END, or
        OFFSET_STORED / OFFSET_INVALID (the committed offset, else the reset policy)."""
        state = self.state(tp)
        _apply_offset(state, offset)
        if state.reset_to is None and state.position is None:
            state.reset_to = self.reset_target()

    def reset_target(self) -> int | None:
        """EARLIEST or LATEST by ``auto.offset.reset``; None for ``none``."""
        if self.auto_offset_reset == "earliest":
            return EARLIEST
        if self.auto_offset_reset == "latest":
            return LATEST
        return None

    def all_consumed(self) -> dict[tuple[str, int], int]:
        """The position of every assigned partition that has one (what a commit stores)."""
        return {k: s.position for k, s in self.assignment.items() if s.position is not None}

    def pause(self, tp: TopicPartition) -> None:
        self.state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp).paused = False

    def paused(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for (t, p), s in self.assignment.items() if s.paused]


def _apply_offset(state: TopicPartitionState, offset: int) -> None:
    if offset >= 0:
        state.position = offset
        state.reset_to = None
    elif offset == OFFSET_BEGINNING:
        state.position, state.reset_to = None, EARLIEST
    elif offset == OFFSET_END:
        state.position, state.reset_to = None, LATEST
    elif offset in (OFFSET_STORED, OFFSET_INVALID):
        state.position, state.reset_to = None, None
    else:
        raise ValueError(f"Invalid offset {offset}")
