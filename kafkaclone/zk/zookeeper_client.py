"""ZooKeeperClient: one kazoo session made safe for the reactor (Kafka's
kafka.zookeeper.ZooKeeperClient). It knows znodes only as paths and bytes; the Kafka
vocabulary on top of it is KafkaZkClient (``kafkaclone.zk.client``).

Threads (DESIGN.md, "Threads and time"): kazoo runs its own threads. This client only ever
calls kazoo's non-blocking ``*_async`` methods from the reactor thread, and every result,
watch event and session state change is handed back to the reactor with
``reactor.callFromThread``: Deferreds fire, handlers run, on the reactor thread only.
Closing the session (which blocks in kazoo) runs on a short-lived thread of its own.

Requests are ``async def`` (callers wrap them with ``Deferred.fromCoroutine``). As Kafka's
retryRequestUntilConnected, a request that fails with a connection loss is retried once the
session reconnects; other ZooKeeper errors surface as kazoo's exceptions
(``NodeExistsError``, ``BadVersionError`` ...).

Watches: register a ``ZNodeChangeHandler`` or ``ZNodeChildChangeHandler`` for a path; reads
of that path (``exists``, ``get_data_and_stat``, ``get_children_and_stat`` with
``register_watch``) then leave a watch, and its event calls the handler on the reactor.
After a reconnect within the same session the watches are re-armed and any change missed
while disconnected is delivered (what the Java client's SetWatches does). After a session
expiry watches are gone, as in Kafka: ``StateChangeHandler.before_initializing_session`` runs
when the session is lost, ``after_initializing_session`` once a new session is connected.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypedDict, TypeVar, cast

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoNodeError,
    SessionExpiredError,
    UnimplementedError,
    ZookeeperError,
)
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE
from twisted.internet.defer import Deferred, DeferredList, TimeoutError
from twisted.python.failure import Failure

from kafkaclone.zk.errors import (
    ZooKeeperClientClosedError,
    ZooKeeperClientTimeoutError,
    ZooKeeperRequestTooLargeError,
)
from kafkaclone.zk.multi_read import MultiRead, multi_read_batches
from kafkaclone.zk.znodes import MATCH_ANY_VERSION

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_SESSION_TIMEOUT_MS = 18_000
"""Kafka 2.8's zookeeper.session.timeout.ms."""

JUTE_MAX_BUFFER = 0xFFFFF
"""ZooKeeper's default jute.maxbuffer: the largest request packet its server reads. On a
larger one it closes the connection, and a client retrying the request never gets through."""

MAX_REQUEST_DATA_BYTES = JUTE_MAX_BUFFER - 1024
"""The most payload and path bytes one request may carry: jute.maxbuffer less room for the
request headers and ACLs."""

READ_WINDOW: Final = 500
"""getData requests ``get_data_many`` keeps in flight per lane (bounded: each holds a
pending request in kazoo and a reply buffer until its window is handed over)."""
READ_LANES: Final = 2
"""Windows of ``get_data_many`` in flight at once: the next window's requests go out while
the reactor takes the previous one's replies."""

MULTI_READ_OPS: Final = 1000
"""getData ops per multiRead request of ``get_data_many``."""
MULTI_READ_LANES: Final = 3
"""multiRead requests of ``get_data_many`` in flight at once: ZooKeeper answers one while
kazoo's thread parses the previous reply and the reactor takes the one before."""
MULTI_READ_EXPECTED_DATA_BYTES: Final = 512
"""The data size per znode a multiRead batch is sized for, so that its reply stays within
jute.maxbuffer (what the Java client accepts): 1,000 ops of 512 bytes make ~600 kB. A
partition state znode is ~100 bytes."""


class SessionOptions(TypedDict, total=False):
    """The keyword options of ``ZooKeeperClient.from_connect_string``, for the factories
    that pass them through."""

    session_timeout_ms: int
    max_reconnect_delay_s: float
    sasl: ZkSaslCredentials | None
    secure_acls: bool


@dataclass(frozen=True)
class ZkSaslCredentials:
    """What the session authenticates with: SASL DIGEST-MD5 (the JAAS ``Client`` section's
    DigestLoginModule ``username`` / ``password``)."""

    username: str
    password: str = field(repr=False)


SENSITIVE_ROOT_PATHS: Final = ("/config/users", "/config/brokers", "/delegation_token")
"""Kafka's ZkData.SensitiveRootPaths: znodes under them are readable by their creator only
(SCRAM credentials, dynamic broker passwords)."""
CONSUMERS_PATH: Final = "/consumers"


def kafka_default_acls(path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls with zookeeper.set.acl=true: all permissions for the
    creator (the authenticated broker), read for everyone but on sensitive paths;
    ``/consumers`` itself stays open (old consumers created their znodes under it)."""
    if path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS):
        return list(CREATOR_ALL_ACL)
    return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


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


def check_request_size(writes: Iterable[tuple[str, bytes]]) -> None:
    """ZooKeeperRequestTooLargeError if the (path, data) writes of one request would exceed
    jute.maxbuffer; nothing is sent then, and the session stays usable."""
    writes = list(writes)
    size = sum(len(path.encode()) + len(data) for path, data in writes)
    if size > MAX_REQUEST_DATA_BYTES:
        raise ZooKeeperRequestTooLargeError(writes[0][0], size, MAX_REQUEST_DATA_BYTES)


def _fire(d: Deferred[Any], value: Any, error: BaseException | None) -> None:
    """Fire ``d`` on the reactor thread, unless it was cancelled (timed out) meanwhile."""
    if d.called:
        return
    if error is None:
        d.callback(value)
    else:
        d.errback(error)


async def gather(coroutines: Iterable[Coroutine[Any, Any, T]]) -> list[T | Exception]:
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


class ZooKeeperClient:
    """Kafka's ZooKeeperClient over a kazoo session. See the module docstring for threading."""

    def __init__(self, zk: KazooClient, reactor: ZkReactor, *,
                 secure_acls: bool = False) -> None:
        self._zk = zk
        self.secure_acls = secure_acls
        """zookeeper.set.acl: znodes are created with Kafka's secure ACLs."""
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
        self._multi_read_supported: bool | None = None
        """Whether the server answers multiRead; None until it has answered one."""
        zk.add_listener(self._on_kazoo_state)

    @classmethod
    def from_connect_string(
        cls,
        connect_string: str,
        reactor: ZkReactor,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        max_reconnect_delay_s: float = 1.0,
        sasl: ZkSaslCredentials | None = None,
        secure_acls: bool = False,
    ) -> ZooKeeperClient:
        """A client for ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``); call
        ``start()``. Reconnection is retried forever, backing off to ``max_reconnect_delay_s``.
        With ``sasl`` the session authenticates with DIGEST-MD5 (kazoo over pure-sasl); with
        ``secure_acls`` every znode is created with Kafka's ACLs (:func:`kafka_default_acls`)."""
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=max_reconnect_delay_s)
        options: dict[str, Any] = {}
        if sasl is not None:
            options["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": sasl.username,
                                       "password": sasl.password}
        zk = KazooClient(
            hosts=connect_string,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=retry,
            **options,
        )
        return cls(zk, reactor, secure_acls=secure_acls)

    def _acl(self, path: str) -> list[ACL] | None:
        return kafka_default_acls(path) if self.secure_acls else None

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

    # -- requests (watch aware) -------------------------------------------------------------------

    async def exists(self, path: str) -> ZnodeStat | None:
        """The znode's stat, None if it does not exist. Watches the path (its creation,
        deletion or data change) if a ZNodeChangeHandler is registered for it."""
        watch = self._on_data_watch if path in self._znode_change_handlers else None
        stat = await self._call(lambda: self._zk.exists_async(path, watch=watch))
        if watch is not None:
            self._armed_data_watches[path] = (
                (False, 0) if stat is None else (True, int(stat.mzxid))
            )
        return stat

    async def get_data_and_stat(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None if the znode does not exist. Watches as ``exists``."""
        watch = self._on_data_watch if path in self._znode_change_handlers else None
        try:
            data, stat = await self._call(lambda: self._zk.get_async(path, watch=watch))
        except NoNodeError:
            if watch is not None:
                # getData leaves no watch on a missing znode: watch its creation instead.
                await self.exists(path)
            return None
        if watch is not None:
            self._armed_data_watches[path] = (True, int(stat.mzxid))
        return (data or b""), stat

    async def get_data_many(
        self, paths: Sequence[str], *, window: int = READ_WINDOW, lanes: int = READ_LANES,
        multi_read_ops: int = MULTI_READ_OPS,
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """``get_data_and_stat`` of many znodes: per path in order (data, stat), or None
        where the znode does not exist. A path with a ZNodeChangeHandler is read by
        ``get_data_and_stat``, which arms its watch.

        The others go ``multi_read_ops`` to a multiRead request (ZooKeeper 3.6+,
        ``kafkaclone.zk.multi_read``), ``MULTI_READ_LANES`` requests in flight. A server
        that answers a multiRead with an error (UNIMPLEMENTED: one older than 3.6; this
        client then stops asking it) has those znodes read one getData each, pipelined as
        Kafka's handleRequests: ``lanes`` windows of up to ``window`` requests in flight,
        each window's replies handed to the reactor in one call. Requests cut by a
        connection loss are sent again once reconnected; any other error of a single read
        (NOAUTH ...) is raised, the first, once its request or window has answered."""
        results: list[tuple[bytes, ZnodeStat] | None] = [None] * len(paths)
        watched = [i for i, path in enumerate(paths) if path in self._znode_change_handlers]
        for i in watched:
            results[i] = await self.get_data_and_stat(paths[i])
        unwatched = [i for i, path in enumerate(paths)
                     if path not in self._znode_change_handlers]
        if self._multi_read_supported is not False and unwatched:
            unwatched = await self._multi_read_many(paths, unwatched, results, multi_read_ops)
        windows = [unwatched[i : i + window] for i in range(0, len(unwatched), window)]

        async def lane() -> None:
            while windows:
                indices = windows.pop(0)
                while indices:
                    indices = await self._get_window(paths, indices, results)
                    if indices:
                        logger.debug("ZooKeeper connection lost during %d reads, retrying",
                                     len(indices))
                        await self._wait_until_connected()

        for outcome in await gather(lane() for _ in range(max(1, lanes))):
            if isinstance(outcome, Exception):
                raise outcome
        return results

    async def _multi_read_many(
        self, paths: Sequence[str], indices: list[int],
        results: list[tuple[bytes, ZnodeStat] | None], max_ops: int,
    ) -> list[int]:
        """The multiRead part of ``get_data_many``: the reads of ``indices`` in batches,
        results stored in ``results``; the indices left to read one getData each (their
        multiRead was answered with an error)."""
        batch_paths = [paths[i] for i in indices]
        batches = [
            [indices[j] for j in batch]
            for batch in multi_read_batches(
                batch_paths, max_ops=max_ops, max_request_bytes=MAX_REQUEST_DATA_BYTES,
                max_reply_bytes=JUTE_MAX_BUFFER,
                expected_data_bytes=MULTI_READ_EXPECTED_DATA_BYTES)
        ]
        unread: list[int] = []

        async def lane() -> None:
            while batches:
                unread.extend(await self._multi_read(paths, batches.pop(0), results))

        for outcome in await gather(lane() for _ in range(MULTI_READ_LANES)):
            if isinstance(outcome, Exception):
                raise outcome
        return sorted(unread)

    async def _multi_read(
        self, paths: Sequence[str], indices: list[int],
        results: list[tuple[bytes, ZnodeStat] | None],
    ) -> list[int]:
        """One multiRead of ``paths[i]`` for ``indices``, results stored in ``results``
        (a missing znode stays None); ``indices`` back if the request was answered with an
        error, to be read one getData each; a single op's error other than NONODE raised."""
        chroot = self._zk.chroot or ""
        request = MultiRead(tuple(chroot + paths[i] for i in indices))
        while True:
            self._check_open()
            if self._multi_read_supported is False:
                return indices
            async_result = self._zk.handler.async_result()
            # kazoo's own request methods end the same way (KazooClient._call queues a
            # request object for its connection thread); kazoo has no public hook for a
            # request type it does not know.
            self._zk._call(request, async_result)
            try:
                outcomes = await self._deferred(async_result)
            except ConnectionLoss:
                logger.debug("ZooKeeper connection lost during a multiRead, retrying")
                await self._wait_until_connected()
                continue
            except UnimplementedError:
                self._multi_read_unsupported()
                return indices
            except (SessionExpiredError, AuthFailedError):
                raise  # the session's state, not the request's: a getData would fail too
            except ZookeeperError as error:
                logger.warning("A multiRead of %d znodes was answered %r: reading them one "
                               "request each", len(indices), error)
                return indices
            break
        self._multi_read_supported = True
        first_error: Exception | None = None
        for i, outcome in zip(indices, outcomes, strict=True):
            if isinstance(outcome, tuple):
                results[i] = outcome
            elif not isinstance(outcome, NoNodeError) and first_error is None:
                first_error = outcome
        if first_error is not None:
            raise first_error
        return []

    def _multi_read_unsupported(self) -> None:
        if self._multi_read_supported is not False:
            logger.info("The ZooKeeper server does not know multiRead (3.6+): reading "
                        "znodes one request each")
        self._multi_read_supported = False

    async def _get_window(
        self, paths: Sequence[str], indices: list[int],
        results: list[tuple[bytes, ZnodeStat] | None],
    ) -> list[int]:
        """One window of ``get_data_many``: its reads sent at once, their results stored
        in ``results``; the indices whose read was cut by a connection loss, to redo."""
        self._check_open()
        outcomes = await self._deferred_all(
            [self._zk.get_async(paths[i]) for i in indices])
        lost: list[int] = []
        error: BaseException | None = None
        for i, (value, exception) in zip(indices, outcomes, strict=True):
            if exception is None:
                data, stat = value
                results[i] = (data or b""), stat
            elif isinstance(exception, ConnectionLoss):
                lost.append(i)
            elif not isinstance(exception, NoNodeError) and error is None:
                error = exception
        if error is not None:
            raise error
        return lost

    async def get_children_and_stat(
        self, path: str, register_watch: bool = False
    ) -> tuple[list[str], ZnodeStat] | None:
        """(children's names, stat), or None if the znode does not exist. With
        ``register_watch`` and a ZNodeChildChangeHandler registered for ``path``, watches
        the children."""
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

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode (with ``make_parents``, its missing parents too, empty); the
        created path (with its sequence number for ``sequential``)."""
        check_request_size([(path, data)])
        created = await self._call(
            lambda: self._zk.create_async(
                path, data, acl=self._acl(path), ephemeral=ephemeral, sequence=sequential,
                makepath=make_parents,
            )
        )
        return str(created)

    async def set_data(
        self, path: str, data: bytes, version: int = MATCH_ANY_VERSION
    ) -> ZnodeStat:
        """Set the data (conditionally on ``version``); the znode's new stat."""
        check_request_size([(path, data)])
        return await self._call(lambda: self._zk.set_async(path, data, version))

    async def delete(self, path: str, version: int = MATCH_ANY_VERSION) -> None:
        await self._call(lambda: self._zk.delete_async(path, version))

    async def multi(self, ops: Sequence[ZkOp]) -> list[Any]:
        """One atomic multi-op; per op its result (created path, ZnodeStat, True) or the
        kazoo exception instance for a failed one (others then RolledBackError /
        RuntimeInconsistency)."""
        check_request_size(
            [(op.path, op.data if isinstance(op, CreateOp | SetDataOp) else b"") for op in ops]
        )

        def start() -> Any:
            transaction = self._zk.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    transaction.create(
                        op.path, op.data, acl=self._acl(op.path), ephemeral=op.ephemeral,
                        sequence=op.sequential,
                    )
                elif isinstance(op, SetDataOp):
                    transaction.set_data(op.path, op.data, op.version)
                elif isinstance(op, DeleteOp):
                    transaction.delete(op.path, op.version)
                else:
                    transaction.check(op.path, op.version)
            return transaction.commit_async()

        return list(await self._call(start))

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

    def _deferred_all(self, async_results: Sequence[Any]
                      ) -> Deferred[list[tuple[Any, BaseException | None]]]:
        """A Deferred fired on the reactor thread, once, with every kazoo IAsyncResult's
        (value, exception) in order, when the last of them completes."""
        d: Deferred[list[tuple[Any, BaseException | None]]] = Deferred()
        if not async_results:
            d.callback([])
            return d
        lock = threading.Lock()
        remaining = [len(async_results)]

        def completed(_result: Any) -> None:  # a kazoo thread
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            outcomes = [(r.value, r.exception) for r in async_results]
            self._reactor.callFromThread(_fire, d, outcomes, None)

        for async_result in async_results:
            async_result.rawlink(completed)
        return d

    def _wait_until_connected(self) -> Deferred[None]:
        self._check_open()
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

    def _on_kazoo_state(self, state: str) -> None:  # a kazoo thread
        self._reactor.callFromThread(self._handle_state, state)

    def _handle_state(self, state: str) -> None:
        if self._closed:
            return
        if state == KazooState.LOST:
            logger.info("ZooKeeper session %s expired", hex_session_id(self.session_id))
            self._session_lost = True
            self._suspended = False
            self._armed_data_watches.clear()
            self._armed_child_watches.clear()
            for handler in list(self._state_change_handlers.values()):
                _run_handler(handler.before_initializing_session, handler.name)
        elif state == KazooState.SUSPENDED:
            logger.info(
                "ZooKeeper connection lost, session %s suspended", hex_session_id(self.session_id)
            )
            self._suspended = True
        elif state == KazooState.CONNECTED:
            waiters, self._connected_waiters = self._connected_waiters, []
            for waiter in waiters:
                _fire(waiter, None, None)
            if self._session_lost:
                self._session_lost = False
                logger.info("ZooKeeper new session %s connected", hex_session_id(self.session_id))
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
            stat = await self.exists(path)
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
            children_stat = await self.get_children_and_stat(path, register_watch=True)
            child_handler = self._znode_child_change_handlers.get(path)
            new_version = -1 if children_stat is None else children_stat[1].cversion
            if child_handler is not None and new_version != child_version:
                _run_handler(child_handler.handle_child_change, path)


def hex_session_id(session_id: int | None) -> str:
    """A session id as ZooKeeper logs it (``0x...``), for log messages."""
    return "none" if session_id is None else hex(session_id)


def _run_handler(callback: Callable[[], None], name: str) -> None:
    try:
        callback()
    except Exception:
        logger.exception("Uncaught error in ZooKeeper handler %s", name)


def _log_failure(failure: Failure, what: str) -> None:
    logger.error("Error %s: %s", what, failure.getErrorMessage())
