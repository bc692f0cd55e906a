"""Fixtures for the ZooKeeper layer: one real ZooKeeper for the session, a fresh chroot per
test (so tests never see each other's znodes), and ``run`` to drive coroutines on the
global Twisted reactor without starting it."""

from __future__ import annotations

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
def zk_connect(zk_server: ZooKeeperServer, zk_root: KazooClient) -> Iterator[str]:
    """``host:port/<fresh chroot>``: this test's own namespace, removed afterwards."""
    chroot = f"/test-{uuid.uuid4().hex}"
    zk_root.create(chroot)
    yield f"{zk_server.connect_string}{chroot}"
    zk_root.delete(chroot, recursive=True)


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
