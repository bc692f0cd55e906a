"""Consumer: Kafka's consumer design in Python, synchronous, single-threaded use (a
background thread only heartbeats for a group).

Each assigned partition has a position (the next offset to return), kept with the
subscription and the assignment in a SubscriptionState that the group's
ConsumerCoordinator (kafkaclone.clients.group) shares. ``poll`` returns
buffered records if it has any, and keeps one Fetch in flight per broker for the
partitions it leads that have nothing buffered (so the next fetch runs while the caller
works on the last one). A partition without a position (a new assignment, or after
``OFFSET_OUT_OF_RANGE``) takes its committed offset (with a ``group.id``) or the
``auto.offset.reset`` policy (earliest, latest, or ``none``: an error). Records are decoded
straight from the fetched batch bytes, column-wise (kafkaclone.protocol.records.columnar);
``poll_raw`` hands those bytes out undecoded and ``poll_columns`` hands out the columns,
for the Spark source.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kafkaclone.clients.common import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    ConsumerGroupMetadata,
    ConsumerRecord,
    TopicPartition,
)
from kafkaclone.clients.config import ConfigException, ConsumerConfig
from kafkaclone.clients.group import ConsumerCoordinator
from kafkaclone.clients.network import ClusterMetadata, Metadata, NetworkClient
from kafkaclone.clients.subscription_state import (
    EARLIEST,
    LATEST,
    RebalanceListener,
    SubscriptionState,
    TopicPartitionState,
)
from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    LeaderNotAvailableError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import (
    ControlRecordType,
    RecordBatch,
    decode_control_record_key,
    iter_batches,
)
from kafkaclone.protocol.records.columnar import RecordColumns, decode_columns

logger = logging.getLogger(__name__)

_REFRESH_ERRORS: Final = (6, 3, 5, 9, 74, 76, 56)
"""NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
REPLICA_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR:
the leader moved; refresh metadata and fetch again."""


@dataclass
class RawFetch:
    """One partition's part of a fetch response, undecoded (``poll_raw``)."""

    topic: str
    partition: int
    fetch_offset: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview
    """Whole record batches (a partial batch at the end is cut off)."""
    next_offset: int | None
    """The offset after the last complete batch (None when there is none)."""


class _Completed:
    """A fetched partition's batches not yet returned (``state``: the partition's state
    they were fetched for; a new assignment of the partition has a new one)."""

    __slots__ = ("columns", "fetch_offset", "next_offset", "raw", "row", "state", "tp")

    def __init__(self, tp: tuple[str, int], state: TopicPartitionState, fetch_offset: int,
                 raw: memoryview, next_offset: int | None) -> None:
        self.tp = tp
        self.state = state
        self.fetch_offset = fetch_offset
        self.raw = raw
        self.columns: RecordColumns | None = None
        self.row = 0
        self.next_offset = next_offset


def drop_aborted_batches(raw: memoryview, aborted_transactions: Iterable[Any]
                         ) -> memoryview:
    """The batches of ``raw`` without those of aborted transactions, for read_committed
    (Kafka's Fetcher): a fetch answer lists each aborted transaction in it by producer id
    and first offset; a transactional batch of a producer whose aborted transaction started
    at or before the batch's last offset is dropped, until that producer's ABORT marker.
    Control batches stay (they are skipped when decoded, and count for the next offset)."""
    pending = sorted(((t.first_offset, t.producer_id) for t in aborted_transactions),
                     reverse=True)
    if not pending:
        return raw
    aborted_producers: set[int] = set()
    kept: list[memoryview] = []
    dropped = False
    for batch in iter_batches(raw, allow_partial_tail=True):
        if not isinstance(batch, RecordBatch) or not batch.has_producer_id:
            kept.append(batch.view)
            continue
        header = batch.header
        while pending and pending[-1][0] <= header.last_offset:
            aborted_producers.add(pending.pop()[1])
        if header.is_control:
            if header.producer_id in aborted_producers and _is_abort_marker(batch):
                aborted_producers.discard(header.producer_id)
            kept.append(batch.view)
        elif header.is_transactional and header.producer_id in aborted_producers:
            dropped = True
        else:
            kept.append(batch.view)
    return memoryview(b"".join(kept)) if dropped else raw


def _is_abort_marker(batch: RecordBatch) -> bool:
    for record in batch.records():
        return decode_control_record_key(record.key) is ControlRecordType.ABORT
    return False


def _scan_next_offset(raw: memoryview) -> tuple[memoryview, int | None]:
    """Cut a partial batch off the end; the offset after the last complete batch."""
    end = 0
    next_offset = None
    for batch in iter_batches(raw, allow_partial_tail=True):
        end += batch.size_in_bytes
        next_offset = batch.next_offset
    return raw[:end], next_offset


def _tps(partitions: Iterable[Any]) -> list[TopicPartition]:
    out = []
    for p in partitions:
        if isinstance(p, TopicPartition):
            out.append(p)
        elif isinstance(p, tuple):
            out.append(TopicPartition(*p))
        else:
            out.append(TopicPartition(p.topic, p.partition, getattr(p, "offset", OFFSET_INVALID)))
    return out


class Consumer:
    """Kafka's consumer (see the module docstring). ``conf``: Kafka's consumer config
    keys, dotted, as a dict."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(conf or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        if "allow.auto.create.topics" not in merged:
            merged["allow.auto.create.topics"] = "true"
        self.config = c = ConsumerConfig(merged)
        self.client_id = c.get_str("client.id") or f"consumer-{id(self) & 0xFFFF}"
        self.group_id = c.get_optional_str("group.id") or None
        self.request_timeout_ms = c.get_int("request.timeout.ms")
        self.default_api_timeout_s = c.get_int("default.api.timeout.ms") / 1000.0
        self.retry_backoff_s = c.get_int("retry.backoff.ms") / 1000.0
        self.max_poll_records = c.get_int("max.poll.records")
        self.isolation_level = 1 if c.get_str("isolation.level") == "read_committed" else 0
        self.check_crcs = c.get_bool("check.crcs")
        self.fetch_max_wait_ms = c.get_int("fetch.max.wait.ms")
        self.fetch_min_bytes = c.get_int("fetch.min.bytes")
        self.fetch_max_bytes = c.get_int("fetch.max.bytes")
        self.max_partition_fetch_bytes = c.get_int("max.partition.fetch.bytes")
        self.client_rack = c.get_str("client.rack")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ConfigException("request.timeout.ms should be greater than fetch.max.wait.ms")
        self.key_deserializer = c.get_callable("key.deserializer")
        self.value_deserializer = c.get_callable("value.deserializer")
        self.interceptors = c.get_configured_instances("interceptor.classes")
        self.metadata = Metadata(c, client_id=self.client_id)
        self._network = NetworkClient(self.metadata, c, client_id=self.client_id,
                                      max_in_flight=5)
        self._subscriptions = SubscriptionState(c.get_str("auto.offset.reset"))
        self._assignment_id = self._subscriptions.assignment_id
        """The assignment ``_completed`` was last checked against."""
        self._fetching: set[int] = set()
        """Brokers with a Fetch in flight."""
        self._completed: deque[_Completed] = deque()
        self._pending_error: KafkaError | None = None
        self._closed = False
        self._started = time.monotonic()
        self._stats = {"fetch-total": 0, "bytes-consumed-total": 0,
                       "records-consumed-total": 0}
        self._coordinator = None if self.group_id is None else ConsumerCoordinator(
            self._subscriptions, self.metadata, c, client_id=self.client_id,
            interceptors=self.interceptors)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- assignment -------------------------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Manual assignment: these partitions replace any previous ones. A partition's
        offset (if given) is where reading starts: an offset, OFFSET_BEGINNING (-2),
        OFFSET_END (-1), or OFFSET_STORED/OFFSET_INVALID (the committed offset, else
        ``auto.offset.reset``)."""
        self._check_open()
        if self._subscriptions.subscribed:
            raise RuntimeError("assign() cannot be used together with subscribe()")
        self._set_assignment(_tps(partitions))

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self._subscriptions.assign(tps)
        self._on_assignment_change()
        self.metadata.add_topics({tp.topic for tp in tps})

    def _on_assignment_change(self) -> None:
        """Drop what was fetched for partitions no longer assigned (or assigned anew)."""
        if self._assignment_id == self._subscriptions.assignment_id:
            return
        self._assignment_id = self._subscriptions.assignment_id
        assignment = self._subscriptions.assignment
        self._completed = deque(c for c in self._completed
                                if assignment.get(c.tp) is c.state)

    def unassign(self) -> None:
        self._set_assignment([])

    def assignment(self) -> list[TopicPartition]:
        return self._subscriptions.assigned()

    def incremental_assign(self, partitions: Iterable[Any]) -> None:
        assignment = self._subscriptions.assignment
        self._set_assignment(self._subscriptions.assigned_with_positions() + [
            tp for tp in _tps(partitions) if (tp.topic, tp.partition) not in assignment])

    def incremental_unassign(self, partitions: Iterable[Any]) -> None:
        gone = {(tp.topic, tp.partition) for tp in _tps(partitions)}
        self._set_assignment([tp for tp in self._subscriptions.assigned_with_positions()
                              if (tp.topic, tp.partition) not in gone])

    def subscribe(self, topics: str | Sequence[str] | re.Pattern[str],
                  listener: object | None = None, *,
                  on_assign: Callable[[Consumer, list[TopicPartition]], None] | None = None,
                  on_revoke: Callable[[Consumer, list[TopicPartition]], None] | None = None,
                  on_lost: Callable[[Consumer, list[TopicPartition]], None] | None = None
                  ) -> None:
        """Join ``group.id`` for ``topics`` (names, or a regex: a compiled pattern or a name
        starting with ``^``). ``listener``: an object with ``on_partitions_revoked`` /
        ``on_partitions_assigned`` (/ ``on_partitions_lost``), Kafka's
        ConsumerRebalanceListener; or confluent-kafka's ``on_assign(consumer, partitions)``
        style callbacks."""
        self._check_open()
        if self._coordinator is None:
            raise ConfigException("subscribe() needs a group.id")
        if self._subscriptions.assignment and not self._subscriptions.subscribed:
            self.unassign()

        def bound(callback: Callable[[Consumer, list[TopicPartition]], None] | None
                  ) -> Callable[[list[TopicPartition]], None] | None:
            return None if callback is None else functools.partial(callback, self)

        self._coordinator.subscribe(topics, RebalanceListener(
            listener, on_assign=bound(on_assign), on_revoke=bound(on_revoke),
            on_lost=bound(on_lost)))

    def unsubscribe(self) -> None:
        if self._coordinator is not None:
            self._coordinator.unsubscribe()
        self.unassign()

    def subscription(self) -> list[str]:
        return [] if self._coordinator is None else self._coordinator.subscription()

    # --- positions ----------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int | None = None) -> None:
        """The next ``poll`` returns records from ``partition.offset`` (or ``offset``)."""
        self._subscriptions.seek(partition, partition.offset if offset is None else offset)
        self._completed = deque(c for c in self._completed
                                if c.tp != (partition.topic, partition.partition))

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (_tps(partitions) if partitions is not None else self.assignment()):
            self.seek(tp, OFFSET_BEGINNING)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (_tps(partitions) if partitions is not None else self.assignment()):
            self.seek(tp, OFFSET_END)

    def position(self, partitions: TopicPartition | Iterable[Any],
                 timeout: float | None = None) -> Any:
        """The next offset to read: an int for one TopicPartition, a list of
        TopicPartition for a list (looking positions up where none is known yet)."""
        single = isinstance(partitions, TopicPartition)
        tps = [partitions] if isinstance(partitions, TopicPartition) else _tps(partitions)
        deadline = time.monotonic() + (self.default_api_timeout_s if timeout is None
                                       else timeout)
        for tp in tps:
            self._subscriptions.state(tp)
        self._update_positions(deadline, wait=True)
        out = []
        for tp in tps:
            state = self._subscriptions.state(tp)
            out.append(TopicPartition(tp.topic, tp.partition,
                                      OFFSET_INVALID if state.position is None
                                      else state.position))
        return out[0].offset if single else out

    def pause(self, partitions: Iterable[Any]) -> None:
        for tp in _tps(partitions):
            self._subscriptions.pause(tp)
            self._completed = deque(c for c in self._completed
                                    if c.tp != (tp.topic, tp.partition))

    def resume(self, partitions: Iterable[Any]) -> None:
        for tp in _tps(partitions):
            self._subscriptions.resume(tp)

    def paused(self) -> list[TopicPartition]:
        return self._subscriptions.paused()

    def _update_positions(self, deadline: float, *, wait: bool) -> None:
        """Give every assigned partition a position: the committed offset (with a group),
        else the reset policy's ListOffsets answer."""
        assignment = self._subscriptions.assignment
        missing = [(k, s) for k, s in assignment.items() if s.position is None]
        if not missing:
            return
        if self._coordinator is not None:
            need_committed = [k for k, s in missing if s.reset_to is None]
            if need_committed:
                try:
                    committed = self._coordinator.fetch_committed(
                        need_committed, max(0.0, deadline - time.monotonic()))
                except KafkaError as exc:
                    if wait or not exc.retriable:
                        raise
                    logger.debug("fetching committed offsets failed: %s", exc)
                    return
                for key in need_committed:
                    offset = committed.get(key)
                    if offset is not None and offset >= 0:
                        assignment[key].position = offset
        for key, state in missing:
            if state.position is None and state.reset_to is None:
                target = self._subscriptions.reset_target()
                if target is None:
                    raise OffsetOutOfRangeError(
                        f"No committed offset and auto.offset.reset=none for "
                        f"{key[0]}-{key[1]}")
                state.reset_to = target
        to_list = {k: s.reset_to for k, s in assignment.items()
                   if s.position is None and s.reset_to is not None}
        if not to_list:
            return
        try:
            found = self._list_offsets(to_list, deadline)
        except KafkaError:
            if wait:
                raise
            return
        for key, offset in found.items():
            found_state = self._subscriptions.assignment.get(key)
            if found_state is not None and found_state.position is None and offset >= 0:
                found_state.position = offset
                found_state.reset_to = None

    # --- offsets lookups ----------------------------------------------------------------------

    def _leaders(self, keys: Iterable[tuple[str, int]], deadline: float
                 ) -> dict[int, list[tuple[str, int]]]:
        keys = list(keys)
        while True:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            unknown = []
            for key in keys:
                leader = self.metadata.leader(*key)
                if leader < 0:
                    unknown.append(key)
                else:
                    by_leader.setdefault(leader, []).append(key)
            if not unknown:
                return by_leader
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                meta = self.metadata.topics.get(unknown[0][0])
                if meta is not None and meta.error is not None:
                    raise meta.error
                if meta is not None and unknown[0][1] not in meta.partitions:
                    raise UnknownTopicOrPartitionError(
                        f"{unknown[0][0]}-{unknown[0][1]} does not exist")
                raise LeaderNotAvailableError(
                    f"No leader known for {unknown[0][0]}-{unknown[0][1]}")
            self.metadata.update([k[0] for k in unknown], timeout_s=remaining)
            meta = self.metadata.topics.get(unknown[0][0])
            if meta is not None and meta.error is not None and not meta.error.retriable:
                raise meta.error
            if self.metadata.leader(*unknown[0]) < 0:
                time.sleep(min(self.retry_backoff_s, max(0.0, deadline - time.monotonic())))

    def _list_offsets(self, timestamps: Mapping[tuple[str, int], int], deadline: float
                      ) -> dict[tuple[str, int], int]:
        """ListOffsets to each leader: offset per partition (-1 when none), retrying
        while leaders move, until ``deadline``."""
        result: dict[tuple[str, int], int] = {}
        self._list_offsets_full(timestamps, deadline, result, {})
        return result

    def _list_offsets_full(self, timestamps: Mapping[tuple[str, int], int], deadline: float,
                           offsets: dict[tuple[str, int], int],
                           found_timestamps: dict[tuple[str, int], int]) -> None:
        pending = dict(timestamps)
        request_cls = api.APIS[ApiKey.LIST_OFFSETS].request
        s = request_cls.structs
        last_error: KafkaError | None = None
        while pending:
            if time.monotonic() >= deadline:
                raise last_error or RequestTimedOutError("Timed out looking up offsets")
            for leader, keys in self._leaders(pending, deadline).items():
                by_topic: dict[str, list[Any]] = {}
                for topic, partition in keys:
                    by_topic.setdefault(topic, []).append(s["ListOffsetsPartition"](
                        partition_index=partition, current_leader_epoch=-1,
                        timestamp=pending[(topic, partition)], max_num_offsets=1))
                body = request_cls(replica_id=-1, isolation_level=self.isolation_level,
                                   topics=[s["ListOffsetsTopic"](name=t, partitions=p)
                                           for t, p in by_topic.items()])
                try:
                    response = self._network.request(
                        leader, ApiKey.LIST_OFFSETS, body, max_version=6,
                        timeout_s=max(0.001, deadline - time.monotonic()))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last_error = exc
                    self.metadata.request_update()
                    continue
                for topic in response.topics:
                    for p in topic.partitions:
                        key = (topic.name, p.partition_index)
                        if key not in pending:
                            continue
                        if p.error_code == NONE:
                            offset = p.offset
                            if getattr(p, "old_style_offsets", None):
                                offset = p.old_style_offsets[0]
                            offsets[key] = offset
                            found_timestamps[key] = p.timestamp
                            del pending[key]
                            continue
                        error = error_for_code(p.error_code)(
                            f"ListOffsets for {key[0]}-{key[1]}")
                        if not error.retriable:
                            raise error
                        last_error = error
                        if p.error_code in _REFRESH_ERRORS:
                            self.metadata.request_update()
            if pending:
                if self.metadata.need_update:
                    try:
                        self.metadata.update(
                            [k[0] for k in pending],
                            timeout_s=max(0.001, deadline - time.monotonic()))
                    except KafkaError as exc:
                        last_error = exc
                time.sleep(min(self.retry_backoff_s, max(0.0, deadline - time.monotonic())))

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark (read_committed: the
        last stable offset)."""
        key = (partition.topic, partition.partition)
        if cached:
            state = self._subscriptions.assignment.get(key)
            if state is None:
                return (-1001, -1001)
            return (state.log_start_offset, state.last_stable_offset if self.isolation_level
                    else state.high_watermark)
        deadline = time.monotonic() + (self.default_api_timeout_s if timeout is None
                                       else timeout)
        low = self._list_offsets({key: EARLIEST}, deadline)[key]
        high = self._list_offsets({key: LATEST}, deadline)[key]
        return (low, high)

    def offsets_for_times(self, partitions: Iterable[Any], timeout: float | None = None
                          ) -> list[TopicPartition]:
        """For each TopicPartition whose ``offset`` is a timestamp (ms): the earliest
        offset whose timestamp is at or after it (-1 when there is none)."""
        tps = _tps(partitions)
        deadline = time.monotonic() + (self.default_api_timeout_s if timeout is None
                                       else timeout)
        query = {(tp.topic, tp.partition): tp.offset for tp in tps}
        for key, ts in query.items():
            if ts < 0:
                raise ValueError(f"The target time for {key[0]}-{key[1]} cannot be negative")
        offsets: dict[tuple[str, int], int] = {}
        timestamps: dict[tuple[str, int], int] = {}
        self._list_offsets_full(query, deadline, offsets, timestamps)
        return [TopicPartition(tp.topic, tp.partition, offsets[(tp.topic, tp.partition)])
                for tp in tps]

    def list_topics(self, topic: str | None = None, timeout: float | None = None
                    ) -> ClusterMetadata:
        """The cluster's brokers and topics (all, or ``topic``), as confluent-kafka's
        ``list_topics``: ``.topics[name].partitions[id].leader`` and
        ``.topics[name].error``."""
        self._check_open()
        timeout_s = self.default_api_timeout_s if timeout is None else timeout
        meta: ClusterMetadata = self.metadata.update(
            None if topic is None else [topic], timeout_s=timeout_s,
            allow_auto_create=False)
        if topic is not None:
            meta.topics = {k: v for k, v in meta.topics.items() if k == topic}
        return meta

    def committed(self, partitions: Iterable[Any], timeout: float | None = None
                  ) -> list[TopicPartition]:
        if self._coordinator is None:
            raise ConfigException("committed() needs a group.id")
        tps = _tps(partitions)
        found = self._coordinator.fetch_committed(
            [(tp.topic, tp.partition) for tp in tps],
            self.default_api_timeout_s if timeout is None else timeout)
        return [TopicPartition(tp.topic, tp.partition,
                               found.get((tp.topic, tp.partition), OFFSET_INVALID))
                for tp in tps]

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id, for a transactional producer's
        ``send_offsets_to_transaction`` (confluent-kafka's name; Kafka's
        ``groupMetadata()``)."""
        if self._coordinator is None:
            raise ConfigException("consumer_group_metadata() needs a group.id")
        coordinator = self._coordinator
        return ConsumerGroupMetadata(coordinator.group_id, coordinator.generation,
                                     coordinator.member_id, coordinator.group_instance_id)

    group_metadata = consumer_group_metadata

    def commit(self, message: Any = None, offsets: Iterable[Any] | None = None,
               asynchronous: bool = False) -> list[TopicPartition] | None:
        """Commit ``offsets`` (TopicPartitions whose offset is the next to read), or the
        current positions. Synchronous unless ``asynchronous``."""
        self._check_open()
        if self._coordinator is None:
            raise ConfigException("commit() needs a group.id")
        if message is not None:
            to_commit = {(message.topic, message.partition): message.offset + 1}
        elif offsets is not None:
            to_commit = {(tp.topic, tp.partition): tp.offset for tp in _tps(offsets)}
        else:
            to_commit = self._subscriptions.all_consumed()
        committed: list[TopicPartition] | None = self._coordinator.commit(to_commit,
                                                                           asynchronous)
        return committed

    # --- fetching -----------------------------------------------------------------------------

    def _fetchable(self) -> dict[int, list[tuple[str, int]]]:
        buffered = {c.tp for c in self._completed}
        by_node: dict[int, list[tuple[str, int]]] = {}
        for key, state in self._subscriptions.assignment.items():
            if state.paused or state.position is None or key in buffered:
                continue
            leader = self.metadata.leader(*key)
            if leader < 0:
                self.metadata.request_update()
                continue
            node = self._select_read_replica(state, leader)
            if node in self._fetching:
                continue
            by_node.setdefault(node, []).append(key)
        return by_node

    def _select_read_replica(self, state: TopicPartitionState, leader: int) -> int:
        """The leader, or the replica it named in ``preferred_read_replica`` (KIP-392)
        while that is fresh (``metadata.max.age.ms``) and in the metadata (Kafka's
        Fetcher.selectReadReplica)."""
        replica = state.preferred_read_replica
        if replica is None:
            return leader
        if time.monotonic() >= state.preferred_read_replica_expires or \
                replica not in self.metadata.brokers:
            state.clear_preferred_read_replica()
            return leader
        return replica

    def _send_fetches(self, deadline: float | None = None) -> None:
        """A Fetch to each leader of fetchable partitions without one in flight (connecting
        within ``deadline``, the caller's poll timeout, where a connection is missing)."""
        assignment = self._subscriptions.assignment
        request_cls = api.APIS[ApiKey.FETCH].request
        s = request_cls.structs
        for node_id, keys in self._fetchable().items():
            timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
            if not self._network.ready(node_id, timeout):
                continue
            by_topic: dict[str, list[Any]] = {}
            positions: dict[tuple[str, int], int] = {}
            for key in keys:
                position = assignment[key].position
                assert position is not None
                positions[key] = position
                by_topic.setdefault(key[0], []).append(s["FetchPartition"](
                    partition=key[1], current_leader_epoch=-1, fetch_offset=position,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=self.max_partition_fetch_bytes))
            body = request_cls(
                cluster_id=None, replica_id=-1, max_wait_ms=self.fetch_max_wait_ms,
                min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
                topics=[s["FetchTopic"](topic=t, partitions=p) for t, p in by_topic.items()],
                forgotten_topics_data=[], rack_id=self.client_rack)
            self._fetching.add(node_id)

            def on_response(response: Any, error: KafkaError | None, node_id: int = node_id,
                            positions: dict[tuple[str, int], int] = positions) -> None:
                self._fetching.discard(node_id)
                self._handle_fetch(node_id, response, error, positions)

            self._network.send(node_id, ApiKey.FETCH, body, on_response,
                               timeout_ms=self.request_timeout_ms + self.fetch_max_wait_ms)

    def _handle_fetch(self, node_id: int, response: Any, error: KafkaError | None,
                      positions: dict[tuple[str, int], int]) -> None:
        self._stats["fetch-total"] += 1
        if error is not None or (response.error_code if hasattr(response, "error_code")
                                 else 0):
            logger.debug("fetch from broker %d failed: %s", node_id,
                         error if error is not None else response.error_code)
            self.metadata.request_update()
            for key in positions:  # back to the leader after a preferred replica failed
                failed = self._subscriptions.assignment.get(key)
                if failed is not None and failed.preferred_read_replica == node_id:
                    failed.clear_preferred_read_replica()
            return
        for topic in response.responses:
            for p in topic.partitions:
                key = (topic.topic, p.partition_index)
                state = self._subscriptions.assignment.get(key)
                fetch_offset = positions.get(key)
                if state is None or state.paused or state.position != fetch_offset:
                    continue  # reassigned, paused or sought meanwhile
                if p.error_code != NONE and state.preferred_read_replica == node_id:
                    # As Kafka's Fetcher: any error from the preferred replica (an offset
                    # it does not have yet included) sends the next fetch to the leader.
                    logger.debug("fetch of %s-%d from preferred replica %d answered %d, "
                                 "back to the leader", key[0], key[1], node_id, p.error_code)
                    state.clear_preferred_read_replica()
                    continue
                if p.error_code == NONE:
                    state.high_watermark = p.high_watermark
                    state.last_stable_offset = getattr(p, "last_stable_offset", -1)
                    state.log_start_offset = getattr(p, "log_start_offset", -1)
                    replica = getattr(p, "preferred_read_replica", -1)
                    if replica >= 0 and replica != state.preferred_read_replica:
                        state.preferred_read_replica = replica
                        state.preferred_read_replica_expires = \
                            time.monotonic() + self.metadata.max_age_ms / 1000.0
                    raw = p.records
                    view = memoryview(b"") if raw is None else memoryview(raw)
                    view, next_offset = _scan_next_offset(view)
                    self._stats["bytes-consumed-total"] += len(view)
                    if self.isolation_level and p.aborted_transactions:
                        view = drop_aborted_batches(view, p.aborted_transactions)
                    assert fetch_offset is not None
                    self._completed.append(_Completed(key, state, fetch_offset, view,
                                                      next_offset))
                    if len(view):
                        # As Kafka's consumer: a partition that returned data goes last in
                        # the next requests, so every partition gets to be first (the one
                        # a broker answers with a whole batch even above its byte limits).
                        self._subscriptions.move_partition_to_end(key)
                elif p.error_code == OffsetOutOfRangeError.code:
                    target = self._subscriptions.reset_target()
                    if target is None or self._raw_mode:
                        self._pending_error = OffsetOutOfRangeError(
                            f"Fetch position {fetch_offset} is out of range for partition "
                            f"{key[0]}-{key[1]}")
                        self._pending_error_tp = key
                    else:
                        logger.info("Fetch position %s is out of range for %s-%d, resetting "
                                    "offset", fetch_offset, key[0], key[1])
                        state.position, state.reset_to = None, target
                elif p.error_code in _REFRESH_ERRORS:
                    self.metadata.request_update()
                else:
                    self._pending_error = error_for_code(p.error_code)(
                        f"Fetch of {key[0]}-{key[1]} at offset {fetch_offset}")
                    self._pending_error_tp = key

    _raw_mode = False
    _pending_error_tp: tuple[str, int] | None = None

    def _raise_pending(self) -> None:
        error = self._pending_error
        if error is not None:
            self._pending_error = None
            raise error

    def _fetch_round(self, deadline: float) -> None:
        """Positions, metadata, fetches in flight, one wait for answers."""
        if self.metadata.stale() and self.metadata.wanted:
            try:
                self.metadata.update(timeout_s=max(0.001, min(deadline - time.monotonic(),
                                                              self.request_timeout_ms / 1000)))
            except KafkaError as exc:
                logger.debug("metadata refresh failed: %s", exc)
        self._update_positions(max(deadline, time.monotonic() + 0.001), wait=False)
        self._send_fetches(deadline)
        remaining = max(0.0, deadline - time.monotonic())
        if self._completed:
            remaining = 0.0
        elif not self._fetching:
            remaining = min(remaining, self.retry_backoff_s)
        self._network.poll(remaining)

    def _poll_prepare(self) -> None:
        self._check_open()
        if self._coordinator is not None:
            self._coordinator.poll()
            self._on_assignment_change()
        self._raise_pending()

    def poll(self, timeout: float | None = None) -> list[ConsumerRecord]:
        """Up to ``max.poll.records`` records, waiting at most ``timeout`` seconds for some
        (an empty list when none came)."""
        deadline = time.monotonic() + (1e9 if timeout is None else max(0.0, timeout))
        while True:
            self._poll_prepare()
            records = self._drain_records(self.max_poll_records)
            if records:
                self._send_fetches()
                return self._on_consume(records)
            self._fetch_round(deadline)
            self._raise_pending()
            if not self._completed and time.monotonic() >= deadline:
                return []

    def consume(self, num_messages: int = 1, timeout: float | None = None
                ) -> list[ConsumerRecord]:
        saved = self.max_poll_records
        self.max_poll_records = max(1, num_messages)
        try:
            return self.poll(timeout)
        finally:
            self.max_poll_records = saved

    def metrics(self) -> dict[str, float]:
        """A few of Kafka's consumer-fetch-manager-metrics (totals and rates)."""
        elapsed = max(1e-9, time.monotonic() - self._started)
        out: dict[str, float] = {k: float(v) for k, v in self._stats.items()}
        out["fetch-rate"] = out["fetch-total"] / elapsed
        out["bytes-consumed-rate"] = out["bytes-consumed-total"] / elapsed
        out["records-consumed-rate"] = out["records-consumed-total"] / elapsed
        return out

    def _on_consume(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        self._stats["records-consumed-total"] += len(records)
        for interceptor in self.interceptors:
            hook = getattr(interceptor, "on_consume", None)
            if hook is not None:
                try:
                    changed = hook(records)
                    if changed is not None:
                        records = list(changed)
                except Exception:
                    logger.warning("on_consume of %r failed", interceptor, exc_info=True)
        return records

    def _columns_of(self, completed: _Completed) -> RecordColumns:
        if completed.columns is None:
            state = self._subscriptions.assignment[completed.tp]
            completed.columns = decode_columns(
                completed.raw, state.position or 0, check_crcs=self.check_crcs)
            completed.row = 0
        return completed.columns

    def _drain_records(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while self._completed and len(out) < max_records:
            completed = self._completed[0]
            state = self._subscriptions.assignment.get(completed.tp)
            if state is None or state.paused:
                self._completed.popleft()
                continue
            columns = self._columns_of(completed)
            topic, partition = completed.tp
            take = min(columns.count - completed.row, max_records - len(out))
            kd, vd = self.key_deserializer, self.value_deserializer
            first, last = completed.row, completed.row + take
            offsets = columns.offsets[first:last].tolist()
            timestamps = columns.timestamps[first:last].tolist()
            types = columns.timestamp_types[first:last].tolist()
            key_starts = columns.key_starts[first:last].tolist()
            key_lengths = columns.key_lengths[first:last].tolist()
            value_starts = columns.value_starts[first:last].tolist()
            value_lengths = columns.value_lengths[first:last].tolist()
            data = columns.data
            headers = columns.headers
            append = out.append
            for i in range(take):
                length = key_lengths[i]
                key: object = None if length < 0 else \
                    data[key_starts[i]:key_starts[i] + length]
                length = value_lengths[i]
                value: object = None if length < 0 else \
                    data[value_starts[i]:value_starts[i] + length]
                if kd is not None and key is not None:
                    key = kd(key)
                if vd is not None and value is not None:
                    value = vd(value)
                append(ConsumerRecord(topic, partition, offsets[i], timestamps[i], types[i],
                                      key, value, headers.get(first + i, [])
                                      if headers else []))
            completed.row += take
            if take:
                state.position = offsets[take - 1] + 1
            if completed.row >= columns.count:
                self._completed.popleft()
                if completed.next_offset is not None and (
                        state.position is None or completed.next_offset > state.position):
                    state.position = completed.next_offset
        return out

    def poll_columns(self, timeout: float | None = None
                     ) -> list[tuple[TopicPartition, RecordColumns]]:
        """Like ``poll``, but each fetched partition's records as columns (offsets,
        timestamps, keys, values, headers) without a Python object per record."""
        deadline = time.monotonic() + (1e9 if timeout is None else max(0.0, timeout))
        while True:
            self._poll_prepare()
            out = []
            while self._completed:
                completed = self._completed.popleft()
                state = self._subscriptions.assignment.get(completed.tp)
                if state is None or state.paused:
                    continue
                columns = self._columns_of(completed)
                if completed.row:
                    columns = _slice_columns(columns, completed.row)
                if columns.count:
                    state.position = int(columns.offsets[columns.count - 1]) + 1
                if completed.next_offset is not None and (
                        state.position is None or completed.next_offset > state.position):
                    state.position = completed.next_offset
                out.append((TopicPartition(*completed.tp, state.position or 0), columns))
            if out:
                self._send_fetches()
                return out
            self._fetch_round(deadline)
            self._raise_pending()
            if not self._completed and time.monotonic() >= deadline:
                return []

    def poll_raw(self, timeout: float | None = None) -> list[RawFetch]:
        """Each fetched partition's record batches as bytes, undecoded, with its
        watermarks (empty fetches included, so a caller sees the high watermark). The
        position moves past the returned batches. An out-of-range position raises
        OffsetOutOfRangeError here whatever ``auto.offset.reset`` says: the caller owns the
        positions (as Spark's executors, which run with auto.offset.reset=none)."""
        self._raw_mode = True
        deadline = time.monotonic() + (1e9 if timeout is None else max(0.0, timeout))
        while True:
            self._poll_prepare()
            out = []
            while self._completed:
                completed = self._completed.popleft()
                state = self._subscriptions.assignment.get(completed.tp)
                if state is None or state.paused or state.position != completed.fetch_offset:
                    continue
                if completed.next_offset is not None and completed.next_offset > \
                        completed.fetch_offset:
                    state.position = completed.next_offset
                out.append(RawFetch(completed.tp[0], completed.tp[1], completed.fetch_offset,
                                    state.high_watermark, state.last_stable_offset,
                                    state.log_start_offset, completed.raw,
                                    completed.next_offset))
            if out:
                self._send_fetches()
                return out
            self._fetch_round(deadline)
            self._raise_pending()
            if not self._completed and time.monotonic() >= deadline:
                return []

    # --- lifecycle ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        try:
            if self._coordinator is not None:
                self._coordinator.close(autocommit)
        finally:
            self._closed = True
            self._network.close()
            self.metadata.close()


def _slice_columns(columns: RecordColumns, start: int) -> RecordColumns:
    headers = {row - start: h for row, h in columns.headers.items() if row >= start}
    return RecordColumns(
        columns.count - start, columns.offsets[start:], columns.timestamps[start:],
        columns.timestamp_types[start:], columns.data, columns.key_starts[start:],
        columns.key_lengths[start:], columns.value_starts[start:],
        columns.value_lengths[start:], headers, columns.next_offset, columns.bytes_consumed)
