"""The consumer's side of group management: Kafka's ConsumerCoordinator in small.

FindCoordinator locates the group's coordinator; committed offsets are read with
OffsetFetch and written with OffsetCommit (sync, or async on a worker thread). With
``subscribe`` the consumer joins the group on its next ``poll``: JoinGroup (answering
MEMBER_ID_REQUIRED with the id the broker handed out), the leader runs the assignor the
group agreed on over every member's subscription, SyncGroup delivers each member's
partitions, and a background thread heartbeats every ``heartbeat.interval.ms``. A
heartbeat answering REBALANCE_IN_PROGRESS (or a changed pattern match or partition count
seen in metadata) makes the next ``poll`` rejoin: the eager protocol, so the listener's
``on_partitions_revoked`` runs first (after an auto-commit), then
``on_partitions_assigned``. A consumer that does not call ``poll`` within
``max.poll.interval.ms`` leaves the group, as Kafka's does.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from kafkaclone.clients.assignors import (
    ASSIGNORS,
    Subscription,
    assignor_names,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kafkaclone.clients.common import OFFSET_INVALID, TopicPartition
from kafkaclone.clients.config import ConfigException, ConsumerConfig
from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.clients.network import Metadata
from kafkaclone.clients.subscription_state import RebalanceListener, SubscriptionState
from kafkaclone.common.errors import (
    NONE,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.messages import consumer_protocol

logger = logging.getLogger(__name__)

_COORDINATOR_ERRORS = (NotCoordinatorError.code, CoordinatorNotAvailableError.code)
_REJOIN_ERRORS = (RebalanceInProgressError.code, IllegalGenerationError.code,
                  UnknownMemberIdError.code)


class ConsumerCoordinator:
    """The group side of a consumer whose ``group.id`` is set; it shares the consumer's
    SubscriptionState (the subscription, the assignment it sets after each rebalance, the
    positions it commits) and Metadata."""

    def __init__(self, subscriptions: SubscriptionState, metadata: Metadata,
                 conf: ConsumerConfig, *, client_id: str,
                 interceptors: Sequence[object]) -> None:
        self.subscriptions = subscriptions
        self.metadata = metadata
        self.client_id = client_id
        self.interceptors = interceptors
        self.group_id = conf.get_str("group.id")
        self.group_instance_id = conf.get_optional_str("group.instance.id") or None
        self.session_timeout_ms = conf.get_int("session.timeout.ms")
        self.heartbeat_interval_s = conf.get_int("heartbeat.interval.ms") / 1000.0
        self.rebalance_timeout_ms = conf.get_int("max.poll.interval.ms")
        self.auto_commit = conf.get_bool("enable.auto.commit")
        self.auto_commit_interval_s = conf.get_int("auto.commit.interval.ms") / 1000.0
        self.retry_backoff_s = conf.get_int("retry.backoff.ms") / 1000.0
        self.request_timeout_ms = conf.get_int("request.timeout.ms")
        self.default_api_timeout_s = conf.get_int("default.api.timeout.ms") / 1000.0
        self.exclude_internal = conf.get_bool("exclude.internal.topics")
        self.assignors = assignor_names(conf.get_list("partition.assignment.strategy"))
        if self.heartbeat_interval_s * 1000 >= self.session_timeout_ms:
            raise ConfigException("heartbeat.interval.ms must be lower than "
                                  "session.timeout.ms")
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self._need_rejoin = False
        self._joined_with: dict[str, int] = {}
        """The topics and partition counts the current assignment was computed from (what
        the leader watches in metadata)."""
        self._owned: dict[str, list[int]] = {}
        self._last_owned: dict[str, list[int]] = {}
        self._joining = False
        """The last assignment received (sent in the next JoinGroup for sticky)."""
        self._coordinator: BrokerConnection | None = None
        self._lock = threading.RLock()
        self._last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self._closed = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._async_commits: concurrent.futures.ThreadPoolExecutor | None = None
        self._metadata_version = -1

    # --- coordinator ---------------------------------------------------------------------

    def _connection(self, deadline: float) -> BrokerConnection:
        with self._lock:
            if self._coordinator is not None and self._coordinator.connected:
                return self._coordinator
            last: KafkaError | None = None
            while True:
                try:
                    return self._find_coordinator(deadline)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
                if time.monotonic() + self.retry_backoff_s >= deadline:
                    raise last
                time.sleep(self.retry_backoff_s)

    def _find_coordinator(self, deadline: float) -> BrokerConnection:
        request_cls = api.APIS[ApiKey.FIND_COORDINATOR].request
        response = self.metadata.request_any(
            ApiKey.FIND_COORDINATOR, request_cls(key=self.group_id, key_type=0),
            timeout_s=max(0.001, deadline - time.monotonic()))
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(
                getattr(response, "error_message", None) or
                f"FindCoordinator for group {self.group_id}")
        conn = BrokerConnection(response.host, response.port, node_id=response.node_id,
                                client_id=self.client_id,
                                request_timeout_ms=self.request_timeout_ms,
                                security=self.metadata.security)
        conn.connect()
        if self._coordinator is not None:
            self._coordinator.close()
        self._coordinator = conn
        logger.info("Discovered group coordinator %s:%d (id %d) for group %s",
                    response.host, response.port, response.node_id, self.group_id)
        return conn

    def _coordinator_dead(self) -> None:
        with self._lock:
            if self._coordinator is not None:
                self._coordinator.close()
                self._coordinator = None

    def _request(self, key: ApiKey, body: Any, deadline: float, *,
                 broker_wait_ms: int = 0) -> Any:
        """One request to the coordinator (found again if it moved)."""
        with self._lock:
            conn = self._connection(deadline)
            try:
                _, response = conn.request(key, body, broker_wait_ms=broker_wait_ms)
            except KafkaError:
                self._coordinator_dead()
                raise
            return response

    # --- offsets ---------------------------------------------------------------------------

    def fetch_committed(self, keys: Sequence[tuple[str, int]], timeout_s: float
                        ) -> dict[tuple[str, int], int]:
        """The group's committed offset per partition (absent: none committed)."""
        deadline = time.monotonic() + timeout_s
        request_cls = api.APIS[ApiKey.OFFSET_FETCH].request
        by_topic: dict[str, list[int]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(partition)
        # require_stable as Kafka 2.8's consumer: offsets of a transaction not yet
        # committed (UNSTABLE_OFFSET_COMMIT, retriable) are waited for, not skipped.
        body = request_cls(group_id=self.group_id, require_stable=True, topics=[
            request_cls.structs["OffsetFetchRequestTopic"](name=t, partition_indexes=p)
            for t, p in by_topic.items()])
        while True:
            try:
                response = self._request(ApiKey.OFFSET_FETCH, body, deadline)
                top = getattr(response, "error_code", NONE)
                if top != NONE:
                    raise error_for_code(top)(f"OffsetFetch for group {self.group_id}")
                out: dict[tuple[str, int], int] = {}
                for topic in response.topics:
                    for p in topic.partitions:
                        if p.error_code != NONE:
                            raise error_for_code(p.error_code)(
                                f"OffsetFetch of {topic.name}-{p.partition_index}")
                        if p.committed_offset >= 0:
                            out[(topic.name, p.partition_index)] = p.committed_offset
                return out
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() + self.retry_backoff_s >= deadline:
                    raise
                if exc.code in _COORDINATOR_ERRORS:
                    self._coordinator_dead()
                time.sleep(self.retry_backoff_s)

    def commit(self, offsets: dict[tuple[str, int], int], asynchronous: bool
               ) -> list[TopicPartition] | None:
        if asynchronous:
            if self._async_commits is None:
                self._async_commits = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix=f"kafkaclone-commit | {self.group_id}")
            self._async_commits.submit(self._commit_logged, dict(offsets))
            return None
        return self._commit_sync(offsets, self.default_api_timeout_s)

    def _commit_logged(self, offsets: dict[tuple[str, int], int]) -> None:
        try:
            self._commit_sync(offsets, self.default_api_timeout_s)
        except KafkaError as exc:
            logger.warning("Asynchronous commit of %s failed: %s", offsets, exc)

    def _commit_sync(self, offsets: dict[tuple[str, int], int], timeout_s: float
                     ) -> list[TopicPartition]:
        if not offsets:
            return []
        deadline = time.monotonic() + timeout_s
        request_cls = api.APIS[ApiKey.OFFSET_COMMIT].request
        s = request_cls.structs
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(s["OffsetCommitRequestPartition"](
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                commit_timestamp=-1, committed_metadata=""))
        error: KafkaError | None = None
        while True:
            subscribed = self.subscriptions.subscribed
            generation, member = (self.generation, self.member_id) if subscribed else (-1, "")
            body = request_cls(
                group_id=self.group_id, generation_id=generation, member_id=member,
                group_instance_id=self.group_instance_id if subscribed else None,
                retention_time_ms=-1,
                topics=[s["OffsetCommitRequestTopic"](name=t, partitions=p)
                        for t, p in by_topic.items()])
            try:
                response = self._request(ApiKey.OFFSET_COMMIT, body, deadline)
                error = None
                for topic in response.topics:
                    for p in topic.partitions:
                        if p.error_code != NONE and error is None:
                            error = error_for_code(p.error_code)(
                                f"OffsetCommit of {topic.name}-{p.partition_index} for group "
                                f"{self.group_id}")
                if error is not None:
                    raise error
                break
            except KafkaError as exc:
                if exc.code in _REJOIN_ERRORS and self.subscriptions.subscribed:
                    self._need_rejoin = True
                    if exc.code != RebalanceInProgressError.code:
                        # Kafka's CommitFailedException: this member's generation is gone.
                        self.member_id, self.generation = "", -1
                if exc.code in _COORDINATOR_ERRORS:
                    self._coordinator_dead()
                if not exc.retriable or time.monotonic() + self.retry_backoff_s >= deadline:
                    self._on_commit(offsets, exc)
                    raise
                time.sleep(self.retry_backoff_s)
        self._on_commit(offsets, None)
        return [TopicPartition(t, p, o) for (t, p), o in offsets.items()]

    def _on_commit(self, offsets: dict[tuple[str, int], int], error: KafkaError | None) -> None:
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        for interceptor in self.interceptors:
            hook = getattr(interceptor, "on_commit", None)
            if hook is not None:
                try:
                    hook(tps, error)
                except Exception:
                    logger.warning("on_commit of %r failed", interceptor, exc_info=True)

    # --- membership ------------------------------------------------------------------------

    def subscribe(self, topics: str | Sequence[str] | re.Pattern[str],
                  listener: RebalanceListener) -> None:
        self.subscriptions.subscribe(topics, listener)
        self._need_rejoin = True
        if self.subscriptions.topics:
            self.metadata.add_topics(self.subscriptions.topics)

    def subscription(self) -> list[str]:
        return sorted(self._subscribed_topics())

    def _subscribed_topics(self) -> list[str]:
        topics = set(self.subscriptions.topics)
        pattern = self.subscriptions.pattern
        if pattern is not None:
            for name, meta in self.metadata.topics.items():
                if meta.error is None and pattern.fullmatch(name) and not (
                        self.exclude_internal and meta.is_internal):
                    topics.add(name)
        return sorted(topics)

    def unsubscribe(self) -> None:
        if self.subscriptions.subscribed:
            self._revoke()
            self._leave("the consumer unsubscribed")
        self.subscriptions.unsubscribe()

    def poll(self) -> None:
        """The consumer's poll: rejoin when needed, auto-commit when due."""
        now = time.monotonic()
        self._last_poll = now
        if self.subscriptions.subscribed:
            self._check_metadata()
            if self._need_rejoin or self.generation < 0:
                self._rejoin()
        if self.auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self.auto_commit_interval_s
            positions = self.subscriptions.all_consumed()
            if positions:
                self.commit(positions, asynchronous=True)

    def _check_metadata(self) -> None:
        metadata = self.metadata
        if self.subscriptions.pattern is not None and metadata.stale():
            try:
                metadata.update(None, timeout_s=self.request_timeout_ms / 1000.0)
            except KafkaError as exc:
                logger.debug("metadata refresh failed: %s", exc)
        if metadata.version == self._metadata_version or self.generation < 0:
            return
        self._metadata_version = metadata.version
        current = {t: metadata.partition_count(t) or 0 for t in self._subscribed_topics()}
        if (self.leader_id == self.member_id and current != self._joined_with) or \
                set(current) != set(self._joined_with):
            logger.info("The subscribed topics changed (%s); rejoining group %s", current,
                        self.group_id)
            self._need_rejoin = True

    def _revoke(self) -> None:
        """Give up the current assignment before a rejoin (eager rebalancing): auto-commit
        and ``on_partitions_revoked``; when the membership was lost (the coordinator no
        longer knows this member) no commit is possible and ``on_partitions_lost`` runs."""
        owned = [TopicPartition(t, p) for t, parts in self._owned.items() for p in parts]
        lost = self.generation < 0
        if self.auto_commit and not lost:
            positions = self.subscriptions.all_consumed()
            if positions:
                try:
                    self._commit_sync(positions, self.default_api_timeout_s)
                except KafkaError as exc:
                    logger.warning("Auto-commit before the rebalance failed: %s", exc)
        listener = self.subscriptions.listener
        if lost:
            listener.on_partitions_lost(owned)
        else:
            listener.on_partitions_revoked(owned)
        self.subscriptions.assign([])
        self._owned = {}

    def _rejoin(self) -> None:
        self._joining = True
        try:
            self._rejoin_now()
        finally:
            self._joining = False

    def _rejoin_now(self) -> None:
        if self._owned:
            self._revoke()
        deadline = time.monotonic() + max(self.default_api_timeout_s,
                                          self.rebalance_timeout_ms / 1000.0)
        while True:
            try:
                assignment = self._join_and_sync(deadline)
                break
            except KafkaError as exc:
                if exc.code in _COORDINATOR_ERRORS:
                    self._coordinator_dead()
                if exc.code in (UnknownMemberIdError.code, IllegalGenerationError.code):
                    self.member_id, self.generation = "", -1
                if not (exc.retriable or exc.code in _REJOIN_ERRORS or
                        exc.code == MemberIdRequiredError.code) or \
                        time.monotonic() + self.retry_backoff_s >= deadline:
                    raise
                logger.info("Joining group %s failed (%s); retrying", self.group_id, exc)
                time.sleep(self.retry_backoff_s)
        self._need_rejoin = False
        self._owned = assignment
        tps = [TopicPartition(t, p, OFFSET_INVALID) for t in sorted(assignment)
               for p in assignment[t]]
        self.subscriptions.assign(tps)
        self.metadata.add_topics(set(assignment))
        self.subscriptions.listener.on_partitions_assigned(tps)
        self._start_heartbeat()

    def _metadata_bytes(self, name: str, topics: list[str]) -> bytes:
        cls = consumer_protocol._message(consumer_protocol.CONSUMER_PROTOCOL_SUBSCRIPTION)
        tp_cls = cls.structs["TopicPartition"]
        user_data = None
        if name == "sticky":
            user_data = encode_sticky_user_data(self._last_owned, self.generation)
        return consumer_protocol.encode_subscription(cls(
            topics=topics, user_data=user_data,
            owned_partitions=[tp_cls(topic=t, partitions=p)
                              for t, p in sorted(self._last_owned.items())]), 1)

    def _join_and_sync(self, deadline: float) -> dict[str, list[int]]:
        metadata = self.metadata
        topics = self._subscribed_topics()
        if self.subscriptions.topics:
            metadata.update(self.subscriptions.topics,
                            timeout_s=max(0.001, deadline - time.monotonic()))
            topics = self._subscribed_topics()
        join_cls = api.APIS[ApiKey.JOIN_GROUP].request
        body = join_cls(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocols=[join_cls.structs["JoinGroupRequestProtocol"](
                name=name, metadata=self._metadata_bytes(name, topics))
                for name in self.assignors])
        response = self._request(ApiKey.JOIN_GROUP, body, deadline,
                                 broker_wait_ms=self.rebalance_timeout_ms)
        if response.error_code == MemberIdRequiredError.code:
            self.member_id = response.member_id
            raise MemberIdRequiredError("The group coordinator handed out a member id")
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(f"JoinGroup of group {self.group_id}")
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.protocol = response.protocol_name
        self.leader_id = response.leader
        logger.info("Joined group %s generation %d as %s (leader %s, protocol %s)",
                    self.group_id, self.generation, self.member_id, self.leader_id,
                    self.protocol)
        sync_cls = api.APIS[ApiKey.SYNC_GROUP].request
        assignments = []
        if self.member_id == self.leader_id:
            assignments = [sync_cls.structs["SyncGroupRequestAssignment"](
                member_id=m, assignment=a) for m, a in self._lead(response.members).items()]
        else:
            self._joined_with = {t: metadata.partition_count(t) or 0 for t in topics}
        sync = sync_cls(group_id=self.group_id, generation_id=self.generation,
                        member_id=self.member_id, group_instance_id=self.group_instance_id,
                        protocol_type="consumer", protocol_name=self.protocol,
                        assignments=assignments)
        answer = self._request(ApiKey.SYNC_GROUP, sync, deadline,
                               broker_wait_ms=self.rebalance_timeout_ms)
        if answer.error_code != NONE:
            raise error_for_code(answer.error_code)(f"SyncGroup of group {self.group_id}")
        owned: dict[str, list[int]] = {}
        if answer.assignment:
            _, decoded = consumer_protocol.decode_assignment(answer.assignment)
            for item in decoded.assigned_partitions:
                owned.setdefault(item.topic, []).extend(item.partitions)
        self._last_owned = owned
        self._metadata_version = metadata.version
        return owned

    def _lead(self, members: Iterable[Any]) -> dict[str, bytes]:
        """The leader's part: every member's subscription -> assignment bytes."""
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            _, sub = consumer_protocol.decode_subscription(member.metadata)
            owned = {tp.topic: list(tp.partitions) for tp in (sub.owned_partitions or [])}
            generation = -1
            if self.protocol == "sticky":
                sticky_owned, generation = decode_sticky_user_data(sub.user_data)
                owned = sticky_owned or owned
            subscriptions[member.member_id] = Subscription(list(sub.topics), owned, generation)
        wanted = sorted({t for s in subscriptions.values() for t in s.topics})
        metadata = self.metadata
        metadata.update(wanted, timeout_s=self.request_timeout_ms / 1000.0)
        counts = {t: n for t in wanted
                  if (n := metadata.partition_count(t) or 0) > 0}
        self._joined_with = {t: counts.get(t, 0) for t in self._subscribed_topics()}
        assignor = ASSIGNORS[self.protocol or "range"]()
        result = assignor.assign(counts, subscriptions)
        cls = consumer_protocol._message(consumer_protocol.CONSUMER_PROTOCOL_ASSIGNMENT)
        tp_cls = cls.structs["TopicPartition"]
        logger.info("Group %s generation %d: %s assigned %s", self.group_id, self.generation,
                    assignor.name, result)
        return {member: consumer_protocol.encode_assignment(cls(
            assigned_partitions=[tp_cls(topic=t, partitions=p) for t, p in sorted(a.items())],
            user_data=None), 0) for member, a in result.items()}

    # --- heartbeats --------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat is not None and self._heartbeat.is_alive():
            return
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, daemon=True,
            name=f"kafkaclone-coordinator-heartbeat-thread | {self.group_id}")
        self._heartbeat.start()

    def _heartbeat_loop(self) -> None:
        request_cls = api.APIS[ApiKey.HEARTBEAT].request
        while not self._closed.wait(self.heartbeat_interval_s):
            # As Kafka's heartbeat thread: quiet while the caller's poll joins the group,
            # but a member told to rejoin keeps heartbeating (and being checked against
            # max.poll.interval.ms) until its poll does so.
            if not self.subscriptions.subscribed or self.generation < 0 or self._joining:
                continue
            if time.monotonic() - self._last_poll > self.rebalance_timeout_ms / 1000.0:
                logger.warning(
                    "consumer poll timeout has expired: the time between calls to poll() was "
                    "longer than max.poll.interval.ms (%d ms); leaving group %s",
                    self.rebalance_timeout_ms, self.group_id)
                self._leave("max.poll.interval.ms expired")
                continue
            body = request_cls(group_id=self.group_id, generation_id=self.generation,
                               member_id=self.member_id,
                               group_instance_id=self.group_instance_id)
            try:
                response = self._request(ApiKey.HEARTBEAT, body, time.monotonic() +
                                         self.session_timeout_ms / 1000.0)
            except KafkaError as exc:
                logger.debug("heartbeat failed: %s", exc)
                continue
            code = response.error_code
            if code == NONE:
                continue
            if code in _REJOIN_ERRORS:
                if code != RebalanceInProgressError.code:
                    self.member_id, self.generation = "", -1
                self._need_rejoin = True
            elif code in _COORDINATOR_ERRORS:
                self._coordinator_dead()
            else:
                logger.warning("Heartbeat of group %s failed: %s", self.group_id,
                               error_for_code(code).name)

    def _leave(self, reason: str) -> None:
        if not self.member_id or self.group_instance_id is not None:
            self.generation = -1
            return
        request_cls = api.APIS[ApiKey.LEAVE_GROUP].request
        body = request_cls(group_id=self.group_id, member_id=self.member_id, members=[
            request_cls.structs["MemberIdentity"](member_id=self.member_id,
                                                  group_instance_id=None)])
        try:
            self._request(ApiKey.LEAVE_GROUP, body, time.monotonic() + 5)
            logger.info("Member %s left group %s: %s", self.member_id, self.group_id, reason)
        except KafkaError as exc:
            logger.debug("LeaveGroup failed: %s", exc)
        self.member_id, self.generation = "", -1
        self._need_rejoin = True

    def close(self, autocommit: bool) -> None:
        try:
            if self.subscriptions.subscribed and self.generation >= 0:
                if autocommit and self.auto_commit:
                    positions = self.subscriptions.all_consumed()
                    if positions:
                        try:
                            self._commit_sync(positions, self.default_api_timeout_s)
                        except KafkaError as exc:
                            logger.warning("Auto-commit on close failed: %s", exc)
                if self._owned:
                    self.subscriptions.listener.on_partitions_revoked([
                        TopicPartition(t, p) for t, parts in self._owned.items()
                        for p in parts])
                    self._owned = {}
                self._leave("the consumer is being closed")
        finally:
            self._closed.set()
            if self._async_commits is not None:
                self._async_commits.shutdown(wait=True)
            if self._heartbeat is not None:
                self._heartbeat.join(5)
            with self._lock:
                if self._coordinator is not None:
                    self._coordinator.close()
                    self._coordinator = None
