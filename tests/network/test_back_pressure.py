"""Back-pressure and connection limits of the socket server: muting, queued.max.requests,
the output buffer bound, max.connections(.per.ip), connections.max.idle.ms."""

import logging
import random
import socket
import struct
import threading
import time

import pytest
from twisted.internet import reactor, task
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport

from kafkaclone.network.socket_server import (
    MAX_IN_FLIGHT_REQUESTS,
    ConnectionQuotas,
    KafkaServerFactory,
    RequestQueue,
)

pytestmark = pytest.mark.timeout(60)


class ManualDispatcher:
    def __init__(self) -> None:
        self.pending: list[tuple[bytes, Deferred]] = []

    def dispatch(self, connection, frame):
        d: Deferred = Deferred()
        self.pending.append((bytes(frame), d))
        return d


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect(factory, addr=None):
    conn = factory.buildProtocol(addr)
    if conn is None:
        return None, None
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport


def test_connection_is_muted_while_its_in_flight_bound_is_reached():
    dispatcher = ManualDispatcher()
    conn, transport = connect(KafkaServerFactory(dispatcher))
    conn.dataReceived(b"".join(frame(bytes([i])) for i in range(MAX_IN_FLIGHT_REQUESTS + 3)))
    assert len(dispatcher.pending) == MAX_IN_FLIGHT_REQUESTS
    assert conn.muted and transport.producerState == "paused"
    dispatcher.pending[0][1].callback(b"r0")
    # One answered: one more frame is taken from the buffer, and the bound is reached again.
    assert len(dispatcher.pending) == MAX_IN_FLIGHT_REQUESTS + 1
    assert conn.muted
    for i in range(1, MAX_IN_FLIGHT_REQUESTS + 3):
        dispatcher.pending[i][1].callback(b"r%d" % i)
    assert len(dispatcher.pending) == MAX_IN_FLIGHT_REQUESTS + 3
    assert not conn.muted and transport.producerState == "producing"
    assert conn.channel.in_flight == 0


@pytest.mark.parametrize("chunk", [1000, 65536, 100_000, 300_001])
def test_large_requests_read_into_their_own_buffer_keep_order_and_muting(chunk):
    # Requests of 1 MiB (read into a buffer of their size once 64 KiB are in) between small
    # ones, fed in chunks that split frames anywhere; a bound of 2 in flight mutes the
    # connection, also with a large request complete and waiting.
    rng = random.Random(chunk)
    payloads = [rng.randbytes(n) for n in (10, 1 << 20, 7, 70_000, 1 << 20, 1 << 20, 3)]
    stream = b"".join(frame(p) for p in payloads)
    dispatcher = ManualDispatcher()
    conn, _ = connect(KafkaServerFactory(dispatcher))
    conn._max_in_flight = 2
    was_muted = used_large = False
    for start in range(0, len(stream), chunk):
        conn.dataReceived(stream[start:start + chunk])
        used_large = used_large or conn._large is not None
        while conn.muted:  # answered as a broker would, before the socket is read again
            was_muted = True
            next(d for _, d in dispatcher.pending if not d.called).callback(b"r")
    for _, d in dispatcher.pending:
        if not d.called:
            d.callback(b"r")
    assert was_muted and used_large
    assert [p for p, _ in dispatcher.pending] == payloads
    assert not conn.muted and conn._large is None and not conn._buffer


def test_a_large_request_announced_but_not_sent_gets_no_large_buffer():
    dispatcher = ManualDispatcher()
    conn, _ = connect(KafkaServerFactory(dispatcher))
    conn.dataReceived(struct.pack(">i", 50 << 20) + b"x" * 65536)
    assert conn._large is None  # 64 KiB is less than 1/16 of 50 MiB: no 50 MiB buffer
    conn.dataReceived(b"x" * (4 << 20))
    assert conn._large is not None and len(conn._large) == 50 << 20


def test_queued_max_requests_mutes_every_connection_until_one_completes():
    dispatcher = ManualDispatcher()
    queue = RequestQueue(max_requests=2)
    factory = KafkaServerFactory(dispatcher, request_queue=queue)
    a, _ = connect(factory)
    b, _ = connect(factory)
    a.dataReceived(frame(b"a1"))
    b.dataReceived(frame(b"b1") + frame(b"b2"))
    assert [f for f, _ in dispatcher.pending] == [b"a1", b"b1"]
    assert queue.size == 2 and b.muted
    a.dataReceived(frame(b"a2"))
    assert a.muted and len(dispatcher.pending) == 2
    dispatcher.pending[0][1].callback(b"ra1")
    assert queue.size == 2  # the room went to a waiting connection
    assert sorted(f for f, _ in dispatcher.pending[2:]) in ([b"a2"], [b"b2"])


def test_a_full_write_buffer_mutes_the_connection_until_it_drains():
    conn, transport = connect(KafkaServerFactory(ManualDispatcher()))
    assert transport.producer is conn and transport.streaming
    conn.pauseProducing()  # what the transport does when its buffer is over its size
    conn.dataReceived(frame(b"x"))
    assert conn.muted and conn.factory.dispatcher.pending == []
    conn.resumeProducing()
    assert not conn.muted and len(conn.factory.dispatcher.pending) == 1


class _Addr:
    def __init__(self, host):
        self.host = host
        self.port = 1


def test_max_connections_per_ip_and_its_overrides(caplog):
    quotas = ConnectionQuotas(max_connections_per_ip=2,
                              max_connections_per_ip_overrides={"10.0.0.9": 3})
    factory = KafkaServerFactory(ManualDispatcher(), quotas=quotas, clock=task.Clock())
    with caplog.at_level(logging.INFO):
        first = [connect(factory, _Addr("10.0.0.1"))[0] for _ in range(3)]
        other = [connect(factory, _Addr("10.0.0.9"))[0] for _ in range(4)]
    assert [c is not None for c in first] == [True, True, False]
    assert [c is not None for c in other] == [True, True, True, False]
    assert ("Rejected connection from 10.0.0.1, address already has the configured maximum "
            "of 2 connections.") in caplog.text
    first[0].connectionLost()
    assert connect(factory, _Addr("10.0.0.1"))[0] is not None
    assert quotas.counts == {"10.0.0.1": 2, "10.0.0.9": 3}


def test_max_connections_and_creation_rate():
    clock = task.Clock()
    quotas = ConnectionQuotas(max_connections=3, max_connection_creation_rate=2)
    factory = KafkaServerFactory(ManualDispatcher(), quotas=quotas, clock=clock)
    made = [connect(factory, _Addr(f"10.0.0.{i}"))[0] for i in range(3)]
    assert [c is not None for c in made] == [True, True, False]  # 2 per second
    clock.advance(1)
    made = [connect(factory, _Addr(f"10.0.1.{i}"))[0] for i in range(2)]
    assert [c is not None for c in made] == [True, False]  # max.connections=3
    quotas.reconfigure(max_connections=4, max_connections_per_ip=quotas.max_connections_per_ip,
                       max_connections_per_ip_overrides={}, max_connection_creation_rate=10)
    assert connect(factory, _Addr("10.0.2.1"))[0] is not None


def test_idle_connections_close_after_connections_max_idle_ms():
    clock = task.Clock()
    dispatcher = ManualDispatcher()
    factory = KafkaServerFactory(dispatcher, connections_max_idle_ms=1000, clock=clock)
    _idle, idle_transport = connect(factory)
    busy, busy_transport = connect(factory)
    clock.advance(0.6)
    busy.dataReceived(frame(b"x"))
    clock.advance(0.5)
    assert idle_transport.disconnecting
    assert not busy_transport.disconnecting
    clock.advance(2)  # a request in flight is not idleness
    assert not busy_transport.disconnecting
    dispatcher.pending[0][1].callback(b"r")
    clock.advance(1)
    clock.advance(1)
    assert busy_transport.disconnecting


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _run_reactor_until(done, seconds):
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        reactor.iterate(0.005)


def test_a_slow_reader_holds_a_few_responses_and_others_are_served(tmp_path):
    """The slow-reader probe: one client pipelines 100 requests each answered with 1 MB
    and never reads; the server's memory grows by a few responses, not 100 MB, and
    another client's round trip stays under 100 ms meanwhile."""
    response_size = 1 << 20

    class BigAnswers:
        def dispatch(self, connection, frame_):
            if bytes(frame_) == b"ping":
                return succeed(b"pong")
            return succeed(bytes(response_size))  # a fresh megabyte per request

    factory = KafkaServerFactory(BigAnswers(), request_queue=RequestQueue(500),
                                 quotas=ConnectionQuotas(), connections_max_idle_ms=600000)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    address = ("127.0.0.1", port.getHost().port)
    slow = socket.create_connection(address)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    rss_before = _rss_bytes()
    round_trips: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def pinger():
        try:
            with socket.create_connection(address, timeout=5) as s:
                while not stop.is_set():
                    start = time.monotonic()
                    s.sendall(frame(b"ping"))
                    got = b""
                    while len(got) < 8:
                        got += s.recv(8 - len(got))
                    round_trips.append(time.monotonic() - start)
                    time.sleep(0.01)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        slow.sendall(b"".join(frame(b"fetch") for _ in range(100)))
        thread = threading.Thread(target=pinger)
        thread.start()
        peak = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            reactor.iterate(0.005)
            peak = max(peak, _rss_bytes() - rss_before)
        stop.set()
        _run_reactor_until(lambda: not thread.is_alive(), 5)
        thread.join(timeout=1)
        assert not errors
        assert len(round_trips) > 20
        # The first ping may wait for the listener's accept; the rest are what counts.
        assert max(round_trips[1:]) < 0.1, max(round_trips[1:])
        assert peak < 50 * (1 << 20), peak
        (conn,) = [c for c in factory.connections if c.muted]
        assert conn.channel.in_flight <= 1
    finally:
        slow.close()
        stopping = port.stopListening()
        for conn in list(factory.connections):
            conn.transport.loseConnection()
        _run_reactor_until(lambda: stopping.called and not factory.connections, 5)


def test_sixty_connections_against_max_connections_per_ip_fifty_and_idle_close():
    """Over real TCP: of 60 connections from 127.0.0.1 with max.connections.per.ip=50 the
    51st to 60th are closed at once; the 50 accepted ones close after
    connections.max.idle.ms."""
    factory = KafkaServerFactory(ManualDispatcher(),
                                 quotas=ConnectionQuotas(max_connections_per_ip=50),
                                 connections_max_idle_ms=1500)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    sockets = []
    try:
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", port.getHost().port), timeout=5)
            sockets.append(s)
            _run_reactor_until(lambda: False, 0.002)
        _run_reactor_until(lambda: len(factory.connections) >= 50, 5)

        def closed(s, wait):
            s.settimeout(wait)
            try:
                return s.recv(1) == b""
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True

        refused_at = time.monotonic()
        _run_reactor_until(lambda: False, 0.1)
        assert [closed(s, 0.5) for s in sockets[50:]] == [True] * 10
        assert time.monotonic() - refused_at < 1.2
        assert not any(closed(s, 0.01) for s in sockets[:50])
        assert len(factory.connections) == 50
        _run_reactor_until(lambda: not factory.connections, 10)
        assert not factory.connections
        assert all(closed(s, 2) for s in sockets[:50])
        assert factory.quotas.total == 0
    finally:
        for s in sockets:
            s.close()
        stopping = port.stopListening()
        _run_reactor_until(lambda: stopping.called, 5)
