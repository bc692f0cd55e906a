"""KafkaZkClient: Kafka's ZooKeeper operations over kazoo, safe to use from the reactor.

Threads (DESIGN.md, "Threads and time"): kazoo runs its own threads. This client only ever
calls kazoo's non-blocking ``*_async`` methods from the reactor thread, and every result,
watch event and session state change is handed back to the reactor with
``reactor.callFromThread``: Deferreds fire, handlers run, on the reactor thread only.
Closing the session (which blocks in kazoo) runs on a short-lived thread of its own.

Every operation is an ``async def`` in Kafka's vocabulary (``register_broker``,
``update_leader_and_isr`` ...); callers wrap them with ``Deferred.fromCoroutine``. As in
Kafka, a request that fails with a connection loss is retried once the session reconnects;
other ZooKeeper errors surface as kazoo's exceptions (``NodeExistsError``,
``BadVersionError`` ...) unless the method says otherwise.

Controller fencing: every controller write takes ``expected_controller_epoch_zk_version``
(the ``/controller_epoch`` zkVersion the controller got when it was elected). When it is
not ``MATCH_ANY_VERSION`` the write goes out as a multi-op whose first op checks that
version, so a deposed controller's write fails as a whole with ``ControllerMovedError``.

Watches follow Kafka's ZooKeeperClient: register a ``ZNodeChangeHandler`` or
``ZNodeChildChangeHandler`` for a path; reads of that path (``exists``, data, children with
``register_watch``) then leave a watch, and its event calls the handler on the reactor.
After a reconnect within the same session the watches are re-armed and any change missed
while disconnected is delivered (what the Java client's SetWatches does). After a session
expiry watches are gone, as in Kafka: ``StateChangeHandler.before_initializing_session`` runs
when the session is lost, ``after_initializing_session`` once a new session is connected,
where the broker re-registers and the controller re-elects.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.retry import KazooRetry
from twisted.internet.defer import Deferred, DeferredList, TimeoutError
from twisted.python.failure import Failure

from kafkaclone.zk.errors import (
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    ZNodeDecodeError,
    ZooKeeperClientClosedError,
    ZooKeeperClientTimeoutError,
)
from kafkaclone.zk.znodes import (
    MATCH_ANY_VERSION,
    PERSISTENT_ZK_PATHS,
    UNKNOWN_VERSION,
    BrokerId,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    BrokerSequenceIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityType,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ConsumerIdsZNode,
    ConsumerOffsetMetadataZNode,
    ConsumerOffsetZNode,
    ConsumerOwnersZNode,
    ConsumerPathZNode,
    ConsumerRegistration,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    OffsetCommitMetadata,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    Versioned,
    decode_znode_name,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_SESSION_TIMEOUT_MS = 18_000
"""Kafka 2.8's zookeeper.session.timeout.ms."""


class ZkReactor(Protocol):
    """What the client needs from the reactor (any Twisted reactor provides it)."""

    def callFromThread(
        self, f: Callable[..., object], /, *args: Any, **kwargs: Any
    ) -> None: ...

    def callLater(
        self, delay: float, f: Callable[..., object], /, *args: Any, **kwargs: Any
    ) -> Any: ...


# -- handlers --------------------------------------------------------------------------------


class StateChangeHandler:
    """Session lifecycle hooks (Kafka's StateChangeHandler), called on the reactor."""

    def __init__(self, name: str) -> None:
        self.name = name

    def before_initializing_session(self) -> None:
        """The session expired: ephemeral znodes and watches are gone."""

    def after_initializing_session(self) -> None:
        """A new session is connected after an expiry: re-register, re-read, re-watch."""

    def on_auth_failure(self) -> None:
        """ZooKeeper refused the client's credentials."""


class ZNodeChangeHandler:
    """Called on the reactor when the watched znode is created, deleted or changed."""

    def __init__(self, path: str) -> None:
        self.path = path

    def handle_creation(self) -> None:
        pass

    def handle_deletion(self) -> None:
        pass

    def handle_data_change(self) -> None:
        pass


class ZNodeChildChangeHandler:
    """Called on the reactor when the watched znode's children change."""

    def __init__(self, path: str) -> None:
        self.path = path

    def handle_child_change(self) -> None:
        pass


# -- multi-op requests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


ZkOp = CreateOp | SetDataOp | DeleteOp | CheckOp


@dataclass(frozen=True)
class UpdateLeaderAndIsrResult:
    """Per partition: the written LeaderAndIsr (with its new zkVersion) or the error; and the
    partitions whose state znode changed under us (zkVersion mismatch), to re-read and retry."""

    finished_partitions: dict[TopicPartition, LeaderAndIsr | Exception] = field(
        default_factory=dict
    )
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


def _fire(d: Deferred[Any], value: Any, error: BaseException | None) -> None:
    """Fire ``d`` on the reactor thread, unless it was cancelled (timed out) meanwhile."""
    if d.called:
        return
    if error is None:
        d.callback(value)
    else:
        d.errback(error)


class KafkaZkClient:
    """Kafka's KafkaZkClient over a kazoo session. See the module docstring for threading."""

    def __init__(self, zk: KazooClient, reactor: ZkReactor) -> None:
        self._zk = zk
        self._reactor = reactor
        self._closed = False
        self._session_lost = False
        self._suspended = False
        self._connected_waiters: list[Deferred[None]] = []
        self._state_change_handlers: dict[str, StateChangeHandler] = {}
        self._znode_change_handlers: dict[str, ZNodeChangeHandler] = {}
        self._znode_child_change_handlers: dict[str, ZNodeChildChangeHandler] = {}
        # Watches currently armed, with what they saw when armed: for data watches
        # (exists, mzxid), for child watches the child version (-1 for no znode).
        self._armed_data_watches: dict[str, tuple[bool, int]] = {}
        self._armed_child_watches: dict[str, int] = {}
        zk.add_listener(self._on_kazoo_state)

    @classmethod
    def from_connect_string(
        cls,
        connect_string: str,
        reactor: ZkReactor,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        max_reconnect_delay_s: float = 1.0,
    ) -> KafkaZkClient:
        """A client for ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``); call
        ``start()``. Reconnection is retried forever, backing off to ``max_reconnect_delay_s``."""
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=max_reconnect_delay_s)
        zk = KazooClient(
            hosts=connect_string,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=retry,
        )
        return cls(zk, reactor)

    @staticmethod
    async def create_chroot_if_necessary(
        connect_string: str, reactor: ZkReactor, connection_timeout: float | None = None
    ) -> None:
        """Create the chroot of ``host:port/chroot`` if it is missing, as Kafka's broker does
        before its session (kazoo, like ZooKeeper's client, expects the chroot to exist)."""
        hosts, slash, chroot = connect_string.partition("/")
        if not slash or not chroot.strip("/"):
            return
        client = KafkaZkClient.from_connect_string(hosts, reactor)
        try:
            await client.start(connection_timeout)
            await client.make_sure_persistent_path_exists("/" + chroot.strip("/"))
        finally:
            await client.close()

    # -- session ---------------------------------------------------------------------------

    @property
    def kazoo_client(self) -> KazooClient:
        """The underlying kazoo client (for tools and tests; never block on the reactor)."""
        return self._zk

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    @property
    def session_id(self) -> int | None:
        client_id = self._zk.client_id
        return None if client_id is None else int(client_id[0])

    async def start(self, connection_timeout: float | None = None) -> None:
        """Connect; ZooKeeperClientTimeoutError (and the client closed) if not connected
        within ``connection_timeout`` seconds (zookeeper.connection.timeout.ms)."""
        self._check_open()
        waiter = self._wait_until_connected()
        self._zk.start_async()
        if connection_timeout is not None:
            waiter.addTimeout(connection_timeout, cast(Any, self._reactor))
        try:
            await waiter
        except TimeoutError:
            await self.close()
            raise ZooKeeperClientTimeoutError(
                f"Timed out waiting for connection while in state: {self._zk.state}"
            ) from None

    async def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and release kazoo's threads.
        Pending waits fail with ZooKeeperClientClosedError."""
        if self._closed:
            return
        self._closed = True
        self._zk.remove_listener(self._on_kazoo_state)
        waiters, self._connected_waiters = self._connected_waiters, []
        for waiter in waiters:
            _fire(waiter, None, ZooKeeperClientClosedError("ZooKeeper client closed"))
        done: Deferred[None] = Deferred()

        def stop_kazoo() -> None:  # on its own thread: kazoo's stop() blocks
            try:
                self._zk.stop()
                self._zk.close()
            except Exception as exc:
                self._reactor.callFromThread(_fire, done, None, exc)
            else:
                self._reactor.callFromThread(_fire, done, None, None)

        threading.Thread(target=stop_kazoo, name="kafka-zk-close", daemon=True).start()
        await done

    def register_state_change_handler(self, handler: StateChangeHandler) -> None:
        self._state_change_handlers[handler.name] = handler

    def unregister_state_change_handler(self, name: str) -> None:
        self._state_change_handlers.pop(name, None)

    def register_znode_change_handler(self, handler: ZNodeChangeHandler) -> None:
        self._znode_change_handlers[handler.path] = handler

    def unregister_znode_change_handler(self, path: str) -> None:
        self._znode_change_handlers.pop(path, None)
        self._armed_data_watches.pop(path, None)

    def register_znode_child_change_handler(self, handler: ZNodeChildChangeHandler) -> None:
        self._znode_child_change_handlers[handler.path] = handler

    def unregister_znode_child_change_handler(self, path: str) -> None:
        self._znode_child_change_handlers.pop(path, None)
        self._armed_child_watches.pop(path, None)

    async def register_znode_change_handler_and_check_existence(
        self, handler: ZNodeChangeHandler
    ) -> bool:
        """Register ``handler``, watch its path, and say whether the znode exists now."""
        self.register_znode_change_handler(handler)
        return await self.path_exists(handler.path)

    # -- kazoo -> reactor -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ZooKeeperClientClosedError("ZooKeeper client closed")

    def _deferred(self, async_result: Any) -> Deferred[Any]:
        """A Deferred fired on the reactor thread with a kazoo IAsyncResult's outcome."""
        d: Deferred[Any] = Deferred()

        def completed(result: Any) -> None:  # a kazoo thread
            self._reactor.callFromThread(_fire, d, result.value, result.exception)

        async_result.rawlink(completed)
        return d

    def _wait_until_connected(self) -> Deferred[None]:
        if self._closed:
            raise ZooKeeperClientClosedError("ZooKeeper client closed")
        if self._zk.connected:
            d: Deferred[None] = Deferred()
            d.callback(None)
            return d
        waiter: Deferred[None] = Deferred()
        self._connected_waiters.append(waiter)
        return waiter

    async def _call(self, start: Callable[[], Any]) -> Any:
        """Run one kazoo async operation (``start`` returns its IAsyncResult), retrying it
        after a connection loss once reconnected, as Kafka's retryRequestUntilConnected."""
        while True:
            self._check_open()
            try:
                return await self._deferred(start())
            except ConnectionLoss:
                logger.debug("ZooKeeper connection lost during a request, retrying")
                await self._wait_until_connected()

    async def _gather(self, coroutines: Iterable[Coroutine[Any, Any, T]]) -> list[T | Exception]:
        """Run requests concurrently (Kafka pipelines them); each result or its error."""
        deferreds = [Deferred.fromCoroutine(coroutine) for coroutine in coroutines]
        if not deferreds:
            return []
        results = await DeferredList(deferreds, consumeErrors=True)
        outcomes: list[T | Exception] = []
        for success, value in results:
            if success:
                outcomes.append(value)
            else:
                failure = cast(Failure, value)
                error = failure.value
                if not isinstance(error, Exception):
                    failure.raiseException()
                outcomes.append(error)
        return outcomes

    def _on_kazoo_state(self, state: str) -> None:  # a kazoo thread
        self._reactor.callFromThread(self._handle_state, state)

    def _handle_state(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            logger.info("ZooKeeper session %s expired", _hex(self.session_id))
            self._session_lost = True
            self._suspended = False
            self._armed_data_watches.clear()
            self._armed_child_watches.clear()
            for handler in list(self._state_change_handlers.values()):
                _run_handler(handler.before_initializing_session, handler.name)
        elif state == KazooState.SUSPENDED:
            logger.info("ZooKeeper connection lost, session %s suspended", _hex(self.session_id))
            self._suspended = True
        elif state == KazooState.CONNECTED:
            waiters, self._connected_waiters = self._connected_waiters, []
            for waiter in waiters:
                _fire(waiter, None, None)
            if self._session_lost:
                self._session_lost = False
                logger.info("ZooKeeper new session %s connected", _hex(self.session_id))
                for handler in list(self._state_change_handlers.values()):
                    _run_handler(handler.after_initializing_session, handler.name)
            elif self._suspended:
                self._suspended = False
                Deferred.fromCoroutine(self._rearm_watches()).addErrback(
                    _log_failure, "re-arming ZooKeeper watches"
                )

    def _on_data_watch(self, event: WatchedEvent) -> None:  # a kazoo thread
        self._reactor.callFromThread(self._dispatch_data_event, event)

    def _on_child_watch(self, event: WatchedEvent) -> None:  # a kazoo thread
        self._reactor.callFromThread(self._dispatch_child_event, event)

    def _dispatch_data_event(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:  # kazoo dropping watches on a disconnect
            return
        self._armed_data_watches.pop(event.path, None)
        handler = self._znode_change_handlers.get(event.path)
        if handler is None or self._closed:
            return
        if event.type == EventType.CREATED:
            _run_handler(handler.handle_creation, event.path)
        elif event.type == EventType.DELETED:
            _run_handler(handler.handle_deletion, event.path)
        elif event.type == EventType.CHANGED:
            _run_handler(handler.handle_data_change, event.path)

    def _dispatch_child_event(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return
        self._armed_child_watches.pop(event.path, None)
        handler = self._znode_child_change_handlers.get(event.path)
        if handler is None or self._closed:
            return
        if event.type == EventType.CHILD:
            _run_handler(handler.handle_child_change, event.path)

    async def _rearm_watches(self) -> None:
        """After a reconnect in the same session kazoo has dropped its watches: set them
        again and deliver the events missed meanwhile."""
        data_watches = dict(self._armed_data_watches)
        child_watches = dict(self._armed_child_watches)
        self._armed_data_watches.clear()
        self._armed_child_watches.clear()
        for path, (existed, mzxid) in data_watches.items():
            stat = await self._exists(path)
            handler = self._znode_change_handlers.get(path)
            if handler is None:
                continue
            if existed and stat is None:
                _run_handler(handler.handle_deletion, path)
            elif not existed and stat is not None:
                _run_handler(handler.handle_creation, path)
            elif stat is not None and stat.mzxid != mzxid:
                _run_handler(handler.handle_data_change, path)
        for path, child_version in child_watches.items():
            children_stat = await self._get_children_and_stat(path, register_watch=True)
            child_handler = self._znode_child_change_handlers.get(path)
            new_version = -1 if children_stat is None else children_stat[1].cversion
            if child_handler is not None and new_version != child_version:
                _run_handler(child_handler.handle_child_change, path)

    # -- basic requests (watch aware) -----------------------------------------------------------

    async def _exists(self, path: str) -> Any:
        watch = self._on_data_watch if path in self._znode_change_handlers else None
        stat = await self._call(lambda: self._zk.exists_async(path, watch=watch))
        if watch is not None:
            self._armed_data_watches[path] = (
                (False, 0) if stat is None else (True, int(stat.mzxid))
            )
        return stat

    async def _get_data(self, path: str) -> tuple[bytes, Any] | None:
        """(data, ZnodeStat), or None if the znode does not exist."""
        watch = self._on_data_watch if path in self._znode_change_handlers else None
        try:
            data, stat = await self._call(lambda: self._zk.get_async(path, watch=watch))
        except NoNodeError:
            if watch is not None:
                # getData leaves no watch on a missing znode: watch its creation instead.
                await self._exists(path)
            return None
        if watch is not None:
            self._armed_data_watches[path] = (True, int(stat.mzxid))
        return (data or b""), stat

    async def _get_children_and_stat(
        self, path: str, register_watch: bool
    ) -> tuple[list[str], Any] | None:
        watch = (
            self._on_child_watch
            if register_watch and path in self._znode_child_change_handlers
            else None
        )
        try:
            children, stat = await self._call(
                lambda: self._zk.get_children_async(path, watch=watch, include_data=True)
            )
        except NoNodeError:
            return None
        if watch is not None:
            self._armed_child_watches[path] = int(stat.cversion)
        return list(children), stat

    async def path_exists(self, path: str) -> bool:
        """Watches the path if a ZNodeChangeHandler is registered for it."""
        return await self._exists(path) is not None

    async def get_data_and_stat(self, path: str) -> tuple[bytes, Any] | None:
        """The data and kazoo ZnodeStat, None if absent. Watches as ``path_exists``."""
        return await self._get_data(path)

    async def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        """(data, zkVersion), or (None, UNKNOWN_VERSION) if the znode does not exist."""
        found = await self._get_data(path)
        if found is None:
            return None, UNKNOWN_VERSION
        return found[0], int(found[1].version)

    async def get_children(self, path: str, register_watch: bool = False) -> list[str]:
        """The children's names ([] if the znode does not exist). With ``register_watch``,
        and a ZNodeChildChangeHandler registered for ``path``, watches the children."""
        found = await self._get_children_and_stat(path, register_watch)
        return [] if found is None else found[0]

    async def set_data(self, path: str, data: bytes, version: int = MATCH_ANY_VERSION) -> int:
        """Set the data (conditionally on ``version``); the new zkVersion."""
        stat = await self._call(lambda: self._zk.set_async(path, data, version))
        return int(stat.version)

    async def create_recursive(
        self, path: str, data: bytes = b"", *, throw_if_path_exists: bool = True
    ) -> None:
        """Create ``path`` and any missing parents (empty). NodeExistsError if it exists,
        unless ``throw_if_path_exists`` is false."""
        try:
            await self._call(lambda: self._zk.create_async(path, data, makepath=True))
        except NodeExistsError:
            if throw_if_path_exists:
                raise

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self.create_recursive(path, throw_if_path_exists=False)

    async def create_sequential_persistent_path(self, path: str, data: bytes) -> str:
        """Create ``<path><10-digit sequence>`` (and missing parents); the created path."""
        created = await self._call(
            lambda: self._zk.create_async(path, data, sequence=True, makepath=True)
        )
        return str(created)

    async def conditional_update_path(
        self,
        path: str,
        data: bytes,
        expected_version: int,
        checker: Callable[[bytes | None], bool] | None = None,
    ) -> tuple[bool, int]:
        """Kafka's conditionalUpdatePath: (True, new zkVersion) if the znode was at
        ``expected_version``, else (False, UNKNOWN_VERSION). A retried write may find its
        own earlier attempt applied: ``checker`` (given the current data) then says whether
        the current data is what we wrote, and the write counts as done."""
        try:
            return True, await self.set_data(path, data, expected_version)
        except BadVersionError:
            if checker is not None:
                current = await self._get_data(path)
                if current is not None and checker(current[0]):
                    return True, int(current[1].version)
            return False, UNKNOWN_VERSION
        except NoNodeError:
            return False, UNKNOWN_VERSION

    async def multi(self, ops: Sequence[ZkOp]) -> list[Any]:
        """One atomic multi-op; per op its result (created path, ZnodeStat, True) or the
        kazoo exception instance for a failed one (others then RolledBackError /
        RuntimeInconsistency)."""

        def start() -> Any:
            transaction = self._zk.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    transaction.create(
                        op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential
                    )
                elif isinstance(op, SetDataOp):
                    transaction.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    transaction.delete(op.path, op.version)
                else:
                    transaction.check(op.path, op.version)
            return transaction.commit_async()

        return list(await self._call(start))

    async def guarded(self, op: ZkOp, expected_controller_epoch_zk_version: int) -> Any:
        """Run ``op`` as a controller write: with a version, in a multi-op behind a check of
        ``/controller_epoch``'s zkVersion (ControllerMovedError if it moved); with
        MATCH_ANY_VERSION, unguarded. Returns the op's result or raises its error."""
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            results = await self.multi([op])
            result = results[0]
        elif expected_controller_epoch_zk_version >= 0:
            results = await self.multi(
                [CheckOp(ControllerEpochZNode.PATH, expected_controller_epoch_zk_version), op]
            )
            if isinstance(results[0], BadVersionError | NoNodeError):
                raise ControllerMovedError(
                    "Controller epoch zkVersion check fails. Expected zkVersion = "
                    f"{expected_controller_epoch_zk_version}"
                )
            result = results[1]
        else:
            raise ValueError(
                "expected controller epoch zkVersion must be >= 0 or MATCH_ANY_VERSION, got "
                f"{expected_controller_epoch_zk_version}"
            )
        if isinstance(result, Exception):
            raise result
        return result

    async def _guarded_each(
        self, ops: Sequence[ZkOp], expected_controller_epoch_zk_version: int
    ) -> list[Any]:
        """``guarded`` for each op, pipelined; ControllerMovedError if any found the epoch
        moved, else each op's result or error."""
        outcomes = await self._gather(
            self.guarded(op, expected_controller_epoch_zk_version) for op in ops
        )
        for outcome in outcomes:
            if isinstance(outcome, ControllerMovedError):
                raise outcome
        return outcomes

    async def delete_recursive(
        self, path: str, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION
    ) -> bool:
        """Delete ``path`` and everything below it; False if it did not exist."""
        while True:
            children = await self.get_children(path)
            for child in children:
                await self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
            try:
                await self.guarded(DeleteOp(path), expected_controller_epoch_zk_version)
                return True
            except NoNodeError:
                return False
            except NotEmptyError:
                continue  # a child appeared meanwhile

    # -- cluster and brokers ------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        """Make sure Kafka's persistent top-level paths exist (ZkData.PersistentZkPaths)."""
        await self._gather(self.make_sure_persistent_path_exists(p) for p in PERSISTENT_ZK_PATHS)

    async def get_cluster_id(self) -> str | None:
        found = await self._get_data(ClusterIdZNode.PATH)
        return None if found is None else ClusterIdZNode.decode(found[0])

    async def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster id: ``proposed_cluster_id`` if this call created ``/cluster/id``, the
        existing one otherwise."""
        try:
            await self.create_recursive(
                ClusterIdZNode.PATH, ClusterIdZNode.encode(proposed_cluster_id)
            )
            return proposed_cluster_id
        except NodeExistsError:
            existing = await self.get_cluster_id()
            if existing is None:
                raise RuntimeError("Failed to get cluster id from ZooKeeper") from None
            return existing

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; the broker epoch (its czxid).
        BrokerIdAlreadyRegisteredError if another session holds the id. A znode left by
        this very session (a retried request) counts as registered."""
        path = BrokerIdZNode.path(info.broker_id)
        stat = await self._checked_ephemeral_create(path, BrokerIdZNode.encode(info))
        if stat is None:
            raise BrokerIdAlreadyRegisteredError(info.broker_id)
        logger.info(
            "Registered broker %s at path %s with addresses: %s, czxid (broker epoch): %s",
            info.broker_id,
            path,
            ",".join(ep.connection_string for ep in info.endpoints),
            stat.czxid,
        )
        return int(stat.czxid)

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> Any:
        """Kafka's CheckedEphemeral: the created znode's stat, the existing one's if this
        session owns it, None if another session does."""
        parent_created = False
        while True:
            results = await self.multi(
                [CreateOp(path, b"", ephemeral=True), SetDataOp(path, data, 0)]
            )
            if not isinstance(results[0], Exception) and not isinstance(results[1], Exception):
                return results[1]
            if isinstance(results[0], NoNodeError) and not parent_created:  # no parent yet
                await self.make_sure_persistent_path_exists(path.rsplit("/", 1)[0] or "/")
                parent_created = True
                continue
            if not isinstance(results[0], NodeExistsError):
                error = results[0] if isinstance(results[0], Exception) else results[1]
                raise error
            found = await self._get_data(path)
            if found is None:
                continue  # went away while we looked: try again
            owner = int(found[1].ephemeralOwner)
            if owner != self.session_id:
                logger.error(
                    "Error while creating ephemeral at %s, node already exists and owner "
                    "'%s' does not match current session '%s'",
                    path,
                    _hex(owner),
                    _hex(self.session_id),
                )
                return None
            return found[1]

    async def update_broker_info(self, info: BrokerInfo) -> None:
        await self.set_data(BrokerIdZNode.path(info.broker_id), BrokerIdZNode.encode(info))

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        found = await self._get_data(BrokerIdZNode.path(broker_id))
        return None if found is None else BrokerIdZNode.decode(broker_id, found[0])

    async def get_all_broker_ids(self, register_watch: bool = False) -> list[BrokerId]:
        """The registered broker ids, sorted (Kafka's getSortedBrokerList)."""
        children = await self.get_children(BrokerIdsZNode.PATH, register_watch)
        return sorted(BrokerId(int(child)) for child in children)

    async def get_all_brokers_in_cluster(self, register_watch: bool = False) -> list[BrokerInfo]:
        return [info for info, _ in await self._get_brokers_and_epochs(register_watch)]

    async def get_all_broker_and_epochs_in_cluster(
        self, register_watch: bool = False
    ) -> dict[BrokerId, tuple[BrokerInfo, int]]:
        """broker id -> (registration, broker epoch = the znode's czxid)."""
        pairs = await self._get_brokers_and_epochs(register_watch)
        return {info.broker_id: (info, epoch) for info, epoch in pairs}

    async def _get_brokers_and_epochs(self, register_watch: bool) -> list[tuple[BrokerInfo, int]]:
        broker_ids = await self.get_all_broker_ids(register_watch)
        found = await self._gather(self._get_data(BrokerIdZNode.path(b)) for b in broker_ids)
        result = []
        for broker_id, outcome in zip(broker_ids, found, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:  # gone since listed
                result.append((BrokerIdZNode.decode(broker_id, outcome[0]), int(outcome[1].czxid)))
        return result

    async def generate_broker_sequence_id(self) -> int:
        """A new number from ``/brokers/seqid``'s zkVersion (for broker id generation)."""
        while True:
            try:
                return await self.set_data(BrokerSequenceIdZNode.PATH, b"")
            except NoNodeError:
                await self.make_sure_persistent_path_exists(BrokerSequenceIdZNode.PATH)

    # -- controller ------------------------------------------------------------------------------

    async def get_controller_id(self) -> BrokerId | None:
        """The controller's broker id; watches ``/controller`` if a handler is registered."""
        found = await self._get_data(ControllerZNode.PATH)
        return None if found is None else ControllerZNode.decode(found[0])

    async def get_controller_epoch(self) -> Versioned[int] | None:
        """The controller epoch and ``/controller_epoch``'s zkVersion."""
        found = await self._get_data(ControllerEpochZNode.PATH)
        if found is None:
            return None
        return Versioned(ControllerEpochZNode.decode(found[0]), int(found[1].version))

    async def register_controller_and_increment_controller_epoch(
        self, controller_id: int, timestamp_ms: int | None = None
    ) -> tuple[int, int]:
        """Become controller: create the ephemeral ``/controller`` and bump
        ``/controller_epoch`` in one multi-op. Returns (new epoch, the epoch znode's
        zkVersion), the version every later controller write is guarded by.
        ControllerMovedError if another broker won."""
        current = await self.get_controller_epoch()
        if current is None:
            current = await self._maybe_create_controller_epoch_znode()
        new_epoch = current.value + 1
        logger.debug(
            "Try to create %s and increment controller epoch to %s with expected controller "
            "epoch zkVersion %s",
            ControllerZNode.PATH,
            new_epoch,
            current.zk_version,
        )
        results = await self.multi(
            [
                CreateOp(
                    ControllerZNode.PATH,
                    ControllerZNode.encode(controller_id, timestamp_ms),
                    ephemeral=True,
                ),
                SetDataOp(
                    ControllerEpochZNode.PATH,
                    ControllerEpochZNode.encode(new_epoch),
                    current.zk_version,
                ),
            ]
        )
        if not any(isinstance(result, Exception) for result in results):
            return new_epoch, int(results[1].version)
        if isinstance(results[0], NodeExistsError) or isinstance(results[1], BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        raise next(
            result
            for result in results
            if isinstance(result, Exception)
            and not isinstance(result, RolledBackError | RuntimeInconsistency)
        )

    async def _check_controller_and_epoch(
        self, controller_id: int, new_epoch: int
    ) -> tuple[int, int]:
        """After a failed election multi-op: did our earlier (retried) attempt win?"""
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(
                f"The ephemeral node at {ControllerZNode.PATH} went away while checking "
                "whether the controller election succeeds. Aborting controller startup procedure"
            )
        if current_controller == controller_id:
            epoch = await self.get_controller_epoch()
            if epoch is None:
                raise RuntimeError(f"{ControllerEpochZNode.PATH} went away")
            if epoch.value == new_epoch:
                return new_epoch, epoch.zk_version
        raise ControllerMovedError(
            "Controller moved to another broker. Aborting controller startup procedure"
        )

    async def _maybe_create_controller_epoch_znode(self) -> Versioned[int]:
        try:
            await self._call(
                lambda: self._zk.create_async(
                    ControllerEpochZNode.PATH,
                    ControllerEpochZNode.encode(ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH),
                )
            )
            logger.info(
                "Successfully created %s with initial epoch %s",
                ControllerEpochZNode.PATH,
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH,
            )
            return Versioned(
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH,
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
            )
        except NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise RuntimeError(
                    f"{ControllerEpochZNode.PATH} existed before but went away while reading it"
                ) from None
            return current

    async def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` (guarded; a missing znode is fine)."""
        try:
            await self.guarded(DeleteOp(ControllerZNode.PATH), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass

    # -- topics ------------------------------------------------------------------------------------

    async def get_all_topics_in_cluster(self, register_watch: bool = False) -> set[str]:
        return set(await self.get_children(TopicsZNode.PATH, register_watch))

    async def topic_exists(self, topic: str) -> bool:
        return await self.path_exists(TopicZNode.path(topic))

    async def create_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, Sequence[int]],
    ) -> None:
        """Create ``/brokers/topics/<t>``; NodeExistsError if the topic exists."""
        await self.create_recursive(TopicZNode.path(topic), TopicZNode.encode(topic_id, assignment))

    async def set_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, ReplicaAssignment] | Mapping[int, Sequence[int]],
        expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION,
    ) -> int:
        """Overwrite ``/brokers/topics/<t>`` (new partitions, reassignment); new zkVersion."""
        stat = await self.guarded(
            SetDataOp(TopicZNode.path(topic), TopicZNode.encode(topic_id, assignment)),
            expected_controller_epoch_zk_version,
        )
        return int(stat.version)

    async def get_topic_assignment(self, topic: str) -> Versioned[TopicAssignment] | None:
        found = await self._get_data(TopicZNode.path(topic))
        if found is None:
            return None
        return Versioned(TopicZNode.decode(topic, found[0]), int(found[1].version))

    async def get_replica_assignment_and_topic_id_for_topics(
        self, topics: Iterable[str]
    ) -> dict[str, TopicAssignment]:
        """topic -> its id and assignment, for the topics that exist."""
        names = sorted(set(topics))
        outcomes = await self._gather(self._get_data(TopicZNode.path(t)) for t in names)
        result = {}
        for topic, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result[topic] = TopicZNode.decode(topic, outcome[0])
        return result

    async def get_partition_assignment_for_topics(
        self, topics: Iterable[str]
    ) -> dict[str, dict[int, ReplicaAssignment]]:
        assignments = await self.get_replica_assignment_and_topic_id_for_topics(topics)
        return {topic: dict(a.partitions) for topic, a in assignments.items()}

    async def get_topic_ids_for_topics(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        assignments = await self.get_replica_assignment_and_topic_id_for_topics(topics)
        return {t: a.topic_id for t, a in assignments.items() if a.topic_id is not None}

    async def get_topic_partition_count(self, topic: str) -> int | None:
        found = await self.get_topic_assignment(topic)
        return None if found is None else len(found.value.partitions)

    async def get_all_partitions(self) -> set[TopicPartition]:
        topics = sorted(await self.get_all_topics_in_cluster())
        children = await self._gather(
            self.get_children(TopicPartitionsZNode.path(t)) for t in topics
        )
        result: set[TopicPartition] = set()
        for topic, outcome in zip(topics, children, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            result.update(TopicPartition(topic, int(p)) for p in outcome)
        return result

    async def create_topic_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, Exception | None]:
        """Create each partition's state znode (and its parents), as controller writes.
        Per partition None when created, else the error (NodeExistsError if it was there).
        ControllerMovedError if the controller moved."""
        topics = sorted({tp.topic for tp in states})
        await self._create_ignoring_existing(
            [TopicPartitionsZNode.path(t) for t in topics], expected_controller_epoch_zk_version
        )
        await self._create_ignoring_existing(
            [TopicPartitionZNode.path(tp) for tp in states], expected_controller_epoch_zk_version
        )
        partitions = list(states)
        outcomes = await self._guarded_each(
            [
                CreateOp(
                    TopicPartitionStateZNode.path(tp), TopicPartitionStateZNode.encode(states[tp])
                )
                for tp in partitions
            ],
            expected_controller_epoch_zk_version,
        )
        return {
            tp: outcome if isinstance(outcome, Exception) else None
            for tp, outcome in zip(partitions, outcomes, strict=True)
        }

    async def _create_ignoring_existing(self, paths: Sequence[str], expected: int) -> None:
        outcomes = await self._guarded_each([CreateOp(p) for p in paths], expected)
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NodeExistsError):
                raise outcome

    async def get_topic_partition_state(
        self, tp: TopicPartition
    ) -> LeaderIsrAndControllerEpoch | None:
        found = await self._get_data(TopicPartitionStateZNode.path(tp))
        if found is None:
            return None
        return TopicPartitionStateZNode.decode(found[0], int(found[1].version))

    async def get_topic_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The states of the partitions that have one."""
        tps = list(partitions)
        outcomes = await self._gather(self.get_topic_partition_state(tp) for tp in tps)
        result = {}
        for tp, outcome in zip(tps, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result[tp] = outcome
        return result

    async def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Write partition states, each conditional on its LeaderAndIsr.zk_version (the
        partition epoch) and all guarded by the controller epoch. A version mismatch puts
        the partition in ``partitions_to_retry``. ControllerMovedError if deposed."""
        partitions = list(leader_and_isrs)
        outcomes = await self._guarded_each(
            [
                SetDataOp(
                    TopicPartitionStateZNode.path(tp),
                    TopicPartitionStateZNode.encode(
                        LeaderIsrAndControllerEpoch(leader_and_isrs[tp], controller_epoch)
                    ),
                    leader_and_isrs[tp].zk_version,
                )
                for tp in partitions
            ],
            expected_controller_epoch_zk_version,
        )
        result = UpdateLeaderAndIsrResult()
        for tp, outcome in zip(partitions, outcomes, strict=True):
            if isinstance(outcome, BadVersionError):
                result.partitions_to_retry.append(tp)
            elif isinstance(outcome, Exception):
                result.finished_partitions[tp] = outcome
            else:
                result.finished_partitions[tp] = leader_and_isrs[tp].with_zk_version(
                    int(outcome.version)
                )
        return result

    async def conditional_update_partition_state(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
    ) -> tuple[bool, int]:
        """The partition leader's ISR change (Kafka's ReplicationUtils.updateLeaderAndIsr):
        write the state if the znode is still at ``leader_and_isr.zk_version``. (True, new
        zkVersion) or (False, UNKNOWN_VERSION)."""
        new_state = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)

        def same_state(current: bytes | None) -> bool:
            if current is None:
                return False
            try:
                written = TopicPartitionStateZNode.decode(current, 0)
            except ValueError:
                return False
            return written == LeaderIsrAndControllerEpoch(
                leader_and_isr.with_zk_version(0), controller_epoch
            )

        return await self.conditional_update_path(
            TopicPartitionStateZNode.path(tp),
            TopicPartitionStateZNode.encode(new_state),
            leader_and_isr.zk_version,
            same_state,
        )

    async def delete_topic_znode(
        self, topic: str, expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/brokers/topics/<t>`` and its partition states (topic deletion)."""
        await self.delete_recursive(TopicZNode.path(topic), expected_controller_epoch_zk_version)

    # -- topic deletion ------------------------------------------------------------------------

    async def get_topic_deletions(self, register_watch: bool = False) -> list[str]:
        return sorted(await self.get_children(DeleteTopicsZNode.PATH, register_watch))

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self.path_exists(DeleteTopicsTopicZNode.path(topic))

    async def create_delete_topic_path(self, topic: str) -> None:
        """Mark the topic for deletion; NodeExistsError if it already is."""
        await self.create_recursive(
            DeleteTopicsTopicZNode.path(topic), DeleteTopicsTopicZNode.encode()
        )

    async def delete_topic_deletions(
        self, topics: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        await self._guarded_each(
            [DeleteOp(DeleteTopicsTopicZNode.path(t)) for t in topics],
            expected_controller_epoch_zk_version,
        )

    # -- ISR change notifications ----------------------------------------------------------------

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """Announce ISR changes to the controller; the created sequential znode's path."""
        return await self.create_sequential_persistent_path(
            IsrChangeNotificationSequenceZNode.path(),
            IsrChangeNotificationSequenceZNode.encode(partitions),
        )

    async def get_all_isr_change_notifications(self, register_watch: bool = False) -> list[str]:
        """The pending notifications' sequence numbers, in order."""
        children = await self.get_children(IsrChangeNotificationZNode.PATH, register_watch)
        return sorted(IsrChangeNotificationSequenceZNode.sequence_number(c) for c in children)

    async def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> set[TopicPartition]:
        seqs = list(sequence_numbers)
        outcomes = await self._gather(
            self._get_data(IsrChangeNotificationSequenceZNode.path(s)) for s in seqs
        )
        result: set[TopicPartition] = set()
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result |= IsrChangeNotificationSequenceZNode.decode(outcome[0])
        return result

    async def delete_isr_change_notifications(
        self,
        sequence_numbers: Iterable[str] | None,
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Delete the given notifications (all of them for None); missing ones are fine."""
        if sequence_numbers is None:
            sequence_numbers = await self.get_all_isr_change_notifications()
        outcomes = await self._guarded_each(
            [DeleteOp(IsrChangeNotificationSequenceZNode.path(s)) for s in sequence_numbers],
            expected_controller_epoch_zk_version,
        )
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NoNodeError):
                raise outcome

    # -- reassignment and preferred leader election ----------------------------------------------

    async def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        await self.create_recursive(
            ReassignPartitionsZNode.PATH, ReassignPartitionsZNode.encode(reassignment)
        )

    async def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        found = await self._get_data(ReassignPartitionsZNode.PATH)
        return {} if found is None else ReassignPartitionsZNode.decode(found[0])

    async def reassign_partitions_in_progress(self) -> bool:
        return await self.path_exists(ReassignPartitionsZNode.PATH)

    async def delete_partition_reassignment(
        self, expected_controller_epoch_zk_version: int
    ) -> None:
        try:
            await self.guarded(
                DeleteOp(ReassignPartitionsZNode.PATH), expected_controller_epoch_zk_version
            )
        except NoNodeError:
            pass

    async def create_preferred_replica_election(
        self, partitions: Iterable[TopicPartition]
    ) -> None:
        await self.create_recursive(
            PreferredReplicaElectionZNode.PATH, PreferredReplicaElectionZNode.encode(partitions)
        )

    async def get_preferred_replica_election(self) -> set[TopicPartition]:
        found = await self._get_data(PreferredReplicaElectionZNode.PATH)
        return set() if found is None else PreferredReplicaElectionZNode.decode(found[0])

    async def delete_preferred_replica_election(
        self, expected_controller_epoch_zk_version: int
    ) -> None:
        try:
            await self.guarded(
                DeleteOp(PreferredReplicaElectionZNode.PATH), expected_controller_epoch_zk_version
            )
        except NoNodeError:
            pass

    # -- configs -------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """The entity's overrides ({} if none)."""
        found = await self._get_data(ConfigEntityZNode.path(entity_type, entity_name))
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        names = sorted(set(topics))
        outcomes = await self._gather(
            self.get_entity_configs(ConfigEntityType.TOPIC, t) for t in names
        )
        result = {}
        for topic, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            result[topic] = outcome
        return result

    async def set_or_create_entity_configs(
        self, entity_type: str, entity_name: str, config: Mapping[str, str]
    ) -> None:
        """Write ``/config/<type>/<name>`` (the last writer wins, as in Kafka)."""
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(config)
        try:
            await self.set_data(path, data)
        except NoNodeError:
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:
                await self.set_data(path, data)

    async def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return sorted(await self.get_children(ConfigEntityTypeZNode.path(entity_type)))

    async def create_config_change_notification(self, sanitized_entity_path: str) -> str:
        """Tell every broker that ``<type>/<name>``'s config changed; the znode's path."""
        await self.make_sure_persistent_path_exists(ConfigEntityChangeNotificationZNode.PATH)
        return await self.create_sequential_persistent_path(
            ConfigEntityChangeNotificationSequenceZNode.CREATE_PATH,
            ConfigEntityChangeNotificationSequenceZNode.encode(sanitized_entity_path),
        )

    async def delete_topic_configs(
        self, topics: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        outcomes = await self._guarded_each(
            [DeleteOp(ConfigEntityZNode.path(ConfigEntityType.TOPIC, t)) for t in topics],
            expected_controller_epoch_zk_version,
        )
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NoNodeError):
                raise outcome

    # -- producer ids ------------------------------------------------------------------------------

    async def allocate_producer_id_block(
        self, broker_id: int, block_size: int = 1000
    ) -> ProducerIdBlock:
        """Claim the next block of producer ids (Kafka's ProducerIdManager): read
        ``/latest_producer_id_block``, write the following block conditionally, retry on
        a race with another broker."""
        await self.make_sure_persistent_path_exists(ProducerIdBlockZNode.PATH)
        while True:
            data, zk_version = await self.get_data_and_version(ProducerIdBlockZNode.PATH)
            current = ProducerIdBlockZNode.decode(data) if data else None
            if current is None:
                block = ProducerIdBlock(broker_id, 0, block_size - 1)
            else:
                if current.block_end > 2**63 - 1 - block_size:
                    raise RuntimeError("Have exhausted all producerIds.")
                block = ProducerIdBlock(
                    broker_id, current.block_end + 1, current.block_end + block_size
                )
            encoded = ProducerIdBlockZNode.encode(block)
            succeeded, _ = await self.conditional_update_path(
                ProducerIdBlockZNode.PATH, encoded, zk_version, _equals(encoded)
            )
            if succeeded:
                return block

    # -- committed offsets and group mirrors (offsets.storage=zookeeper) -------------------------

    async def get_consumer_offset(self, group: str, tp: TopicPartition) -> int | None:
        found = await self._get_data(ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
        return None if found is None else ConsumerOffsetZNode.decode(found[0])

    async def set_or_create_consumer_offset(
        self, group: str, tp: TopicPartition, offset: int
    ) -> None:
        path = ConsumerOffsetZNode.path(group, tp.topic, tp.partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            await self.set_data(path, data)
        except NoNodeError:
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:
                await self.set_data(path, data)

    async def get_consumer_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every offset committed for ``group``."""
        topics = sorted(await self.get_children(ConsumerOffsetZNode.offsets_path(group)))
        partitions = await self._gather(
            self.get_children(ConsumerOffsetZNode.topic_path(group, t)) for t in topics
        )
        tps: list[TopicPartition] = []
        for topic, outcome in zip(topics, partitions, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            tps.extend(TopicPartition(topic, int(p)) for p in outcome)
        offsets = await self._gather(self.get_consumer_offset(group, tp) for tp in tps)
        result = {}
        for tp, offset in zip(tps, offsets, strict=True):
            if isinstance(offset, Exception):
                raise offset
            if offset is not None:
                result[tp] = offset
        return result

    async def get_consumer_groups(self) -> list[str]:
        """The group ids under ``/consumers`` (decoded, see ``encode_znode_name``)."""
        return sorted(decode_znode_name(name)
                      for name in await self.get_children(ConsumerPathZNode.PATH))

    async def commit_consumer_offsets(
        self, group: str, commits: Mapping[TopicPartition, tuple[int, OffsetCommitMetadata]],
        *, max_attempts: int = 5,
    ) -> None:
        """Write the offsets of one OffsetCommit in one multi-op: each offset as decimal
        text at ``/consumers/<g>/offsets/<t>/<p>`` and its metadata in the child
        ``.../<p>/metadata``. The first attempt sets existing znodes (the steady state of a
        consuming group); if some are missing, what exists is looked up and one multi-op
        creates the missing znodes (parents included) and sets the others."""
        if not commits:
            return
        ops: list[ZkOp] = []
        for tp, (offset, metadata) in commits.items():
            ops.append(SetDataOp(ConsumerOffsetZNode.path(group, tp.topic, tp.partition),
                                 ConsumerOffsetZNode.encode(offset)))
            ops.append(SetDataOp(ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition),
                                 ConsumerOffsetMetadataZNode.encode(metadata)))
        results = await self.multi(ops)
        attempt = 1
        while any(isinstance(r, Exception) for r in results):
            failure = next(r for r in results
                           if isinstance(r, Exception)
                           and not isinstance(r, RolledBackError | RuntimeInconsistency))
            if not isinstance(failure, NoNodeError | NodeExistsError) or attempt >= max_attempts:
                raise failure
            attempt += 1
            ops = await self._create_or_set_offset_ops(group, commits)
            results = await self.multi(ops)

    async def _create_or_set_offset_ops(
        self, group: str, commits: Mapping[TopicPartition, tuple[int, OffsetCommitMetadata]],
    ) -> list[ZkOp]:
        containers = [ConsumerPathZNode.PATH, ConsumerOffsetZNode.group_path(group),
                      ConsumerOffsetZNode.offsets_path(group)]
        containers += sorted({ConsumerOffsetZNode.topic_path(group, tp.topic) for tp in commits})
        leaves: list[tuple[str, bytes]] = []
        for tp, (offset, metadata) in commits.items():
            leaves.append((ConsumerOffsetZNode.path(group, tp.topic, tp.partition),
                           ConsumerOffsetZNode.encode(offset)))
            leaves.append((ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition),
                           ConsumerOffsetMetadataZNode.encode(metadata)))
        paths = containers + [path for path, _ in leaves]
        exists = await self._gather(self._exists(path) for path in paths)
        existing = {path for path, stat in zip(paths, exists, strict=True)
                    if not isinstance(stat, Exception) and stat is not None}
        ops: list[ZkOp] = [CreateOp(path) for path in containers if path not in existing]
        for path, data in leaves:
            ops.append(SetDataOp(path, data) if path in existing else CreateOp(path, data))
        return ops

    async def get_consumer_offsets_with_metadata(
        self, group: str, partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, tuple[int, OffsetCommitMetadata]]:
        """The committed offsets of ``group`` (all of them when ``partitions`` is None)
        with their metadata; a partition without an offset is left out, an offset without
        a metadata child (written by another tool) has empty metadata."""
        if partitions is None:
            tps: list[TopicPartition] = []
            topics = sorted(await self.get_children(ConsumerOffsetZNode.offsets_path(group)))
            listed = await self._gather(
                self.get_children(ConsumerOffsetZNode.topic_path(group, t)) for t in topics)
            for topic, outcome in zip(topics, listed, strict=True):
                if isinstance(outcome, Exception):
                    raise outcome
                tps.extend(TopicPartition(topic, int(p)) for p in outcome if p.isdigit())
        else:
            tps = list(dict.fromkeys(partitions))
        found = await self._gather(self._get_offset_with_metadata(group, tp) for tp in tps)
        result: dict[TopicPartition, tuple[int, OffsetCommitMetadata]] = {}
        for tp, item in zip(tps, found, strict=True):
            if isinstance(item, Exception):
                raise item
            if item is not None:
                result[tp] = item
        return result

    async def _get_offset_with_metadata(
        self, group: str, tp: TopicPartition
    ) -> tuple[int, OffsetCommitMetadata] | None:
        offset_data = await self._get_data(ConsumerOffsetZNode.path(group, tp.topic,
                                                                    tp.partition))
        if offset_data is None:
            return None
        offset = ConsumerOffsetZNode.decode(offset_data[0])
        metadata_data = await self._get_data(
            ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition))
        if metadata_data is None:
            return offset, OffsetCommitMetadata(commit_timestamp_ms=int(offset_data[1].mtime))
        try:
            return offset, ConsumerOffsetMetadataZNode.decode(metadata_data[0])
        except ZNodeDecodeError:
            logger.warning("Ignoring unreadable offset metadata of group %s, %s", group, tp)
            return offset, OffsetCommitMetadata(commit_timestamp_ms=int(offset_data[1].mtime))

    async def delete_consumer_offsets(self, group: str,
                                      partitions: Iterable[TopicPartition]) -> None:
        """Delete committed offsets (each offset znode with its metadata child)."""
        outcomes = await self._gather(
            self.delete_recursive(ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
            for tp in partitions)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    async def delete_consumer_group(self, group: str) -> bool:
        """Delete ``/consumers/<g>`` and everything below it; False if it did not exist."""
        return await self.delete_recursive(ConsumerOffsetZNode.group_path(group))

    async def register_consumer(
        self, group: str, member_id: str, registration: ConsumerRegistration
    ) -> None:
        """Mirror a group member as an ephemeral ``/consumers/<g>/ids/<member>``."""
        await self._ensure_parent(ConsumerIdsZNode.ids_path(group))
        await self._create_or_set_ephemeral(
            ConsumerIdsZNode.path(group, member_id), ConsumerIdsZNode.encode(registration)
        )

    async def set_partition_owner(self, group: str, tp: TopicPartition, consumer_id: str) -> None:
        """Mirror partition ownership as an ephemeral ``/consumers/<g>/owners/<t>/<p>``."""
        await self._ensure_parent(ConsumerOwnersZNode.topic_path(group, tp.topic))
        await self._create_or_set_ephemeral(
            ConsumerOwnersZNode.path(group, tp.topic, tp.partition),
            ConsumerOwnersZNode.encode(consumer_id),
        )

    async def delete_path(self, path: str, version: int = MATCH_ANY_VERSION) -> bool:
        """Delete one znode; False if it did not exist."""
        try:
            await self._call(lambda: self._zk.delete_async(path, version))
            return True
        except NoNodeError:
            return False

    async def _ensure_parent(self, path: str) -> None:
        await self.make_sure_persistent_path_exists(path)

    async def _create_or_set_ephemeral(self, path: str, data: bytes) -> None:
        try:
            await self._call(lambda: self._zk.create_async(path, data, ephemeral=True))
        except NodeExistsError:
            await self.set_data(path, data)


def _equals(expected: bytes) -> Callable[[bytes | None], bool]:
    return lambda current: current == expected


def _hex(session_id: int | None) -> str:
    return "none" if session_id is None else hex(session_id)


def _run_handler(callback: Callable[[], None], name: str) -> None:
    try:
        callback()
    except Exception:
        logger.exception("Uncaught error in ZooKeeper handler %s", name)


def _log_failure(failure: Failure, what: str) -> None:
    logger.error("Error %s: %s", what, failure.getErrorMessage())
