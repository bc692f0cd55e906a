"""Fixtures for the ZooKeeper layer: one real ZooKeeper for the session, a fresh chroot per
test (so tests never see each other's znodes), and ``run`` to drive coroutines on the
global Twisted reactor without starting it."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.zk.client import KafkaZkClient

T = TypeVar("T")

RUN_TIMEOUT = 15.0


def run(awaitable: Coroutine[Any, Any, T] | Deferred[T], timeout: float = RUN_TIMEOUT) -> T:
    """Run a coroutine (or wait for a Deferred) on the global reactor by iterating it, for
    at most ``timeout`` seconds. The reactor is never started, so nothing outlives the
    test; callFromThread calls from kazoo's threads are processed by each iteration."""
    d = awaitable if isinstance(awaitable, Deferred) else Deferred.fromCoroutine(awaitable)
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    deadline = time.monotonic() + timeout
    while not outcome:
        if time.monotonic() > deadline:
            d.cancel()
            raise TimeoutError(f"not done within {timeout}s")
        reactor.iterate(0.005)
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result


def run_until(condition: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:
    """Iterate the reactor until ``condition()`` holds (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        reactor.iterate(0.005)


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="session")
def zk_root(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A blocking kazoo client on the server's root (test code only)."""
    client = KazooClient(hosts=zk_server.connect_string, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_chroot(zk_root: KazooClient) -> Iterator[str]:
    """A fresh chroot: this test's own namespace, removed afterwards."""
    chroot = f"/test-{uuid.uuid4().hex}"
    zk_root.create(chroot)
    yield chroot
    zk_root.delete(chroot, recursive=True)


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer, zk_chroot: str) -> str:
    """``host:port/<chroot>`` for the test's namespace."""
    return f"{zk_server.connect_string}{zk_chroot}"


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    """A blocking kazoo client inside the test's chroot, to inspect znodes."""
    client = KazooClient(hosts=zk_connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


ClientFactory = Callable[..., KafkaZkClient]


@pytest.fixture
def make_client(zk_connect: str) -> Iterator[ClientFactory]:
    """Start KafkaZkClients in the test's chroot; all are closed at teardown."""
    clients: list[KafkaZkClient] = []

    def make(connect_string: str | None = None, **kwargs: Any) -> KafkaZkClient:
        client = KafkaZkClient.from_connect_string(
            connect_string or zk_connect, reactor, **kwargs
        )
        clients.append(client)
        run(client.start(connection_timeout=10))
        return client

    yield make
    for client in clients:
        run(client.close())


@pytest.fixture
def zk_client(make_client: ClientFactory) -> KafkaZkClient:
    return make_client()


class TcpProxy:
    """A TCP proxy to a ZooKeeper server that tests can cut: ``drop()`` breaks the current
    connections, ``block()`` also refuses new ones until ``unblock()``. It simulates a
    network failure without restarting ZooKeeper (ZooKeeper 3.8.0 mishandles clients that
    connect while it starts up: they hang until their connect timeout)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._blocked = False
        self._drop_requested = False
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def drop(self) -> None:
        with self._lock:
            self._drop_requested = True
        self._wake_w.send(b"x")

    def block(self) -> None:
        with self._lock:
            self._blocked = True
        self.drop()

    def unblock(self) -> None:
        with self._lock:
            self._blocked = False

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self._wake_w.send(b"x")
        self._thread.join(5)
        self._selector.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def _close_pair(self, sock: socket.socket) -> None:
        peer = self._peers.pop(sock, None)
        if peer is not None:
            self._peers.pop(peer, None)
        for s in (sock, peer):
            if s is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(s)
                s.close()

    def _loop(self) -> None:
        while True:
            for key, _ in self._selector.select(0.5):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "wake":
                    sock.recv(64)
                elif key.data == "accept":
                    client, _ = sock.accept()
                    with self._lock:
                        blocked = self._blocked
                    if blocked:
                        client.close()
                        continue
                    try:
                        upstream = socket.create_connection(self._target, timeout=5)
                    except OSError:
                        client.close()
                        continue
                    self._peers[client] = upstream
                    self._peers[upstream] = client
                    self._selector.register(client, selectors.EVENT_READ, "pipe")
                    self._selector.register(upstream, selectors.EVENT_READ, "pipe")
                elif sock in self._peers:
                    try:
                        data = sock.recv(65536)
                        if data:
                            self._peers[sock].sendall(data)
                            continue
                    except OSError:
                        pass
                    self._close_pair(sock)
            with self._lock:
                drop, self._drop_requested = self._drop_requested, False
                closing = self._closing
            if drop or closing:
                for sock in list(self._peers):
                    self._close_pair(sock)
            if closing:
                return


@pytest.fixture
def zk_proxy(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    proxy = TcpProxy((zk_server.host, zk_server.port))
    yield proxy
    proxy.close()
