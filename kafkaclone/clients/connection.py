"""One connection to one broker, for the project's synchronous clients (no reactor).

A blocking-style API over a non-blocking socket and a selector, so every wait is bounded:
``connect`` opens the socket and negotiates versions with ApiVersions (KIP-511: a broker
that does not know our ApiVersions version answers v0 with its range, and we ask again at
the highest version both know); ``request`` sends one request at the highest version both
sides speak (or the one given), with the next correlation id, and waits at most
``request_timeout_ms`` for its response. Failures raise Kafka's error classes
(kafkaclone.common.errors): NetworkExceptionError when the broker cannot be reached or
the connection breaks, RequestTimedOutError when no answer comes in time (the connection
is then closed, as Kafka's clients do), UnsupportedVersionError when no common version
exists. Responses carry their own error codes; callers turn them into exceptions with
``raise_for_code``.

With a :class:`~kafkaclone.clients.security.ClientSecurity` the socket is wrapped in TLS
before anything is sent, and after ApiVersions the client authenticates with SASL
(SaslHandshake v1, then SaslAuthenticate rounds: PLAIN, SCRAM-SHA-256/512); a refused
authentication raises SaslAuthenticationFailedError with the broker's message.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import struct
import time
from collections.abc import Sequence
from typing import Any, Final

from kafkaclone.clients.security import PLAINTEXT, ClientSecurity
from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    NetworkExceptionError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_code,
)
from kafkaclone.common.scram import SCRAM_MECHANISMS, ScramClientExchange, ScramError
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

DEFAULT_REQUEST_TIMEOUT_MS: Final = 30000
MAX_RESPONSE_BYTES: Final = 512 * 1024 * 1024
CLIENT_SOFTWARE_NAME: Final = "kafkaclone"
CLIENT_SOFTWARE_VERSION: Final = "0.1"
SEND_PARTS: Final = 512
"""Buffers given to one ``sendmsg`` call (the kernel takes at most IOV_MAX, 1024)."""
_WOULD_BLOCK: Final = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
"""A non-blocking socket (TLS or not) that cannot go on now."""


def _wanted_event(exc: OSError, default: int) -> int:
    """What to wait for after a would-block: TLS may need to read in order to write."""
    if isinstance(exc, ssl.SSLWantReadError):
        return selectors.EVENT_READ
    if isinstance(exc, ssl.SSLWantWriteError):
        return selectors.EVENT_WRITE
    return default


class BrokerConnection:
    """A connection to ``host:port`` (broker ``node_id`` if known)."""

    def __init__(self, host: str, port: int, *, node_id: int | None = None,
                 client_id: str = "kafkaclone",
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 connect_timeout_ms: int | None = None,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.host = host
        self.security = security
        self.connect_timeout_ms = connect_timeout_ms
        """The bound on opening the socket and the ApiVersions exchange (Kafka's
        socket.connection.setup.timeout.ms); request_timeout_ms if None."""
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.api_versions: dict[int, tuple[int, int]] = {}
        """The broker's version range for each API it serves (from ApiVersions)."""
        self._sock: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._next_correlation_id = 1
        self._size_buf = bytearray()
        self._frame: bytearray | None = None
        self._frame_filled = 0

    def __repr__(self) -> str:
        node = "" if self.node_id is None else f"node {self.node_id} "
        return f"BrokerConnection({node}{self.host}:{self.port})"

    def __enter__(self) -> BrokerConnection:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    # --- lifecycle --------------------------------------------------------------------------

    def connect(self, timeout_s: float | None = None) -> None:
        """Open the connection and negotiate API versions (no-op when connected), within
        ``timeout_s`` if given (and the connect timeout)."""
        if self._sock is not None:
            return
        limit_ms = self.request_timeout_ms if self.connect_timeout_ms is None else \
            min(self.request_timeout_ms, self.connect_timeout_ms)
        timeout = limit_ms / 1000.0 if timeout_s is None else \
            max(0.001, min(limit_ms / 1000.0, timeout_s))
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except OSError as exc:
            raise NetworkExceptionError(
                f"Connection to {self._describe()} failed: {exc.strerror or exc}") from None
        if self.security.ssl_context is not None:
            try:  # the handshake runs blocking, within the connect timeout
                sock = self.security.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except OSError as exc:  # ssl.SSLError included: the broker is not usable
                sock.close()
                raise NetworkExceptionError(
                    f"TLS handshake with {self._describe()} failed: {exc.strerror or exc}"
                ) from None
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._selector = selectors.DefaultSelector()
        try:
            deadline = time.monotonic() + timeout
            self._negotiate(deadline)
            if self.security.sasl is not None:
                self._authenticate(deadline)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._size_buf = bytearray()
        self._frame = None
        self._frame_filled = 0

    def _describe(self) -> str:
        node = "" if self.node_id is None else f"node {self.node_id} "
        return f"{node}({self.host}:{self.port})"

    # --- versions -----------------------------------------------------------------------------

    def _negotiate(self, deadline: float) -> None:
        ours = api.APIS[ApiKey.API_VERSIONS]
        version = ours.max_version
        body = ours.request(client_software_name=CLIENT_SOFTWARE_NAME,
                            client_software_version=CLIENT_SOFTWARE_VERSION)
        response = self._round_trip(ApiKey.API_VERSIONS, version, body, deadline=deadline)
        if response.error_code == UnsupportedVersionError.code:
            theirs = {k.api_key: k.max_version for k in response.api_keys}
            version = min(version, theirs.get(ApiKey.API_VERSIONS, 0))
            response = self._round_trip(ApiKey.API_VERSIONS, version, body, deadline=deadline)
        raise_for_code(response.error_code, f"ApiVersions from {self._describe()}")
        self.api_versions = {int(k.api_key): (int(k.min_version), int(k.max_version))
                             for k in response.api_keys}

    def _authenticate(self, deadline: float) -> None:
        """SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate (Kafka's
        SaslClientAuthenticator)."""
        credentials = self.security.sasl
        assert credentials is not None
        handshake = self._round_trip(
            ApiKey.SASL_HANDSHAKE, 1,
            api.APIS[ApiKey.SASL_HANDSHAKE].request(mechanism=credentials.mechanism),
            deadline=deadline)
        if handshake.error_code != NONE:
            raise error_for_code(handshake.error_code)(
                f"{credentials.mechanism} is not enabled on {self._describe()} (it enables "
                f"{', '.join(handshake.mechanisms)})")
        if credentials.mechanism in SCRAM_MECHANISMS:
            exchange = ScramClientExchange(credentials.mechanism, credentials.username,
                                           credentials.password)
            server_first = self._sasl_token(exchange.first(), deadline)
            server_final = self._sasl_token(exchange.final(server_first), deadline)
            try:
                exchange.verify(server_final)
            except ScramError as exc:
                raise SaslAuthenticationFailedError(str(exc)) from None
        else:
            self._sasl_token(f"\x00{credentials.username}\x00{credentials.password}".encode(),
                             deadline)

    def _sasl_token(self, token: bytes, deadline: float) -> bytes:
        response = self._round_trip(
            ApiKey.SASL_AUTHENTICATE, 1,
            api.APIS[ApiKey.SASL_AUTHENTICATE].request(auth_bytes=token), deadline=deadline)
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(
                response.error_message or f"SASL authentication with {self._describe()} failed")
        return bytes(response.auth_bytes)

    def version_for(self, key: ApiKey, max_version: int | None = None) -> int:
        """The highest version of ``key`` both sides speak (at most ``max_version``)."""
        declared = api.APIS[key]
        broker_range = self.api_versions.get(int(key))
        if broker_range is None:
            raise UnsupportedVersionError(
                f"The broker {self._describe()} does not support {declared.name}")
        high = min(declared.max_version, broker_range[1])
        if max_version is not None:
            high = min(high, max_version)
        low = max(declared.min_version, broker_range[0])
        if high < low:
            raise UnsupportedVersionError(
                f"The broker {self._describe()} supports {declared.name} "
                f"v{broker_range[0]}-{broker_range[1]}, the client "
                f"v{declared.min_version}-{declared.max_version}")
        return high

    # --- requests -----------------------------------------------------------------------------

    def request(self, key: ApiKey, body: Any, version: int | None = None, *,
                max_version: int | None = None, broker_wait_ms: int = 0) -> tuple[int, Any]:
        """Send ``body`` and wait for the answer: (the version used, the response body).
        ``broker_wait_ms``: how long the broker may hold the request by design (an admin
        request's own timeout), waited for on top of ``request_timeout_ms``."""
        self.connect()
        if version is None:
            version = self.version_for(key, max_version)
        return version, self._round_trip(key, version, body, broker_wait_ms)

    def _round_trip(self, key: ApiKey, version: int, body: Any, broker_wait_ms: int = 0, *,
                    deadline: float | None = None) -> Any:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        payload = api.encode_request(key, version, correlation_id, self.client_id, body)
        if deadline is None:
            deadline = time.monotonic() + \
                (self.request_timeout_ms + max(0, broker_wait_ms)) / 1000.0
        try:
            self._write(struct.pack(">i", len(payload)) + payload, deadline)
            (length,) = struct.unpack(">i", self._read(4, deadline))
            if not 0 <= length <= MAX_RESPONSE_BYTES:
                raise NetworkExceptionError(f"invalid response size {length}")
            frame = self._read(length, deadline)
            received_id, response = api.decode_response(key, version, frame)
        except KafkaError:
            self.close()
            raise
        if received_id != correlation_id:
            self.close()
            raise NetworkExceptionError(
                f"Correlation id {received_id} from {self._describe()} does not match the "
                f"request's {correlation_id}")
        return response

    def _wait(self, events: int, deadline: float, what: str) -> None:
        assert self._sock is not None and self._selector is not None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RequestTimedOutError(
                f"No response from {self._describe()} within {self.request_timeout_ms} ms "
                f"({what})")
        self._selector.register(self._sock, events)
        try:
            ready = self._selector.select(remaining)
        finally:
            self._selector.unregister(self._sock)
        if not ready:
            raise RequestTimedOutError(
                f"No response from {self._describe()} within {self.request_timeout_ms} ms "
                f"({what})")

    def _write(self, data: bytes | memoryview, deadline: float) -> None:
        self._write_parts([memoryview(data)], deadline)

    def _write_parts(self, parts: list[memoryview], deadline: float) -> None:
        """Write the buffers in order as one stream (``sendmsg``, at most SEND_PARTS at a
        time, so nothing is joined or copied first)."""
        first = 0
        while first < len(parts) and not parts[first]:
            first += 1
        while first < len(parts):
            sent = self._send_once(parts, first, deadline)
            while sent and sent >= len(parts[first]):
                sent -= len(parts[first])
                first += 1
            if sent:
                parts[first] = parts[first][sent:]
            while first < len(parts) and not parts[first]:
                first += 1

    def _send_once(self, parts: list[memoryview], first: int, deadline: float) -> int:
        """One send from ``parts[first]`` on: the bytes the socket took, 0 after waiting
        for it to become writable. TLS sockets have no ``sendmsg``: one part at a time."""
        sock = self._sock
        if sock is None:
            raise NetworkExceptionError(f"Connection to {self._describe()} is closed")
        try:
            if isinstance(sock, ssl.SSLSocket):
                return sock.send(parts[first])
            return sock.sendmsg(parts[first:first + SEND_PARTS])
        except _WOULD_BLOCK as exc:
            self._wait(_wanted_event(exc, selectors.EVENT_WRITE), deadline, "sending")
            return 0
        except OSError as exc:
            raise NetworkExceptionError(
                f"Connection to {self._describe()} broke: {exc.strerror or exc}") from None

    def _read(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        needed = n
        while needed:
            if self._sock is None:
                raise NetworkExceptionError(f"Connection to {self._describe()} is closed")
            try:
                chunk = self._sock.recv(min(needed, 1 << 20))
            except _WOULD_BLOCK as exc:
                self._wait(_wanted_event(exc, selectors.EVENT_READ), deadline, "receiving")
                continue
            except OSError as exc:
                raise NetworkExceptionError(
                    f"Connection to {self._describe()} broke: {exc.strerror or exc}") from None
            if not chunk:
                raise NetworkExceptionError(
                    f"Connection to {self._describe()} was closed by the broker")
            chunks.append(chunk)
            needed -= len(chunk)
        return b"".join(chunks)


    # --- pipelined requests (several in flight; kafkaclone.clients.network) -------------------

    def fileno(self) -> int:
        if self._sock is None:
            raise NetworkExceptionError(f"Connection to {self._describe()} is closed")
        return self._sock.fileno()

    def send_request(self, key: ApiKey, version: int, body: Any, deadline: float) -> int:
        """Write one request (waiting at most until ``deadline`` for socket space) and
        return its correlation id; the answer comes from ``receive_frames``."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        payload = api.encode_request_parts(key, version, correlation_id, self.client_id,
                                           body)
        size = sum(len(part) for part in payload)
        parts = [memoryview(struct.pack(">i", size))]
        parts += (memoryview(part).cast("B") for part in payload)
        try:
            self._write_parts(parts, deadline)
        except KafkaError:
            self.close()
            raise
        return correlation_id

    def receive_frames(self) -> list[bytearray]:
        """The complete response frames readable now, without waiting (each starts with
        its correlation id). Raises NetworkExceptionError when the connection broke."""
        frames: list[bytearray] = []
        sock = self._sock
        if sock is None:
            raise NetworkExceptionError(f"Connection to {self._describe()} is closed")
        try:
            while True:
                if self._frame is None:
                    chunk = sock.recv(4 - len(self._size_buf))
                    if not chunk:
                        raise NetworkExceptionError(
                            f"Connection to {self._describe()} was closed by the broker")
                    self._size_buf += chunk
                    if len(self._size_buf) < 4:
                        continue
                    (length,) = struct.unpack(">i", self._size_buf)
                    self._size_buf = bytearray()
                    if not 0 <= length <= MAX_RESPONSE_BYTES:
                        raise NetworkExceptionError(f"invalid response size {length}")
                    self._frame = bytearray(length)
                    self._frame_filled = 0
                view = memoryview(self._frame)[self._frame_filled:]
                if view:
                    received = sock.recv_into(view, min(len(view), 8 << 20))
                    if not received:
                        raise NetworkExceptionError(
                            f"Connection to {self._describe()} was closed by the broker")
                    self._frame_filled += received
                if self._frame_filled == len(self._frame):
                    frames.append(self._frame)
                    self._frame = None
        except _WOULD_BLOCK:
            return frames
        except OSError as exc:
            self.close()
            raise NetworkExceptionError(
                f"Connection to {self._describe()} broke: {exc.strerror or exc}") from None
        except KafkaError:
            self.close()
            raise


def check(error_code: int, message: str | None = None) -> None:
    """Raise the Kafka exception for a response's error code (nothing for NONE)."""
    if error_code != NONE:
        raise_for_code(error_code, message)


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` -> [("h1", 9092), ("h2", 9093)]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    parsed = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"Invalid url in bootstrap.servers: {item}")
        parsed.append((host.strip("[]") or "localhost", int(port)))
    if not parsed:
        raise ValueError("No resolvable bootstrap urls given in bootstrap.servers")
    return parsed
