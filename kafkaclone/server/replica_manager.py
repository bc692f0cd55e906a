"""ReplicaManager: the partitions this broker hosts, as the controller orders them.

Kafka 2.8's ``ReplicaManager`` in ZooKeeper mode, the parts the controller drives:

- :meth:`ReplicaManager.become_leader_or_follower` (LeaderAndIsr): a request from an older
  controller epoch than the last one seen is refused as a whole (STALE_CONTROLLER_EPOCH);
  otherwise each partition whose leader epoch is newer than the one recorded becomes a
  leader or a follower, its log created with the topic's config (``/config/topics/<t>``
  over the broker defaults). A partition whose leader epoch is not newer answers
  STALE_CONTROLLER_EPOCH, one this broker is not a replica of UNKNOWN_TOPIC_OR_PARTITION,
  a storage failure KAFKA_STORAGE_ERROR.
- :meth:`ReplicaManager.stop_replicas` (StopReplica): stops replicas and, when asked,
  deletes their logs. An older controller epoch is refused as a whole; a partition whose
  leader epoch (StopReplica v3) is not newer answers FENCED_LEADER_EPOCH, except for the
  "no epoch" (-1, older versions) and "topic being deleted" (-2) sentinels.

Requests are handled one at a time (Kafka's replicaStateChangeLock), on the reactor.

The data path (produce, fetch, follower fetchers, high watermark, ISR shrink/expand) is
issue 5: it plugs in where :meth:`_make_leaders` / :meth:`_make_followers` start and stop
fetchers, and where the ``leadership_listeners`` are told (the group coordinator).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from twisted.internet.defer import DeferredLock

from kafkaclone.cluster.partition import Partition, PartitionState
from kafkaclone.log.common import TopicPartition
from kafkaclone.log.config import LogConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.errors import (
    NONE,
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    StaleControllerEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)

logger = logging.getLogger(__name__)

INITIAL_CONTROLLER_EPOCH: Final = 0
"""Kafka's KafkaController.InitialControllerEpoch."""
EPOCH_DURING_DELETE: Final = -2
"""StopReplica's leader epoch for a topic being deleted (LeaderAndIsr.EpochDuringDelete)."""
NO_EPOCH: Final = -1
"""StopReplica's leader epoch from versions that do not carry one (LeaderAndIsr.NoEpoch)."""


class TopicConfigSource(Protocol):
    """Where topic config overrides come from (KafkaZkClient reads /config/topics/<t>)."""

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]: ...


@dataclass(frozen=True)
class StopReplicaState:
    leader_epoch: int = NO_EPOCH
    delete_partition: bool = False


@dataclass
class ReplicaManagerResult:
    """A controller request's outcome: a request-wide error and one per partition."""

    error_code: int = NONE
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)


LeadershipListener = Callable[[Sequence[Partition], Sequence[Partition]], None]
"""Told (new leaders, new followers) after each LeaderAndIsr (the group coordinator)."""


class ReplicaManager:
    """The partitions hosted by one broker."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_configs: TopicConfigSource | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._topic_configs = topic_configs
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        """The highest controller epoch seen in a controller request."""
        self.all_partitions: dict[TopicPartition, Partition] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.leadership_listeners: list[LeadershipListener] = []
        self._state_change_lock = DeferredLock()

    # -- queries ---------------------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.all_partitions.get(tp)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.all_partitions.values() if p.is_leader]

    def follower_partitions(self) -> list[Partition]:
        return [p for p in self.all_partitions.values() if not p.is_leader]

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        """Nothing runs in the background yet (issue 5: ISR expiry, HW checkpoints)."""

    def shutdown(self) -> None:
        """Forget the hosted partitions; the LogManager closes their logs."""
        self.all_partitions.clear()

    # -- LeaderAndIsr ----------------------------------------------------------------------

    async def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Sequence[PartitionState],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> ReplicaManagerResult:
        await self._state_change_lock.acquire()
        try:
            return await self._become_leader_or_follower(
                controller_id, controller_epoch, partition_states, topic_ids or {})
        finally:
            self._state_change_lock.release()

    async def _become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Sequence[PartitionState],
        topic_ids: Mapping[str, uuid.UUID],
    ) -> ReplicaManagerResult:
        if controller_epoch < self.controller_epoch:
            logger.warning(
                "Ignoring LeaderAndIsr request from controller %d with controller epoch %d "
                "since it is older than the latest known controller epoch %d",
                controller_id, controller_epoch, self.controller_epoch)
            return ReplicaManagerResult(StaleControllerEpochError.code, {
                s.topic_partition: StaleControllerEpochError.code for s in partition_states})
        self.controller_epoch = controller_epoch

        errors: dict[TopicPartition, int] = {}
        accepted: list[tuple[Partition, PartitionState]] = []
        for state in partition_states:
            tp = state.topic_partition
            partition = self.all_partitions.get(tp)
            if partition is None:
                partition = Partition(tp, self.broker_id, self.log_manager)
            if state.leader_epoch > partition.leader_epoch:
                if self.broker_id in state.replicas:
                    self.all_partitions[tp] = partition
                    accepted.append((partition, state))
                else:
                    logger.warning(
                        "Ignoring LeaderAndIsr for %s from controller %d epoch %d: this "
                        "broker is not in its assigned replicas %s", tp, controller_id,
                        controller_epoch, list(state.replicas))
                    errors[tp] = UnknownTopicOrPartitionError.code
            else:
                # Kafka 2.8 answers a leader epoch that is not newer (older, or the same
                # one again) with STALE_CONTROLLER_EPOCH.
                logger.info(
                    "Ignoring LeaderAndIsr for %s from controller %d epoch %d: its leader "
                    "epoch %d is not newer than the current leader epoch %d", tp,
                    controller_id, controller_epoch, state.leader_epoch, partition.leader_epoch)
                errors[tp] = StaleControllerEpochError.code
        for topic, topic_id in topic_ids.items():
            if topic_id.int != 0:
                self.topic_ids[topic] = topic_id

        configs = await self._log_configs_for(
            {partition.topic for partition, _ in accepted if partition.log is None})
        leaders = [(p, s) for p, s in accepted if s.leader == self.broker_id]
        followers = [(p, s) for p, s in accepted if s.leader != self.broker_id]
        new_leaders = self._make_leaders(controller_id, controller_epoch, leaders, configs, errors)
        new_followers = self._make_followers(controller_id, controller_epoch, followers, configs,
                                             errors)
        for listener in list(self.leadership_listeners):
            try:
                listener(new_leaders, new_followers)
            except Exception:
                logger.exception("leadership listener %r failed", listener)
        return ReplicaManagerResult(NONE, errors)

    async def _log_configs_for(self, topics: set[str]) -> dict[str, LogConfig]:
        """Each topic's LogConfig: its /config/topics overrides over the broker defaults."""
        defaults = self.log_manager.default_config
        overrides: dict[str, dict[str, str]] = {}
        if topics and self._topic_configs is not None:
            overrides = await self._topic_configs.get_topic_configs(topics)
        configs: dict[str, LogConfig] = {}
        for topic in topics:
            try:
                configs[topic] = LogConfig.from_props(overrides.get(topic, {}), defaults=defaults,
                                                      ignore_unknown=True)
            except KafkaError as exc:
                logger.error("Invalid config overrides of topic %s, using the defaults: %s",
                             topic, exc)
                configs[topic] = defaults
        return configs

    def _make_leaders(
        self,
        controller_id: int,
        controller_epoch: int,
        states: Sequence[tuple[Partition, PartitionState]],
        configs: Mapping[str, LogConfig],
        errors: dict[TopicPartition, int],
    ) -> list[Partition]:
        """Kafka's makeLeaders: (issue 5: stop fetching these first) then make_leader."""
        made: list[Partition] = []
        for partition, state in states:
            tp = partition.topic_partition
            try:
                if partition.make_leader(state, configs.get(partition.topic)):
                    made.append(partition)
                else:
                    logger.info("Skipped the become-leader state change for %s with leader "
                                "epoch %d since it is already the leader", tp,
                                state.leader_epoch)
                errors[tp] = NONE
            except KafkaError as exc:
                errors[tp] = self._storage_or_unknown(exc, tp, "leader", controller_id,
                                                      controller_epoch)
        return made

    def _make_followers(
        self,
        controller_id: int,
        controller_epoch: int,
        states: Sequence[tuple[Partition, PartitionState]],
        configs: Mapping[str, LogConfig],
        errors: dict[TopicPartition, int],
    ) -> list[Partition]:
        """Kafka's makeFollowers: make_follower (issue 5: then truncate and start fetching
        from the new leader)."""
        made: list[Partition] = []
        for partition, state in states:
            tp = partition.topic_partition
            try:
                if partition.make_follower(state, configs.get(partition.topic)):
                    made.append(partition)
                errors[tp] = NONE
            except KafkaError as exc:
                errors[tp] = self._storage_or_unknown(exc, tp, "follower", controller_id,
                                                      controller_epoch)
        return made

    @staticmethod
    def _storage_or_unknown(exc: KafkaError, tp: TopicPartition, role: str,
                            controller_id: int, controller_epoch: int) -> int:
        logger.error("Error while making this broker the %s of %s for controller %d epoch "
                     "%d: %s", role, tp, controller_id, controller_epoch, exc)
        if isinstance(exc, KafkaStorageError):
            return KafkaStorageError.code
        return exc.code if exc.code != NONE else UnknownServerError.code

    # -- StopReplica -----------------------------------------------------------------------

    async def stop_replicas(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Mapping[TopicPartition, StopReplicaState],
    ) -> ReplicaManagerResult:
        await self._state_change_lock.acquire()
        try:
            return self._stop_replicas(controller_id, controller_epoch, partition_states)
        finally:
            self._state_change_lock.release()

    def _stop_replicas(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Mapping[TopicPartition, StopReplicaState],
    ) -> ReplicaManagerResult:
        if controller_epoch < self.controller_epoch:
            logger.warning(
                "Ignoring StopReplica request from controller %d with controller epoch %d "
                "since it is older than the latest known controller epoch %d",
                controller_id, controller_epoch, self.controller_epoch)
            return ReplicaManagerResult(StaleControllerEpochError.code, {})
        self.controller_epoch = controller_epoch

        errors: dict[TopicPartition, int] = {}
        for tp, state in partition_states.items():
            partition = self.all_partitions.get(tp)
            if (partition is not None and state.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
                    and state.leader_epoch <= partition.leader_epoch):
                logger.info(
                    "Ignoring StopReplica for %s from controller %d epoch %d: its leader "
                    "epoch %d is not newer than the current leader epoch %d", tp,
                    controller_id, controller_epoch, state.leader_epoch, partition.leader_epoch)
                errors[tp] = FencedLeaderEpochError.code
                continue
            # issue 5: remove the fetcher of tp here.
            try:
                if state.delete_partition:
                    # A replica not hosted any more still gets its log deleted: the topic
                    # may have been deleted while this broker was down.
                    self.all_partitions.pop(tp, None)
                    if partition is not None:
                        partition.delete()
                    self.log_manager.async_delete(tp)
                errors[tp] = NONE
            except KafkaError as exc:
                logger.error("Error while stopping replica %s: %s", tp, exc)
                errors[tp] = (KafkaStorageError.code if isinstance(exc, KafkaStorageError)
                              else exc.code)
        return ReplicaManagerResult(NONE, errors)

