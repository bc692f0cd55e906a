"""The issue's slow-reader probe on the real Fetch path, over real TCP: one client
pipelines 100 Fetch requests answered with 1 MB each and never reads its socket; the
broker's memory grows by a few responses, and another client's round trip stays under
100 ms meanwhile."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from twisted.internet import reactor

from kafkaclone.network.socket_server import KafkaServerFactory, RequestQueue
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ApiVersionsRequest
from tests.server.data_path_helpers import (
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    fetched,
    make_broker,
    produce_request,
)

pytestmark = pytest.mark.timeout(120)

MB = 1 << 20


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    yield b
    close_broker(b)


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def iterate_until(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        reactor.iterate(0.005)  # type: ignore[attr-defined]


def framed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def test_slow_fetch_reader_is_bounded_and_others_are_served(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    for _ in range(8):
        response = broker.call(ApiKey.PRODUCE, 8, produce_request(
            {("t", 0): batch(*[bytes(8192)] * 16)}))
        assert response.responses[0].partition_responses[0].error_code == 0
    one = fetched(broker.call(ApiKey.FETCH, 12, fetch_request(
        {("t", 0): 0}, max_bytes=MB, partition_max_bytes=MB)), "t", 0)
    response_size = len(one.records)
    assert response_size > 900_000

    fetch_frame = framed(api.encode_request(ApiKey.FETCH, 12, 1, "slow", fetch_request(
        {("t", 0): 0}, max_bytes=MB, partition_max_bytes=MB)))
    ping_frame = framed(api.encode_request(ApiKey.API_VERSIONS, 0, 2, "ping",
                                           ApiVersionsRequest()))
    factory = KafkaServerFactory(broker.dispatcher, request_queue=RequestQueue(500))
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
    address = ("127.0.0.1", port.getHost().port)
    slow = socket.create_connection(address)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    round_trips: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def pinger() -> None:
        try:
            with socket.create_connection(address, timeout=5) as s:
                while not stop.is_set():
                    start = time.monotonic()
                    s.sendall(ping_frame)
                    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
                    s.recv(size, socket.MSG_WAITALL)
                    round_trips.append(time.monotonic() - start)
                    time.sleep(0.01)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    rss_before = rss_bytes()
    try:
        slow.sendall(fetch_frame * 100)
        thread = threading.Thread(target=pinger)
        thread.start()
        peak = 0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            reactor.iterate(0.005)  # type: ignore[attr-defined]
            peak = max(peak, rss_bytes() - rss_before)
        stop.set()
        iterate_until(lambda: not thread.is_alive(), 5)
        thread.join(timeout=1)
        assert not errors
        assert len(round_trips) > 20
        assert max(round_trips[1:]) < 0.1, max(round_trips[1:])
        # 100 responses would be 100 MB; a few of them (and the kernel's buffers) are held.
        assert peak < 50 * MB, peak
        (muted,) = [c for c in factory.connections if c.muted]
        assert muted.channel.in_flight <= 1
    finally:
        slow.close()
        stopping = port.stopListening()
        for conn in list(factory.connections):
            conn.transport.loseConnection()
        iterate_until(lambda: bool(stopping.called) and not factory.connections, 5)
