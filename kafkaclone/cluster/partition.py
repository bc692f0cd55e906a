"""Partition: one partition as this broker hosts it (Kafka's ``kafka.cluster.Partition``).

The controller's LeaderAndIsr makes the local replica the leader or a follower
(:meth:`Partition.make_leader`, :meth:`Partition.make_follower`); the partition records
what the controller said (leader, leader epoch, ISR, replicas, the state znode's zkVersion)
and owns the local log, created through the LogManager on first use.

Not here yet (issue 5, the data path): remote replica tracking, high watermark advance,
ISR shrink and expand. They hang off :attr:`Partition.isr` / :attr:`Partition.zk_version`
and the ``make_*`` transitions, which is where Kafka resets follower state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from kafkaclone.log.common import TopicPartition
from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager

logger = logging.getLogger(__name__)

NO_LEADER: Final = -1
NO_LEADER_EPOCH: Final = -1
"""A partition the controller has not described yet: any leader epoch (>= 0) is newer."""


@dataclass(frozen=True)
class PartitionState:
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

    def __init__(self, tp: TopicPartition, local_broker_id: int, log_manager: LogManager) -> None:
        self.topic_partition = tp
        self.local_broker_id = local_broker_id
        self._log_manager = log_manager
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

    def create_log_if_not_exists(self, is_new: bool, config: LogConfig | None = None) -> Log:
        """The local log, created with ``config`` if there is none yet. ``is_new`` says the
        controller created this replica just now (an existing replica's log is never
        created while a log directory is offline: its data may be there)."""
        if self.log is None:
            self.log = self._log_manager.get_or_create_log(
                self.topic_partition, config, is_new=is_new)
        return self.log

    def _update_assignment_and_isr(self, state: PartitionState) -> None:
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.isr = tuple(state.isr)
        self.controller_epoch = state.controller_epoch
        self.zk_version = state.zk_version

    def make_leader(self, state: PartitionState, config: LogConfig | None = None) -> bool:
        """Become the leader as ``state`` says; whether this replica was not the leader
        before. The new leader epoch starts at the log end offset, recorded in the log's
        leader-epoch cache (Kafka's ``maybeAssignEpochStartOffset``)."""
        self._update_assignment_and_isr(state)
        log = self.create_log_if_not_exists(state.is_new, config)
        start_offset = log.log_end_offset
        logger.info(
            "%s starts at leader epoch %d from offset %d with high watermark %d. Previous "
            "leader epoch was %d.", self.topic_partition, state.leader_epoch, start_offset,
            log.high_watermark, self.leader_epoch)
        latest = log.leader_epoch_cache.latest_entry
        if latest is None or latest.epoch != state.leader_epoch:
            log.leader_epoch_cache.assign(state.leader_epoch, start_offset)
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = start_offset
        was_leader = self.is_leader
        self.leader_id = self.local_broker_id
        return not was_leader

    def make_follower(self, state: PartitionState, config: LogConfig | None = None) -> bool:
        """Become a follower of ``state.leader``; whether the leader changed (the fetcher
        must then move to the new leader)."""
        self._update_assignment_and_isr(state)
        self.create_log_if_not_exists(state.is_new, config)
        new_leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        if self.leader_id == new_leader:
            return False
        self.leader_id = new_leader
        return True

    def delete(self) -> None:
        """Forget the local replica's state; the caller deletes the log."""
        self.leader_id = NO_LEADER
        self.isr = ()
        self.log = None


def partition_state_of(topic: str, state: Any) -> PartitionState:
    """A decoded LeaderAndIsrPartitionState struct as a PartitionState (fields a version
    does not carry have their defaults)."""
    return PartitionState(
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
