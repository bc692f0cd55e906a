"""Fixtures shared by every test directory: one real ZooKeeper for the session, a fresh
chroot per test (tests never see each other's znodes), and KafkaZkClients in it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.testing.reactor import run
from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.zk.client import KafkaZkClient


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="module")
def zk_root(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A blocking kazoo client on the server's root (test code only). Per module, so its
    threads are gone before unrelated modules run (Hypothesis warns when a background
    thread touches the global ``random`` while it draws examples)."""
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
