"""Zero-copy responses over real TCP: parts with file regions go out with sendfile in
order with everything else, byte-identical to the copied path; a deleted file still sends,
a truncated one closes the connection; a reader that does not read holds the sender
without spinning; transports that are not plain TCP get the regions' bytes."""

import os
import socket
import struct
import time
from pathlib import Path

import pytest
from twisted.internet import reactor
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport

from kafkaclone.common.file_region import FileRegion, SharedFile
from kafkaclone.network.socket_server import (
    SENDFILE_MIN_BYTES,
    KafkaServerFactory,
    response_bytes,
)

pytestmark = pytest.mark.timeout(60)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _iterate_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        reactor.iterate(0.002)


class Served:
    """A listener on 127.0.0.1 for ``dispatcher``; a client socket read without blocking
    while the reactor runs."""

    def __init__(self, dispatcher, *, sendfile: bool = True, rcvbuf: int | None = None,
                 sendfile_min_bytes: int = 0):
        self.factory = KafkaServerFactory(dispatcher, sendfile=sendfile,
                                          sendfile_min_bytes=sendfile_min_bytes)
        self.port = reactor.listenTCP(0, self.factory, interface="127.0.0.1")
        self.client = socket.socket()
        if rcvbuf is not None:
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.client.connect(("127.0.0.1", self.port.getHost().port))
        self.client.setblocking(False)
        self.received = bytearray()
        self.eof = False

    def send(self, data: bytes) -> None:
        self.client.setblocking(True)
        self.client.sendall(data)
        self.client.setblocking(False)

    def pump(self) -> None:
        reactor.iterate(0.002)
        for _ in range(1000):
            try:
                chunk = self.client.recv(1 << 20)
            except BlockingIOError:
                return
            except ConnectionResetError:
                self.eof = True
                return
            if not chunk:
                self.eof = True
                return
            self.received += chunk

    def frames(self) -> list[bytes]:
        out, pos = [], 0
        while pos + 4 <= len(self.received):
            (length,) = struct.unpack_from(">i", self.received, pos)
            if pos + 4 + length > len(self.received):
                break
            out.append(bytes(self.received[pos + 4:pos + 4 + length]))
            pos += 4 + length
        return out

    def read_frames(self, count: int, timeout: float = 20) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while len(self.frames()) < count and not self.eof:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.frames())} of {count} frames in time")
            self.pump()
        return self.frames()

    def wait_closed(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not self.eof:
            if time.monotonic() > deadline:
                raise AssertionError("the connection was not closed")
            self.pump()

    def close(self) -> None:
        self.client.close()
        stopping = self.port.stopListening()
        for conn in list(self.factory.connections):
            conn.transport.abortConnection()
        _iterate_until(lambda: stopping.called and not self.factory.connections, 10)


def _data_file(tmp_path: Path, size: int, name: str = "segment.log") -> tuple[Path, bytes]:
    data = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(data)
    return path, data


def _region(path: Path, position: int, size: int) -> FileRegion:
    return FileRegion(SharedFile(os.open(path, os.O_RDONLY)), position, size)


class PartsDispatcher:
    """Answers request ``i`` with ``answers[i]``: bytes, or parts with file regions."""

    def __init__(self, answers):
        self.answers = answers
        self.count = 0

    def dispatch(self, connection, frame_):
        answer = self.answers[self.count]
        self.count += 1
        return succeed(answer)


@pytest.mark.parametrize(("sendfile", "min_bytes"), [(True, 0), (True, SENDFILE_MIN_BYTES),
                                                     (False, 0)])
def test_regions_arrive_in_order_with_other_responses(tmp_path: Path, sendfile: bool,
                                                      min_bytes: int) -> None:
    """Responses with regions, large and small (below the sendfile threshold: read and
    written, or queued behind a sendfile in progress), and bytes responses, pipelined."""
    path, data = _data_file(tmp_path, 3 << 20)
    answers = [
        b"plain-0",
        [b"head-1", _region(path, 10, 1 << 20), b"mid", _region(path, 5, 7), b"tail"],
        b"plain-2",
        [_region(path, 0, 3 << 20)],
        [b"head-4", _region(path, (3 << 20) - 100, 100)],
        b"plain-5",
        [b"head-6", _region(path, 3, 1000)],
        b"plain-7",
    ]
    expected = [response_bytes(answer) for answer in answers]
    served = Served(PartsDispatcher(answers), sendfile=sendfile, sendfile_min_bytes=min_bytes)
    try:
        served.send(b"".join(frame(b"r%d" % i) for i in range(len(answers))))
        assert served.read_frames(len(answers)) == expected
        assert expected[1] == b"head-1" + data[10:10 + (1 << 20)] + b"mid" + data[5:12] + b"tail"
        (conn,) = served.factory.connections
        assert conn._sendfile is sendfile
        _iterate_until(lambda: conn._file_sender is None and not conn.muted, 5)
        assert conn.transport.producer is conn  # the connection is the producer again
    finally:
        served.close()


def test_a_deleted_file_is_still_sent_from_the_open_descriptor(tmp_path: Path) -> None:
    """Retention deletes a segment between the read and the send: the region keeps the
    descriptor, so the bytes read are the bytes sent (Kafka keeps its FileChannel)."""
    from kafkaclone.log.file_records import FileRecords

    path, data = _data_file(tmp_path, 1 << 20)
    records = FileRecords(path)
    region = records.slice(100, 500_000)
    answer: Deferred = Deferred()

    class Later:
        def dispatch(self, connection, frame_):
            return answer

    served = Served(Later())
    try:
        served.send(frame(b"fetch"))
        _iterate_until(lambda: bool(served.factory.connections), 5)
        assert records.delete()  # closed and unlinked, as retention does
        assert not path.exists()
        answer.callback([b"header", region])
        assert served.read_frames(1) == [b"header" + data[100:500_100]]
        del region
    finally:
        served.close()


def test_a_truncated_file_closes_the_connection_without_a_wrong_frame(
        tmp_path: Path) -> None:
    path, _ = _data_file(tmp_path, 1 << 20)
    region = _region(path, 0, 1 << 20)
    os.truncate(path, 1000)
    served = Served(PartsDispatcher([b"first", [b"header", region], b"never"]))
    try:
        served.send(frame(b"a") + frame(b"b") + frame(b"c"))
        served.wait_closed()
        frames = served.frames()
        assert frames == [b"first"]  # the short frame never completes
        _iterate_until(lambda: not served.factory.connections, 5)
    finally:
        served.close()


def test_a_reader_that_does_not_read_holds_the_sender_without_spinning(
        tmp_path: Path) -> None:
    """Pipelined 4 MiB file responses to a client that does not read: the connection is
    muted with one response partly sent and the broker idle (no busy loop on EAGAIN);
    once the client reads, everything arrives intact."""
    size = 4 << 20
    path, data = _data_file(tmp_path, size)
    count = 10
    served = Served(PartsDispatcher([[b"h%d" % i, _region(path, 0, size)]
                                     for i in range(count)]), rcvbuf=64 * 1024)
    try:
        served.send(b"".join(frame(b"r") for _ in range(count)))
        _iterate_until(lambda: bool(served.factory.connections), 5)
        (conn,) = served.factory.connections
        _iterate_until(lambda: conn._file_sender is not None, 5)
        # Let the socket buffers fill, then measure the broker's CPU while nothing drains.
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            reactor.iterate(0.01)
        cpu, wall = time.process_time(), time.monotonic()
        while time.monotonic() - wall < 1.0:
            reactor.iterate(0.01)
        assert time.process_time() - cpu < 0.5  # waiting, not spinning
        assert conn.muted and conn._file_sender is not None
        assert conn.channel.in_flight <= 2  # the other requests wait unprocessed
        frames = served.read_frames(count, timeout=40)
        assert frames == [b"h%d" % i + data for i in range(count)]
    finally:
        served.close()


def test_a_transport_that_is_not_plain_tcp_gets_the_bytes(tmp_path: Path) -> None:
    """TLS (like a StringTransport) cannot take sendfile: the regions are read and written
    as bytes, the frame length exact."""
    path, data = _data_file(tmp_path, 100_000)
    conn = KafkaServerFactory(PartsDispatcher([[b"head", _region(path, 7, 90_000),
                                                b"tail"]])).buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    assert conn._sendfile is False
    conn.dataReceived(frame(b"fetch"))
    assert transport.value() == frame(b"head" + data[7:90_007] + b"tail")


def test_a_response_the_socket_takes_whole_leaves_at_once(tmp_path: Path) -> None:
    """With nothing buffered, a file response is sent inside the call that answers it: no
    reactor turn before its bytes leave (a follower's fetch answer is a hop of the acks=all
    round trip), the connection not muted, no file sender left behind."""
    path, data = _data_file(tmp_path, 40_000)
    served = Served(PartsDispatcher([[b"head", _region(path, 0, 40_000)]]))
    try:
        _iterate_until(lambda: bool(served.factory.connections), 5)
        (conn,) = served.factory.connections
        conn.dataReceived(frame(b"fetch"))  # the request, handed over without the reactor
        assert conn._file_sender is None and not conn.muted
        served.client.settimeout(5)
        expected = frame(b"head" + data)
        while len(served.received) < len(expected):  # no reactor.iterate here
            served.received += served.client.recv(1 << 20)
        assert bytes(served.received) == expected
        served.client.setblocking(False)
    finally:
        served.close()
