"""Frames written at once to a plain TCP socket (kafkaclone.network.direct_write): small
responses leave within the reactor turn that produced them, without Twisted's buffer; a
response the socket cannot take whole goes on through Twisted's buffer, and later ones
queue behind it, all arriving intact and in order."""

import os

import pytest
from twisted.internet.testing import StringTransport

from kafkaclone.network.direct_write import direct_socket, write_sequence
from tests.network.test_sendfile import PartsDispatcher, Served, _iterate_until, frame

pytestmark = pytest.mark.timeout(60)


class _CountingTwistedWrites:
    """Counts the frames that went through the transport's own buffer."""

    def __init__(self, transport) -> None:
        self.calls = 0
        self._write_sequence = transport.writeSequence
        transport.writeSequence = self

    def __call__(self, parts) -> None:
        self.calls += 1
        self._write_sequence(parts)


def test_small_responses_are_sent_without_twisteds_buffer() -> None:
    answers = [b"answer-%d" % i * (i + 1) for i in range(20)]
    served = Served(PartsDispatcher(answers), sendfile=False)
    try:
        served.send(frame(b"first"))
        assert served.read_frames(1) == answers[:1]
        (conn,) = served.factory.connections
        assert conn._socket is not None
        through_twisted = _CountingTwistedWrites(conn.transport)
        for i in range(1, len(answers)):
            served.send(frame(b"r%d" % i))
            assert served.read_frames(i + 1) == answers[:i + 1]
        assert through_twisted.calls == 0
        assert not conn.transport.dataBuffer and not conn.transport._tempDataLen
    finally:
        served.close()


def test_what_the_socket_does_not_take_follows_through_twisted_in_order() -> None:
    """A client that does not read: the first large response is partly sent, the rest
    and every later response wait in Twisted's buffer (the connection muted once it is
    full); once the client reads, every frame arrives whole and in order."""
    large = [os.urandom(3 << 20) for _ in range(3)]
    answers = [large[0], b"small-1", large[1], b"small-3", large[2], b"small-5"]
    served = Served(PartsDispatcher(answers), sendfile=False, rcvbuf=64 * 1024)
    try:
        served.send(b"".join(frame(b"r%d" % i) for i in range(len(answers))))
        _iterate_until(lambda: bool(served.factory.connections), 5)
        (conn,) = served.factory.connections
        _iterate_until(lambda: len(conn.transport.dataBuffer) + conn.transport._tempDataLen
                       > 0, 5)
        assert served.read_frames(len(answers), timeout=40) == answers
        _iterate_until(lambda: not conn.transport.dataBuffer
                       and not conn.transport._tempDataLen and not conn.muted, 5)
    finally:
        served.close()


def test_other_transports_get_twisteds_write() -> None:
    transport = StringTransport()
    assert direct_socket(transport) is None
    write_sequence(transport, None, (b"\x00\x00\x00\x02", b"ok"))
    assert transport.value() == b"\x00\x00\x00\x02ok"


def test_many_parts_go_through_twisted() -> None:
    """More parts than one sendmsg should take: Twisted's writeSequence, whole."""
    served = Served(PartsDispatcher([b"x"]), sendfile=False)
    try:
        served.send(frame(b"r"))
        assert served.read_frames(1) == [b"x"]
        (conn,) = served.factory.connections
        through_twisted = _CountingTwistedWrites(conn.transport)
        parts = [b"%03d" % i for i in range(100)]
        write_sequence(conn.transport, conn._socket,
                       [len(b"".join(parts)).to_bytes(4, "big"), *parts])
        assert through_twisted.calls == 1
        assert served.read_frames(2)[1] == b"".join(parts)
    finally:
        served.close()
