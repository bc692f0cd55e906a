"""Partition: one partition as this broker hosts it (Kafka's ``kafka.cluster.Partition``).

The controller's LeaderAndIsr makes the local replica the leader or a follower
(:meth:`Partition.make_leader`, :meth:`Partition.make_follower`); the partition records
what the controller said (leader, leader epoch, ISR, replicas, the state znode's zkVersion)
and owns the local log, created through the LogManager on first use.

As the leader it is the data path's centre, as in Kafka 2.8:

- :meth:`Partition.append_records_to_leader`: refuses when this replica is not the leader
  (NOT_LEADER_OR_FOLLOWER) and, for acks=-1, when the ISR is smaller than
  ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS); appends with the leader epoch;
- :meth:`Partition.read_records`: a fetch up to the log end offset (followers) or the high
  watermark (consumers), after leader epoch fencing (FENCED_LEADER_EPOCH for an older
  ``current_leader_epoch``, UNKNOWN_LEADER_EPOCH for a newer one);
- remote replica state (:class:`Replica`): each follower's log end offset, log start
  offset and last caught-up time, updated by its fetches
  (:meth:`Partition.update_follower_fetch_state`);
- the high watermark: the minimum log end offset over the (maximal) ISR and the
  followers caught up within ``replica.lag.time.max.ms``; it only moves up;
- ISR expand when a follower reaches the high watermark (and the current leader epoch's
  start offset), ISR shrink (:meth:`Partition.maybe_shrink_isr`) when a follower has not
  caught up for ``replica.lag.time.max.ms``. Both are written through an
  :class:`IsrManager` (the ZooKeeper state znode, conditional on its zkVersion) while the
  "maximal" ISR (old and new together) counts for the high watermark; the ISR changes
  only once the write succeeded.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

from twisted.internet.defer import Deferred

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    ReplicaNotAvailableError,
    UnknownLeaderEpochError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager

logger = logging.getLogger(__name__)

NO_LEADER: Final = -1
NO_LEADER_EPOCH: Final = -1
"""A partition the controller has not described yet: any leader epoch (>= 0) is newer."""
UNKNOWN_OFFSET: Final = -1
READ_COMMITTED: Final = 1
"""ListOffsets' and Fetch's isolation_level for read_committed."""


class FetchIsolation(enum.Enum):
    """How far a fetch may read (Kafka's FetchIsolation)."""

    LOG_END = "log_end"
    """Followers: up to the log end offset."""
    HIGH_WATERMARK = "high_watermark"
    """Consumers, read_uncommitted."""
    TXN_COMMITTED = "txn_committed"
    """Consumers, read_committed: up to the last stable offset (the high watermark until
    transactions exist)."""


class LogReadInfo(NamedTuple):
    """What :meth:`Partition.read_records` returns (Kafka's LogReadInfo)."""

    fetched_data: FetchDataInfo
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    diverging_epoch: tuple[int, int] | None = None
    """KIP-320: (epoch, end offset) where a follower's log diverges from the leader's."""


class IsrManager(Protocol):
    """Where a leader writes its ISR changes (the ZooKeeper partition state znode)."""

    def submit(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
               zk_version: int, controller_epoch: int) -> Deferred[int | None]:
        """Write the new ISR if the state znode is still at ``zk_version``; fires with the
        new zkVersion, or None if the write was refused (another writer came first)."""
        ...


class IsrChangeListener(Protocol):
    """Told of each ISR change this leader made (Kafka's IsrChangeListener: the
    ReplicaManager's IsrShrinksPerSec / IsrExpandsPerSec)."""

    def mark_isr_shrink(self) -> None: ...

    def mark_isr_expand(self) -> None: ...


@dataclass
class Replica:
    """A remote replica as the leader sees it (Kafka's ``kafka.cluster.Replica``)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(self, fetch_offset: int, start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int) -> None:
        """A fetch from ``fetch_offset``: the follower has everything below it. It is
        caught up at this fetch's time if it reached the leader's end offset, or at the
        previous fetch's time if it reached what the leader's end offset was then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms,
                                              self.last_fetch_time_ms)
        self.log_start_offset = start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def reset_last_caught_up_time(self, leader_end_offset: int, now: int,
                                  last_caught_up_time_ms: int) -> None:
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now
        self.last_caught_up_time_ms = last_caught_up_time_ms

    def is_caught_up(self, leader_end_offset: int, now: int, max_lag_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or (
            now - self.last_caught_up_time_ms <= max_lag_ms)


@dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    """One partition of a LeaderAndIsr request (Kafka's LeaderAndIsrPartitionState)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class Partition:
    """A partition hosted by this broker, as leader or follower."""

    def __init__(
        self,
        tp: TopicPartition,
        local_broker_id: int,
        log_manager: LogManager,
        *,
        replica_lag_time_max_ms: int,
        clock: Scheduler,
        isr_manager: IsrManager | None = None,
        on_high_watermark_change: Callable[[TopicPartition], None] | None = None,
        is_broker_alive: Callable[[int], bool] | None = None,
        isr_change_listener: IsrChangeListener | None = None,
    ) -> None:
        self.topic_partition = tp
        self._isr_change_listener = isr_change_listener
        self.local_broker_id = local_broker_id
        self._log_manager = log_manager
        self._clock = clock
        self._isr_manager = isr_manager
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._on_high_watermark_change = on_high_watermark_change
        self._is_broker_alive = is_broker_alive
        self.leader_id: int = NO_LEADER
        self.leader_epoch: int = NO_LEADER_EPOCH
        self.leader_epoch_start_offset: int | None = None
        self.controller_epoch: int = -1
        self.zk_version: int = -1
        """The state znode's zkVersion (the partition epoch), for conditional ISR updates."""
        self.replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        """The ISR being written to ZooKeeper, until the write is answered."""
        self.remote_replicas: dict[int, Replica] = {}
        self.log: Log | None = log_manager.get_log(tp)

    def __repr__(self) -> str:
        return (f"Partition({self.topic_partition}, leader={self.leader_id}, "
                f"leader_epoch={self.leader_epoch}, isr={list(self.isr)}, "
                f"replicas={list(self.replicas)}, zk_version={self.zk_version})")

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition_id(self) -> int:
        return self.topic_partition.partition

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus the replicas a pending change adds or still has (Kafka's maximalIsr:
        while an ISR write is in flight, both the old and the new members count)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log is not None else UNKNOWN_OFFSET

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log is not None else UNKNOWN_OFFSET

    def _now_ms(self) -> int:
        return now_ms(self._clock)

    def create_log_if_not_exists(self, is_new: bool, config: LogConfig | None = None) -> Log:
        """The local log, created with ``config`` if there is none yet. ``is_new`` says the
        controller created this replica just now (an existing replica's log is never
        created while a log directory is offline: its data may be there)."""
        if self.log is None:
            self.log = self._log_manager.get_or_create_log(
                self.topic_partition, config, is_new=is_new)
        return self.log

    def _update_assignment_and_isr(self, state: LeaderAndIsrPartitionState) -> None:
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None
        self.controller_epoch = state.controller_epoch
        self.zk_version = state.zk_version

    # -- leadership ------------------------------------------------------------------------

    def make_leader(self, state: LeaderAndIsrPartitionState,
                    config: LogConfig | None = None, *, flush_epoch: bool = True) -> bool:
        """Become the leader as ``state`` says; whether this replica was not the leader
        before. The new leader epoch starts at the log end offset, recorded in the log's
        leader-epoch cache (Kafka's ``maybeAssignEpochStartOffset``). The followers' fetch
        state is reset: those in the ISR count as caught up now, the others never were.
        ``flush_epoch=False``: the caller writes the leader-epoch checkpoint before this
        leader serves anything (``LogManager.flush_leader_epochs``)."""
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self._update_assignment_and_isr(state)
        log = self.create_log_if_not_exists(state.is_new, config)
        start_offset = log.log_end_offset
        # Per partition at DEBUG: the ReplicaManager sums up each LeaderAndIsr at INFO.
        logger.debug(
            "%s starts at leader epoch %d from offset %d with high watermark %d. Previous "
            "leader epoch was %d.", self.topic_partition, state.leader_epoch, start_offset,
            log.high_watermark, self.leader_epoch)
        log.assign_epoch_start_offset(state.leader_epoch, start_offset, flush=flush_epoch)
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = start_offset
        was_leader = self.is_leader
        self.leader_id = self.local_broker_id
        remote_ids = [r for r in self.replicas if r != self.local_broker_id]
        self.remote_replicas = {r: self.remote_replicas.get(r) or Replica(r) for r in remote_ids}
        if is_new_epoch:
            now = self._now_ms()
            for replica in self.remote_replicas.values():
                caught_up = now if replica.broker_id in self.isr else 0
                replica.reset_last_caught_up_time(start_offset, now, caught_up)
        # The ISR may be down to the leader alone: the high watermark may move.
        self._maybe_increment_leader_hw(log)
        return not was_leader

    def make_follower(self, state: LeaderAndIsrPartitionState,
                      config: LogConfig | None = None) -> bool:
        """Become a follower of ``state.leader``; whether the leader or the leader epoch
        changed (Kafka 2.8: the fetcher then restarts the partition, truncation included,
        against the new leader or at the new epoch)."""
        self._update_assignment_and_isr(state)
        log = self.create_log_if_not_exists(state.is_new, config)
        self.remote_replicas = {}
        new_leader = state.leader
        old_leader_epoch = self.leader_epoch
        # Per partition at DEBUG: the ReplicaManager sums up each LeaderAndIsr at INFO.
        logger.debug(
            "Follower %s starts at leader epoch %d from offset %d with high watermark %d. "
            "Previous leader epoch was %d.", self.topic_partition, state.leader_epoch,
            log.log_end_offset, log.high_watermark, old_leader_epoch)
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        if self.leader_id == new_leader and self.leader_epoch == old_leader_epoch:
            return False
        self.leader_id = new_leader
        return True

    def delete(self) -> None:
        """Forget the local replica's state; the caller deletes the log."""
        self.leader_id = NO_LEADER
        self.isr = ()
        self.pending_isr = None
        self.remote_replicas = {}
        self.log = None

    def _leader_log(self) -> Log:
        """The log, if this replica is the leader; NOT_LEADER_OR_FOLLOWER otherwise."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic_partition} on broker "
                f"{self.local_broker_id}")
        if self.log is None:
            raise ReplicaNotAvailableError(
                f"Log for partition {self.topic_partition} is not available on broker "
                f"{self.local_broker_id}")
        return self.log

    def _local_log(self, current_leader_epoch: int, require_leader: bool) -> Log:
        """The log after leader epoch fencing (Kafka's localLogWithEpochOrException)."""
        self.check_current_leader_epoch(current_leader_epoch)
        if require_leader:
            return self._leader_log()
        if self.log is None:
            raise NotLeaderOrFollowerError(
                f"Replica of partition {self.topic_partition} is not available on broker "
                f"{self.local_broker_id}")
        return self.log

    def is_current_leader_epoch(self, current_leader_epoch: int) -> bool:
        """Whether a request's view of the leader epoch (-1: no view) is this one's: what
        :meth:`check_current_leader_epoch` checks, without an exception (asked per
        partition of every fetch)."""
        return (current_leader_epoch == NO_LEADER_EPOCH
                or current_leader_epoch == self.leader_epoch)

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """A request's view of the leader epoch (-1: no view): older is fenced, newer is
        unknown to this broker yet."""
        if self.is_current_leader_epoch(current_leader_epoch):
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} of partition "
                f"{self.topic_partition} is older than the current leader epoch "
                f"{self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"The leader epoch in the request {current_leader_epoch} of partition "
                f"{self.topic_partition} is newer than the current leader epoch "
                f"{self.leader_epoch}")

    # -- produce ---------------------------------------------------------------------------

    def append_records_to_leader(
        self,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        required_acks: int = 1,
    ) -> tuple[LogAppendInfo, bool]:
        """Append as the leader; (append info, whether the high watermark moved).
        NOT_LEADER_OR_FOLLOWER when not the leader, NOT_ENOUGH_REPLICAS for acks=-1 with
        an ISR smaller than min.insync.replicas; the log's validation errors otherwise."""
        log = self._leader_log()
        min_isr = log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic_partition}")
        info = log.append(records, self.leader_epoch, origin=origin)
        return info, self._maybe_increment_leader_hw(log)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, int]:
        """DelayedProduce's test (Kafka's checkEnoughReplicasReachOffset): (done, error
        code). Done once the high watermark reached ``required_offset``, with
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas."""
        if not self.is_leader or self.log is None:
            return False, NotLeaderOrFollowerError.code
        log = self.log
        if log.high_watermark >= required_offset:
            if log.config.min_insync_replicas <= len(self.isr):
                return True, 0
            return True, NotEnoughReplicasAfterAppendError.code
        return False, 0

    # -- fetch -----------------------------------------------------------------------------

    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        fetch_isolation: FetchIsolation,
        fetch_only_from_leader: bool,
        min_one_message: bool,
        last_fetched_epoch: int = NO_LEADER_EPOCH,
        *,
        file_region: bool = False,
    ) -> LogReadInfo:
        """Whole batches from ``fetch_offset``: up to the log end offset for followers,
        the high watermark for consumers, the last stable offset for read_committed ones
        (with the aborted transactions the records overlap). OFFSET_OUT_OF_RANGE outside the log. A
        follower's ``last_fetched_epoch`` (Fetch v12) that the leader's log does not have
        up to ``fetch_offset`` is answered with the diverging epoch and no records. With
        ``file_region`` the records are a range of a segment file (Log.read)."""
        log = self._local_log(current_leader_epoch, fetch_only_from_leader)
        high_watermark = log.high_watermark
        log_end_offset = log.log_end_offset
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                empty = FetchDataInfo(LogOffsetMetadata(fetch_offset), memoryview(b""))
                return LogReadInfo(empty, high_watermark, log.log_start_offset,
                                   log_end_offset, high_watermark, (epoch, end_offset))
        last_stable_offset = log.last_stable_offset
        if fetch_isolation is FetchIsolation.LOG_END:
            upper_bound = log_end_offset
        elif fetch_isolation is FetchIsolation.TXN_COMMITTED:
            upper_bound = last_stable_offset
        else:
            upper_bound = high_watermark
        data = log.read(fetch_offset, max_bytes, upper_bound, min_one_message=min_one_message,
                        file_region=file_region)
        if fetch_isolation is FetchIsolation.TXN_COMMITTED:
            data = log.with_aborted_transactions(data)
        return LogReadInfo(data, high_watermark, log.log_start_offset, log_end_offset,
                           last_stable_offset)

    def update_follower_fetch_state(self, follower_id: int, fetch_offset: int,
                                    follower_start_offset: int, fetch_time_ms: int,
                                    leader_end_offset: int) -> bool:
        """Record a follower's fetch (it has everything below ``fetch_offset``); expand the
        ISR or move the high watermark if that follows. False if ``follower_id`` is not a
        replica of this partition (or this broker not its leader)."""
        replica = self.remote_replicas.get(follower_id)
        if replica is None or not self.is_leader or self.log is None:
            return False
        previous_end = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, follower_start_offset, fetch_time_ms,
                                   leader_end_offset)
        if follower_id not in self.isr:  # per partition of every fetch: most are in it
            self._maybe_expand_isr(replica)
        if previous_end != replica.log_end_offset:
            if self._maybe_increment_leader_hw(self.log, fetch_time_ms):
                self._high_watermark_changed()
        return True

    def _high_watermark_changed(self) -> None:
        if self._on_high_watermark_change is not None:
            self._on_high_watermark_change(self.topic_partition)

    def _maybe_increment_leader_hw(self, log: Log, now: int | None = None) -> bool:
        """Move the high watermark up to the smallest log end offset among the maximal ISR
        and the followers caught up within replica.lag.time.max.ms; whether it moved."""
        new_hw = log.log_end_offset
        if self.remote_replicas:
            current = self._now_ms() if now is None else now
            maximal = self.maximal_isr
            max_lag = self.replica_lag_time_max_ms
            for replica in self.remote_replicas.values():
                end = replica.log_end_offset
                if end < new_hw and (current - replica.last_caught_up_time_ms <= max_lag
                                     or replica.broker_id in maximal):
                    new_hw = end
        old_hw = log.high_watermark
        if new_hw > old_hw:
            log.update_high_watermark(new_hw)
            logger.debug("High watermark of %s updated from %d to %d", self.topic_partition,
                         old_hw, new_hw)
            return True
        return False

    def low_watermark_if_leader(self) -> int:
        """The smallest log start offset over the leader and the live followers (what
        DeleteRecords waits for)."""
        log = self._leader_log()
        offsets = [log.log_start_offset]
        for replica in self.remote_replicas.values():
            alive = self._is_broker_alive is None or self._is_broker_alive(replica.broker_id)
            if alive:
                offsets.append(replica.log_start_offset)
        return min(offsets)

    # -- ISR -------------------------------------------------------------------------------

    def _maybe_expand_isr(self, replica: Replica) -> None:
        """Add a follower that caught up (reached the high watermark and the current leader
        epoch's start offset) to the ISR."""
        log = self.log
        if (log is None or self.pending_isr is not None or replica.broker_id in self.isr
                or replica.broker_id not in self.replicas):
            return
        start = self.leader_epoch_start_offset
        end = replica.log_end_offset
        if start is None or end < start or end < log.high_watermark:
            return
        new_isr = (*self.isr, replica.broker_id)
        logger.info("Expanding ISR of %s from %s to %s", self.topic_partition,
                    ",".join(map(str, self.isr)), ",".join(map(str, new_isr)))
        self._alter_isr(new_isr)

    def out_of_sync_replicas(self, max_lag_ms: int, now: int | None = None) -> list[int]:
        """Followers in the ISR that have not caught up for more than ``max_lag_ms``."""
        log = self.log
        if log is None:
            return []
        current = self._now_ms() if now is None else now
        leader_end = log.log_end_offset
        out: list[int] = []
        for broker_id in self.isr:
            if broker_id == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(broker_id)
            if replica is None:
                out.append(broker_id)
            elif (replica.log_end_offset != leader_end
                  and current - replica.last_caught_up_time_ms > max_lag_ms):
                out.append(broker_id)
        return out

    def maybe_shrink_isr(self) -> bool:
        """Drop the followers that have not caught up for replica.lag.time.max.ms from the
        ISR (the leader itself stays); whether a change was submitted."""
        if not self.is_leader or self.pending_isr is not None or self.log is None:
            return False
        out = self.out_of_sync_replicas(self.replica_lag_time_max_ms)
        if not out:
            return False
        new_isr = tuple(r for r in self.isr if r not in out)
        log = self.log
        logger.info(
            "Shrinking ISR of %s from %s to %s. Leader: (highWatermark: %d, endOffset: %d). "
            "Out of sync replicas: %s.", self.topic_partition, ",".join(map(str, self.isr)),
            ",".join(map(str, new_isr)), log.high_watermark, log.log_end_offset,
            ", ".join(
                f"(brokerId: {r}, endOffset: "
                f"{self.remote_replicas[r].log_end_offset if r in self.remote_replicas else -1})"
                for r in out))
        self._alter_isr(new_isr)
        return True

    def _alter_isr(self, new_isr: tuple[int, ...]) -> None:
        if self._isr_manager is None:
            # No ZooKeeper (unit tests of the data path): the change takes effect at once.
            self._apply_isr(new_isr, self.zk_version + 1)
            return
        self.pending_isr = new_isr
        leader_epoch = self.leader_epoch
        d = self._isr_manager.submit(self.topic_partition, self.local_broker_id, leader_epoch,
                                     new_isr, self.zk_version, self.controller_epoch)

        def answered(new_version: int | None) -> None:
            if self.leader_epoch != leader_epoch or self.pending_isr != new_isr:
                return  # a LeaderAndIsr came in the meantime: its state wins
            self.pending_isr = None
            if new_version is None:
                logger.info("Failed to update the ISR of %s to %s: the cached zkVersion %d is "
                            "not the state znode's; skipping it", self.topic_partition,
                            ",".join(map(str, new_isr)), self.zk_version)
                return
            self._apply_isr(new_isr, new_version)

        def failed(failure: Any) -> None:
            if self.pending_isr == new_isr and self.leader_epoch == leader_epoch:
                self.pending_isr = None
            logger.warning("Failed to update the ISR of %s to %s: %s", self.topic_partition,
                           ",".join(map(str, new_isr)), failure.getErrorMessage())

        d.addCallbacks(answered, failed)

    def _apply_isr(self, new_isr: tuple[int, ...], zk_version: int) -> None:
        listener = self._isr_change_listener
        if listener is not None and len(new_isr) > len(self.isr):
            listener.mark_isr_expand()
        elif listener is not None and len(new_isr) < len(self.isr):
            listener.mark_isr_shrink()
        self.isr = new_isr
        self.zk_version = zk_version
        logger.info("ISR updated for %s to %s and zkVersion updated to %d",
                    self.topic_partition, ",".join(map(str, new_isr)), zk_version)
        if self.log is not None and self.is_leader:
            # A shrink may let the high watermark move; an expand may satisfy min.isr.
            self._maybe_increment_leader_hw(self.log)
        self._high_watermark_changed()

    # -- offsets ---------------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation_level: int | None, current_leader_epoch: int,
        fetch_only_from_leader: bool,
    ) -> TimestampAndOffset | None:
        """ListOffsets (Kafka's fetchOffsetForTimestamp): -2 the log start offset, -1 the
        last offset a client may read (the high watermark for consumers, whose
        ``isolation_level`` is set; the log end offset for replicas), otherwise the first
        record at or after ``timestamp`` below that; None if there is none.
        OFFSET_NOT_AVAILABLE while a new leader's high watermark has not reached the
        start of its epoch."""
        log = self._local_log(current_leader_epoch, fetch_only_from_leader)
        if isolation_level is None:
            last_fetchable = log.log_end_offset
        elif isolation_level == READ_COMMITTED:
            last_fetchable = log.last_stable_offset
        else:
            last_fetchable = log.high_watermark
        not_available: OffsetNotAvailableError | None = None
        start = self.leader_epoch_start_offset
        if isolation_level is not None and start is not None and start > log.high_watermark:
            not_available = OffsetNotAvailableError(
                f"Failed to fetch offsets for partition {self.topic_partition} with leader "
                f"epoch {self.leader_epoch} as this partition's high watermark "
                f"({log.high_watermark}) is lagging behind the start offset from the "
                f"beginning of this epoch ({start}).")
        if timestamp == LATEST_TIMESTAMP:
            if not_available is not None:
                raise not_available
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return log.fetch_offset_by_timestamp(timestamp)
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is not None and found.offset < last_fetchable:
            return found
        if not_available is not None:
            raise not_available
        return None

    def legacy_fetch_offsets_before(self, timestamp: int, max_num_offsets: int,
                                    is_from_consumer: bool,
                                    fetch_only_from_leader: bool) -> list[int]:
        """ListOffsets v0 (Kafka's legacyFetchOffsetsBefore): the base offsets of the
        segments last modified at or before ``timestamp`` (and the log end offset for a
        non-empty active segment), newest first, at most ``max_num_offsets``; -1 starts
        from the latest, -2 is the earliest. A consumer sees nothing above the high
        watermark."""
        log = self._local_log(NO_LEADER_EPOCH, fetch_only_from_leader)
        segments = log.log_segments
        offsets: list[tuple[int, int]] = [
            (max(segment.base_offset, log.log_start_offset), segment.last_modified_ms())
            for segment in segments]
        if segments[-1].size > 0:
            offsets.append((log.log_end_offset, self._now_ms()))
        if timestamp == LATEST_TIMESTAMP:
            start = len(offsets) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(offsets) - 1
            while start >= 0 and offsets[start][1] > timestamp:
                start -= 1
        count = min(max_num_offsets, start + 1)
        result = sorted((offsets[start - j][0] for j in range(count)), reverse=True)
        if is_from_consumer:
            hw = log.high_watermark
            if any(o > hw for o in result):
                result = [hw, *(o for o in result if o <= hw)]
        return result

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of the largest epoch <= the asked one."""
        log = self._local_log(current_leader_epoch, fetch_only_from_leader)
        epoch, end_offset = log.end_offset_for_epoch(leader_epoch)
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        return epoch, end_offset

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords on the leader: move the log start offset to ``offset`` (-1: the
        high watermark); the offset asked for. OFFSET_OUT_OF_RANGE past the high
        watermark, POLICY_VIOLATION on a compacted topic."""
        log = self._leader_log()
        if log.config.compact:
            raise PolicyViolationError(
                f"Records of partition {self.topic_partition} can not be deleted due to the "
                f"configured policy")
        target = log.high_watermark if offset == -1 else offset
        if target < 0:
            raise OffsetOutOfRangeError(
                f"The offset {offset} for partition {self.topic_partition} is not valid")
        log.delete_records_before(target)
        return target

    # -- follower side (used by the replica fetcher) ---------------------------------------

    def _follower_log(self) -> Log:
        if self.log is None:
            raise NotLeaderOrFollowerError(
                f"Replica of partition {self.topic_partition} is not available on broker "
                f"{self.local_broker_id}")
        return self.log

    @property
    def log_start_offset(self) -> int:
        return self._follower_log().log_start_offset

    @property
    def latest_epoch(self) -> int | None:
        """The latest leader epoch the local log has records of (None: none)."""
        return None if self.log is None else self.log.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """The local log's (epoch, end offset) for the largest epoch <= ``leader_epoch``
        (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET if it has none)."""
        return self._follower_log().end_offset_for_epoch(leader_epoch)

    def append_records_to_follower(self, records: bytes | bytearray | memoryview
                                   ) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets."""
        return self._follower_log().append_as_follower(records)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> int:
        """A follower takes the leader's high watermark, capped by its own end offset."""
        if self.log is None:
            return UNKNOWN_OFFSET
        return self.log.update_high_watermark(min(leader_high_watermark,
                                                  self.log.log_end_offset))

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower moves its log start offset up to the leader's (records the leader
        deleted), never past its own high watermark."""
        log = self._follower_log()
        target = min(leader_log_start_offset, log.high_watermark)
        if target > log.log_start_offset:
            log.delete_records_before(target)

    def truncate_to(self, offset: int) -> None:
        """Remove the local log's records from ``offset`` on (a follower's log diverged
        from its leader's)."""
        self._follower_log().truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the local log and restart it at ``offset`` (it fell below the leader's log
        start offset)."""
        self._follower_log().truncate_fully_and_start_at(offset)


def partition_state_of(topic: str, state: Any) -> LeaderAndIsrPartitionState:
    """A decoded LeaderAndIsr request partition state as a LeaderAndIsrPartitionState
    (fields a version does not carry have their defaults)."""
    return LeaderAndIsrPartitionState(
        topic=topic,
        partition=state.partition_index,
        controller_epoch=state.controller_epoch,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=tuple(state.isr),
        zk_version=state.zk_version,
        replicas=tuple(state.replicas),
        adding_replicas=tuple(state.adding_replicas or ()),
        removing_replicas=tuple(state.removing_replicas or ()),
        is_new=bool(state.is_new),
    )
