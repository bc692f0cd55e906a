"""KafkaClientConnection and the controller's channel over real TCP to a tiny in-test
broker (kafkaclone's own socket server with a recording dispatcher)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import reactor
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ConnectError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import NetworkExceptionError, RequestTimedOutError
from kafkaclone.controller.channel_manager import (
    UM,
    UPDATE_METADATA_VERSION,
    ControllerChannelManager,
)
from kafkaclone.network.client import KafkaClientConnection
from kafkaclone.network.socket_server import ConnectionInfo, KafkaServerFactory
from kafkaclone.protocol.api import APIS, decode_request, encode_response
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.testing.zookeeper import free_port
from kafkaclone.zk.znodes import BrokerId, BrokerInfo

R: Any = reactor


class TinyBroker:
    """Answers UpdateMetadata with success; leaves StopReplica unanswered."""

    def __init__(self, port: int = 0) -> None:
        self.received: list[tuple[int, Any]] = []
        self.factory = KafkaServerFactory(self)
        self.listening = R.listenTCP(port, self.factory, interface="127.0.0.1")
        self.port: int = self.listening.getHost().port

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        request = decode_request(frame)
        self.received.append((request.api.key, request.body))
        if request.api.key == ApiKey.STOP_REPLICA:
            return Deferred()
        body = APIS[request.api.key].response(error_code=0)
        return succeed(encode_response(request.api.key, request.api_version,
                                       request.correlation_id, body))

    def stop(self) -> None:
        for connection in list(self.factory.connections):
            transport: Any = connection.transport
            transport.abortConnection()
        run(Deferred.fromCoroutine(_await(self.listening.stopListening())))


async def _await(d: Any) -> None:
    if isinstance(d, Deferred):
        await d


@pytest.fixture
def broker() -> Iterator[TinyBroker]:
    server = TinyBroker()
    yield server
    server.stop()


def update_metadata() -> Any:
    return UM(controller_id=1, controller_epoch=1, broker_epoch=5, ungrouped_partition_states=[],
              topic_states=[], live_brokers=[])


def test_requests_are_answered_in_order(broker: TinyBroker) -> None:
    client = KafkaClientConnection(R, "127.0.0.1", broker.port, client_id="test")
    try:
        pending = [Deferred.fromCoroutine(client.send(ApiKey.UPDATE_METADATA,
                                                      UPDATE_METADATA_VERSION, update_metadata()))
                   for _ in range(3)]
        for d in pending:
            assert run(d).error_code == 0
        assert [key for key, _ in broker.received] == [ApiKey.UPDATE_METADATA] * 3
        assert broker.received[0][1].broker_epoch == 5
    finally:
        client.close()


def test_a_request_times_out_and_the_connection_is_dropped(broker: TinyBroker) -> None:
    client = KafkaClientConnection(R, "127.0.0.1", broker.port, request_timeout=0.3)
    SR = APIS[ApiKey.STOP_REPLICA].request
    body = SR(controller_id=1, controller_epoch=1, broker_epoch=5, delete_partitions=False,
              ungrouped_partitions=[], topics=[], topic_states=[])
    try:
        with pytest.raises(RequestTimedOutError):
            run(client.send(ApiKey.STOP_REPLICA, 3, body))
        assert not client.connected
        assert run(client.send(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                               update_metadata())).error_code == 0
    finally:
        client.close()


def test_reconnects_with_backoff() -> None:
    port = free_port()
    client = KafkaClientConnection(R, "127.0.0.1", port, reconnect_backoff=0.05,
                                   reconnect_backoff_max=0.2)
    try:
        with pytest.raises(NetworkExceptionError):
            run(client.connect())
        with pytest.raises(NetworkExceptionError):
            run(client.connect())
        assert client.current_backoff == pytest.approx(0.1)
        server = TinyBroker(port)
        try:
            run(client.connect())
            assert client.connected and client.current_backoff == 0
        finally:
            server.stop()
    finally:
        client.close()


def test_the_connection_setup_timeout_doubles_per_failure_up_to_its_max() -> None:
    """socket.connection.setup.timeout.ms / .max.ms as Kafka's NetworkClient: the timeout
    of each attempt (what the endpoint is given) doubles per failed attempt, capped, with a
    random factor of +-20 %, and starts again from the first after a success."""
    port = free_port()
    connecting = MemoryReactorClock()
    client = KafkaClientConnection(connecting, "127.0.0.1", port, connect_timeout=10.0,
                                   connect_timeout_max=30.0, reconnect_backoff=0.0)
    timeouts: list[float] = []
    try:
        for _ in range(4):
            attempt = Deferred.fromCoroutine(client.connect())
            attempt.addErrback(lambda failure: failure.trap(NetworkExceptionError))
            connecting.advance(0)
            host, connect_port, factory, timeout, _ = connecting.tcpClients.pop()
            assert (host, connect_port) == ("127.0.0.1", port)
            timeouts.append(timeout)
            factory.clientConnectionFailed(None, Failure(ConnectError("refused")))
            assert attempt.called
        for timeout, term in zip(timeouts, [10.0, 20.0, 30.0, 30.0], strict=True):
            assert term * 0.8 <= timeout <= term * 1.2
    finally:
        client.close()

    plain = KafkaClientConnection(connecting, "127.0.0.1", port, request_timeout=7.0)
    assert plain.current_connect_timeout == 7.0  # no max: the request timeout, as before


def test_controller_channel_retries_until_the_broker_answers() -> None:
    port = free_port()
    channel = ControllerChannelManager(R, 1, "PLAINTEXT", request_timeout=2.0,
                                       retry_backoff=0.05)
    info = BrokerInfo(BrokerId(2),
                      (EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", port),))
    answers: list[Any] = []
    try:
        channel.add_broker(info)
        channel.send_request(2, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                             update_metadata(), answers.append)
        deadline = time.monotonic() + 0.3
        run_until(lambda: time.monotonic() > deadline)  # a few failed attempts
        assert channel.queue_size(2) == 1  # nobody listens yet: kept for retry
        server = TinyBroker(port)
        try:
            run_until(lambda: bool(answers), timeout=10)
            assert answers[0].error_code == 0
            assert [key for key, _ in server.received] == [ApiKey.UPDATE_METADATA]
            channel.send_request(3, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION,
                                 update_metadata())  # not live: dropped
            assert channel.queue_size(3) == 0
        finally:
            server.stop()
    finally:
        channel.shutdown()


class _FrameRecorder:
    """The owner a client protocol hands its frames to; it can drop the connection on a
    given frame, as KafkaClientConnection does on an undecodable response."""

    def __init__(self, close_on: int = -1) -> None:
        self.frames: list[bytes] = []
        self.closed: list[str] = []
        self.close_on = close_on
        self.protocol: Any = None

    def frame_received(self, _proto: Any, frame: bytes | bytearray) -> None:
        self.frames.append(bytes(frame))
        if len(self.frames) - 1 == self.close_on:
            self.protocol.transport = None

    def close_connection(self, reason: str) -> None:
        self.closed.append(reason)


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _client_protocol(owner: _FrameRecorder) -> Any:
    from kafkaclone.network.client import _KafkaClientProtocol
    from kafkaclone.network.framing import LARGE_FRAME_START
    protocol = _KafkaClientProtocol(owner)  # type: ignore[arg-type]
    protocol.transport = object()  # type: ignore[assignment]
    owner.protocol = protocol
    assert LARGE_FRAME_START <= 100_000
    return protocol


@pytest.mark.parametrize("chunk", [1, 7, 1000, 65536, 10**7])
def test_responses_are_framed_whatever_the_reads(chunk: int) -> None:
    """Small frames and frames large enough for their own buffer, back to back, come out
    whole and in order however the socket's reads split them (a large frame's last read
    carrying the next frames too)."""
    payloads = [b"a" * 10, bytes(range(256)) * 1000, b"", b"b" * 300_000, b"c" * 5,
                bytes(reversed(range(256))) * 4000]
    stream = b"".join(_framed(p) for p in payloads)
    owner = _FrameRecorder()
    protocol = _client_protocol(owner)
    for start in range(0, len(stream), chunk):
        protocol.dataReceived(stream[start:start + chunk])
    assert owner.frames == payloads
    assert not owner.closed


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    """Once enough of a large frame is in, the rest of it is not appended to the receive
    buffer."""
    owner = _FrameRecorder()
    protocol = _client_protocol(owner)
    payload = b"z" * 1_000_000
    stream = _framed(payload)
    protocol.dataReceived(stream[:200_000])
    assert protocol._large is not None and len(protocol._large) == len(payload)
    assert len(protocol._buffer) == 0
    protocol.dataReceived(stream[200_000:])
    assert owner.frames == [payload]
    assert protocol._large is None


def test_a_frame_that_closes_the_connection_stops_the_reading() -> None:
    """After the owner dropped the connection on a frame (its transport gone), the frames
    behind it in the same read are not handed on, large frame or small."""
    for first in (b"x" * 10, b"y" * 200_000):
        owner = _FrameRecorder(close_on=0)
        protocol = _client_protocol(owner)
        stream = _framed(first) + _framed(b"after")
        for start in range(0, len(stream), 100_000):
            if protocol.transport is None:  # no read comes after the connection is dropped
                break
            protocol.dataReceived(stream[start:start + 100_000])
        assert owner.frames == [first]


def test_a_negative_response_length_closes_the_connection() -> None:
    owner = _FrameRecorder()
    protocol = _client_protocol(owner)
    protocol.dataReceived((-5).to_bytes(4, "big", signed=True) + b"rest")
    assert owner.frames == []
    assert owner.closed == ["bad response length -5"]
