"""ZooKeeper-layer test helpers: the shared fixtures are in tests/conftest.py; this adds
ZooKeeperClients, a guard against blocking kazoo calls on the reactor thread, and a TCP
proxy that cuts the client's connection without restarting ZooKeeper."""

from __future__ import annotations

import contextlib
import selectors
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkaclone.testing.reactor import run, run_until
from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.zk.zookeeper_client import ZooKeeperClient
from tests.conftest import ClientFactory

__all__ = ["MAIN_THREAD", "ClientFactory", "TcpProxy", "ZooKeeperClientFactory", "run",
           "run_until"]

MAIN_THREAD = threading.main_thread()
"""The reactor thread of these tests."""

ZooKeeperClientFactory = Callable[..., ZooKeeperClient]


@pytest.fixture
def make_zookeeper_client(make_client: ClientFactory) -> ZooKeeperClientFactory:
    """Start ZooKeeperClients in the test's chroot (each the session of a KafkaZkClient from
    ``make_client``, so all are closed at teardown)."""
    return lambda *args, **kwargs: make_client(*args, **kwargs).zookeeper_client


@pytest.fixture(autouse=True)
def no_blocking_kazoo_calls_on_the_reactor_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reactor is this (main) thread: any blocking kazoo call made on it from
    kafkaclone code fails the test. Test code inspects znodes with the blocking client
    ``zk`` freely, so only calls coming from kafkaclone.zk are refused."""

    def guard(name: str) -> None:
        original = getattr(KazooClient, name)

        def checked(self: KazooClient, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is MAIN_THREAD:
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller.startswith("kafkaclone.zk"):
                    raise AssertionError(f"blocking KazooClient.{name} on the reactor thread")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(KazooClient, name, checked)

    for name in ("start", "stop", "get", "set", "create", "exists", "get_children",
                 "delete", "ensure_path", "sync", "restart"):  # fmt: skip
        guard(name)


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
