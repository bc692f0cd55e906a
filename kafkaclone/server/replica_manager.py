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

Requests are handled one at a time (Kafka's replicaStateChangeLock), on the reactor. A
LeaderAndIsr is applied ``STATE_CHANGE_SLICE`` partitions at a time (their logs created), the
reactor serving the data path (and a SIGTERM) between slices once ``STATE_CHANGE_TURN_S``
has gone on them, and while a slice's new logs and new leaders' epoch checkpoints are written
on the I/O threads: thousands of new partitions never stall it.

The data path, leader side (Kafka's appendRecords / fetchMessages and their purgatories):

- :meth:`ReplicaManager.append_records` appends each partition's batches on its leader
  (:meth:`Partition.append_records_to_leader`); with acks=-1 the answer waits in a
  :class:`DelayedProduce` until the high watermark passes the batches or ``timeout_ms``;
- :meth:`ReplicaManager.fetch_messages` reads (KIP-74 byte limits), records a follower's
  fetch position on the leader (ISR expand, high watermark), and waits in a
  :class:`DelayedFetch` for ``min_bytes`` up to ``max_wait_ms``;
- :meth:`ReplicaManager.find_preferred_read_replica` (KIP-392): with a
  ``replica.selector.class``, a leader asked by a consumer that sent its rack (Fetch v11+)
  may answer, instead of records, a follower to read from (``preferred_read_replica``);
- every append and high watermark move retries the delayed operations of its partition;
- a periodic ``isr-expiration`` task (every replica.lag.time.max.ms / 2) shrinks the ISR
  of lagging followers, written through :class:`ZkIsrManager` (a conditional update of the
  state znode) and announced under ``/isr_change_notification`` by the periodic
  ``isr-change-propagation`` task, batched as Kafka 2.8 does;
- high watermarks are checkpointed to ``replication-offset-checkpoint`` by the
  LogManager's periodic task and at shutdown.

Log directory failure (Kafka's handleLogDirFailure): the LogManager's LogDirFailureChannel
hands a directory that had an I/O error to :meth:`ReplicaManager.handle_log_dir_failure`,
which stops the replicas whose logs are there (fetchers removed, waiting requests answered)
and marks them offline: from then on they answer KAFKA_STORAGE_ERROR to produce, fetch,
LeaderAndIsr and StopReplica. The LogManager closes the directory, the controller is told
through ``/log_dir_event_notification``, and a broker with no live directory left halts
("Shutdown broker because all log dirs in ... have failed").

The follower side (kafkaclone.server.replica_fetcher, Kafka's makeFollowers): a partition
this broker now follows leaves its old fetcher and joins a fetcher of its new leader (found
in the metadata cache on the inter-broker listener) at its log end offset (truncation on
fetch) or high watermark; a partition this broker now leads, or stops hosting, leaves its
fetcher; fetchers left idle stop. The ``leadership_listeners`` (the group coordinator) are
told after each LeaderAndIsr.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from twisted.internet.defer import Deferred, DeferredLock

from kafkaclone.cluster.partition import (
    FetchIsolation,
    IsrChangeListener,
    LeaderAndIsrPartitionState,
    Partition,
)
from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import (
    NONE,
    FencedLeaderEpochError,
    InvalidRequiredAcksError,
    InvalidTopicExceptionError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    ReplicaNotAvailableError,
    StaleControllerEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.log_summary import examples, summarized
from kafkaclone.common.topic import is_internal
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import (
    UNDEFINED_EPOCH,
    AbortedTransaction,
    AppendOrigin,
    TimestampAndOffset,
    log_future_dir_name,
    records_bytes,
)
from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.network.pacing import PACING_STRETCH_S, Pacer
from kafkaclone.server import heap
from kafkaclone.server.config import default_int
from kafkaclone.server.delayed.delete_records import (
    DelayedDeleteRecords,
    DeleteRecordsPartitionStatus,
)
from kafkaclone.server.delayed.fetch import (
    UNKNOWN_OFFSET_METADATA,
    DelayedFetch,
    FetchParams,
    LogReadResult,
    PartitionFetchInfo,
)
from kafkaclone.server.delayed.produce import (
    DelayedProduce,
    ProducePartitionResult,
    ProducePartitionStatus,
)
from kafkaclone.server.delayed.purgatory import DelayedOperationPurgatory
from kafkaclone.server.fetch_session import FetchSessionCache
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.replica_fetcher import (
    BrokerEndPoint,
    ConnectionFactory,
    InitialFetchState,
    ReplicaFetcherConfig,
    ReplicaFetcherManager,
    initial_fetch_offset,
)
from kafkaclone.server.replica_selector import (
    ClientMetadata,
    PartitionView,
    ReplicaView,
    create_replica_selector,
)
from kafkaclone.server.replication_quota import ALL_REPLICAS, ReplicationQuotaManager

logger = logging.getLogger(__name__)

INITIAL_CONTROLLER_EPOCH: Final = 0
"""Kafka's KafkaController.InitialControllerEpoch."""
EPOCH_DURING_DELETE: Final = -2
"""StopReplica's leader epoch for a topic being deleted (LeaderAndIsr.EpochDuringDelete)."""
NO_EPOCH: Final = -1
"""StopReplica's leader epoch from versions that do not carry one (LeaderAndIsr.NoEpoch)."""
_NO_RECORDS: Final = memoryview(b"")


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

LOG_DIR_MOVE_BYTES: Final = 1024 * 1024
"""Bytes copied per move per step (Kafka's alter-log-dirs fetch size, replica.fetch.max.bytes)."""
LOG_DIR_MOVE_INTERVAL_S: Final = 0.01
"""Pause between steps: the reactor serves the data path between them."""
ISR_CHANGE_PROPAGATION_INTERVAL_MS: Final = 2_500
STATE_CHANGE_SLICE: Final = 50
"""Partitions made leader or follower at a time while applying a LeaderAndIsr (a new one
costs a few ms: its log's files, created on the I/O threads, a reactor turn)."""
STATE_CHANGE_TURN_S: Final = PACING_STRETCH_S
"""The reactor takes a turn between slices once this long has gone on them (a ``Pacer``): a
partition with its log costs ~25 µs, so a turn per slice of 50 made a failover's 3,000
partitions wait for 60 turns of a busy reactor (seconds)."""
ISR_CHANGE_PROPAGATION_BLACKOUT_MS: Final = 5_000
ISR_CHANGE_MAX_DELAY_MS: Final = 60_000
"""Kafka 2.8's ReplicaManager.IsrChangePropagation*: a batch of ISR changes is announced
once no change came for 5 s, or at the latest 60 s after the last announcement."""


@dataclass(frozen=True)
class ReplicaManagerConfig:
    """The broker settings the data path uses (Kafka's names; the defaults are the broker
    config table's)."""

    replica_lag_time_max_ms: int = default_int("replica.lag.time.max.ms")
    fetch_max_bytes: int = default_int("fetch.max.bytes")
    replica_fetch_response_max_bytes: int = default_int("replica.fetch.response.max.bytes")
    producer_purgatory_purge_interval_requests: int = (
        default_int("producer.purgatory.purge.interval.requests"))
    fetch_purgatory_purge_interval_requests: int = (
        default_int("fetch.purgatory.purge.interval.requests"))
    max_incremental_fetch_session_cache_slots: int = (
        default_int("max.incremental.fetch.session.cache.slots"))
    replica_selector_class: str | None = None

    @classmethod
    def from_kafka_config(cls, config: Any) -> ReplicaManagerConfig:
        return cls(
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetch_max_bytes=config.fetch_max_bytes,
            replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            producer_purgatory_purge_interval_requests=(
                config.producer_purgatory_purge_interval_requests),
            fetch_purgatory_purge_interval_requests=(
                config.fetch_purgatory_purge_interval_requests),
            max_incremental_fetch_session_cache_slots=(
                config.max_incremental_fetch_session_cache_slots),
            replica_selector_class=config.replica_selector_class,
        )


class IsrZkClient(Protocol):
    """The KafkaZkClient calls the leader's ISR changes need."""

    async def conditional_update_partition_state(
        self, tp: TopicPartition, leader_and_isr: Any, controller_epoch: int
    ) -> tuple[bool, int]: ...

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str: ...


class LogDirEventZkClient(Protocol):
    """The KafkaZkClient call that tells the controller of a failed log directory."""

    async def propagate_log_dir_event(self, broker_id: int) -> str: ...


class ZkIsrManager:
    """Writes a leader's ISR changes to the partition state znode (conditional on its
    zkVersion) and collects the changed partitions for ``/isr_change_notification``
    (Kafka 2.8's ZkIsrManager)."""

    def __init__(self, zk_client: IsrZkClient, clock: Scheduler) -> None:
        self._zk = zk_client
        self._clock = clock
        self.pending_changes: set[TopicPartition] = set()
        self.last_change_ms = 0
        self.last_propagation_ms = now_ms(clock)

    def submit(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: tuple[int, ...],
               zk_version: int, controller_epoch: int) -> Deferred[int | None]:
        from kafkaclone.zk.znodes import LeaderAndIsr

        async def write() -> int | None:
            ok, new_version = await self._zk.conditional_update_partition_state(
                tp, LeaderAndIsr(leader, leader_epoch, isr, zk_version), controller_epoch)
            if not ok:
                return None
            self.pending_changes.add(tp)
            self.last_change_ms = now_ms(self._clock)
            return new_version

        return Deferred.fromCoroutine(write())

    def maybe_propagate(self) -> Deferred[None] | None:
        """Announce the collected changes if none came for 5 s or the last announcement is
        60 s old (Kafka's maybePropagateIsrChanges)."""
        now = now_ms(self._clock)
        if not self.pending_changes:
            return None
        if (self.last_change_ms + ISR_CHANGE_PROPAGATION_BLACKOUT_MS >= now
                and self.last_propagation_ms + ISR_CHANGE_MAX_DELAY_MS >= now):
            return None
        changes = sorted(self.pending_changes)
        self.pending_changes.clear()
        self.last_propagation_ms = now

        async def announce() -> None:
            try:
                await self._zk.propagate_isr_changes(changes)
            except Exception as exc:  # ZooKeeper trouble: announce them with the next batch
                logger.warning("Failed to announce ISR changes of %s: %s", changes, exc)
                self.pending_changes.update(changes)

        return Deferred.fromCoroutine(announce())


INVALID_OFFSET_LAG: Final = -1
"""DescribeLogDirs' offset lag of a log whose replica is not online here."""


@dataclass(frozen=True)
class LogDirReplica:
    topic_partition: TopicPartition
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory as DescribeLogDirs reports it."""

    path: str
    error_code: int
    replicas: list[LogDirReplica] = field(default_factory=list)


class ReplicaManagerMetrics(IsrChangeListener, Protocol):
    """The counters the data path updates (kafkaclone.server.metrics.BrokerMetrics)."""

    def record_append(self, records: int, size: int) -> None: ...

    def record_bytes_out(self, size: int) -> None: ...


class ReplicaManager:
    """The partitions hosted by one broker."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_configs: TopicConfigSource | None = None,
        *,
        clock: Scheduler,
        config: ReplicaManagerConfig | None = None,
        isr_zk_client: IsrZkClient | None = None,
        metadata_cache: MetadataCache | None = None,
        fetcher_config: ReplicaFetcherConfig | None = None,
        fetcher_connection_factory: ConnectionFactory | None = None,
        metrics: ReplicaManagerMetrics | None = None,
        log_dir_event_zk_client: LogDirEventZkClient | None = None,
        halt: Callable[[], None] | None = None,
    ) -> None:
        """``clock``: the reactor (or a task.Clock); ``isr_zk_client``: where a leader
        writes its ISR changes (without it they apply locally at once, for tests);
        ``metadata_cache``: tells a partition this broker does not host (NOT_LEADER_OR_
        FOLLOWER) from one that does not exist (UNKNOWN_TOPIC_OR_PARTITION), and where
        leaders are (their endpoints); ``fetcher_config``: run replica fetchers for the
        partitions this broker follows (without it followers do not fetch: tests of the
        leader side), over ``fetcher_connection_factory`` connections (TCP by default);
        ``log_dir_event_zk_client``: where a failed log directory is announced; ``halt``:
        stops the process once no log directory is left (Kafka's Exit.halt)."""
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metrics = metrics
        self._topic_configs = topic_configs
        self.clock = clock
        self.config = config or ReplicaManagerConfig()
        self.metadata_cache = metadata_cache
        self.replica_selector = create_replica_selector(self.config.replica_selector_class)
        self.isr_manager = (ZkIsrManager(isr_zk_client, clock) if isr_zk_client is not None
                            else None)
        self.delayed_produce: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory(
                "Produce", clock, self.config.producer_purgatory_purge_interval_requests))
        self.delayed_fetch: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch", clock, self.config.fetch_purgatory_purge_interval_requests)
        self.delayed_delete_records: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory("DeleteRecords", clock))
        self.fetch_sessions = FetchSessionCache(
            self.config.max_incremental_fetch_session_cache_slots, clock)
        self._tasks: dict[str, Any] = {}
        self._running = False
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        """The highest controller epoch seen in a controller request."""
        self.all_partitions: dict[TopicPartition, Partition] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.leadership_listeners: list[LeadershipListener] = []
        self._state_change_lock = DeferredLock()
        self._shutting_down = False
        self.offline_partitions: set[TopicPartition] = set()
        """Partitions whose log was in a failed log directory (Kafka's HostedPartition.Offline)."""
        self._log_dir_event_zk = log_dir_event_zk_client
        self._halt = halt
        self._log_dir_move_call: Any = None
        self._log_dir_moves: set[TopicPartition] = set()
        """The moves between log directories being copied (Kafka's
        ReplicaAlterLogDirsManager's partitions); a future log loaded at start-up joins
        them once its partition's LeaderAndIsr arrives."""
        self.leader_quota = ReplicationQuotaManager(
            broker_id, clock,
            lambda topic: log_manager.config_for(topic).leader_replication_throttled_replicas)
        """What this broker serves to followers of throttled replicas (KIP-73)."""
        self.follower_quota = ReplicationQuotaManager(
            broker_id, clock,
            lambda topic: log_manager.config_for(topic).follower_replication_throttled_replicas)
        """What this broker's fetchers read for throttled replicas (KIP-73)."""
        self.alter_log_dirs_quota = ReplicationQuotaManager(
            broker_id, clock, lambda topic: [ALL_REPLICAS])
        """What the moves between log directories copy
        (replica.alter.log.dirs.io.max.bytes.per.second; every move is throttled)."""
        self.replica_fetcher_manager: ReplicaFetcherManager | None = (
            None if fetcher_config is None else ReplicaFetcherManager(
                fetcher_config, self, clock, fetcher_connection_factory,
                quota=self.follower_quota))

    # -- queries ---------------------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.all_partitions.get(tp)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.all_partitions.values() if p.is_leader]

    def follower_partitions(self) -> list[Partition]:
        return [p for p in self.all_partitions.values() if not p.is_leader]

    # -- lifecycle -------------------------------------------------------------------------

    def startup(self) -> None:
        """Start the periodic tasks: ISR expiry every replica.lag.time.max.ms / 2 and the
        ISR change announcements every 2.5 s (high watermarks are checkpointed by the
        LogManager's own task)."""
        self._running = True
        self._schedule("isr-expiration", self.config.replica_lag_time_max_ms / 2,
                       self.maybe_shrink_isr)
        if self.isr_manager is not None:
            self._schedule("isr-change-propagation", ISR_CHANGE_PROPAGATION_INTERVAL_MS,
                           self.isr_manager.maybe_propagate)

    def _schedule(self, name: str, period_ms: float, function: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                function()
            except Exception:
                logger.exception("Uncaught exception in scheduled task '%s'", name)
            if self._running:
                self._tasks[name] = self.clock.callLater(period_ms / 1000.0, run)

        self._tasks[name] = self.clock.callLater(period_ms / 1000.0, run)

    def shutdown(self) -> Deferred[None]:
        """Stop the replica fetchers and the periodic tasks, answer the waiting requests,
        checkpoint the high watermarks, forget the hosted partitions; the LogManager closes
        their logs. Fires once the fetchers' loops have ended."""
        self._running = False
        self._shutting_down = True
        fetchers_stopped: Deferred[None] = (
            self.replica_fetcher_manager.shutdown() if self.replica_fetcher_manager is not None
            else Deferred.fromCoroutine(_nothing()))
        for call in self._tasks.values():
            if call.active():
                call.cancel()
        self._tasks.clear()
        if self._log_dir_move_call is not None and self._log_dir_move_call.active():
            self._log_dir_move_call.cancel()
        self.delayed_produce.shutdown()
        self.delayed_fetch.shutdown()
        self.delayed_delete_records.shutdown()
        try:
            self.log_manager.checkpoint_high_watermarks()
        except (OSError, KafkaError) as exc:
            logger.error("Error while checkpointing high watermarks at shutdown: %s", exc)
        self.all_partitions.clear()
        return fetchers_stopped

    # -- LeaderAndIsr ----------------------------------------------------------------------

    async def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Sequence[LeaderAndIsrPartitionState],
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
        partition_states: Sequence[LeaderAndIsrPartitionState],
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
        accepted: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        stale: list[TopicPartition] = []
        added = 0
        for state in partition_states:
            tp = state.topic_partition
            if tp in self.offline_partitions:
                logger.warning(
                    "Ignoring LeaderAndIsr for %s from controller %d epoch %d as the local "
                    "replica for the partition is in an offline log directory", tp,
                    controller_id, controller_epoch)
                errors[tp] = KafkaStorageError.code
                continue
            partition = self.all_partitions.get(tp)
            if partition is None:
                partition = self.new_partition(tp)
                added += 1
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
                logger.debug(
                    "Ignoring LeaderAndIsr for %s from controller %d epoch %d: its leader "
                    "epoch %d is not newer than the current leader epoch %d", tp,
                    controller_id, controller_epoch, state.leader_epoch, partition.leader_epoch)
                errors[tp] = StaleControllerEpochError.code
                stale.append(tp)
        if stale:
            # One line per request: a new controller's first request names every partition
            # (each line per partition is at DEBUG, as Kafka's state-change log keeps them).
            logger.info(
                "Ignoring LeaderAndIsr for %d partitions (%s) from controller %d epoch %d: "
                "their leader epochs are not newer than the current ones", len(stale),
                examples(stale), controller_id, controller_epoch)
        for topic, topic_id in topic_ids.items():
            if topic_id.int != 0:
                self.topic_ids[topic] = topic_id

        configs = await self._log_configs_for(
            {partition.topic for partition, _ in accepted if partition.log is None})
        new_leaders: list[Partition] = []
        new_followers: list[Partition] = []
        epoch_writes: list[Deferred[dict[TopicPartition, KafkaStorageError]]] = []
        pacer = Pacer(self.clock, STATE_CHANGE_TURN_S)
        for start in range(0, len(accepted), STATE_CHANGE_SLICE):
            if start and pacer.due:
                await pacer.turn()
            chunk = accepted[start:start + STATE_CHANGE_SLICE]
            if not self._shutting_down:
                chunk = await self._create_logs(controller_id, controller_epoch, chunk,
                                                configs, errors)
            if self._shutting_down:
                logger.info("Shutting down: LeaderAndIsr from controller %d epoch %d left "
                            "partly unapplied", controller_id, controller_epoch)
                for partition, _ in accepted[start:]:
                    errors[partition.topic_partition] = NotLeaderOrFollowerError.code
                accepted = accepted[:start]
                break
            new_leaders += self._make_leaders(
                controller_id, controller_epoch,
                [(p, s) for p, s in chunk if s.leader == self.broker_id], configs, errors,
                epoch_writes)
            new_followers += self._make_followers(
                controller_id, controller_epoch,
                [(p, s) for p, s in chunk if s.leader != self.broker_id], configs, errors)
            if added:
                # Per slice: a full collection between slices walks only the new ones.
                heap.long_lived_objects_added()
        for written in epoch_writes:
            written.addCallback(self._leader_epoch_writes_done, controller_id,
                                controller_epoch)
        if accepted:
            logger.info("LeaderAndIsr from controller %d epoch %d applied: %d partitions "
                        "became leader, %d follower, %d errors", controller_id,
                        controller_epoch, len(new_leaders), len(new_followers),
                        sum(1 for code in errors.values() if code != NONE))
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.shutdown_idle_fetchers()
        self._maybe_add_log_dir_moves(partition for partition, _ in accepted)
        for listener in list(self.leadership_listeners):
            try:
                listener(new_leaders, new_followers)
            except Exception:
                logger.exception("leadership listener %r failed", listener)
        # Requests waiting on a partition whose leadership changed answer now.
        self.complete_delayed_requests_for(partition.topic_partition for partition, _ in accepted)
        return ReplicaManagerResult(NONE, errors)

    def new_partition(self, tp: TopicPartition) -> Partition:
        """A Partition wired to this manager's clock, ISR writer and purgatories."""
        cache = self.metadata_cache
        return Partition(
            tp, self.broker_id, self.log_manager, clock=self.clock,
            isr_manager=self.isr_manager,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            on_high_watermark_change=self.complete_delayed_requests,
            is_broker_alive=None if cache is None else cache.is_alive,
            isr_change_listener=self.metrics,
        )

    async def _log_configs_for(self, topics: set[str]) -> dict[str, LogConfig]:
        """Each topic's LogConfig: its /config/topics overrides over the broker defaults."""
        defaults = self.log_manager.default_config
        overrides: dict[str, dict[str, str]] = {}
        if topics and self._topic_configs is not None:
            overrides = await self._topic_configs.get_topic_configs(topics)
        configs: dict[str, LogConfig] = {}
        for topic in topics:
            try:
                configs[topic] = LogConfig.from_topic_overrides(overrides.get(topic, {}),
                                                                defaults)
            except KafkaError as exc:
                logger.error("Invalid config overrides of topic %s, using the defaults: %s",
                             topic, exc)
                configs[topic] = defaults
        return configs

    async def _create_logs(
        self,
        controller_id: int,
        controller_epoch: int,
        states: Sequence[tuple[Partition, LeaderAndIsrPartitionState]],
        configs: Mapping[str, LogConfig],
        errors: dict[TopicPartition, int],
    ) -> list[tuple[Partition, LeaderAndIsrPartitionState]]:
        """Create the missing logs of ``states`` in parallel, off the reactor thread (the
        LogManager's I/O threads); the partitions whose log could not be created answer
        their error and are left out of what is returned."""
        wanted = {partition.topic_partition: (configs.get(partition.topic), state.is_new)
                  for partition, state in states if partition.log is None}
        if not wanted:
            return list(states)
        created: Deferred[dict[TopicPartition, KafkaError]] = Deferred()
        self.log_manager.create_logs(wanted, created.callback)
        failures = await created
        if summarized(len(failures)):
            # Thousands at once (no file descriptor left for them, a directory gone): one
            # line, each partition's at DEBUG.
            first = next(iter(failures.values()))
            logger.error("Error while making this broker a replica of %d partitions (%s) "
                         "for controller %d epoch %d, the first: %s", len(failures),
                         examples(list(failures)), controller_id, controller_epoch, first)
            for tp, exc in failures.items():
                logger.debug("Error while making this broker the replica of %s: %s", tp, exc)
                errors[tp] = self._state_change_error_code(exc)
        else:
            for tp, exc in failures.items():
                errors[tp] = self._storage_or_unknown(exc, tp, "replica", controller_id,
                                                      controller_epoch)
        return [(p, s) for p, s in states if p.topic_partition not in failures]

    def _make_leaders(
        self,
        controller_id: int,
        controller_epoch: int,
        states: Sequence[tuple[Partition, LeaderAndIsrPartitionState]],
        configs: Mapping[str, LogConfig],
        errors: dict[TopicPartition, int],
        epoch_writes: list[Deferred[dict[TopicPartition, KafkaStorageError]]],
    ) -> list[Partition]:
        """Kafka's makeLeaders: stop fetching these partitions, then make_leader. The new
        leader epochs' checkpoints are then written together on the I/O threads while the
        reactor goes on (``epoch_writes`` gets what fires once they are on disk); the
        request is answered without waiting for them. Until then an epoch is recoverable
        from the log: ``Log.flush`` writes it before the recovery point passes it, and a
        restart after a crash assigns the epochs of the batches above the recovery point
        (docs/storage.md)."""
        made: list[Partition] = []
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.remove_fetcher_for_partitions(
                partition.topic_partition for partition, _ in states)
        skipped = 0
        for partition, state in states:
            tp = partition.topic_partition
            try:
                if partition.make_leader(state, configs.get(partition.topic),
                                         flush_epoch=False):
                    made.append(partition)
                else:
                    skipped += 1
                    logger.debug("Skipped the become-leader state change for %s with leader "
                                 "epoch %d since it is already the leader", tp,
                                 state.leader_epoch)
                errors[tp] = NONE
            except KafkaError as exc:
                errors[tp] = self._storage_or_unknown(exc, tp, "leader", controller_id,
                                                      controller_epoch)
        if skipped:
            logger.info("Skipped the become-leader state change for %d partitions already "
                        "led here (their leader epochs updated)", skipped)
        logs = {p.topic_partition: p.log for p, _ in states
                if p.log is not None and errors.get(p.topic_partition) == NONE}
        written: Deferred[dict[TopicPartition, KafkaStorageError]] = Deferred()
        self.log_manager.flush_leader_epochs_then(logs, written.callback)
        epoch_writes.append(written)
        return made

    def _leader_epoch_writes_done(
        self,
        failures: dict[TopicPartition, KafkaStorageError],
        controller_id: int,
        controller_epoch: int,
    ) -> None:
        """After a LeaderAndIsr's new leader epochs are on disk: a failed write took its
        directory offline (the LogDirFailureChannel; its partitions answer
        KAFKA_STORAGE_ERROR from then on and the controller is told)."""
        for tp, failure in failures.items():
            self._storage_or_unknown(failure, tp, "leader", controller_id, controller_epoch)

    def _make_followers(
        self,
        controller_id: int,
        controller_epoch: int,
        states: Sequence[tuple[Partition, LeaderAndIsrPartitionState]],
        configs: Mapping[str, LogConfig],
        errors: dict[TopicPartition, int],
    ) -> list[Partition]:
        """Kafka's makeFollowers: make_follower if the new leader is alive (else only
        create the log), move the partitions whose leader or leader epoch changed to a
        fetcher of their leader, at their initial fetch offset (the fetcher truncates)."""
        made: list[Partition] = []
        leaders: dict[TopicPartition, BrokerEndPoint] = {}
        fetchers = self.replica_fetcher_manager
        endpoints: dict[int, BrokerEndPoint | None] = {}
        unavailable: list[tuple[TopicPartition, int]] = []
        for partition, state in states:
            tp = partition.topic_partition
            try:
                if fetchers is None:
                    leader = None
                elif state.leader in endpoints:
                    leader = endpoints[state.leader]
                else:
                    leader = endpoints[state.leader] = self._leader_endpoint(state.leader)
                if fetchers is not None and leader is None:
                    # The leader should always be in the metadata cache; without it the
                    # partition keeps its old state (a later LeaderAndIsr retries), but its
                    # log exists so that its high watermark is checkpointed (KAFKA-1647).
                    logger.debug(
                        "Received LeaderAndIsr request from controller %d epoch %d for "
                        "partition %s (last update controller epoch %d) but cannot become "
                        "follower since the new leader %d is unavailable.",
                        controller_id, controller_epoch, tp, state.controller_epoch,
                        state.leader)
                    partition.create_log_if_not_exists(state.is_new,
                                                       configs.get(partition.topic))
                    unavailable.append((tp, state.leader))
                elif partition.make_follower(state, configs.get(partition.topic)):
                    made.append(partition)
                    if leader is not None:
                        leaders[tp] = leader
                errors[tp] = NONE
            except KafkaError as exc:
                errors[tp] = self._storage_or_unknown(exc, tp, "follower", controller_id,
                                                      controller_epoch)
        if fetchers is not None and unavailable:
            logger.error(
                "Received LeaderAndIsr request from controller %d epoch %d but %d partitions "
                "(%s) cannot become follower since their new leader is unavailable.",
                controller_id, controller_epoch, len(unavailable),
                examples([f"{tp} (leader {leader})" for tp, leader in unavailable]))
            fetchers.remove_fetcher_for_partitions(tp for tp, _ in unavailable)
        if fetchers is not None and made:
            # Stopping the old fetchers first makes the fetch position start from the log.
            fetchers.remove_fetcher_for_partitions(p.topic_partition for p in made)
            if not self._shutting_down:
                truncation_on_fetch = fetchers.config.truncation_on_fetch
                initial: dict[TopicPartition, InitialFetchState] = {}
                for partition in made:
                    tp = partition.topic_partition
                    if partition.log is None or tp not in leaders:
                        continue
                    initial[tp] = InitialFetchState(
                        leaders[tp], partition.leader_epoch,
                        initial_fetch_offset(partition, truncation_on_fetch))
                fetchers.add_fetcher_for_partitions(initial)
        return made

    def _leader_endpoint(self, leader_id: int) -> BrokerEndPoint | None:
        """The leader's endpoint on the inter-broker listener, if it is alive."""
        cache = self.metadata_cache
        if cache is None or leader_id < 0 or self.replica_fetcher_manager is None:
            return None
        listener = self.replica_fetcher_manager.config.inter_broker_listener_name
        for broker, endpoint in cache.alive_endpoints(listener):
            if broker.id == leader_id and endpoint.host is not None:
                return BrokerEndPoint(leader_id, endpoint.host, endpoint.port)
        return None

    @staticmethod
    def _storage_or_unknown(exc: KafkaError, tp: TopicPartition, role: str,
                            controller_id: int, controller_epoch: int) -> int:
        logger.error("Error while making this broker the %s of %s for controller %d epoch "
                     "%d: %s", role, tp, controller_id, controller_epoch, exc)
        return ReplicaManager._state_change_error_code(exc)

    @staticmethod
    def _state_change_error_code(exc: KafkaError) -> int:
        if isinstance(exc, KafkaStorageError):
            return KafkaStorageError.code
        return exc.code if exc.code != NONE else UnknownServerError.code

    # -- log directory failure -------------------------------------------------------------

    def handle_log_dir_failure(self, directory: Path, send_zk_notification: bool = True
                               ) -> None:
        """Stop serving the replicas of a failed log directory (on the reactor thread)."""
        directory = Path(directory)
        offline = [p for p in self.all_partitions.values()
                   if p.log is not None and p.log.dir.parent == directory]
        offline_tps = [p.topic_partition for p in offline]
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.remove_fetcher_for_partitions(offline_tps)
        for partition in offline:
            del self.all_partitions[partition.topic_partition]
            partition.delete()
            self.offline_partitions.add(partition.topic_partition)
        logger.warning("Broker %d stopped fetcher for partitions %s because they are in the "
                       "failed log directory %s.", self.broker_id,
                       ",".join(str(tp) for tp in offline_tps), directory)
        self.log_manager.handle_log_dir_failure(directory)
        if not self.log_manager.live_log_dirs:
            logger.critical("Shutdown broker because all log dirs in %s have failed",
                            ", ".join(str(d) for d in self.log_manager.configured_log_dirs))
            if self._halt is not None:
                self._halt()
            return
        self.complete_delayed_requests_for(offline_tps)
        if offline:
            for listener in list(self.leadership_listeners):
                try:
                    listener([], offline)
                except Exception:
                    logger.exception("leadership listener %r failed", listener)
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.shutdown_idle_fetchers()
        if send_zk_notification and self._log_dir_event_zk is not None:
            Deferred.fromCoroutine(self._propagate_log_dir_event(directory))
        logger.warning("Stopped serving replicas in dir %s", directory)

    async def _propagate_log_dir_event(self, directory: Path) -> None:
        assert self._log_dir_event_zk is not None
        try:
            await self._log_dir_event_zk.propagate_log_dir_event(self.broker_id)
        except Exception as exc:
            logger.error("Failed to tell the controller that log dir %s failed: %s",
                         directory, exc)

    # -- DescribeLogDirs / AlterReplicaLogDirs ------------------------------------------------

    def describe_log_dirs(self, partitions: set[TopicPartition] | None
                          ) -> list[LogDirDescription]:
        """Every configured log directory with the logs of ``partitions`` (None: all) it
        holds; an offline directory with KAFKA_STORAGE_ERROR and nothing else (Kafka's
        describeLogDirs)."""
        manager = self.log_manager
        live = set(manager.live_log_dirs)
        descriptions: list[LogDirDescription] = []
        for directory in manager.configured_log_dirs:
            if directory not in live:
                descriptions.append(LogDirDescription(str(directory), KafkaStorageError.code))
                continue
            replicas = [
                LogDirReplica(tp, log.size, self._log_end_offset_lag(tp, log.log_end_offset),
                              is_future=False)
                for tp, log in sorted(manager.logs_in_dir(directory).items())
                if partitions is None or tp in partitions
            ] + [
                LogDirReplica(tp, log.size, self._future_log_lag(tp, log.log_end_offset),
                              is_future=True)
                for tp, log in sorted(manager.future_logs_in_dir(directory).items())
                if partitions is None or tp in partitions
            ]
            descriptions.append(LogDirDescription(str(directory), NONE, replicas))
        return descriptions

    def _log_end_offset_lag(self, tp: TopicPartition, log_end_offset: int) -> int:
        partition = self.all_partitions.get(tp)
        log = None if partition is None else partition.log
        if log is None:
            return INVALID_OFFSET_LAG
        return max(log.high_watermark - log_end_offset, 0)

    def _future_log_lag(self, tp: TopicPartition, log_end_offset: int) -> int:
        current = self.log_manager.get_log(tp)
        return INVALID_OFFSET_LAG if current is None else current.log_end_offset - log_end_offset

    def alter_replica_log_dirs(self, partition_dirs: Mapping[TopicPartition, str]
                               ) -> dict[TopicPartition, int]:
        """Each partition's error for moving its replica to the given directory (Kafka's
        alterReplicaLogDirs): LOG_DIR_NOT_FOUND for a directory not in log.dirs,
        KAFKA_STORAGE_ERROR for an offline directory or partition, REPLICA_NOT_AVAILABLE for
        a replica not hosted here (its log is then created in that directory when it comes),
        NONE when the replica is there already or its move started: a ``-future`` log in
        the destination, which the ``ReplicaAlterLogDirs`` task fills from the current log
        and swaps in once caught up (KAFKA_STORAGE_ERROR while some directory is offline,
        as Kafka creates no future log then)."""
        results: dict[TopicPartition, int] = {}
        manager = self.log_manager
        for tp, destination in partition_dirs.items():
            try:
                if len(log_future_dir_name(tp)) > 255:
                    raise InvalidTopicExceptionError("The topic name is too long.")
                if not manager.is_log_dir_online(destination):
                    raise KafkaStorageError(f"Log directory {destination} is offline")
                if tp in self.offline_partitions:
                    raise KafkaStorageError(f"Partition {tp} is offline")
                manager.maybe_update_preferred_log_dir(tp, destination)
                partition = self.all_partitions.get(tp)
                log = None if partition is None else partition.log
                if log is None:
                    raise ReplicaNotAvailableError(
                        f"Replica of partition {tp} is not available on broker "
                        f"{self.broker_id}")
                if log.dir.parent == manager.configured_log_dir(destination):
                    manager.abort_future_log(tp)  # a move elsewhere is cancelled
                else:
                    manager.create_future_log(tp, destination)
                    self._log_dir_moves.add(tp)
                    self._schedule_log_dir_moves()
                results[tp] = NONE
            except KafkaError as exc:
                logger.warning("Unable to alter log dirs for %s: %s", tp, exc)
                results[tp] = exc.code
        return results

    def _maybe_add_log_dir_moves(self, partitions: Iterable[Partition]) -> None:
        """Resume the moves of these partitions whose future log was loaded at start-up,
        now that their log is served (Kafka's maybeAddLogDirFetchers)."""
        futures = self.log_manager.future_logs
        resumed = {partition.topic_partition for partition in partitions
                   if partition.log is not None and partition.topic_partition in futures
                   and partition.topic_partition not in self._log_dir_moves}
        if resumed:
            logger.info("Resuming the moves between log directories of %s",
                        ", ".join(str(tp) for tp in sorted(resumed)))
            self._log_dir_moves |= resumed
            self._schedule_log_dir_moves()

    def _schedule_log_dir_moves(self) -> None:
        if self._log_dir_move_call is None or not self._log_dir_move_call.active():
            self._log_dir_move_call = self.clock.callLater(0, self.move_future_logs)

    def move_future_logs(self) -> None:
        """One step of every move between log directories (Kafka's
        ReplicaAlterLogDirsThread, on the reactor): copy up to LOG_DIR_MOVE_BYTES of the
        current log into the future log, following the current log's truncations (by
        leader epoch, as a follower does, so a future log loaded at start-up drops what
        the current log no longer has) and start offset; a future log that caught up
        replaces the current one in the same step (no append can come in between).
        Reschedules itself while moves remain."""
        self._log_dir_move_call = None
        manager = self.log_manager
        futures = manager.future_logs
        for tp in sorted(self._log_dir_moves):
            future = futures.get(tp)
            if future is None:  # cancelled, or its directory failed
                self._log_dir_moves.discard(tp)
                continue
            partition = self.all_partitions.get(tp)
            current = None if partition is None else partition.log
            if partition is None or current is None:
                self._log_dir_moves.discard(tp)
                manager.abort_future_log(tp)
                continue
            try:
                manager.truncate_future_log_to(tp, future_truncation_offset(future, current))
                if current.log_start_offset > future.log_end_offset:
                    future.truncate_fully_and_start_at(current.log_start_offset)
                if (future.log_end_offset < current.log_end_offset
                        and not self.alter_log_dirs_quota.is_quota_exceeded()):
                    data = current.read(future.log_end_offset, LOG_DIR_MOVE_BYTES)
                    if len(data.records) > 0:
                        future.append_as_follower(records_bytes(data.records))
                        self.alter_log_dirs_quota.record(len(data.records))
                future.update_high_watermark(current.high_watermark)
                if current.log_start_offset > future.log_start_offset:
                    future.delete_records_before(min(current.log_start_offset,
                                                     future.high_watermark))
                if future.log_end_offset == current.log_end_offset:
                    self._log_dir_moves.discard(tp)
                    partition.log = manager.replace_current_with_future_log(tp)
                    self.complete_delayed_requests(tp)
            except KafkaError as exc:
                logger.error("Error moving the replica of %s to %s: %s", tp, future.dir.parent,
                             exc)
                self._log_dir_moves.discard(tp)
                manager.abort_future_log(tp)
        if self._log_dir_moves and self._running:
            self._log_dir_move_call = self.clock.callLater(LOG_DIR_MOVE_INTERVAL_S,
                                                          self.move_future_logs)

    # -- StopReplica -----------------------------------------------------------------------

    async def stop_replicas(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Mapping[TopicPartition, StopReplicaState],
    ) -> ReplicaManagerResult:
        await self._state_change_lock.acquire()
        try:
            result = self._stop_replicas(controller_id, controller_epoch, partition_states)
        finally:
            self._state_change_lock.release()
        self.complete_delayed_requests_for(partition_states)
        return result

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
            if tp in self.offline_partitions:
                logger.warning(
                    "Ignoring StopReplica for %s from controller %d epoch %d as the local "
                    "replica for the partition is in an offline log directory", tp,
                    controller_id, controller_epoch)
                errors[tp] = KafkaStorageError.code
                continue
            partition = self.all_partitions.get(tp)
            if (partition is not None and state.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
                    and state.leader_epoch <= partition.leader_epoch):
                logger.info(
                    "Ignoring StopReplica for %s from controller %d epoch %d: its leader "
                    "epoch %d is not newer than the current leader epoch %d", tp,
                    controller_id, controller_epoch, state.leader_epoch, partition.leader_epoch)
                errors[tp] = FencedLeaderEpochError.code
                continue
            if self.replica_fetcher_manager is not None:
                self.replica_fetcher_manager.remove_fetcher_for_partitions([tp])
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
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.shutdown_idle_fetchers()
        if any(state.delete_partition for state in partition_states.values()):
            heap.long_lived_objects_released()
        return ReplicaManagerResult(NONE, errors)


    # -- the data path ---------------------------------------------------------------------

    def get_partition_or_error(self, tp: TopicPartition) -> Partition:
        """The hosted partition; NOT_LEADER_OR_FOLLOWER if it exists in the cluster but is
        not hosted here, UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
        partition = self.all_partitions.get(tp)
        if partition is not None:
            return partition
        if tp in self.offline_partitions:
            raise KafkaStorageError(
                f"Partition {tp} is in an offline log directory on broker {self.broker_id}")
        cache = self.metadata_cache
        if cache is not None and cache.partition_state(tp.topic, tp.partition) is not None:
            raise NotLeaderOrFollowerError(
                f"Error while fetching partition state for {tp}: not hosted on broker "
                f"{self.broker_id}")
        raise UnknownTopicOrPartitionError(f"Partition {tp} does not exist on this broker")

    def missing_partition_error(self, tp: TopicPartition) -> int:
        return (KafkaStorageError.code if tp in self.offline_partitions
                else UnknownTopicOrPartitionError.code)

    def complete_delayed_requests(self, tp: TopicPartition) -> None:
        """Retry the requests waiting on ``tp`` (its data, high watermark or leader moved)."""
        self.delayed_fetch.check_and_complete(tp)
        self.delayed_produce.check_and_complete(tp)
        self.delayed_delete_records.check_and_complete(tp)

    def complete_delayed_requests_for(self, tps: Iterable[TopicPartition]) -> None:
        """``complete_delayed_requests`` of many partitions, each waiting request tried
        once."""
        tps = list(tps)
        self.delayed_fetch.check_and_complete_all(tps)
        self.delayed_produce.check_and_complete_all(tps)
        self.delayed_delete_records.check_and_complete_all(tps)

    async def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Mapping[TopicPartition, bytes | bytearray | memoryview],
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        internal_topics_allowed: bool = False,
    ) -> dict[TopicPartition, ProducePartitionResult]:
        """Append each partition's batches on this broker's leader replica. acks 0 and 1
        answer after the local append; acks -1 once the high watermark passed every
        appended batch, or ``timeout_ms`` (REQUEST_TIMED_OUT). Any other acks value is
        INVALID_REQUIRED_ACKS for every partition."""
        if required_acks not in (0, 1, -1):
            return {tp: ProducePartitionResult(InvalidRequiredAcksError.code)
                    for tp in entries}
        appended = self._append_to_local_log(entries, origin, internal_topics_allowed,
                                             required_acks)
        results = {tp: result for tp, (result, _) in appended.items()}
        if required_acks != -1 or not any(r.error_code == NONE for r in results.values()):
            return results
        return await self.wait_for_replicas(
            timeout_ms, {tp: ProducePartitionStatus(required_offset, result)
                         for tp, (result, required_offset) in appended.items()})

    def wait_for_replicas(self, timeout_ms: int,
                          statuses: dict[TopicPartition, ProducePartitionStatus]
                          ) -> Deferred[dict[TopicPartition, ProducePartitionResult]]:
        """An acks=-1 append's answer (a DelayedProduce in the purgatory): each partition's
        result once its high watermark reached ``required_offset``, or REQUEST_TIMED_OUT
        after ``timeout_ms``."""
        answered: Deferred[dict[TopicPartition, ProducePartitionResult]] = Deferred()
        operation = DelayedProduce(timeout_ms, statuses, self, answered.callback)
        self.delayed_produce.try_complete_else_watch(operation, list(statuses))
        return answered

    def _append_to_local_log(
        self,
        entries: Mapping[TopicPartition, bytes | bytearray | memoryview],
        origin: AppendOrigin,
        internal_topics_allowed: bool,
        required_acks: int,
    ) -> dict[TopicPartition, tuple[ProducePartitionResult, int]]:
        """Each partition's result and the offset acks=-1 waits for (its last offset + 1)."""
        return {tp: self.append_partition_to_local_log(tp, records, origin,
                                                       internal_topics_allowed, required_acks)
                for tp, records in entries.items()}

    def append_partition_to_local_log(
        self,
        tp: TopicPartition,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        internal_topics_allowed: bool = False,
        required_acks: int = 1,
    ) -> tuple[ProducePartitionResult, int]:
        """One partition of ``_append_to_local_log`` (the Produce handler's one-partition
        path calls it directly): its result, and the offset acks=-1 waits for (-1 after an
        error). The delayed fetches (and with a moved high watermark the delayed produces)
        waiting on the partition are retried."""
        try:
            if is_internal(tp.topic) and not internal_topics_allowed:
                raise InvalidTopicExceptionError(
                    f"Cannot append to internal topic {tp.topic}")
            partition = self.get_partition_or_error(tp)
            info, hw_moved = partition.append_records_to_leader(records, origin,
                                                                required_acks)
        except KafkaError as exc:
            logger.debug("Error processing append operation on partition %s: %s", tp, exc)
            return ProducePartitionResult(exc.code, error_message=exc.message), -1
        except Exception as exc:
            logger.error("Error processing append operation on partition %s", tp,
                         exc_info=exc)
            return ProducePartitionResult(UnknownServerError.code), -1
        if self.metrics is not None:
            self.metrics.record_append(info.record_count, info.valid_bytes)
        # New data for followers' long polls; a moved high watermark for consumers'
        # and acks=-1 producers.
        if hw_moved:
            self.complete_delayed_requests(tp)
        else:
            self.delayed_fetch.check_and_complete(tp)
        return (ProducePartitionResult(NONE, info.first_offset, info.log_append_time,
                                       info.log_start_offset),
                info.last_offset + 1)

    async def fetch_messages(
        self,
        params: FetchParams,
        infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
    ) -> list[tuple[TopicPartition, LogReadResult]]:
        """Read the partitions; answer at once if ``max_wait_ms`` <= 0, nothing was asked,
        ``min_bytes`` are there or a partition failed, else wait in a DelayedFetch. A
        follower's fetch records its position on the leader first."""
        results = self.read_from_local_log(params, infos)
        if params.is_from_follower:
            results = self._update_follower_fetch_state(params.replica_id, results)
        readable = sum(result.size for _, result in results)
        if (params.max_wait_ms <= 0 or not infos or readable >= params.min_bytes
                or any(result.error_code != NONE for _, result in results)):
            if self.metrics is not None and not params.is_from_follower:
                self.metrics.record_bytes_out(readable)
            return results
        statuses = [(tp, info, result.fetch_offset_metadata)
                    for (tp, info), (_, result) in zip(infos, results, strict=True)]
        answered: Deferred[list[tuple[TopicPartition, LogReadResult]]] = Deferred()
        operation = DelayedFetch(params.max_wait_ms, params, statuses, self, answered.callback)
        self.delayed_fetch.try_complete_else_watch(operation, [tp for tp, _ in infos])
        completed = await answered
        if self.metrics is not None and not params.is_from_follower:
            self.metrics.record_bytes_out(sum(result.size for _, result in completed))
        return completed

    def read_from_local_log(
        self,
        params: FetchParams,
        infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
    ) -> list[tuple[TopicPartition, LogReadResult]]:
        """Read each partition (Kafka's readFromLocalLog). KIP-74: the first batch is
        returned whole even beyond the limits; then each partition gets at most its
        partition_max_bytes and the request at most max_bytes.

        A follower's fetch names every partition its leader leads, thousands, nearly all
        with nothing new, and is read when it arrives and again when it answers: a
        partition with nothing to read at its fetch offset is answered from its log's
        offsets (:meth:`_read_if_idle`), the others go through ``read_records``."""
        limit = params.max_bytes
        min_one_message = True
        results: list[tuple[TopicPartition, LogReadResult]] = []
        append = results.append
        fetch_time = now_ms(self.clock)
        throttled_bytes = 0
        partitions = self.all_partitions
        # KIP-392's preferred read replica is chosen only for consumers that sent their
        # rack, with a replica.selector.class: otherwise no partition needs asking.
        client_metadata = (params.client_metadata if self.replica_selector is not None
                           and not params.is_from_follower else None)
        read_if_idle = self._read_if_idle
        for tp, info in infos:
            partition = partitions.get(tp)
            result = (None if partition is None or client_metadata is not None
                      else read_if_idle(partition, info, params, fetch_time))
            if result is not None:
                append((tp, result))
                continue
            result = self._read_partition(params, tp, info, min(info.max_bytes, limit),
                                          min_one_message, fetch_time, client_metadata)
            size = result.size
            if params.is_from_follower and size and self.leader_quota.is_throttled(tp):
                if partition is not None and self.should_leader_throttle(partition,
                                                                         params.replica_id):
                    result = result._replace(records=None)
                    size = 0
                else:
                    throttled_bytes += size
            if size > 0:
                min_one_message = False
            limit = max(0, limit - size)
            append((tp, result))
        # Kafka records what goes to followers of throttled replicas once it is sent.
        if throttled_bytes:
            self.leader_quota.record(throttled_bytes)
        return results

    @staticmethod
    def _read_if_idle(partition: Partition, info: PartitionFetchInfo, params: FetchParams,
                      fetch_time: int) -> LogReadResult | None:
        """What ``read_records`` answers when there is nothing to read and nothing to check
        (its fetch offset is the log end offset and the readable end, the leader epoch the
        request names is the current one or none, a follower's last fetched epoch is the
        log's latest, so no divergence), built from the log's offsets without a read; None
        otherwise: the general path reads, or raises the partition's error."""
        if not partition.is_current_leader_epoch(info.current_leader_epoch):
            return None
        if params.fetch_only_from_leader and not partition.is_leader:
            return None
        log = partition.log
        if log is None:
            return None
        end = log.log_end_offset
        if info.fetch_offset != end:
            return None
        last_fetched_epoch = info.last_fetched_epoch
        if last_fetched_epoch >= 0 and last_fetched_epoch != log.latest_epoch:
            return None
        high_watermark = log.high_watermark
        last_stable_offset = log.last_stable_offset
        isolation = params.isolation
        if isolation is FetchIsolation.LOG_END:
            aborted: list[AbortedTransaction] | None = None
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            if high_watermark != end:
                return None
            aborted = None
        else:
            if last_stable_offset != end:
                return None
            aborted = []
        return LogReadResult(NONE, _NO_RECORDS, log.log_end_offset_metadata, high_watermark,
                             log.log_start_offset, end, last_stable_offset,
                             info.log_start_offset, fetch_time, None, -1, aborted)

    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: a follower out of the ISR of a throttled replica,
        with the leader's replication quota exceeded."""
        return (replica_id not in partition.isr
                and self.leader_quota.is_throttled(partition.topic_partition)
                and self.leader_quota.is_quota_exceeded())

    def _read_partition(self, params: FetchParams, tp: TopicPartition,
                        info: PartitionFetchInfo, max_bytes: int, min_one_message: bool,
                        fetch_time: int, client_metadata: ClientMetadata | None
                        ) -> LogReadResult:
        """One partition's read; ``client_metadata``: the consumer's, if a preferred read
        replica may be chosen for it."""
        try:
            partition = self.get_partition_or_error(tp)
            preferred = (None if client_metadata is None else
                         self.find_preferred_read_replica(partition, client_metadata,
                                                          params.replica_id, info.fetch_offset,
                                                          fetch_time))
            if preferred is not None:
                # The consumer is sent to the follower: no read here, only the offsets
                # (Kafka's fetchOffsetSnapshot, not restricted to the leader).
                partition.check_current_leader_epoch(info.current_leader_epoch)
                log = partition.log
                if log is None:
                    raise NotLeaderOrFollowerError(
                        f"Replica of partition {tp} is not available on broker "
                        f"{self.broker_id}")
                return LogReadResult(NONE, None, UNKNOWN_OFFSET_METADATA, log.high_watermark,
                                     log.log_start_offset, log.log_end_offset,
                                     log.last_stable_offset, info.log_start_offset, -1,
                                     preferred_read_replica=preferred)
            read = partition.read_records(
                info.fetch_offset, info.current_leader_epoch, max_bytes, params.isolation,
                params.fetch_only_from_leader, min_one_message,
                last_fetched_epoch=info.last_fetched_epoch, file_region=params.file_regions)
        except KafkaError as exc:
            logger.debug("Error processing fetch with max size %d from %s on partition %s "
                         "at offset %d: %s", max_bytes, _fetcher_name(params.replica_id), tp,
                         info.fetch_offset, exc)
            return LogReadResult(exc.code, None, UNKNOWN_OFFSET_METADATA, -1, -1, -1, -1, -1,
                                 -1)
        except Exception as exc:
            logger.error("Error processing fetch from %s on partition %s at offset %d",
                         _fetcher_name(params.replica_id), tp, info.fetch_offset, exc_info=exc)
            return LogReadResult(UnknownServerError.code, None, UNKNOWN_OFFSET_METADATA, -1, -1,
                                 -1, -1, -1, -1)
        data = read.fetched_data
        return LogReadResult(NONE, data.records, data.fetch_offset_metadata,
                             read.high_watermark, read.log_start_offset, read.log_end_offset,
                             read.last_stable_offset, info.log_start_offset, fetch_time,
                             read.diverging_epoch,
                             aborted_transactions=data.aborted_transactions)

    def find_preferred_read_replica(self, partition: Partition, client_metadata: ClientMetadata,
                                    replica_id: int, fetch_offset: int,
                                    current_time_ms: int) -> int | None:
        """The follower ``replica.selector.class`` sends this consumer to, or None: the
        leader serves (Kafka 2.8's findPreferredReadReplica). Only on the leader, only for
        consumers; the candidates are the followers whose log holds ``fetch_offset``
        (in the ISR or not), on the client's listener."""
        selector = self.replica_selector
        if selector is None or not partition.is_leader or replica_id >= 0:
            return None
        log = partition.log
        cache = self.metadata_cache
        if log is None or cache is None:
            return None
        tp = partition.topic_partition
        endpoints = cache.partition_replica_endpoints(tp.topic, tp.partition,
                                                      client_metadata.listener_name)

        def rack_of(broker_id: int) -> str | None:
            broker = endpoints.get(broker_id)
            return None if broker is None else broker.rack

        followers = [
            ReplicaView(r.broker_id, rack_of(r.broker_id), r.log_end_offset,
                        current_time_ms - r.last_caught_up_time_ms)
            for r in partition.remote_replicas.values()
            if r.broker_id in endpoints
            and r.log_start_offset <= fetch_offset <= r.log_end_offset
        ]
        leader = ReplicaView(self.broker_id, rack_of(self.broker_id), log.log_end_offset, 0)
        selected = selector.select(tp, client_metadata, PartitionView([*followers, leader], leader))
        if selected is None or selected == leader:
            return None
        return selected.broker_id

    def _update_follower_fetch_state(
        self, follower_id: int, results: list[tuple[TopicPartition, LogReadResult]]
    ) -> list[tuple[TopicPartition, LogReadResult]]:
        updated: list[tuple[TopicPartition, LogReadResult]] = []
        for tp, result in results:
            if result.error_code != NONE or result.diverging_epoch is not None:
                updated.append((tp, result))
                continue
            partition = self.all_partitions.get(tp)
            if partition is not None and partition.update_follower_fetch_state(
                    follower_id, result.fetch_offset_metadata.message_offset,
                    result.follower_log_start_offset, result.fetch_time_ms,
                    result.log_end_offset):
                updated.append((tp, result))
                # The follower's new position may complete DeleteRecords waits.
                self.delayed_delete_records.check_and_complete(tp)
            else:
                replicas = [] if partition is None else list(partition.replicas)
                logger.warning(
                    "Leader %d failed to record follower %d's position %d since the replica "
                    "is not recognized to be one of the assigned replicas %s for partition "
                    "%s. Empty records will be returned for this partition.", self.broker_id,
                    follower_id, result.fetch_offset_metadata.message_offset, replicas, tp)
                updated.append((tp, result._replace(records=None)))
        return updated

    def maybe_shrink_isr(self) -> None:
        """The isr-expiration task: every leader drops its lagging followers."""
        for partition in list(self.all_partitions.values()):
            if partition.is_leader:
                try:
                    partition.maybe_shrink_isr()
                except Exception:
                    logger.exception("Error while shrinking the ISR of %s",
                                     partition.topic_partition)

    # -- offsets ---------------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, isolation_level: int | None,
        current_leader_epoch: int, fetch_only_from_leader: bool,
    ) -> TimestampAndOffset | None:
        partition = self.get_partition_or_error(tp)
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level,
                                                    current_leader_epoch,
                                                    fetch_only_from_leader)

    def legacy_fetch_offsets_for_timestamp(
        self, tp: TopicPartition, timestamp: int, max_num_offsets: int,
        is_from_consumer: bool, fetch_only_from_leader: bool,
    ) -> list[int]:
        partition = self.get_partition_or_error(tp)
        return partition.legacy_fetch_offsets_before(timestamp, max_num_offsets,
                                                     is_from_consumer, fetch_only_from_leader)

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int, fetch_only_from_leader: bool
                                     ) -> tuple[int, int]:
        partition = self.get_partition_or_error(tp)
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch,
                                                      fetch_only_from_leader)

    async def delete_records(self, timeout_ms: int, offsets: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, DeleteRecordsPartitionStatus]:
        """DeleteRecords: move each leader's log start offset, then wait until every live
        replica's log start offset reached it (or ``timeout_ms``: REQUEST_TIMED_OUT)."""
        statuses: dict[TopicPartition, DeleteRecordsPartitionStatus] = {}
        for tp, offset in offsets.items():
            try:
                if is_internal(tp.topic):
                    raise InvalidTopicExceptionError(
                        f"Cannot delete records of internal topic {tp.topic}")
                partition = self.get_partition_or_error(tp)
                new_start = partition.delete_records_on_leader(offset)
                statuses[tp] = DeleteRecordsPartitionStatus(new_start)
            except KafkaError as exc:
                statuses[tp] = DeleteRecordsPartitionStatus(-1, -1, exc.code, False)
        answered: Deferred[dict[TopicPartition, DeleteRecordsPartitionStatus]] = Deferred()
        operation = DelayedDeleteRecords(timeout_ms, statuses, self, answered.callback)
        self.delayed_delete_records.try_complete_else_watch(operation, list(statuses))
        return await answered


def future_truncation_offset(future: Log, current: Log) -> int:
    """Where ``future`` agrees with ``current`` up to (Kafka's follower truncation by
    OffsetForLeaderEpoch, ``current`` answering as the leader): the end of ``future``'s
    latest epoch in ``current``, or of the latest epoch both know; its log end offset if
    nothing is to be dropped."""
    target = future.log_end_offset
    epoch = future.latest_epoch
    if epoch is not None:
        current_epoch, current_end = current.end_offset_for_epoch(epoch)
        if current_epoch == UNDEFINED_EPOCH:
            target = current.log_start_offset
        elif current_epoch == epoch:
            target = min(target, current_end)
        else:
            _, future_end = future.end_offset_for_epoch(current_epoch)
            target = min(target, current_end, future_end)
    return min(target, current.log_end_offset)


async def _nothing() -> None:
    return None


def _fetcher_name(replica_id: int) -> str:
    return f"replica {replica_id}" if replica_id >= 0 else "consumer"


__all__ = ["FetchIsolation", "FetchParams", "PartitionFetchInfo", "ReplicaManager"]
