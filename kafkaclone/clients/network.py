"""The clients' view of the cluster: metadata and a connection per broker.

``Metadata`` bootstraps from ``bootstrap.servers`` and keeps the brokers and the
partitions (leader, epoch, replicas) of the topics a client uses, refreshed when older than
``metadata.max.age.ms`` or when a request says the leader moved. It has its own
connections and a lock, so any thread may ask it (the producer's ``send`` waiting for a
new topic, the sender thread after NOT_LEADER_OR_FOLLOWER).

``NetworkClient`` is Kafka's NetworkClient in small: one connection per broker, up to
``max.in.flight.requests.per.connection`` pipelined requests on each, one selector over all
of them (plus a wake-up socket so another thread can interrupt a wait), a deadline per
request (``request.timeout.ms``; a timed-out request closes its connection and fails every
request in flight on it, as Kafka's does), and ``reconnect.backoff.ms`` after a failed
connect. A request's completion runs its callback on the thread that calls ``poll``.
"""

from __future__ import annotations

import logging
import random
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkaclone.clients.config import ClientConfig, ConfigException
from kafkaclone.clients.connection import BrokerConnection, parse_bootstrap
from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    LeaderNotAvailableError,
    NetworkExceptionError,
    RequestTimedOutError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)


def make_error(code: int, message: str | None = None) -> KafkaError:
    return error_for_code(code)(message)


@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionMetadata:
    id: int
    leader: int
    replicas: list[int]
    isrs: list[int]
    leader_epoch: int = -1
    error: KafkaError | None = None

    @property
    def partition(self) -> int:
        return self.id


@dataclass
class TopicMetadata:
    topic: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: KafkaError | None = None
    is_internal: bool = False


@dataclass
class ClusterMetadata:
    """What ``list_topics`` returns (the shape of confluent-kafka's ClusterMetadata)."""

    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerMetadata]
    topics: dict[str, TopicMetadata]
    orig_broker_id: int = -1


class Metadata:
    """Brokers and topic partitions, refreshed on demand (thread-safe)."""

    def __init__(self, conf: ClientConfig, *, client_id: str) -> None:
        try:
            self.bootstrap = parse_bootstrap(conf.get_list("bootstrap.servers"))
        except ValueError as exc:
            raise ConfigException(str(exc)) from None
        self.client_id = client_id
        self.request_timeout_ms = conf.get_int("request.timeout.ms")
        self.retry_backoff_ms = conf.get_int("retry.backoff.ms")
        self.max_age_ms = conf.get_int("metadata.max.age.ms")
        self.allow_auto_create = conf.get_bool("allow.auto.create.topics")
        self.security = conf.security
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.wanted: set[str] = set()
        """The topics this client uses (refreshed together)."""
        self.last_refresh = 0.0
        self.need_update = False
        self.version = 0
        self._available: dict[str, tuple[int, list[int]]] = {}
        self._lock = threading.RLock()
        self._conn: BrokerConnection | None = None
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self, deadline: float) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        candidates: list[tuple[str, int, int | None]] = [
            (b.host, b.port, b.id) for b in self.brokers.values()]
        random.shuffle(candidates)
        candidates += [(h, p, None) for h, p in self.bootstrap]
        failures = []
        for host, port, node_id in candidates:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            conn = BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                    request_timeout_ms=max(1, min(self.request_timeout_ms,
                                                                  remaining_ms)),
                                    security=self.security)
            try:
                conn.connect()
            except KafkaError as exc:
                failures.append(str(exc))
                continue
            conn.request_timeout_ms = self.request_timeout_ms
            self._conn = conn
            return conn
        raise NetworkExceptionError("No broker is reachable: " + "; ".join(failures))

    def stale(self) -> bool:
        return self.need_update or \
            time.monotonic() - self.last_refresh > self.max_age_ms / 1000.0

    def request_update(self) -> None:
        self.need_update = True

    def add_topics(self, topics: Iterable[str]) -> None:
        with self._lock:
            self.wanted.update(topics)

    def update(self, topics: Iterable[str] | None = (), *, timeout_s: float | None = None,
               allow_auto_create: bool | None = None) -> Any:
        """Ask a broker for the metadata of ``topics`` (plus the wanted ones; None: every
        topic) and remember it. Retries across brokers until ``timeout_s``."""
        timeout = self.request_timeout_ms / 1000.0 if timeout_s is None else timeout_s
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            if topics is not None:
                self.wanted.update(topics)
            names = None if topics is None else sorted(self.wanted)
            auto = self.allow_auto_create if allow_auto_create is None else allow_auto_create
            last: KafkaError | None = None
            while True:
                if self._closed:
                    raise NetworkExceptionError("The client is closed")
                try:
                    return self._update_once(names, auto, deadline)
                except KafkaError as exc:
                    last = exc
                    if self._conn is not None:
                        self._conn.close()
                        self._conn = None
                if time.monotonic() + self.retry_backoff_ms / 1000.0 >= deadline:
                    raise last
                time.sleep(self.retry_backoff_ms / 1000.0)

    def request_any(self, key: ApiKey, body: Any, *, timeout_s: float) -> Any:
        """One request to any broker (FindCoordinator, for instance)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            try:
                conn = self._connection(deadline)
                _, response = conn.request(key, body)
            except KafkaError:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                raise
            return response

    def api_versions(self, *, timeout_s: float) -> dict[int, tuple[int, int]]:
        """The version range per API key of some broker of the cluster."""
        with self._lock:
            return dict(self._connection(time.monotonic() + timeout_s).api_versions)

    def _update_once(self, names: list[str] | None, auto: bool, deadline: float) -> Any:
        conn = self._connection(deadline)
        request_cls = api.APIS[ApiKey.METADATA].request
        topic_cls = request_cls.structs["MetadataRequestTopic"]
        body = request_cls(
            topics=None if names is None else [topic_cls(name=t) for t in names],
            allow_auto_topic_creation=auto,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False)
        version = conn.version_for(ApiKey.METADATA)
        _, response = conn.request(ApiKey.METADATA, body, version)
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack)
                   for b in response.brokers}
        topics: dict[str, TopicMetadata] = {}
        for t in response.topics:
            meta = TopicMetadata(t.name, is_internal=bool(getattr(t, "is_internal", False)))
            if t.error_code != NONE:
                meta.error = make_error(t.error_code)
            for p in t.partitions:
                meta.partitions[p.partition_index] = PartitionMetadata(
                    p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes),
                    getattr(p, "leader_epoch", -1),
                    None if p.error_code == NONE else make_error(p.error_code))
            topics[t.name] = meta
        if names is None:
            self.topics = topics
        else:
            self.topics.update(topics)
        self.brokers = brokers
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = getattr(response, "controller_id", -1)
        self.last_refresh = time.monotonic()
        self.need_update = False
        self.version += 1
        return ClusterMetadata(self.cluster_id, self.controller_id, dict(brokers), topics,
                               conn.node_id if conn.node_id is not None else -1)

    def leader(self, topic: str, partition: int) -> int:
        """The leader's broker id, or -1 when unknown."""
        meta = self.topics.get(topic)
        if meta is None:
            return -1
        p = meta.partitions.get(partition)
        if p is None or p.leader < 0 or p.leader not in self.brokers:
            return -1
        return p.leader

    def partition_count(self, topic: str) -> int | None:
        meta = self.topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        return len(meta.partitions)

    def available_partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` that have a live leader (cached per refresh)."""
        cached = self._available.get(topic)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        meta = self.topics.get(topic)
        if meta is None:
            return []
        found = sorted(p.id for p in meta.partitions.values()
                       if p.leader >= 0 and p.leader in self.brokers)
        self._available[topic] = (self.version, found)
        return found


# --- the network client -----------------------------------------------------------------------

Callback = Callable[[Any, KafkaError | None], None]


@dataclass
class InFlight:
    correlation_id: int
    key: ApiKey
    version: int
    deadline: float
    callback: Callback
    sent_at: float


class _Node:
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.in_flight: deque[InFlight] = deque()
        self.failed_at = 0.0
        self.failures = 0
        self.fd: int | None = None


class NetworkClient:
    """Pipelined requests to brokers by id (see the module docstring). One thread uses it
    (``wakeup`` may be called from any)."""

    def __init__(self, metadata: Metadata, conf: ClientConfig, *, client_id: str,
                 max_in_flight: int = 5) -> None:
        self.metadata = metadata
        self.client_id = client_id
        self.request_timeout_ms = conf.get_int("request.timeout.ms")
        self.reconnect_backoff_ms = conf.get_int("reconnect.backoff.ms")
        self.connect_timeout_ms = conf.get_int("socket.connection.setup.timeout.ms")
        self.reconnect_backoff_max_ms = conf.get_int("reconnect.backoff.max.ms")
        self.max_in_flight = max_in_flight
        self._nodes: dict[int, _Node] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False

    # --- connections ------------------------------------------------------------------------

    def _node(self, node_id: int) -> _Node | None:
        node = self._nodes.get(node_id)
        broker = self.metadata.brokers.get(node_id)
        if node is not None and broker is not None and (
                node.conn.host, node.conn.port) != (broker.host, broker.port):
            self._disconnect(node_id, NetworkExceptionError(f"Broker {node_id} moved"))
            node = None
        if node is None:
            if broker is None:
                return None
            node = _Node(BrokerConnection(broker.host, broker.port, node_id=node_id,
                                          client_id=self.client_id,
                                          request_timeout_ms=self.request_timeout_ms,
                                          connect_timeout_ms=self.connect_timeout_ms,
                                          security=self.metadata.security))
            self._nodes[node_id] = node
        return node

    def ready(self, node_id: int, timeout_s: float | None = None) -> bool:
        """Connected to ``node_id`` (connecting now, within ``timeout_s`` if given, unless
        in reconnect backoff) with room for another request in flight."""
        node = self._node(node_id)
        if node is None:
            return False
        if not node.conn.connected:
            backoff = min(self.reconnect_backoff_ms * (2 ** max(0, node.failures - 1)),
                          self.reconnect_backoff_max_ms) / 1000.0
            if node.failures and time.monotonic() - node.failed_at < backoff:
                return False
            try:
                node.conn.connect(timeout_s)
            except KafkaError as exc:
                node.failures += 1
                node.failed_at = time.monotonic()
                self.metadata.request_update()
                logger.debug("connecting to broker %d failed: %s", node_id, exc)
                return False
            node.failures = 0
            node.fd = node.conn.fileno()
            self._selector.register(node.fd, selectors.EVENT_READ, node_id)
        return len(node.in_flight) < self.max_in_flight

    def connection(self, node_id: int) -> BrokerConnection | None:
        node = self._nodes.get(node_id)
        return None if node is None else node.conn

    def in_flight_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            node = self._nodes.get(node_id)
            return 0 if node is None else len(node.in_flight)
        return sum(len(n.in_flight) for n in self._nodes.values())

    def least_loaded_node(self) -> int | None:
        best: tuple[int, int] | None = None
        for node_id in self.metadata.brokers:
            node = self._nodes.get(node_id)
            load = 0 if node is None else len(node.in_flight)
            if node is not None and not node.conn.connected and node.failures:
                load += 1000
            if best is None or load < best[0]:
                best = (load, node_id)
        return None if best is None else best[1]

    def _disconnect(self, node_id: int, error: KafkaError) -> None:
        node = self._nodes.get(node_id)
        if node is None:
            return
        if node.fd is not None:
            try:
                self._selector.unregister(node.fd)
            except (KeyError, ValueError):
                pass
            node.fd = None
        node.conn.close()
        node.failures += 1
        node.failed_at = time.monotonic()
        in_flight = list(node.in_flight)
        node.in_flight.clear()
        self.metadata.request_update()
        for request in in_flight:
            self._complete(request, None, error)

    def close_node(self, node_id: int) -> None:
        self._disconnect(node_id, NetworkExceptionError(f"Connection to {node_id} closed"))

    # --- requests -----------------------------------------------------------------------------

    def send(self, node_id: int, key: ApiKey, body: Any | Callable[[int], Any],
             callback: Callback, *, version: int | None = None,
             max_version: int | None = None, expect_response: bool = True,
             timeout_ms: int | None = None) -> None:
        """Send a request to a ready node. ``body`` may be a function of the version used
        (requests whose fields depend on it). Without a response expected (Produce with
        acks=0) the callback runs at once with None."""
        node = self._nodes[node_id]
        conn = node.conn
        if version is None:
            version = conn.version_for(key, max_version)
        payload = body(version) if callable(body) else body
        now = time.monotonic()
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        try:
            correlation_id = conn.send_request(key, version, payload, now + timeout / 1000.0)
        except KafkaError as exc:
            self._disconnect(node_id, exc)
            callback(None, exc)
            return
        if not expect_response:
            callback(None, None)
            return
        node.in_flight.append(InFlight(correlation_id, key, version, now + timeout / 1000.0,
                                       callback, now))

    def request(self, node_id: int, key: ApiKey, body: Any | Callable[[int], Any], *,
                timeout_s: float | None = None, max_version: int | None = None,
                timeout_ms: int | None = None) -> Any:
        """Send one request and poll until its answer (other requests complete meanwhile)."""
        timeout = self.request_timeout_ms / 1000.0 if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        while not self.ready(node_id, max(0.001, deadline - time.monotonic())):
            if self._nodes.get(node_id) is None:
                raise LeaderNotAvailableError(f"Broker {node_id} is not in the metadata")
            if time.monotonic() >= deadline:
                raise NetworkExceptionError(f"Broker {node_id} is not reachable")
            self.poll(min(0.05, max(0.0, deadline - time.monotonic())))
        result: list[Any] = []

        def done(response: Any, error: KafkaError | None) -> None:
            result.append((response, error))

        self.send(node_id, key, body, done, max_version=max_version, timeout_ms=timeout_ms)
        while not result:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimedOutError(f"No answer from broker {node_id} in {timeout} s")
            self.poll(remaining)
        response, error = result[0]
        if error is not None:
            raise error
        return response

    def _complete(self, request: InFlight, response: Any, error: KafkaError | None) -> None:
        try:
            request.callback(response, error)
        except Exception:
            logger.exception("a %s callback failed", request.key.name)

    def wakeup(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def poll(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for answers and complete what arrived or expired."""
        if self._closed:
            return
        now = time.monotonic()
        for node in self._nodes.values():
            if node.in_flight:
                timeout_s = min(timeout_s, node.in_flight[0].deadline - now)
        events = self._selector.select(max(0.0, timeout_s))
        for key, _mask in events:
            node_id = key.data
            if node_id is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
                continue
            self._read(node_id)
        now = time.monotonic()
        for node_id, node in list(self._nodes.items()):
            if node.in_flight and node.in_flight[0].deadline <= now:
                first = node.in_flight[0]
                self._disconnect(node_id, RequestTimedOutError(
                    f"Disconnecting from broker {node_id}: no answer to {first.key.name} "
                    f"within request.timeout.ms ({self.request_timeout_ms} ms)"))

    def _read(self, node_id: int) -> None:
        node = self._nodes.get(node_id)
        if node is None or not node.conn.connected:
            return
        try:
            frames = node.conn.receive_frames()
        except KafkaError as exc:
            frames = []
            error: KafkaError | None = exc
        else:
            error = None
        for frame in frames:
            if not node.in_flight:
                error = NetworkExceptionError(f"Unexpected response from broker {node_id}")
                break
            request = node.in_flight.popleft()
            try:
                correlation_id, response = api.decode_response(request.key, request.version,
                                                               frame)
            except KafkaError as exc:
                self._complete(request, None, exc)
                error = exc
                break
            if correlation_id != request.correlation_id:
                self._complete(request, None, NetworkExceptionError("correlation id mismatch"))
                error = NetworkExceptionError("correlation id mismatch")
                break
            self._complete(request, response, None)
        if error is not None:
            self._disconnect(node_id, error)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for node_id in list(self._nodes):
            self._disconnect(node_id, NetworkExceptionError("The client is closed"))
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

