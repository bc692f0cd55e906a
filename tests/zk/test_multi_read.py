"""multiRead (ZooKeeper 3.6+, op 22): the request's bytes, its reply parsed, batches cut
within jute.maxbuffer; then against the real ZooKeeper the fixtures start (3.8): many
znodes in few requests, missing znodes, a single read's error, and the fallback to one
getData per znode when the server answers a multiRead with an error."""

from __future__ import annotations

import struct
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, NoAuthError, NoNodeError
from kazoo.security import make_digest_acl

from kafkaclone.zk.multi_read import (
    GET_DATA_OP_OVERHEAD,
    GET_DATA_RESULT_OVERHEAD,
    MultiRead,
    multi_read_batches,
)
from kafkaclone.zk.zookeeper_client import ZooKeeperClient
from tests.zk.conftest import MAIN_THREAD, ZooKeeperClientFactory, run

T = TypeVar("T")

STAT = (1, 2, 3, 4, 5, 6, 7, 0, 3, 0, 8)


def test_serialize_is_a_multi_operation_record_of_get_data_ops() -> None:
    assert MultiRead(("/a", "/bc")).serialize() == (
        struct.pack("!iBi", 4, 0, -1) + struct.pack("!i", 2) + b"/a" + b"\x00"
        + struct.pack("!iBi", 4, 0, -1) + struct.pack("!i", 3) + b"/bc" + b"\x00"
        + struct.pack("!iBi", -1, 1, -1)
    )
    assert len(MultiRead(("/a",)).serialize()) == GET_DATA_OP_OVERHEAD + 2 + 9
    assert MultiRead.type == 22


def test_deserialize_reads_data_stats_and_per_op_errors() -> None:
    reply = (
        b"junk" + struct.pack("!iBi", 4, 0, 0) + struct.pack("!i", 3) + b"abc"
        + struct.pack("!qqqqiiiqiiq", *STAT)
        + struct.pack("!iBi", -1, 0, -101) + struct.pack("!i", -101)
        + struct.pack("!iBi", 4, 0, 0) + struct.pack("!i", -1)
        + struct.pack("!qqqqiiiqiiq", *STAT)
        + struct.pack("!iBi", -1, 1, -1)
    )
    first, missing, empty = MultiRead.deserialize(reply, 4)
    assert isinstance(first, tuple) and first[0] == b"abc" and tuple(first[1]) == STAT
    assert first[1].version == 5
    assert isinstance(missing, NoNodeError)
    assert isinstance(empty, tuple) and empty[0] == b""


def test_deserialize_refuses_an_unknown_op_type() -> None:
    with pytest.raises(ValueError, match="unexpected op type 5"):
        MultiRead.deserialize(struct.pack("!iBi", 5, 0, 0) + bytes(68), 0)


def test_batches_bounded_by_ops_request_and_reply_bytes() -> None:
    paths = [f"/p/{i:04d}" for i in range(25)]  # 7 bytes each
    assert multi_read_batches(paths, max_ops=10, max_request_bytes=10**6,
                              max_reply_bytes=10**6, expected_data_bytes=100) == [
        list(range(0, 10)), list(range(10, 20)), list(range(20, 25))]
    per_op = GET_DATA_OP_OVERHEAD + 7
    assert [len(b) for b in multi_read_batches(
        paths, max_ops=100, max_request_bytes=4 * per_op, max_reply_bytes=10**6,
        expected_data_bytes=100)] == [4, 4, 4, 4, 4, 4, 1]
    per_reply = GET_DATA_RESULT_OVERHEAD + 100
    assert [len(b) for b in multi_read_batches(
        paths, max_ops=100, max_request_bytes=10**6, max_reply_bytes=12 * per_reply,
        expected_data_bytes=100)] == [12, 12, 1]
    # one path larger than any limit still goes, alone
    assert multi_read_batches(["/x" * 50, "/y"], max_ops=10, max_request_bytes=20,
                              max_reply_bytes=10, expected_data_bytes=100) == [[0], [1]]
    assert multi_read_batches([], max_ops=10, max_request_bytes=100, max_reply_bytes=100,
                              expected_data_bytes=1) == []


def record_requests(client: ZooKeeperClient, what: Callable[[Any], T]) -> list[T]:
    """``what(request)`` of every request the client queues on its kazoo session, in a
    list that grows as it does."""
    seen: list[T] = []
    kazoo = client.kazoo_client
    queue = kazoo._call

    def call(request: Any, async_object: Any) -> Any:
        seen.append(what(request))
        return queue(request, async_object)

    kazoo._call = call  # type: ignore[method-assign]
    return seen


def record_request_types(client: ZooKeeperClient) -> list[int]:
    """The type of every request the client queues on its kazoo session."""
    return record_requests(client, lambda request: int(request.type))


def create_many(zk: KazooClient, paths: list[str], data: list[bytes]) -> None:
    for start in range(0, len(paths), 500):
        transaction = zk.transaction()
        for path, value in zip(paths[start : start + 500], data[start : start + 500],
                               strict=True):
            transaction.create(path, value)
        assert all(isinstance(r, str) for r in transaction.commit())


@pytest.mark.timeout(90)
def test_many_znodes_read_in_few_multi_reads_missing_ones_none(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    zk.create("/states")
    present = [i for i in range(2_600) if i % 7 != 3]
    create_many(zk, [f"/states/{i}" for i in present],
                [b"x" * (i % 200) + str(i).encode() for i in present])
    zk.set("/states/1", b"one")
    types = record_request_types(client)
    threads: list[threading.Thread] = []

    async def read() -> list[Any]:
        found = await client.get_data_many([f"/states/{i}" for i in range(2_600)],
                                           multi_read_ops=1_000)
        threads.append(threading.current_thread())
        return found

    found = run(read())
    assert threads == [MAIN_THREAD]
    assert types == [22, 22, 22]  # 1,000 + 1,000 + 600 ops, no single getData
    expected = [
        None if i % 7 == 3 else (b"one" if i == 1 else b"x" * (i % 200) + str(i).encode())
        for i in range(2_600)]
    assert [None if f is None else f[0] for f in found] == expected
    assert found[1] is not None and found[1][1].version == 1
    assert found[2] is not None and found[2][1].version == 0
    assert found[2][1].dataLength == len(expected[2] or b"")
    assert client._multi_read_supported is True


@pytest.mark.timeout(60)
def test_a_single_read_error_is_raised(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient
) -> None:
    client = make_zookeeper_client()
    zk.create("/open", b"a")
    zk.create("/secret", b"b", acl=[make_digest_acl("someone", "else", all=True)])
    types = record_request_types(client)
    try:
        with pytest.raises(NoAuthError):
            run(client.get_data_many(["/open", "/missing", "/secret"]))
        # the raw reply: each op's own result, the error in its place
        raw = zk.handler.async_result()
        zk._call(MultiRead((f"{zk.chroot}/open", f"{zk.chroot}/secret",
                            f"{zk.chroot}/missing")), raw)
        opened, secret, missing = raw.get(timeout=10)
    finally:
        zk.delete("/secret")  # the recursive cleanup could not list its children
    assert types == [22]
    assert isinstance(opened, tuple) and opened[0] == b"a"
    assert isinstance(secret, NoAuthError) and isinstance(missing, NoNodeError)


class UnknownRequest(MultiRead):
    """A multiRead as a server without it sees it: an op code it does not know."""

    type = 99  # type: ignore[misc]


@pytest.mark.timeout(60)
def test_a_server_answering_multi_read_with_an_error_is_read_one_znode_a_request(
    make_zookeeper_client: ZooKeeperClientFactory, zk: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = make_zookeeper_client()
    for i in range(0, 30, 3):
        zk.create(f"/old/{i}", str(i).encode(), makepath=True)
    monkeypatch.setattr("kafkaclone.zk.zookeeper_client.MultiRead", UnknownRequest)
    requests = record_requests(client, lambda request: (int(request.type),
                                                        getattr(request, "path", None)))
    paths = [f"/old/{i}" for i in range(30)]
    expected = [str(i).encode() if i % 3 == 0 else None for i in range(30)]
    found = run(client.get_data_many(paths, multi_read_ops=10, window=4))
    assert [None if f is None else f[0] for f in found] == expected
    assert client._multi_read_supported is False
    # ZooKeeper answered UNIMPLEMENTED (and closed the connection): every multiRead in
    # flight was answered so or cut and not sent again; then single reads, one per
    # znode, and again for those the closing connection cut (sent before it closed)
    multi_reads = [request_type for request_type, _ in requests].count(99)
    assert multi_reads in (1, 2, 3)
    assert requests[:multi_reads] == [(99, None)] * multi_reads
    single = requests[multi_reads:]
    assert {request_type for request_type, _ in single} == {4}
    chroot = client.kazoo_client.chroot or ""
    reads = Counter((path or "").removeprefix(chroot) for _, path in single)
    assert sorted(reads) == sorted(paths)
    assert max(reads.values()) <= 2
    # the next call asks no multiRead any more
    types = record_request_types(client)
    found = run(client.get_data_many(paths))
    assert [None if f is None else f[0] for f in found] == expected
    assert types == [4] * 30


@pytest.mark.timeout(60)
def test_a_closed_session_is_raised_not_read_one_znode_a_request(
    make_zookeeper_client: ZooKeeperClientFactory,
) -> None:
    client = make_zookeeper_client()
    types = record_request_types(client)
    stopping = threading.Thread(target=client.kazoo_client.stop)  # kazoo's stop blocks
    stopping.start()
    stopping.join(10)
    assert not stopping.is_alive()
    with pytest.raises(ConnectionClosedError):
        run(client.get_data_many(["/a", "/b"]))
    assert types == [22]
    assert client._multi_read_supported is None
