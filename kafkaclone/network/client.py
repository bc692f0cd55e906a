"""A Kafka client connection on Twisted: what the controller and the replica fetcher use to
talk to other brokers (Kafka's NetworkClient, for one destination).

``KafkaClientConnection(reactor, host, port)`` connects lazily; ``send(api_key, version,
body)`` assigns a correlation id, writes the request frame and returns a Deferred of the
decoded response body. Responses arrive in request order on a Kafka connection, so they are
matched to the oldest request in flight; a correlation id that does not match is a broken
connection. A request not answered within ``request_timeout`` fails with
RequestTimedOutError and, as in Kafka, the connection is closed (whatever is in flight on
it fails with NetworkExceptionError). After a failed connection attempt the next one waits
``reconnect_backoff`` seconds, doubling up to ``reconnect_backoff_max``
(``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``).

With a :class:`ClientSecurity` (the broker's inter-broker listener settings) the
connection is TLS (SSL, SASL_SSL) and/or authenticates with SASL (SASL_PLAINTEXT, SASL_SSL)
before it counts as connected: SaslHandshake v1, then the mechanism's tokens in
SaslAuthenticate v1 (PLAIN, SCRAM-SHA-256/512). A refused authentication fails the
connection attempt like a refused connection (the backoff applies).

Everything runs on the reactor thread.
"""

from __future__ import annotations

import logging
import random
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

from twisted.internet import protocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import SSL4ClientEndpoint, TCP4ClientEndpoint, connectProtocol
from twisted.python.failure import Failure

from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.common.errors import (
    NONE,
    NetworkExceptionError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    error_for_code,
)
from kafkaclone.common.scram import SCRAM_MECHANISMS, ScramClientExchange, ScramError
from kafkaclone.network.direct_write import direct_socket, write_sequence
from kafkaclone.network.framing import LARGE_FRAME_START, large_frame_due
from kafkaclone.network.tls import SslConfig, client_tls_options
from kafkaclone.protocol.api import decode_response, encode_request
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

logger = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = 30.0
"""request.timeout.ms (controller.socket.timeout.ms for the controller), in seconds."""
DEFAULT_RECONNECT_BACKOFF = 0.05
"""reconnect.backoff.ms, in seconds."""
DEFAULT_RECONNECT_BACKOFF_MAX = 1.0
"""reconnect.backoff.max.ms, in seconds."""
CONNECT_TIMEOUT_JITTER = 0.2
"""The random factor on a connection setup timeout (Kafka's NetworkClient: +-20 %)."""
MAX_RESPONSE_BYTES = 2**31 - 1


@dataclass(frozen=True)
class SaslClientCredentials:
    """The mechanism and the user a broker authenticates to other brokers as (from the
    inter-broker listener's ``<mechanism>.sasl.jaas.config``)."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:  # never the password
        return f"SaslClientCredentials({self.mechanism}, {self.username})"


@dataclass(frozen=True)
class ClientSecurity:
    """How to connect to a listener: its protocol, TLS settings and SASL credentials."""

    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    tls: SslConfig | None = None
    sasl: SaslClientCredentials | None = None


PLAINTEXT_CLIENT = ClientSecurity()


@dataclass
class _InFlight:
    api_key: int
    api_version: int
    correlation_id: int
    result: Deferred[Any]
    timeout: Any


class _KafkaClientProtocol(protocol.Protocol):
    """Kafka framing for responses (4-byte length, then the frame).

    A large response (a follower's or a consumer's fetch) is read into a buffer of its own
    size once enough of it is in, as the socket server does with large requests: each byte
    is copied once out of the socket's reads, where growing the receive buffer, slicing
    the frame out of it and copying the slice into bytes took three copies (and, for
    frames of a megabyte, fresh pages for each)."""

    def __init__(self, owner: KafkaClientConnection) -> None:
        self._owner = owner
        self._buffer = bytearray()
        self._socket: socket.socket | None = None
        self._large: bytearray | None = None
        self._large_filled = 0

    def connectionMade(self) -> None:
        self._socket = direct_socket(self.transport)

    def dataReceived(self, data: bytes) -> None:
        large = self._large
        if large is None:
            self._buffer += data
        else:
            # The buffer is empty while a large frame fills; what follows it goes there.
            filled = self._large_filled
            take = min(len(large) - filled, len(data))
            with memoryview(data) as view:
                large[filled:filled + take] = view[:take]
                self._buffer += view[take:]
            self._large_filled = filled + take
            if self._large_filled < len(large):
                return
            self._large = None
            self._owner.frame_received(self, large)
            if self.transport is None:
                return
        buffer = self._buffer
        offset = 0
        while len(buffer) - offset >= 4:
            length = int.from_bytes(buffer[offset:offset + 4], "big", signed=True)
            if length < 0 or length > MAX_RESPONSE_BYTES:
                self._owner.close_connection(f"bad response length {length}")
                return
            end = offset + 4 + length
            if len(buffer) < end:
                received = len(buffer) - offset - 4
                if large_frame_due(length, received):
                    large = bytearray(length)
                    with memoryview(buffer) as view:
                        large[:received] = view[offset + 4:]
                    self._large, self._large_filled = large, received
                    offset = len(buffer)
                break
            if length < LARGE_FRAME_START:
                frame: bytes = bytes(buffer[offset + 4:end])
            else:  # one copy, not two (it all came in one read)
                with memoryview(buffer) as view:
                    frame = bytes(view[offset + 4:end])
            offset = end
            self._owner.frame_received(self, frame)
            if self.transport is None:
                return
        del buffer[:offset]

    def send_frame(self, frame: bytes) -> None:
        write_sequence(self.transport, self._socket, (len(frame).to_bytes(4, "big"), frame))

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self._owner.connection_lost(self, reason)


class KafkaClientConnection:
    """One connection to one broker; see the module docstring."""

    def __init__(
        self,
        reactor: Any,
        host: str,
        port: int,
        *,
        client_id: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float | None = None,
        connect_timeout_max: float | None = None,
        reconnect_backoff: float = DEFAULT_RECONNECT_BACKOFF,
        reconnect_backoff_max: float = DEFAULT_RECONNECT_BACKOFF_MAX,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self._reactor = reactor
        self.security = security
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = request_timeout if connect_timeout is None else connect_timeout
        self.connect_timeout_max = connect_timeout_max
        self._reconnect_backoff = reconnect_backoff
        self._reconnect_backoff_max = reconnect_backoff_max
        self._protocol: _KafkaClientProtocol | None = None
        self._connecting: Deferred[_KafkaClientProtocol] | None = None
        self._connect_waiters: list[Deferred[None]] = []
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation_id = 0
        self._failures = 0
        self._next_attempt_at = 0.0
        self._closed = False
        self._authenticating: _KafkaClientProtocol | None = None

    def __repr__(self) -> str:
        return f"KafkaClientConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._protocol is not None

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    @property
    def current_backoff(self) -> float:
        """How long the next connection attempt after a failure waits."""
        if self._failures == 0:
            return 0.0
        return float(min(self._reconnect_backoff * 2 ** (self._failures - 1),
                         self._reconnect_backoff_max))

    @property
    def current_connect_timeout(self) -> float:
        """How long the next connection attempt may take to be set up. With
        ``connect_timeout_max`` it is Kafka's connection setup timeout
        (``socket.connection.setup.timeout.ms`` / ``.max.ms``): ``connect_timeout`` doubled
        per failed attempt since the last success, at most ``connect_timeout_max``, times a
        random factor in [0.8, 1.2]; without it, ``connect_timeout``."""
        if self.connect_timeout_max is None:
            return self.connect_timeout
        term: float = min(self.connect_timeout * 2.0 ** self._failures,
                          max(self.connect_timeout_max, self.connect_timeout))
        return term * random.uniform(1 - CONNECT_TIMEOUT_JITTER, 1 + CONNECT_TIMEOUT_JITTER)

    # -- connecting ------------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect if not connected (waiting out the reconnect backoff after a failure).
        NetworkExceptionError if the attempt fails or the connection is closed."""
        if self._closed:
            raise NetworkExceptionError(f"{self!r} is closed")
        if self._protocol is not None:
            return
        waiter: Deferred[None] = Deferred()
        self._connect_waiters.append(waiter)
        if self._connecting is None:
            self._start_connecting()
        await waiter

    def _start_connecting(self) -> None:
        delay = max(0.0, self._next_attempt_at - self._reactor.seconds())
        pending: list[Any] = []

        def cancel(_: Deferred[_KafkaClientProtocol]) -> None:
            for step in pending:
                if isinstance(step, Deferred):
                    step.cancel()
                elif step.active():
                    step.cancel()

        attempt: Deferred[_KafkaClientProtocol] = Deferred(cancel)

        def succeeded(proto: _KafkaClientProtocol) -> None:
            if attempt.called:  # cancelled meanwhile
                transport: Any = proto.transport
                if transport is not None:
                    transport.loseConnection()
                return
            attempt.callback(proto)

        def failed(failure: Failure) -> None:
            if not attempt.called:
                attempt.errback(failure)

        def go() -> None:
            timeout = max(1.0, self.current_connect_timeout)
            tls = self.security.tls
            endpoint: Any
            if tls is None:
                endpoint = TCP4ClientEndpoint(self._reactor, self.host, self.port,
                                              timeout=timeout)
            else:
                endpoint = SSL4ClientEndpoint(  # type: ignore[no-untyped-call]
                    self._reactor, self.host, self.port, client_tls_options(tls, self.host),
                    timeout=timeout)
            d = connectProtocol(endpoint, _KafkaClientProtocol(self))  # type: ignore[no-untyped-call]
            pending.append(d)
            if self.security.sasl is not None:
                d.addCallback(self._authenticated_protocol)
            d.addCallbacks(succeeded, failed)

        pending.append(self._reactor.callLater(delay, go))
        self._connecting = attempt
        attempt.addCallbacks(self._connected, self._connect_failed)

    def _authenticated_protocol(
            self, proto: _KafkaClientProtocol) -> Deferred[_KafkaClientProtocol]:
        async def run() -> _KafkaClientProtocol:
            try:
                await self._authenticate(proto)
            except Exception:
                transport: Any = proto.transport
                if transport is not None:
                    transport.abortConnection()
                raise
            return proto
        return Deferred.fromCoroutine(run())

    async def _authenticate(self, proto: _KafkaClientProtocol) -> None:
        """SaslHandshake v1, then SaslAuthenticate v1 rounds (Kafka's
        SaslClientAuthenticator)."""
        credentials = self.security.sasl
        assert credentials is not None
        self._authenticating = proto
        try:
            handshake: SaslHandshakeResponse = await self._send_on(
                proto, ApiKey.SASL_HANDSHAKE, 1,
                SaslHandshakeRequest(mechanism=credentials.mechanism))
            if handshake.error_code != NONE:
                raise error_for_code(handshake.error_code)(
                    f"SASL handshake for {credentials.mechanism} failed; the broker enables "
                    f"{', '.join(handshake.mechanisms)}")
            if credentials.mechanism in SCRAM_MECHANISMS:
                exchange = ScramClientExchange(credentials.mechanism, credentials.username,
                                               credentials.password)
                server_first = await self._sasl_token(proto, exchange.first())
                server_final = await self._sasl_token(proto, exchange.final(server_first))
                try:
                    exchange.verify(server_final)
                except ScramError as exc:
                    raise SaslAuthenticationFailedError(str(exc)) from None
            else:
                token = f"\x00{credentials.username}\x00{credentials.password}".encode()
                await self._sasl_token(proto, token)
        finally:
            self._authenticating = None

    async def _sasl_token(self, proto: _KafkaClientProtocol, token: bytes) -> bytes:
        response: SaslAuthenticateResponse = await self._send_on(
            proto, ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(
                response.error_message or "SASL authentication failed")
        return bytes(response.auth_bytes)

    def _connected(self, proto: _KafkaClientProtocol) -> None:
        self._connecting = None
        if self._closed:
            transport: Any = proto.transport
            transport.loseConnection()
            self._wake_connect_waiters(NetworkExceptionError(f"{self!r} is closed"))
            return
        self._protocol = proto
        self._failures = 0
        socket_transport: Any = proto.transport
        if hasattr(socket_transport, "setTcpNoDelay"):
            socket_transport.setTcpNoDelay(True)  # as Kafka's NetworkClient: no Nagle delay
        logger.debug("connected to %s:%s", self.host, self.port)
        self._wake_connect_waiters(None)

    def _connect_failed(self, failure: Failure) -> None:
        self._connecting = None
        self._failures += 1
        self._next_attempt_at = self._reactor.seconds() + self.current_backoff
        logger.info("connection to %s:%s failed: %s", self.host, self.port,
                    failure.getErrorMessage())
        self._wake_connect_waiters(NetworkExceptionError(
            f"connection to {self.host}:{self.port} failed: {failure.getErrorMessage()}"))

    def _wake_connect_waiters(self, error: Exception | None) -> None:
        waiters, self._connect_waiters = self._connect_waiters, []
        for waiter in waiters:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(error)

    # -- requests ----------------------------------------------------------------------------

    async def send(self, api_key: int, api_version: int, body: Any) -> Any:
        """Send one request (connecting first if needed); the decoded response body."""
        await self.connect()
        proto = self._protocol
        if proto is None:
            raise NetworkExceptionError(f"{self!r} disconnected")
        return await self._send_on(proto, api_key, api_version, body)

    async def _send_on(self, proto: _KafkaClientProtocol, api_key: int, api_version: int,
                       body: Any) -> Any:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
        result: Deferred[Any] = Deferred()
        entry = _InFlight(api_key, api_version, correlation_id, result, None)
        entry.timeout = self._reactor.callLater(self.request_timeout, self._timed_out, entry)
        self._in_flight.append(entry)
        proto.send_frame(frame)
        return await result

    def _timed_out(self, entry: _InFlight) -> None:
        entry.timeout = None
        if entry not in self._in_flight:
            return
        self._in_flight.remove(entry)
        logger.warning("request %s (correlation id %s) to %s:%s timed out after %ss; "
                       "disconnecting", entry.api_key, entry.correlation_id, self.host,
                       self.port, self.request_timeout)
        entry.result.errback(RequestTimedOutError(
            f"no response from {self.host}:{self.port} within {self.request_timeout}s"))
        self.close_connection("request timed out")

    def frame_received(self, proto: _KafkaClientProtocol, frame: bytes | bytearray) -> None:
        if proto is not self._protocol and proto is not self._authenticating:
            return
        if not self._in_flight:
            self.close_connection("a response arrived with no request in flight")
            return
        entry = self._in_flight[0]
        try:
            correlation_id, body = decode_response(entry.api_key, entry.api_version, frame)
        except Exception as exc:  # a malformed response breaks the connection
            self.close_connection(f"undecodable response: {exc}")
            return
        if correlation_id != entry.correlation_id:
            self.close_connection(f"correlation id {correlation_id} does not match the "
                                  f"expected {entry.correlation_id}")
            return
        self._in_flight.popleft()
        if entry.timeout is not None and entry.timeout.active():
            entry.timeout.cancel()
        entry.result.callback(body)

    # -- disconnecting ------------------------------------------------------------------------

    def close_connection(self, reason: str) -> None:
        """Drop the current connection (requests in flight fail); the next send reconnects."""
        proto = self._protocol
        if proto is None:
            return
        logger.info("closing connection to %s:%s: %s", self.host, self.port, reason)
        self._protocol = None
        self._fail_in_flight(NetworkExceptionError(
            f"connection to {self.host}:{self.port} closed: {reason}"))
        transport: Any = proto.transport
        if transport is not None:
            transport.abortConnection()

    def connection_lost(self, proto: _KafkaClientProtocol, reason: Failure) -> None:
        if proto is self._authenticating:
            self._authenticating = None
            self._fail_in_flight(NetworkExceptionError(
                f"connection to {self.host}:{self.port} lost during authentication: "
                f"{reason.getErrorMessage()}"))
            return
        if proto is not self._protocol:
            return
        self._protocol = None
        self._fail_in_flight(NetworkExceptionError(
            f"connection to {self.host}:{self.port} lost: {reason.getErrorMessage()}"))

    def _fail_in_flight(self, error: Exception) -> None:
        entries, self._in_flight = self._in_flight, deque()
        for entry in entries:
            if entry.timeout is not None and entry.timeout.active():
                entry.timeout.cancel()
            entry.result.errback(error)

    def close(self) -> None:
        """Close for good: requests in flight and connection waits fail."""
        if self._closed:
            return
        self._closed = True
        self.close_connection("client closed")
        if self._connecting is not None:
            self._connecting.cancel()
        self._wake_connect_waiters(NetworkExceptionError(f"{self!r} is closed"))
