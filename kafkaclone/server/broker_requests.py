"""Requests a broker sends on its own behalf: ControlledShutdown to the controller.

Uses ``kafkaclone.network.client.KafkaClientConnection`` (the controller's and replica
fetcher's connection) when it is available, else a one-request Twisted connection of its
own. Either way everything runs on the reactor: nothing blocks it.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from twisted.internet import protocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.python.failure import Failure

from kafkaclone.common.errors import NetworkExceptionError, RequestTimedOutError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS, decode_response, encode_request
from kafkaclone.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
CLIENT_ID = "kafkaclone-broker"


async def send_controlled_shutdown(
    reactor: Any, host: str, port: int, broker_id: int, broker_epoch: int, *, timeout_s: float
) -> tuple[int, set[TopicPartition]]:
    """Send ControlledShutdown v3 to the controller at host:port: (error code, partitions
    the broker still leads). NetworkExceptionError / RequestTimedOutError on failure."""
    body = APIS[ApiKey.CONTROLLED_SHUTDOWN].request(broker_id=broker_id,
                                                    broker_epoch=broker_epoch)
    response = await send_request(reactor, host, port, ApiKey.CONTROLLED_SHUTDOWN,
                                  CONTROLLED_SHUTDOWN_VERSION, body, timeout_s=timeout_s)
    remaining = {TopicPartition(p.topic_name, p.partition_index)
                 for p in response.remaining_partitions}
    return int(response.error_code), remaining


async def send_request(
    reactor: Any, host: str, port: int, key: ApiKey, version: int, body: Any, *, timeout_s: float
) -> Any:
    """One request on a fresh connection, closed afterwards; the decoded response body."""
    try:
        from kafkaclone.network.client import KafkaClientConnection
    except ImportError:
        return await _send_once(reactor, host, port, key, version, body, timeout_s)
    connection = KafkaClientConnection(reactor, host, port, client_id=CLIENT_ID,
                                       request_timeout=timeout_s)
    try:
        return await connection.send(key, version, body)
    finally:
        connection.close()


class _OneShot(protocol.Protocol):
    def __init__(self, frame: bytes) -> None:
        self._frame = frame
        self._buffer = bytearray()
        self.response: Deferred[bytes] = Deferred()

    def connectionMade(self) -> None:
        transport: Any = self.transport
        transport.write(len(self._frame).to_bytes(4, "big") + self._frame)

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= 4:
            length = int.from_bytes(self._buffer[:4], "big")
            if len(self._buffer) >= 4 + length and not self.response.called:
                self.response.callback(bytes(self._buffer[4:4 + length]))
                transport: Any = self.transport
                transport.loseConnection()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if not self.response.called:
            self.response.errback(NetworkExceptionError(
                f"connection closed before a response: {reason.getErrorMessage()}"))


async def _send_once(
    reactor: Any, host: str, port: int, key: ApiKey, version: int, body: Any, timeout_s: float
) -> Any:
    frame = encode_request(key, version, 1, CLIENT_ID, body)
    proto = _OneShot(frame)
    endpoint = TCP4ClientEndpoint(reactor, host, port, timeout=max(1, int(timeout_s)))
    try:
        await cast(Any, connectProtocol)(endpoint, proto)
    except Exception as exc:
        raise NetworkExceptionError(f"cannot connect to {host}:{port}: {exc}") from exc
    timer = reactor.callLater(timeout_s, proto.response.cancel)
    try:
        reply = await proto.response
    except Exception as exc:
        transport: Any = proto.transport
        if transport is not None:
            transport.loseConnection()
        if not timer.active():
            raise RequestTimedOutError(f"no response from {host}:{port} in {timeout_s}s") from exc
        raise
    finally:
        if timer.active():
            timer.cancel()
    return decode_response(key, version, reply)[1]
