"""ZooKeeperClient against a real ZooKeeper, driven by the real Twisted reactor: the
session, results and watch events on the reactor thread, retries across reconnects."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)
from kazoo.security import make_digest_acl
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from kafkaclone.testing.zookeeper import expire_session
from kafkaclone.zk.errors import (
    ZooKeeperClientClosedError,
    ZooKeeperClientTimeoutError,
    ZooKeeperRequestTooLargeError,
)
from kafkaclone.zk.zookeeper_client import (
    MAX_REQUEST_DATA_BYTES,
    CheckOp,
    CreateOp,
    DeleteOp,
    SetDataOp,
    StateChangeHandler,
    ZNodeChangeHandler,
    ZNodeChildChangeHandler,
    ZooKeeperClient,
)
from tests.zk.conftest import MAIN_THREAD, TcpProxy, ZooKeeperClientFactory, run, run_until


class RecordingZNodeChange(ZNodeChangeHandler):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.events: list[tuple[str, threading.Thread]] = []

    def handle_creation(self) -> None:
        self.events.append(("created", threading.current_thread()))

    def handle_deletion(self) -> None:
        self.events.append(("deleted", threading.current_thread()))

    def handle_data_change(self) -> None:
        self.events.append(("changed", threading.current_thread()))

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


class RecordingChildChange(ZNodeChildChangeHandler):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.threads: list[threading.Thread] = []

    def handle_child_change(self) -> None:
        self.threads.append(threading.current_thread())


def test_the_blocking_call_guard_works(make_zookeeper_client: ZooKeeperClientFactory) -> None:
    client = make_zookeeper_client()
    namespace: dict[str, Any] = {"__name__": "kafkaclone.zk.example"}
    exec("def blocking(zk):\n    return zk.exists('/')", namespace)
    with pytest.raises(AssertionError, match=r"blocking KazooClient\.exists"):
        namespace["blocking"](client.kazoo_client)


# -- session --------------------------------------------------------------------------------------


def test_start_and_close(make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient) -> None:
    client = make_zookeeper_client()
    assert client.connected
    assert client.session_id is not None
    run(client.create("/e", ephemeral=True))
    assert zk.exists("/e").ephemeralOwner == client.session_id
    run(client.close())
    assert not client.connected
    assert not zk.exists("/e")  # the session went with the close
    with pytest.raises(ZooKeeperClientClosedError):
        run(client.exists("/"))
    run(client.close())  # idempotent


def test_start_times_out_without_a_server() -> None:
    client = ZooKeeperClient.from_connect_string("127.0.0.1:1", reactor, max_reconnect_delay_s=0.1)
    with pytest.raises(ZooKeeperClientTimeoutError):
        run(client.start(connection_timeout=0.5))
    with pytest.raises(ZooKeeperClientClosedError):
        run(client.exists("/"))


def test_results_are_delivered_on_the_reactor_thread(
    make_zookeeper_client: ZooKeeperClientFactory,
) -> None:
    client = make_zookeeper_client()
    threads: list[threading.Thread] = []

    async def requests() -> None:
        await client.create("/a/b", b"x", make_parents=True)
        threads.append(threading.current_thread())
        await client.get_data_and_stat("/a/b")
        threads.append(threading.current_thread())
        await client.get_children_and_stat("/a")
        threads.append(threading.current_thread())
        await client.delete("/a/b")
        threads.append(threading.current_thread())

    run(requests())
    assert threads == [MAIN_THREAD] * 4


def test_requests_and_kazoo_errors(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    assert run(client.create("/a/b", b"x", make_parents=True)) == "/a/b"
    with pytest.raises(NodeExistsError):
        run(client.create("/a/b"))
    with pytest.raises(NoNodeError):
        run(client.create("/missing/parent"))
    assert run(client.create("/a/s_", sequential=True)) == "/a/s_0000000001"
    found = run(client.get_data_and_stat("/a/b"))
    assert found is not None
    assert (found[0], found[1].version) == (b"x", 0)
    assert run(client.get_data_and_stat("/nope")) is None
    assert run(client.exists("/nope")) is None
    assert run(client.set_data("/a/b", b"y", 0)).version == 1
    with pytest.raises(BadVersionError):
        run(client.set_data("/a/b", b"z", 0))
    children = run(client.get_children_and_stat("/a"))
    assert children is not None
    assert sorted(children[0]) == ["b", "s_0000000001"]
    assert run(client.get_children_and_stat("/nope")) is None
    run(client.delete("/a/b"))
    with pytest.raises(NoNodeError):
        run(client.delete("/a/b"))
    assert zk.get_children("/a") == ["s_0000000001"]


def test_multi_is_atomic_and_reports_each_op(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    results = run(client.multi([CreateOp("/m", b"1"), SetDataOp("/m", b"2", 0),
                                CheckOp("/m", 1), CreateOp("/m/c")]))
    assert results[0] == "/m"
    assert results[1].version == 1
    assert results[2] is True
    assert zk.get("/m")[0] == b"2"
    results = run(client.multi([DeleteOp("/m/c"), SetDataOp("/m", b"3", 0)]))
    assert isinstance(results[0], RolledBackError)
    assert isinstance(results[1], BadVersionError)
    assert zk.exists("/m/c")  # nothing was applied
    assert zk.get("/m")[0] == b"2"


def test_a_write_beyond_jute_maxbuffer_is_refused_before_it_is_sent(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    too_large = b"x" * MAX_REQUEST_DATA_BYTES
    with pytest.raises(ZooKeeperRequestTooLargeError, match=r"jute\.maxbuffer"):
        run(client.create("/big", too_large))
    run(client.create("/big", b"small"))
    with pytest.raises(ZooKeeperRequestTooLargeError):
        run(client.set_data("/big", too_large))
    half = b"x" * (MAX_REQUEST_DATA_BYTES // 2)
    with pytest.raises(ZooKeeperRequestTooLargeError):
        run(client.multi([SetDataOp("/big", half), CreateOp("/big/c", half)]))
    assert zk.get("/big")[0] == b"small"
    assert not zk.exists("/big/c")
    run(client.set_data("/big", b"x" * (MAX_REQUEST_DATA_BYTES - 100)))  # at the limit: sent
    assert len(zk.get("/big")[0]) == MAX_REQUEST_DATA_BYTES - 100


# -- watches --------------------------------------------------------------------------------------


def test_data_watch_handler(make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient) -> None:
    client = make_zookeeper_client()
    handler = RecordingZNodeChange("/w")
    client.register_znode_change_handler(handler)
    assert run(client.exists("/w")) is None  # watches the creation
    zk.create("/w", b"1")
    run_until(lambda: handler.names() == ["created"])
    assert run(client.get_data_and_stat("/w")) is not None  # re-arms the watch
    zk.set("/w", b"2")
    run_until(lambda: handler.names() == ["created", "changed"])
    zk.set("/w", b"3")  # a watch fires once: not re-read, not seen
    assert run(client.exists("/w")) is not None
    zk.delete("/w")
    run_until(lambda: handler.names() == ["created", "changed", "deleted"])
    assert {thread for _, thread in handler.events} == {MAIN_THREAD}
    client.unregister_znode_change_handler("/w")
    assert run(client.exists("/w")) is None  # no watch without a handler
    zk.create("/w")
    assert run(client.exists("/w")) is not None
    assert handler.names() == ["created", "changed", "deleted"]


def test_child_watch_handler(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    zk.create("/parent")
    handler = RecordingChildChange("/parent")
    client.register_znode_child_change_handler(handler)
    assert run(client.get_children_and_stat("/parent")) is not None  # no register_watch
    zk.create("/parent/a")
    assert run(client.get_children_and_stat("/parent", register_watch=True)) is not None
    zk.create("/parent/b")
    run_until(lambda: len(handler.threads) == 1)
    assert handler.threads == [MAIN_THREAD]
    zk.create("/parent/c")  # not re-armed: not seen
    assert run(client.exists("/parent")) is not None
    assert len(handler.threads) == 1


def test_session_expiry_runs_the_state_change_handlers(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    run(client.create("/e", ephemeral=True))
    old_session = client.session_id
    calls: list[tuple[str, threading.Thread]] = []

    class Recording(StateChangeHandler):
        def before_initializing_session(self) -> None:
            calls.append(("before", threading.current_thread()))

        def after_initializing_session(self) -> None:
            calls.append(("after", threading.current_thread()))

    client.register_state_change_handler(Recording("recording"))
    expire_session(client.kazoo_client)
    run_until(lambda: len(calls) == 2)
    assert calls == [("before", MAIN_THREAD), ("after", MAIN_THREAD)]
    assert client.connected
    assert client.session_id != old_session
    assert not zk.exists("/e")
    client.unregister_state_change_handler("recording")


# -- connection loss ------------------------------------------------------------------------------


def test_requests_wait_while_disconnected_and_missed_events_are_delivered(
    make_zookeeper_client: ZooKeeperClientFactory, zk_proxy: TcpProxy, zk_chroot: str,
    zk: KazooClient,
) -> None:
    """A network failure shorter than the session: requests wait for the reconnection,
    watches dropped by kazoo are set again, and changes made meanwhile are delivered."""
    client = make_zookeeper_client(f"{zk_proxy.connect_string}{zk_chroot}")
    zk.create("/parent")
    children = RecordingChildChange("/parent")
    data = RecordingZNodeChange("/w")
    client.register_znode_child_change_handler(children)
    client.register_znode_change_handler(data)
    assert run(client.get_children_and_stat("/parent", register_watch=True)) is not None
    assert run(client.exists("/w")) is None
    session = client.session_id

    zk_proxy.block()
    run_until(lambda: not client.connected)
    zk.create("/parent/a")
    zk.create("/w")
    pending = Deferred.fromCoroutine(client.get_children_and_stat("/parent"))
    for _ in range(20):
        reactor.iterate(0.01)
    assert not pending.called
    zk_proxy.unblock()

    found = run(pending)
    assert found is not None
    assert found[0] == ["a"]
    run_until(lambda: len(children.threads) == 1 and data.names() == ["created"])
    assert client.session_id == session
    # the watches are armed again: later changes are seen too
    assert run(client.get_children_and_stat("/parent", register_watch=True)) is not None
    zk.create("/parent/b")
    run_until(lambda: len(children.threads) == 2)


def test_a_request_cut_by_a_connection_loss_is_retried(
    make_zookeeper_client: ZooKeeperClientFactory, zk_proxy: TcpProxy, zk_chroot: str,
    zk: KazooClient,
) -> None:
    client = make_zookeeper_client(f"{zk_proxy.connect_string}{zk_chroot}")
    zk.create("/d", b"data")
    for _ in range(5):
        pending = Deferred.fromCoroutine(client.get_data_and_stat("/d"))
        zk_proxy.drop()
        found = run(pending)
        assert found is not None
        assert found[0] == b"data"


@pytest.mark.timeout(60)
def test_get_data_many_reads_in_windows_missing_znodes_are_none(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    for i in range(0, 20, 2):
        zk.create(f"/many/{i}", str(i).encode(), makepath=True)
    zk.set("/many/4", b"four")
    watched = RecordingZNodeChange("/many/6")
    client.register_znode_change_handler(watched)
    paths = [f"/many/{i}" for i in range(20)]
    threads: list[threading.Thread] = []

    async def read() -> list[Any]:
        found = await client.get_data_many(paths, window=3, lanes=2)
        threads.append(threading.current_thread())
        return found

    found = run(read())
    assert threads == [MAIN_THREAD]
    assert [None if f is None else f[0] for f in found] == [
        (b"four" if i == 4 else str(i).encode()) if i % 2 == 0 else None for i in range(20)]
    assert found[4] is not None and found[4][1].version == 1
    assert run(client.get_data_many([])) == []
    # a watched path is read with its watch armed
    zk.set("/many/6", b"six")
    run_until(lambda: watched.names() == ["changed"])


@pytest.mark.timeout(60)
def test_get_data_many_raises_a_read_error_other_than_a_missing_znode(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    zk.create("/open", b"a")
    zk.create("/secret", b"b", acl=[make_digest_acl("someone", "else", all=True)])
    try:
        with pytest.raises(NoAuthError):
            run(client.get_data_many(["/open", "/missing", "/secret"], window=2))
    finally:
        zk.delete("/secret")  # the recursive cleanup could not list its children
    found = run(client.get_data_many(["/open", "/missing"]))
    assert found[0] is not None and found[0][0] == b"a"
    assert found[1] is None


@pytest.mark.timeout(60)
def test_get_data_many_resends_reads_cut_by_a_connection_loss(
    make_zookeeper_client: ZooKeeperClientFactory, zk_proxy: TcpProxy, zk_chroot: str,
    zk: KazooClient,
) -> None:
    client = make_zookeeper_client(f"{zk_proxy.connect_string}{zk_chroot}")
    for i in range(50):
        zk.create(f"/cut/{i}", str(i).encode(), makepath=True)
    paths = [f"/cut/{i}" for i in range(50)]
    for _ in range(3):
        pending = Deferred.fromCoroutine(client.get_data_many(paths, window=10))
        zk_proxy.drop()
        found = run(pending)
        assert [f[0] if f is not None else None for f in found] == [
            str(i).encode() for i in range(50)]
