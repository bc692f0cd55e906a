"""The follower side of replication: replica fetchers (Kafka 2.8's ReplicaFetcherManager,
ReplicaFetcherThread and AbstractFetcherThread, on the reactor).

A broker that follows a partition pulls the leader's log with Fetch requests carrying its
own broker id as ``replica_id``; the leader records each follower's position from them
(ISR, high watermark: kafkaclone.cluster.partition). Here:

- :class:`ReplicaFetcherManager` keeps ``num.replica.fetchers`` fetchers per source broker.
  A partition goes to fetcher ``abs(31 * hash(topic) + partition) % num.replica.fetchers``
  (Java's String.hashCode, as Kafka), so a partition always lands on the same fetcher of a
  broker. The ReplicaManager adds partitions when it makes this broker a follower (at the
  offset :func:`initial_fetch_offset` gives) and removes them when it makes it a leader,
  stops the replica or shuts down; a leader change moves a partition to a fetcher of the
  new leader, and fetchers left with nothing to do are shut down.
- :class:`ReplicaFetcher` is one connection to one source broker and a loop: truncate the
  partitions that need it, then one Fetch for every partition ready to fetch (at most
  ``replica.fetch.max.bytes`` each, ``replica.fetch.response.max.bytes`` in all, waiting
  up to ``replica.fetch.wait.max.ms`` for ``replica.fetch.min.bytes``), append what came
  with the leader's offsets and epochs, take the leader's high watermark and log start
  offset. Fetches run in an incremental fetch session (KIP-227, :class:`FetchSessionHandler`):
  after a full fetch that opens the session, a fetch names only the partitions whose fetch
  position changed, plus the ones to forget.

Truncation (KIP-101, KIP-279): a partition that becomes a follower may hold records its
new leader never had. With ``inter.broker.protocol.version`` 2.7-IV1 or later (Kafka 2.8's
default) a follower whose log knows a leader epoch starts fetching at its log end offset
with its last fetched epoch, and the leader answers a diverging epoch if the logs differ
(KIP-595's truncation on fetch). Otherwise, and for logs with no epoch, the partition
starts in the *truncating* state: an OffsetForLeaderEpoch request asks the leader for the
end offset of the follower's latest epoch, and the follower truncates to the smaller of
that and its own log end offset; if the leader answered an epoch the follower does not
know, it truncates to the end of its own largest epoch below it and asks again; an
undefined answer falls back to the high watermark. Both paths share the same rule
(:meth:`ReplicaFetcher._truncation_offset`).

Errors: OFFSET_OUT_OF_RANGE asks the leader for its end offset (ListOffsets) and truncates
if the follower is ahead (after an unclean election), or restarts the log empty at the
leader's log start offset if the follower fell below it. FENCED_LEADER_EPOCH stops
fetching the partition until the next LeaderAndIsr; UNKNOWN_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER and other partition errors back the partition off for
``replica.fetch.backoff.ms``; a failed request (connection refused, lost, or no answer
within ``replica.socket.timeout.ms``) backs off every partition it asked for.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final, NamedTuple, Protocol

from twisted.internet.defer import CancelledError, Deferred

from kafkaclone.common.clock import Scheduler
from kafkaclone.common.errors import (
    NONE,
    CorruptMessageError,
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkaclone.common.jvm import java_string_hash, kafka_abs
from kafkaclone.common.log_summary import each_level, examples, summarized
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
)
from kafkaclone.network.client import PLAINTEXT_CLIENT, ClientSecurity, KafkaClientConnection
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.config import default_int, default_str
from kafkaclone.server.replication_quota import ReplicationQuotaManager

logger = logging.getLogger(__name__)

FETCH = APIS[ApiKey.FETCH].request
OFFSET_FOR_LEADER_EPOCH = APIS[ApiKey.OFFSET_FOR_LEADER_EPOCH].request
LIST_OFFSETS = APIS[ApiKey.LIST_OFFSETS].request

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
"""A full fetch that asks the leader for a new session (closing the one named)."""
_INT32_MAX: Final = 0x7FFFFFFF


# -- configuration -------------------------------------------------------------------------


def _ibp_at_least(version: str, major: int, minor: int, iv: int = 0) -> bool:
    """Whether ``inter.broker.protocol.version`` (canonical, "2.8-IV1") is at least
    major.minor-IV<iv>."""
    base, _, suffix = version.partition("-")
    parts = base.split(".")
    try:
        numbers = (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
        internal = int(suffix[2:]) if suffix.upper().startswith("IV") else None
    except ValueError:
        return True  # an unparsable version: the newest behaviour
    if numbers != (major, minor):
        return numbers > (major, minor)
    # "2.7" alone means its latest internal version.
    return internal is None or internal >= iv


@dataclass(frozen=True)
class ReplicaFetcherConfig:
    """The broker settings the fetchers use (Kafka's names; the defaults are the broker
    config table's, the inter-broker listener's that of security.inter.broker.protocol)."""

    broker_id: int
    num_replica_fetchers: int = default_int("num.replica.fetchers")
    replica_fetch_max_bytes: int = default_int("replica.fetch.max.bytes")
    replica_fetch_min_bytes: int = default_int("replica.fetch.min.bytes")
    replica_fetch_wait_max_ms: int = default_int("replica.fetch.wait.max.ms")
    replica_fetch_response_max_bytes: int = default_int("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = default_int("replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = default_int("replica.socket.timeout.ms")
    socket_connection_setup_timeout_ms: int = default_int("socket.connection.setup.timeout.ms")
    socket_connection_setup_timeout_max_ms: int = default_int(
        "socket.connection.setup.timeout.max.ms")
    inter_broker_listener_name: str = default_str("security.inter.broker.protocol")
    inter_broker_protocol_version: str = default_str("inter.broker.protocol.version")
    client_security: ClientSecurity = PLAINTEXT_CLIENT
    """TLS and SASL of the inter-broker listener (the broker sets it once resolved)."""

    @classmethod
    def from_kafka_config(cls, config: Any) -> ReplicaFetcherConfig:
        return cls(
            broker_id=config.broker_id,
            num_replica_fetchers=config.num_replica_fetchers,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_min_bytes=config.replica_fetch_min_bytes,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            replica_socket_timeout_ms=config.replica_socket_timeout_ms,
            socket_connection_setup_timeout_ms=config.socket_connection_setup_timeout_ms,
            socket_connection_setup_timeout_max_ms=(
                config.socket_connection_setup_timeout_max_ms),
            inter_broker_listener_name=config.inter_broker_listener_name,
            inter_broker_protocol_version=config.inter_broker_protocol_version,
        )

    @cached_property
    def truncation_on_fetch(self) -> bool:
        """KIP-595's diverging epochs in Fetch v12 (inter.broker.protocol.version 2.7-IV1+)."""
        return _ibp_at_least(self.inter_broker_protocol_version, 2, 7, 1)

    @cached_property
    def fetch_version(self) -> int:
        return 12 if self.truncation_on_fetch else 11

    @cached_property
    def offset_for_leader_epoch_version(self) -> int:
        return 4 if _ibp_at_least(self.inter_broker_protocol_version, 2, 8) else 3

    @cached_property
    def list_offsets_version(self) -> int:
        return 6 if _ibp_at_least(self.inter_broker_protocol_version, 2, 8) else 5


# -- state -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerEndPoint:
    """A source broker on the inter-broker listener."""

    id: int
    host: str
    port: int


class ReplicaFetchState(enum.Enum):
    """Whether a fetcher truncates or fetches a partition (Kafka's AbstractFetcherThread
    ReplicaState: Truncating, Fetching; not the controller's ReplicaState)."""

    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(frozen=True)
class PartitionFetchState:
    """Where a fetcher is with one partition (Kafka's PartitionFetchState)."""

    fetch_offset: int
    lag: int | None
    current_leader_epoch: int
    state: ReplicaFetchState
    last_fetched_epoch: int | None = None
    delayed_until: float = 0.0
    """Reactor seconds before which the partition is backing off after an error."""

    def is_delayed(self, now: float) -> bool:
        return now < self.delayed_until

    def is_ready_for_fetch(self, now: float) -> bool:
        return self.state is ReplicaFetchState.FETCHING and not self.is_delayed(now)

    def is_truncating(self, now: float) -> bool:
        return self.state is ReplicaFetchState.TRUNCATING and not self.is_delayed(now)


@dataclass(frozen=True)
class InitialFetchState:
    """Where a partition added to a fetcher starts (Kafka's InitialFetchState)."""

    leader: BrokerEndPoint
    current_leader_epoch: int
    init_offset: int


@dataclass(frozen=True)
class OffsetTruncationState:
    offset: int
    truncation_completed: bool


class FollowerPartition(Protocol):
    """What a fetcher uses of a partition this broker follows (cluster.Partition)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def latest_epoch(self) -> int | None: ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def append_records_to_follower(self, records: bytes | bytearray | memoryview) -> Any: ...

    def update_follower_high_watermark(self, leader_high_watermark: int) -> int: ...

    def maybe_increment_log_start_offset(self, leader_log_start_offset: int) -> None: ...


class FetcherReplicaManager(Protocol):
    """What the fetchers use of the ReplicaManager."""

    def get_partition(self, tp: TopicPartition) -> Any: ...


class FetcherConnection(Protocol):
    """A connection to the source broker (kafkaclone.network.client.KafkaClientConnection)."""

    def send(self, api_key: int, api_version: int, body: Any) -> Awaitable[Any]: ...

    def close(self) -> None: ...


ConnectionFactory = Callable[[BrokerEndPoint, str], FetcherConnection]
"""(source broker, client id) -> connection."""


class FetchPosition(NamedTuple):
    """What a fetch asks of one partition; the leader's session keeps the last one sent (a
    tuple: built and compared for every partition of every fetch)."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int


class FetchSessionHandler:
    """The follower's side of a fetch session with one leader (KIP-227, Kafka's
    FetchSessionHandler): full fetches until the leader opens a session, then incremental
    ones carrying only the partitions added or changed since the last fetch and the ones
    removed (``forgotten``). An error, or an answer naming a partition outside the session,
    makes the next fetch a full one that closes the session and asks for a new one; an
    unknown session starts over without one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicPartition, FetchPosition] = {}

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: Mapping[TopicPartition, FetchPosition]
              ) -> tuple[dict[TopicPartition, FetchPosition], list[TopicPartition]]:
        """(partitions to send, partitions to forget) for a fetch of ``wanted``."""
        if self.is_full:
            self.session_partitions = dict(wanted)
            return dict(wanted), []
        forgotten = [tp for tp in self.session_partitions if tp not in wanted]
        for tp in forgotten:
            del self.session_partitions[tp]
        to_send: dict[TopicPartition, FetchPosition] = {}
        for tp, position in wanted.items():
            if self.session_partitions.get(tp) != position:
                to_send[tp] = position
                self.session_partitions[tp] = position
        return to_send, forgotten

    def handle_response(self, error_code: int, session_id: int,
                        partitions: Iterable[TopicPartition]) -> bool:
        """Move the session on after an answer; whether its partition data may be used."""
        if error_code != NONE:
            logger.info("[%s] Fetch session %d at epoch %d failed: %s", self.name,
                        self.session_id, self.epoch, error_for_code(error_code).name)
            if error_code == FetchSessionIdNotFoundError.code:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        answered = set(partitions)
        unknown = answered - self.session_partitions.keys()
        if self.is_full:
            missing = self.session_partitions.keys() - answered
            if unknown or missing:
                logger.info("[%s] The leader's full fetch answer did not match the request "
                            "(unexpected %s, missing %s)", self.name, sorted(unknown),
                            sorted(missing))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
            return True
        if unknown:
            logger.info("[%s] The leader's incremental fetch answer named partitions outside "
                        "the session: %s", self.name, sorted(unknown))
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:  # the leader closed the session
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """The fetch got no answer: start over with a full fetch."""
        self.epoch = INITIAL_EPOCH


def initial_fetch_offset(partition: FollowerPartition, truncation_on_fetch: bool) -> int:
    """Where a new follower starts (Kafka's initialFetchOffset): its log end offset when it
    can truncate on fetch (its log knows an epoch), else its high watermark."""
    if truncation_on_fetch and partition.latest_epoch is not None:
        return partition.log_end_offset
    return partition.high_watermark


def fetcher_id_for(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId."""
    value = (31 * java_string_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
    if value >= 1 << 31:
        value -= 1 << 32
    return kafka_abs(value) % num_fetchers


# -- one fetcher -----------------------------------------------------------------------------


class ReplicaFetcher:
    """Fetches a set of partitions from one source broker; see the module docstring."""

    def __init__(
        self,
        fetcher_id: int,
        source: BrokerEndPoint,
        config: ReplicaFetcherConfig,
        replica_manager: FetcherReplicaManager,
        clock: Scheduler,
        connection: FetcherConnection,
        on_partition_failed: Callable[[TopicPartition], None] | None = None,
        quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.fetcher_id = fetcher_id
        self.quota = quota
        """The follower's replication throttle (KIP-73), None: unthrottled."""
        self.source = source
        self.config = config
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{source.id}"
        self._replica_manager = replica_manager
        self._clock = clock
        self._connection = connection
        self._on_partition_failed = on_partition_failed
        self.partition_states: dict[TopicPartition, PartitionFetchState] = {}
        self._running = False
        self._loop: Deferred[None] | None = None
        self._wakeup: Deferred[None] | None = None
        self.session = FetchSessionHandler(self.name)
        self.fetch_requests_sent = 0
        """How many Fetch requests went out (tests and monitoring)."""

    def __repr__(self) -> str:
        return f"{self.name}({len(self.partition_states)} partitions)"

    @property
    def partition_count(self) -> int:
        return len(self.partition_states)

    @property
    def running(self) -> bool:
        return self._running

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._running:
            return
        self._running = True
        logger.info("[%s] Starting", self.name)
        self._loop = Deferred.fromCoroutine(self._run())

    def shutdown(self) -> Deferred[None]:
        """Stop the loop (a request in flight fails at once) and close the connection; fires
        when the loop has ended."""
        logger.info("[%s] Shutting down", self.name)
        self._running = False
        self._connection.close()
        self._wake()
        loop = self._loop
        done: Deferred[None] = Deferred()
        if loop is None or loop.called:
            done.callback(None)
        else:
            loop.addBoth(lambda _: done.callback(None))
        return done

    async def _run(self) -> None:
        while self._running:
            try:
                await self._do_work()
            except Exception:
                # Nothing a leader answers may end the loop: log it, back off, go on.
                logger.exception("[%s] Error in the fetcher loop", self.name)
                await self._sleep(self.config.replica_fetch_backoff_ms / 1000.0)
        logger.info("[%s] Stopped", self.name)

    def _wake(self) -> None:
        """End the current sleep on the next reactor turn (never inside the caller: adding
        partitions from a LeaderAndIsr must not run the fetch loop in the middle of it)."""
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None and not wakeup.called:
            self._clock.callLater(0, _fire, wakeup)

    async def _sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less if partitions are added or the fetcher stops."""
        if not self._running:
            return
        wakeup: Deferred[None] = Deferred()
        self._wakeup = wakeup
        call = self._clock.callLater(seconds, _fire, wakeup)
        try:
            await wakeup
        finally:
            if call.active():
                call.cancel()

    # -- partitions ------------------------------------------------------------------------

    def add_partitions(self, initial_states: Mapping[TopicPartition, InitialFetchState]
                       ) -> set[TopicPartition]:
        """Start fetching these partitions (Kafka's addPartitions). A partition already here
        at the same leader epoch keeps its state; otherwise it starts fetching at its
        initial offset with its last fetched epoch (truncation on fetch), or truncating."""
        for tp, initial in initial_states.items():
            current = self.partition_states.get(tp)
            if current is not None and current.current_leader_epoch == initial.current_leader_epoch:
                continue
            last_fetched_epoch = self._latest_epoch(tp)
            state = (ReplicaFetchState.FETCHING
                     if self.config.truncation_on_fetch and last_fetched_epoch is not None
                     else ReplicaFetchState.TRUNCATING)
            self.partition_states[tp] = PartitionFetchState(
                initial.init_offset, None, initial.current_leader_epoch, state,
                last_fetched_epoch if state is ReplicaFetchState.FETCHING else None)
            logger.debug("[%s] Added %s at offset %d, leader epoch %d (%s)", self.name, tp,
                        initial.init_offset, initial.current_leader_epoch, state.value)
        self._wake()
        return set(initial_states)

    def remove_partitions(self, tps: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, PartitionFetchState]:
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for tp in tps:
            state = self.partition_states.pop(tp, None)
            if state is not None:
                removed[tp] = state
        return removed

    def _delay_partitions(self, tps: Iterable[TopicPartition]) -> None:
        until = self._clock.seconds() + self.config.replica_fetch_backoff_ms / 1000.0
        for tp in tps:
            state = self.partition_states.get(tp)
            if state is not None and not state.is_delayed(self._clock.seconds()):
                self.partition_states[tp] = replace(state, delayed_until=until)

    def _mark_partition_failed(self, tp: TopicPartition, level: int = logging.WARNING
                               ) -> None:
        """Stop fetching ``tp`` until the next LeaderAndIsr (Kafka's markPartitionFailed)."""
        if self.partition_states.pop(tp, None) is not None:
            logger.log(level, "[%s] Partition %s marked as failed", self.name, tp)
            if self._on_partition_failed is not None:
                self._on_partition_failed(tp)

    def _partition(self, tp: TopicPartition) -> FollowerPartition:
        partition = self._replica_manager.get_partition(tp)
        if partition is None:
            raise NotLeaderOrFollowerError(f"Partition {tp} is not hosted on broker "
                                           f"{self.config.broker_id}")
        result: FollowerPartition = partition
        return result

    def _latest_epoch(self, tp: TopicPartition) -> int | None:
        partition = self._replica_manager.get_partition(tp)
        if partition is None:
            return None
        epoch: int | None = partition.latest_epoch
        return epoch

    # -- one round ---------------------------------------------------------------------------

    async def _do_work(self) -> None:
        await self._maybe_truncate()
        if not self._running:
            return
        request, fetched = self._build_fetch()
        if request is None:
            now = self._clock.seconds()
            if not any(s.is_truncating(now) for s in self.partition_states.values()):
                # Nothing to do until a partition is added or its backoff ends.
                await self._sleep(self.config.replica_fetch_backoff_ms / 1000.0)
            return
        await self._process_fetch_request(request, fetched)

    # -- truncation ----------------------------------------------------------------------------

    async def _maybe_truncate(self) -> None:
        now = self._clock.seconds()
        truncating = [tp for tp, state in self.partition_states.items()
                      if state.is_truncating(now)]
        if not truncating:
            return
        with_epochs: dict[TopicPartition, tuple[int, int]] = {}
        without_epochs: list[TopicPartition] = []
        for tp in truncating:
            epoch = self._latest_epoch(tp)
            if epoch is None:
                without_epochs.append(tp)
            else:
                with_epochs[tp] = (epoch, self.partition_states[tp].current_leader_epoch)
        if without_epochs:
            self._truncate_to_high_watermark(without_epochs)
        if with_epochs:
            await self._truncate_to_epoch_end_offsets(with_epochs)

    def _truncate_to_high_watermark(self, tps: Iterable[TopicPartition]) -> None:
        """A log with no leader epochs truncates to where it starts fetching, its high
        watermark."""
        for tp in tps:
            state = self.partition_states.get(tp)
            if state is None:
                continue
            try:
                self._truncate(tp, OffsetTruncationState(state.fetch_offset, True))
            except KafkaError as exc:
                logger.error("[%s] Failed to truncate %s: %s", self.name, tp, exc)
                self._mark_partition_failed(tp)
                continue
            self.partition_states[tp] = replace(state, state=ReplicaFetchState.FETCHING,
                                                last_fetched_epoch=self._latest_epoch(tp))

    async def _truncate_to_epoch_end_offsets(
            self, epochs: dict[TopicPartition, tuple[int, int]]) -> None:
        """Ask the leader where each partition's latest epoch ends (OffsetForLeaderEpoch) and
        truncate to it (Kafka's truncateToEpochEndOffsets)."""
        by_topic: dict[str, list[Any]] = {}
        structs = OFFSET_FOR_LEADER_EPOCH.structs
        for tp, (epoch, current_epoch) in epochs.items():
            by_topic.setdefault(tp.topic, []).append(structs["OffsetForLeaderPartition"](
                partition=tp.partition, current_leader_epoch=current_epoch, leader_epoch=epoch))
        request = OFFSET_FOR_LEADER_EPOCH(replica_id=self.config.broker_id, topics=[
            structs["OffsetForLeaderTopic"](topic=topic, partitions=partitions)
            for topic, partitions in by_topic.items()])
        try:
            response = await self._connection.send(
                ApiKey.OFFSET_FOR_LEADER_EPOCH, self.config.offset_for_leader_epoch_version,
                request)
        except (KafkaError, ConnectionError, CancelledError) as exc:
            if self._running:
                logger.warning("[%s] Error when sending leader epoch request for %s: %s",
                               self.name, sorted(epochs), exc)
                self._delay_partitions(epochs)
            return
        answers: dict[TopicPartition, tuple[int, int, int]] = {}
        for topic in response.topics:
            for p in topic.partitions:
                answers[TopicPartition(topic.topic, p.partition)] = (
                    p.error_code, p.leader_epoch, p.end_offset)
        for tp, (_, requested_epoch) in epochs.items():
            state = self.partition_states.get(tp)
            # Leadership or the leader epoch moved while the request was out: ignore it.
            if state is None or state.current_leader_epoch != requested_epoch:
                continue
            answer = answers.get(tp)
            if answer is None:
                logger.warning("[%s] The leader did not answer for %s", self.name, tp)
                self._delay_partitions([tp])
                continue
            error_code, leader_epoch, end_offset = answer
            if error_code == NONE:
                self._apply_epoch_end_offset(tp, state, leader_epoch, end_offset)
            elif error_code == FencedLeaderEpochError.code:
                self._on_partition_fenced(tp, requested_epoch)
            else:
                logger.info("[%s] Retrying leaderEpoch request for partition %s as the leader "
                            "reported an error: %s", self.name, tp,
                            error_for_code(error_code).name)
                self._delay_partitions([tp])

    def _apply_epoch_end_offset(self, tp: TopicPartition, state: PartitionFetchState,
                                leader_epoch: int, end_offset: int) -> None:
        try:
            truncation = self._truncation_offset(tp, state, leader_epoch, end_offset)
            self._truncate(tp, truncation)
        except KafkaError as exc:
            logger.error("[%s] Failed to truncate %s: %s", self.name, tp, exc)
            self._mark_partition_failed(tp)
            return
        done = truncation.truncation_completed
        self.partition_states[tp] = replace(
            state, fetch_offset=truncation.offset,
            state=ReplicaFetchState.FETCHING if done else ReplicaFetchState.TRUNCATING,
            last_fetched_epoch=self._latest_epoch(tp) if done else None)

    def _truncation_offset(self, tp: TopicPartition, state: PartitionFetchState,
                           leader_epoch: int, leader_end_offset: int) -> OffsetTruncationState:
        """Where to truncate given the leader's (epoch, end offset) for our latest epoch
        (Kafka's getOffsetTruncationState)."""
        partition = self._partition(tp)
        replica_end_offset = partition.log_end_offset
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            logger.warning("[%s] Based on the replica's leader epoch, the leader replied with "
                           "an unknown offset in %s. The initial fetch offset %d will be used "
                           "for truncation.", self.name, tp, state.fetch_offset)
            return OffsetTruncationState(min(state.fetch_offset, replica_end_offset), True)
        if leader_epoch == UNDEFINED_EPOCH:
            return OffsetTruncationState(min(leader_end_offset, replica_end_offset), True)
        follower_epoch, follower_end_offset = partition.end_offset_for_epoch(leader_epoch)
        if follower_epoch == UNDEFINED_EPOCH:
            logger.warning("[%s] Based on the replica's leader epoch, the leader replied with "
                           "epoch %d below any of the replica's tracked epochs for %s. The "
                           "leader's offset %d will be used for truncation.", self.name,
                           leader_epoch, tp, leader_end_offset)
            return OffsetTruncationState(min(leader_end_offset, replica_end_offset), True)
        if follower_epoch != leader_epoch:
            # The leader answered an epoch this replica does not know: go back to the end of
            # our largest epoch below it and ask again.
            offset = min(follower_end_offset, replica_end_offset)
            logger.info("[%s] Based on the replica's leader epoch, the leader replied with "
                        "epoch %d unknown to the replica for %s. Will truncate to %d and send "
                        "another leader epoch request to the leader.", self.name,
                        leader_epoch, tp, offset)
            return OffsetTruncationState(offset, False)
        offset = min(follower_end_offset, leader_end_offset, replica_end_offset)
        return OffsetTruncationState(offset, True)

    def _truncate(self, tp: TopicPartition, truncation: OffsetTruncationState) -> None:
        partition = self._partition(tp)
        if truncation.offset < partition.high_watermark:
            logger.warning("[%s] Truncating %s to offset %d below the high watermark %d",
                           self.name, tp, truncation.offset, partition.high_watermark)
        if truncation.offset < partition.log_end_offset:
            logger.info("[%s] Truncating partition %s to local high watermark/offset %d "
                        "(log end offset %d)", self.name, tp, truncation.offset,
                        partition.log_end_offset)
        partition.truncate_to(truncation.offset)

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> None:
        self._on_partitions_fenced([(tp, request_epoch)])

    def _on_partitions_fenced(self, fenced: Sequence[tuple[TopicPartition, int]]) -> None:
        """Kafka's onPartitionFenced for the partitions of one answer fetched at an epoch the
        leader has left: each waits for its next LeaderAndIsr. A new controller's ISR
        changes fence thousands at once: past ``EXAMPLES`` of them, one line for all (each
        at DEBUG), where a line each held the reactor thread for a second."""
        older = [(tp, epoch) for tp, epoch in fenced
                 if (state := self.partition_states.get(tp)) is not None
                 and state.current_leader_epoch == epoch]
        for tp, epoch in older:
            logger.log(each_level(len(older), logging.INFO), "[%s] Partition %s has an older "
                       "epoch (%d) than the current leader. Will await the new LeaderAndIsr "
                       "state before resuming fetching.", self.name, tp, epoch)
            self._mark_partition_failed(tp, each_level(len(older), logging.WARNING))
        if summarized(len(older)):
            logger.warning("[%s] %d partitions have an older epoch than the current leader "
                           "(%s): marked as failed until their next LeaderAndIsr", self.name,
                           len(older), examples([f"{tp} (epoch {epoch})" for tp, epoch in older]))

    # -- fetching ------------------------------------------------------------------------------

    def _build_fetch(self) -> tuple[Any, dict[TopicPartition, PartitionFetchState]]:
        """One Fetch for every partition ready to fetch (None if there is none): in the
        session, only what changed since the last fetch."""
        now = self._clock.seconds()
        wanted: dict[TopicPartition, FetchPosition] = {}
        fetched: dict[TopicPartition, PartitionFetchState] = {}
        max_bytes = self.config.replica_fetch_max_bytes
        truncation_on_fetch = self.config.truncation_on_fetch
        quota = self.quota
        throttling = quota is not None and quota.is_quota_exceeded()
        for tp, state in self.partition_states.items():
            if not state.is_ready_for_fetch(now):
                continue
            if throttling and self._should_follower_throttle(tp, state):
                continue
            try:
                log_start_offset = self._partition(tp).log_start_offset
            except KafkaError as exc:
                logger.error("[%s] Error building the fetch for %s: %s", self.name, tp, exc)
                self._delay_partitions([tp])
                continue
            last_fetched_epoch = state.last_fetched_epoch
            if not truncation_on_fetch or last_fetched_epoch is None:
                last_fetched_epoch = UNDEFINED_EPOCH
            wanted[tp] = FetchPosition(state.fetch_offset, log_start_offset, max_bytes,
                                       state.current_leader_epoch, last_fetched_epoch)
            fetched[tp] = state
        if not fetched:
            return None, fetched
        to_send, forgotten = self.session.build(wanted)
        structs = FETCH.structs
        by_topic: dict[str, list[Any]] = {}
        for tp, position in to_send.items():
            by_topic.setdefault(tp.topic, []).append(structs["FetchPartition"](
                partition=tp.partition, current_leader_epoch=position.current_leader_epoch,
                fetch_offset=position.fetch_offset,
                last_fetched_epoch=position.last_fetched_epoch,
                log_start_offset=position.log_start_offset,
                partition_max_bytes=position.max_bytes))
        forgotten_by_topic: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
        config = self.config
        request = FETCH(
            cluster_id=None, replica_id=config.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes, isolation_level=0,
            session_id=self.session.session_id, session_epoch=self.session.epoch,
            topics=[structs["FetchTopic"](topic=topic, partitions=partitions)
                    for topic, partitions in by_topic.items()],
            forgotten_topics_data=[structs["ForgottenTopic"](topic=topic, partitions=parts)
                                   for topic, parts in forgotten_by_topic.items()],
            rack_id="")
        return request, fetched

    def _should_follower_throttle(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        """Kafka's shouldFollowerThrottle: a replica not caught up, throttled, with the
        follower's quota exceeded, is left out of the fetch."""
        quota = self.quota
        in_sync = state.lag is not None and state.lag <= 0
        return (quota is not None and not in_sync and quota.is_throttled(tp)
                and quota.is_quota_exceeded())

    async def _process_fetch_request(self, request: Any,
                                     fetched: dict[TopicPartition, PartitionFetchState]) -> None:
        self.fetch_requests_sent += 1
        try:
            response = await self._connection.send(ApiKey.FETCH, self.config.fetch_version,
                                                   request)
        except (KafkaError, ConnectionError, CancelledError) as exc:
            self.session.handle_error()
            if not self._running:
                return
            logger.info("[%s] Error sending fetch request to broker %d: %s", self.name,
                        self.source.id, exc)
            self._delay_partitions(fetched)
            await self._sleep(self.config.replica_fetch_backoff_ms / 1000.0)
            return
        if not self._running:
            return
        answered = [(TopicPartition(topic.topic, data.partition_index), data)
                    for topic in response.responses for data in topic.partitions]
        if not self.session.handle_response(response.error_code, response.session_id,
                                            [tp for tp, _ in answered]):
            if response.error_code not in (NONE, FetchSessionIdNotFoundError.code,
                                           InvalidFetchSessionEpochError.code):
                logger.warning("[%s] Fetch request to broker %d failed: %s", self.name,
                               self.source.id, error_for_code(response.error_code).name)
                self._delay_partitions(fetched)
                await self._sleep(self.config.replica_fetch_backoff_ms / 1000.0)
            return  # a session error: the next fetch is a full one, at once
        with_errors: list[TopicPartition] = []
        fenced: list[tuple[TopicPartition, int]] = []
        diverging: dict[TopicPartition, tuple[PartitionFetchState, int, int]] = {}
        for tp, data in answered:
            requested = fetched.get(tp)
            current = self.partition_states.get(tp)
            # Drop answers for partitions removed, moved or reset while the fetch was out.
            if (requested is None or current is None
                    or current.fetch_offset != requested.fetch_offset
                    or current.current_leader_epoch != requested.current_leader_epoch
                    or not current.is_ready_for_fetch(self._clock.seconds())):
                continue
            error = data.error_code
            if error == NONE:
                epoch_end = data.diverging_epoch
                if (epoch_end is not None and epoch_end.epoch >= 0
                        and epoch_end.end_offset >= 0):
                    diverging[tp] = (current, epoch_end.epoch, epoch_end.end_offset)
                else:
                    self._process_partition_data(tp, current, data, with_errors)
            elif error == OffsetOutOfRangeError.code:
                if not await self._handle_out_of_range(tp, current):
                    with_errors.append(tp)
            elif error == FencedLeaderEpochError.code:
                fenced.append((tp, requested.current_leader_epoch))
            else:
                level = (logging.DEBUG if error in (UnknownLeaderEpochError.code,
                                                    NotLeaderOrFollowerError.code)
                         else logging.WARNING
                         if error == UnknownTopicOrPartitionError.code else logging.ERROR)
                logger.log(level, "[%s] Error for partition %s at offset %d: %s",
                           self.name, tp, current.fetch_offset, error_for_code(error).name)
                with_errors.append(tp)
        self._on_partitions_fenced(fenced)
        for tp, (state, epoch, end_offset) in diverging.items():
            if self.partition_states.get(tp) is state:
                logger.info("[%s] The leader reports that %s diverges at epoch %d, end offset "
                            "%d", self.name, tp, epoch, end_offset)
                self._apply_epoch_end_offset(tp, state, epoch, end_offset)
        self._delay_partitions(with_errors)

    def _process_partition_data(self, tp: TopicPartition, state: PartitionFetchState,
                                data: Any, with_errors: list[TopicPartition]) -> None:
        """Append what the leader sent and take its high watermark and log start offset
        (Kafka's ReplicaFetcherThread.processPartitionData)."""
        try:
            partition = self._partition(tp)
            if state.fetch_offset != partition.log_end_offset:
                raise RuntimeError(f"Offset mismatch for partition {tp}: fetched offset = "
                                   f"{state.fetch_offset}, log end offset = "
                                   f"{partition.log_end_offset}.")
            records = data.records
            info = None
            if records is not None and len(records) > 0:
                info = partition.append_records_to_follower(records)
                if self.quota is not None and self.quota.is_throttled(tp):
                    self.quota.record(len(records))
            partition.update_follower_high_watermark(data.high_watermark)
            partition.maybe_increment_log_start_offset(data.log_start_offset)
        except (CorruptMessageError, InvalidRecordError) as exc:
            # Maybe a transient state of the leader's log: retry after the backoff.
            logger.error("[%s] Found invalid messages during fetch for partition %s offset %d: "
                         "%s", self.name, tp, state.fetch_offset, exc)
            with_errors.append(tp)
            return
        except KafkaStorageError as exc:
            logger.error("[%s] Error while processing data for partition %s at offset %d: %s",
                         self.name, tp, state.fetch_offset, exc)
            self._mark_partition_failed(tp)
            return
        except Exception:
            logger.exception("[%s] Unexpected error occurred while processing data for "
                             "partition %s at offset %d", self.name, tp, state.fetch_offset)
            self._mark_partition_failed(tp)
            return
        next_offset = (info.last_offset + 1 if info is not None and info.valid_bytes > 0
                       else state.fetch_offset)
        lag = max(0, data.high_watermark - next_offset)
        if next_offset != state.fetch_offset or state.lag != lag:
            # The fields spelled out: dataclasses.replace, per answer, cost more than the
            # rest of this bookkeeping.
            self.partition_states[tp] = PartitionFetchState(
                next_offset, lag, state.current_leader_epoch, state.state,
                partition.latest_epoch, state.delayed_until)

    async def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState
                                   ) -> bool:
        """OFFSET_OUT_OF_RANGE (Kafka's fetchOffsetAndTruncate): if the leader's log ends
        below ours (an unclean election), truncate to its end; if ours ends below its log
        start, restart empty there; fetch from max(our end, its start). False on failure."""
        epoch = state.current_leader_epoch
        try:
            partition = self._partition(tp)
            replica_end_offset = partition.log_end_offset
            leader_end_offset = await self._leader_offset(tp, epoch, LATEST_TIMESTAMP)
            current = self.partition_states.get(tp)
            if current is None or current.current_leader_epoch != epoch:
                return True
            if leader_end_offset < replica_end_offset:
                logger.warning("[%s] Reset fetch offset for partition %s from %d to current "
                               "leader %d's latest offset %d", self.name, tp,
                               replica_end_offset, self.source.id, leader_end_offset)
                self._truncate(tp, OffsetTruncationState(leader_end_offset, True))
                self.partition_states[tp] = PartitionFetchState(
                    leader_end_offset, 0, epoch, ReplicaFetchState.FETCHING, self._latest_epoch(tp))
                return True
            leader_start_offset = await self._leader_offset(tp, epoch, EARLIEST_TIMESTAMP)
            current = self.partition_states.get(tp)
            if current is None or current.current_leader_epoch != epoch:
                return True
            replica_end_offset = partition.log_end_offset
            offset_to_fetch = max(leader_start_offset, replica_end_offset)
            logger.warning("[%s] Reset fetch offset for partition %s from %d to current leader "
                           "%d's start offset %d", self.name, tp, replica_end_offset,
                           self.source.id, leader_start_offset)
            if leader_start_offset > replica_end_offset:
                partition.truncate_fully_and_start_at(leader_start_offset)
            self.partition_states[tp] = PartitionFetchState(
                offset_to_fetch, leader_end_offset - offset_to_fetch, epoch,
                ReplicaFetchState.FETCHING, self._latest_epoch(tp))
            return True
        except FencedLeaderEpochError:
            self._on_partition_fenced(tp, epoch)
            return True
        except (KafkaError, ConnectionError, CancelledError) as exc:
            logger.error("[%s] Error getting offset for partition %s: %s", self.name, tp, exc)
            return False

    async def _leader_offset(self, tp: TopicPartition, current_leader_epoch: int,
                             timestamp: int) -> int:
        """The leader's log end (-1) or start (-2) offset (ListOffsets as a replica)."""
        structs = LIST_OFFSETS.structs
        request = LIST_OFFSETS(replica_id=self.config.broker_id, isolation_level=0, topics=[
            structs["ListOffsetsTopic"](name=tp.topic, partitions=[
                structs["ListOffsetsPartition"](
                    partition_index=tp.partition, current_leader_epoch=current_leader_epoch,
                    timestamp=timestamp, max_num_offsets=1)])])
        response = await self._connection.send(ApiKey.LIST_OFFSETS,
                                               self.config.list_offsets_version, request)
        for topic in response.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and p.partition_index == tp.partition:
                    if p.error_code != NONE:
                        raise error_for_code(p.error_code)(
                            f"ListOffsets for {tp} on broker {self.source.id}")
                    offset: int = p.offset
                    return offset
        raise UnknownTopicOrPartitionError(f"The leader did not answer ListOffsets for {tp}")


def _fire(wakeup: Deferred[None]) -> None:
    if not wakeup.called:
        wakeup.callback(None)


# -- the manager -----------------------------------------------------------------------------


class ReplicaFetcherManager:
    """The fetchers of one broker, ``num.replica.fetchers`` per source broker; see the module
    docstring."""

    def __init__(
        self,
        config: ReplicaFetcherConfig,
        replica_manager: FetcherReplicaManager,
        clock: Scheduler,
        connection_factory: ConnectionFactory | None = None,
        *, quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.config = config
        self.quota = quota
        self._replica_manager = replica_manager
        self._clock = clock
        self._connection_factory = connection_factory or self._tcp_connection
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        """(source broker id, fetcher id) -> fetcher."""
        self.failed_partitions: set[TopicPartition] = set()
        self._stopping: list[Deferred[None]] = []

    def _tcp_connection(self, source: BrokerEndPoint, client_id: str) -> FetcherConnection:
        return KafkaClientConnection(
            self._clock, source.host, source.port, client_id=client_id,
            request_timeout=self.config.replica_socket_timeout_ms / 1000.0,
            connect_timeout=self.config.socket_connection_setup_timeout_ms / 1000.0,
            connect_timeout_max=self.config.socket_connection_setup_timeout_max_ms / 1000.0,
            security=self.config.client_security)

    def fetcher_id(self, tp: TopicPartition) -> int:
        return fetcher_id_for(tp, max(1, self.config.num_replica_fetchers))

    def fetcher_for(self, tp: TopicPartition) -> ReplicaFetcher | None:
        for fetcher in self.fetchers.values():
            if tp in fetcher.partition_states:
                return fetcher
        return None

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        fetcher = self.fetcher_for(tp)
        return None if fetcher is None else fetcher.partition_states.get(tp)

    def add_fetcher_for_partitions(self, initial_states: Mapping[TopicPartition,
                                                                 InitialFetchState]) -> None:
        """Hand each partition to its fetcher for its leader, creating (or, if the leader's
        endpoint changed, replacing) the fetcher (Kafka's addFetcherForPartitions)."""
        groups: dict[tuple[BrokerEndPoint, int], dict[TopicPartition, InitialFetchState]] = {}
        for tp, initial in initial_states.items():
            groups.setdefault((initial.leader, self.fetcher_id(tp)), {})[tp] = initial
        for (source, fetcher_id), states in groups.items():
            key = (source.id, fetcher_id)
            fetcher = self.fetchers.get(key)
            carried: dict[TopicPartition, InitialFetchState] = {}
            if fetcher is not None and fetcher.source != source:
                # The broker's endpoint changed: a new fetcher (connection) takes over the
                # old one's partitions where they were.
                carried = {tp: InitialFetchState(source, state.current_leader_epoch,
                                                 state.fetch_offset)
                           for tp, state in fetcher.partition_states.items()
                           if tp not in states}
                self._shutdown_fetcher(key)
                fetcher = None
            if fetcher is None:
                fetcher = self._create_fetcher(fetcher_id, source)
                self.fetchers[key] = fetcher
                fetcher.start()
                if carried:
                    fetcher.add_partitions(carried)
            self.failed_partitions.difference_update(states)
            fetcher.add_partitions(states)
            logger.info("Added fetcher to broker %d for partitions %s", source.id,
                        ", ".join(f"{tp} (offset {s.init_offset}, leader epoch "
                                  f"{s.current_leader_epoch})" for tp, s in states.items()))

    def _create_fetcher(self, fetcher_id: int, source: BrokerEndPoint) -> ReplicaFetcher:
        client_id = f"broker-{self.config.broker_id}-fetcher-{fetcher_id}"
        connection = self._connection_factory(source, client_id)
        return ReplicaFetcher(fetcher_id, source, self.config, self._replica_manager,
                              self._clock, connection, self.failed_partitions.add,
                              quota=self.quota)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]
                                      ) -> dict[TopicPartition, PartitionFetchState]:
        wanted = set(tps)
        removed: dict[TopicPartition, PartitionFetchState] = {}
        if not wanted:
            return removed
        for fetcher in self.fetchers.values():
            removed.update(fetcher.remove_partitions(wanted))
        self.failed_partitions.difference_update(wanted)
        if removed:
            logger.info("Removed fetcher for partitions %s",
                        ", ".join(str(tp) for tp in sorted(removed)))
        return removed

    def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if fetcher.partition_count == 0:
                self._shutdown_fetcher(key)

    def _shutdown_fetcher(self, key: tuple[int, int]) -> None:
        fetcher = self.fetchers.pop(key)
        stopped = fetcher.shutdown()
        self._stopping.append(stopped)
        stopped.addBoth(lambda _: self._stopping.remove(stopped))

    def shutdown(self) -> Deferred[None]:
        """Stop every fetcher; fires once all their loops ended."""
        logger.info("shutting down the replica fetchers")
        for key in list(self.fetchers):
            self._shutdown_fetcher(key)
        pending = list(self._stopping)

        async def wait() -> None:
            for d in pending:
                if not d.called:
                    await d

        return Deferred.fromCoroutine(wait())


__all__ = [
    "BrokerEndPoint",
    "InitialFetchState",
    "PartitionFetchState",
    "ReplicaFetchState",
    "ReplicaFetcher",
    "ReplicaFetcherConfig",
    "ReplicaFetcherManager",
    "fetcher_id_for",
    "initial_fetch_offset",
]
