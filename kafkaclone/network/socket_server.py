"""The broker's socket server: Kafka framing on Twisted, responses in request order.

A connection is a :class:`KafkaServerProtocol` (Twisted's ``Int32StringReceiver``: Kafka's
framing is a 4-byte big-endian length and then the request). Each complete frame goes to a
:class:`RequestDispatcher`, which returns a Deferred of the encoded response frame, or of
``None`` for a request that gets no response (a Produce with acks=0). Requests on one
connection may complete in any order; :class:`RequestChannel` sends their responses in the
order the requests arrived, as Kafka clients require.

A frame longer than ``socket.request.max.bytes``, a request the dispatcher refuses with
:class:`CloseConnection` (a malformed header, an unknown API key, an unsupported version)
or a handler failure closes only that connection; the broker and every other client go on.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any, Protocol

from twisted.internet import protocol
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.protocols.basic import Int32StringReceiver
from twisted.python.failure import Failure

from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.common.security import ANONYMOUS, KafkaPrincipal
from kafkaclone.network.authenticator import SaslServerAuthenticator, SaslServerConfig
from kafkaclone.network.tls import SslPrincipalMapper, subject_dn

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes


class CloseConnection(Exception):
    """Raised by a dispatcher for a request after which the connection must be closed."""


@dataclass(frozen=True)
class ConnectionInfo:
    """Who sent a request: the address pair of the connection, a connection id, the
    listener it came in on and the principal it authenticated as (``User:ANONYMOUS`` on a
    PLAINTEXT listener and before a SASL exchange completes)."""

    connection_id: str
    client_host: str
    client_port: int
    _: KW_ONLY
    listener_name: str = "PLAINTEXT"
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    principal: KafkaPrincipal = ANONYMOUS


@dataclass(frozen=True)
class ListenerSecurity:
    """How a listener authenticates its connections: TLS itself is set up by whoever
    listens (``listenSSL``); with ``principal_mapper`` an SSL listener names the principal
    after the client certificate, with ``sasl`` a SASL listener runs the exchange first."""

    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    principal_mapper: SslPrincipalMapper | None = None
    sasl: SaslServerConfig | None = None


PLAINTEXT_SECURITY = ListenerSecurity()


class RequestDispatcher(Protocol):
    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        """Handle one request frame; fire with the response frame or None (no response)."""


class _Slot:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = False
        self.response: bytes | None = None


class RequestChannel:
    """Keeps a connection's responses in request order, whatever order they complete in."""

    def __init__(self, send: Any, close: Any) -> None:
        self._send = send
        self._close = close
        self._slots: deque[_Slot] = deque()
        self.closed = False
        self._closing = False

    @property
    def in_flight(self) -> int:
        return len(self._slots)

    def track(self, result: Deferred[bytes | None]) -> None:
        slot = _Slot()
        self._slots.append(slot)
        result.addCallbacks(self._completed, self._failed, callbackArgs=(slot,),
                            errbackArgs=(slot,))

    def _completed(self, response: bytes | None, slot: _Slot) -> None:
        slot.done = True
        slot.response = response
        self._flush()

    def _failed(self, failure: Failure, slot: _Slot) -> None:
        if not isinstance(failure.value, CloseConnection):
            log.error("request handler failed; closing the connection", exc_info=failure.value)
        else:
            log.info("closing connection: %s", failure.value)
        self._slots.clear()
        self.shutdown()

    def _flush(self) -> None:
        while self._slots and self._slots[0].done and not self.closed:
            slot = self._slots.popleft()
            if slot.response is not None:
                self._send(slot.response)
        if self._closing and not self._slots:
            self.shutdown()

    def close_after_flush(self) -> None:
        """Close once the responses queued so far have been sent (a refused SASL exchange:
        its answer goes out, then the connection closes)."""
        self._closing = True
        self._flush()

    def shutdown(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()


class KafkaServerProtocol(Int32StringReceiver):
    """One client connection."""

    structFormat = "!I"
    prefixLength = 4

    def __init__(self, dispatcher: RequestDispatcher, max_request_bytes: int,
                 connection_id: str, listener_name: str = "PLAINTEXT",
                 security: ListenerSecurity = PLAINTEXT_SECURITY) -> None:
        self.dispatcher = dispatcher
        self.listener_name = listener_name
        self.security = security
        self.authenticator: SaslServerAuthenticator | None = None
        self._peer_certificate_read = False
        self.MAX_LENGTH = max_request_bytes
        self.connection_id = connection_id
        self._buffer = bytearray()
        self.channel = RequestChannel(self.sendString, self._abort)
        self.info: ConnectionInfo | None = None

    def connectionMade(self) -> None:
        transport: Any = self.transport
        # As Kafka's Acceptor: no Nagle delay on answers (a follower's fetch answer or an
        # acks=all produce answer would otherwise wait for the peer's delayed ACK).
        if hasattr(transport, "setTcpNoDelay"):
            transport.setTcpNoDelay(True)
        peer = transport.getPeer()
        self.info = ConnectionInfo(self.connection_id, getattr(peer, "host", ""),
                                   getattr(peer, "port", 0), listener_name=self.listener_name,
                                   security_protocol=self.security.security_protocol)
        if self.security.sasl is not None:
            self.authenticator = SaslServerAuthenticator(self.security.sasl, self,
                                                         self.connection_id)

    def dataReceived(self, data: bytes) -> None:
        # Int32StringReceiver re-concatenates its whole buffer on every chunk, which is
        # quadratic for the 1 MiB produce requests that arrive in many reads; this keeps the
        # same framing with one growing buffer.
        if self.channel.closed:
            return
        buffer = self._buffer
        buffer += data
        offset = 0
        while len(buffer) - offset >= 4 and not self.channel.closed:
            length = int.from_bytes(buffer[offset:offset + 4], "big")
            if length > self.MAX_LENGTH:
                del buffer[:offset]
                self.lengthLimitExceeded(length)
                return
            end = offset + 4 + length
            if len(buffer) < end:
                break
            # A bytearray slice: the one copy out of the receive buffer, and writable, so
            # the log can assign offsets in the produced batches in place.
            frame = buffer[offset + 4:end]
            offset = end
            self.stringReceived(frame)
        del buffer[:offset]

    def stringReceived(self, string: bytes | bytearray) -> None:
        assert self.info is not None
        if not self._peer_certificate_read and self.security.principal_mapper is not None:
            self._peer_certificate_read = True
            if not self._principal_from_certificate(self.security.principal_mapper):
                return
        if self.authenticator is not None and not self.authenticator.complete:
            self.authenticator.frame_received(string)
            return
        self.channel.track(maybeDeferred(self.dispatcher.dispatch, self.info, string))

    def _principal_from_certificate(self, mapper: SslPrincipalMapper) -> bool:
        """An SSL listener's principal: the client certificate's subject DN through
        ssl.principal.mapping.rules (ANONYMOUS without a certificate). False (and the
        connection closing) if no rule applies."""
        assert self.info is not None
        transport: Any = self.transport
        certificate = transport.getPeerCertificate()
        if certificate is None:
            return True
        try:
            name = mapper.name(subject_dn(certificate))
        except ValueError as exc:
            log.info("closing connection %s: %s", self.connection_id, exc)
            self.channel.shutdown()
            return False
        self.info = replace(self.info, principal=KafkaPrincipal.user(name))
        return True

    # -- AuthenticatorChannel ----------------------------------------------------------------

    def forward(self, frame: bytes | bytearray) -> None:
        assert self.info is not None
        self.channel.track(maybeDeferred(self.dispatcher.dispatch, self.info, frame))

    def respond(self, response: bytes) -> None:
        self.channel.track(succeed(response))

    def close(self, reason: str) -> None:
        self.channel.close_after_flush()

    def authenticated(self, principal: KafkaPrincipal) -> None:
        assert self.info is not None
        self.info = replace(self.info, principal=principal)
        log.debug("connection %s authenticated as %s", self.connection_id, principal)

    def lengthLimitExceeded(self, length: int) -> None:
        log.warning("closing connection %s: request of %d bytes exceeds "
                    "socket.request.max.bytes (%d)", self.connection_id, length, self.MAX_LENGTH)
        self.channel.shutdown()

    def _abort(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.loseConnection()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.channel.closed = True


class KafkaServerFactory(protocol.ServerFactory):
    """Builds a KafkaServerProtocol per accepted connection and tracks the live ones."""

    def __init__(self, dispatcher: RequestDispatcher,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 listener_name: str = "PLAINTEXT",
                 security: ListenerSecurity = PLAINTEXT_SECURITY) -> None:
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.listener_name = listener_name
        self.security = security
        self.connections: set[KafkaServerProtocol] = set()
        self._next_id = 0

    def buildProtocol(self, addr: Any) -> KafkaServerProtocol:
        self._next_id += 1
        conn = _TrackedProtocol(self.dispatcher, self.max_request_bytes,
                                f"{self.listener_name}-{self._next_id}", self.listener_name,
                                self.security)
        conn.factory = self
        return conn


class _TrackedProtocol(KafkaServerProtocol):
    factory: KafkaServerFactory

    def connectionMade(self) -> None:
        super().connectionMade()
        self.factory.connections.add(self)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        super().connectionLost(reason)
        self.factory.connections.discard(self)
