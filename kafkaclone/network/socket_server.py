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

Back-pressure, as Kafka's Processor mutes a channel: a connection is not read (its
transport's ``pauseProducing``) while

- it has :data:`MAX_IN_FLIGHT_REQUESTS` requests unanswered (Kafka mutes at one; here
  pipelined requests are processed together, their answers still leaving in order:
  librdkafka pipelines one-record acks=all Produce requests, and processing them one at a
  time puts a replication round trip per record on the connection),
- its transport holds more unsent response bytes than its buffer size (the connection is
  the transport's streaming producer, so Twisted pauses it when the peer reads slowly), or
- the broker as a whole has ``queued.max.requests`` requests being processed
  (:class:`RequestQueue`), or
- a client quota throttles it (:meth:`KafkaServerProtocol.throttle`, Kafka's
  ThrottledChannel: the response goes out at once with its ``throttle_time_ms``, and the
  connection is not read until that time has passed, KIP-219).

Frames already read stay in the connection's buffer until it is unmuted, so a client that
pipelines requests and never reads holds at most a few responses in the broker's memory.

The answers to the frames processed in one go (what one read brought, or what waited while
the connection was muted) are written together when the batch is done, up to
:data:`~kafkaclone.network.direct_write.MAX_PARTS` parts per write: a pipelining client's
many small answers cost one ``sendmsg``, not one each. An answer of
:data:`CORKED_FRAME_MAX_BYTES` or more, and one with file regions, is written at once
(after those held before it); an answer completing later (a long poll, acks=all) is
written when it completes. ResponseSendTimeMs of an answer held so is the time it took to
hold it.

:class:`ConnectionQuotas` enforces ``max.connections``, ``max.connections.per.ip`` (and
its overrides) and ``max.connection.creation.rate``: a refused connection is closed at once;
``connections.max.idle.ms`` closes connections that neither read nor wrote for that long.

Zero-copy fetch (Kafka's ``FileRecords.writeTo`` → ``transferTo``): a response may come as
parts, bytes and file regions (:class:`~kafkaclone.common.file_region.FileRegion`: the
Fetch response's records, ranges of segment files). On a plain TCP connection, for a
response with at least :data:`SENDFILE_MIN_BYTES` in regions (or behind one), a
:class:`_FileSender` writes them in order straight to the socket, the regions with
``os.sendfile``: at once when Twisted's own write buffer is empty and the socket takes
them all; otherwise once the buffer has drained (it is the transport's pull producer
meanwhile, so Twisted tells it when the buffer is empty and the socket writable), and the
connection is not read until they are sent. Over TLS (and with ``sendfile``
off) the regions are read and written as bytes. A region whose file no longer holds it (the
segment was truncated after the read) closes the connection rather than send a wrong frame;
a deleted segment still sends, from the descriptor the region keeps open.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from time import monotonic
from typing import Any, Final, Protocol, cast

from twisted.internet import protocol, tcp
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import ISSLTransport
from twisted.protocols.basic import Int32StringReceiver
from twisted.python.failure import Failure

from kafkaclone.common.clock import DelayedCall, Scheduler
from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.common.file_region import FileRegion
from kafkaclone.common.security import ANONYMOUS, KafkaPrincipal
from kafkaclone.network.authenticator import SaslServerAuthenticator, SaslServerConfig
from kafkaclone.network.direct_write import (
    MAX_PARTS,
    direct_socket,
    nothing_buffered,
    write_sequence,
)
from kafkaclone.network.framing import large_frame_due
from kafkaclone.network.request_metrics import (
    RequestMetrics,
    request_description,
)
from kafkaclone.network.tls import SslPrincipalMapper, subject_dn

log = logging.getLogger(__name__)
request_log = logging.getLogger("kafkaclone.network.request_logger")
"""Kafka's kafka.request.logger: one DEBUG line per completed request."""

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
DEFAULT_QUEUED_MAX_REQUESTS: Final = 500  # queued.max.requests
MAX_IN_FLIGHT_REQUESTS: Final = 100
"""Unanswered requests after which a connection is not read until one is answered. At 5
(the Java producer's max.in.flight), a librdkafka producer at 1,000 one-record acks=all
requests/s queued for seconds in the broker's socket buffer under load; the memory a slow
reader holds is bounded by the write buffer, not by this."""
SENDFILE_MIN_BYTES: Final = 128 * 1024
"""File regions adding up to less than this in a response are read and written as bytes:
below it one ``pread`` and a buffered write cost less than handing the socket to the file
sender and back (measured over loopback: some 40-60 µs more per response at 64 KiB and
below, 50-100 µs less at 256 KiB and above)."""
CORKED_FRAME_MAX_BYTES: Final = 64 * 1024
"""A response frame at least this large is written at once rather than held with the
others answered in the same batch of requests (:meth:`KafkaServerProtocol.sendString`)."""
INT_MAX: Final = 2**31 - 1
_FRAME_LENGTH: Final = struct.Struct(">I")
_LOGGED_HEADER_BYTES: Final = 256
"""What the DEBUG request log keeps of a request: its header, client id included."""


Response = bytes | list[bytes | FileRegion]
"""A response frame without its length prefix: bytes, or parts to be written in order
(:func:`kafkaclone.protocol.api.encode_response_parts`)."""


def response_bytes(response: Response) -> bytes:
    """A response frame as one bytes object, its file regions read (tests, in-memory
    transports)."""
    if not isinstance(response, list):
        return response
    return b"".join(part if isinstance(part, bytes) else part.read() for part in response)


class CloseConnection(Exception):
    """Raised by a dispatcher for a request after which the connection must be closed."""


@dataclass(frozen=True)
class ConnectionInfo:
    """Who sent a request: the address pair of the connection, a connection id, the
    listener it came in on and the principal it authenticated as (``User:ANONYMOUS`` on a
    PLAINTEXT listener and before a SASL exchange completes). ``throttle`` mutes the
    connection for a number of milliseconds (a client over its quota)."""

    connection_id: str
    client_host: str
    client_port: int
    _: KW_ONLY
    listener_name: str = "PLAINTEXT"
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    principal: KafkaPrincipal = ANONYMOUS
    throttle: Callable[[int], None] | None = field(default=None, compare=False, repr=False)


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
                 frame: bytes | bytearray) -> Deferred[Response | None]:
        """Handle one request frame; fire with the response frame or None (no response)."""


class RequestQueue:
    """The broker-wide bound on requests being processed (Kafka's ``queued.max.requests``,
    the RequestChannel's queue): at the bound, connections stop reading until a request
    completes."""

    def __init__(self, max_requests: int = DEFAULT_QUEUED_MAX_REQUESTS) -> None:
        self.max_requests = max_requests
        self.size = 0
        self._waiting: dict[KafkaServerProtocol, None] = {}

    @property
    def full(self) -> bool:
        return self.size >= self.max_requests

    def wait(self, connection: KafkaServerProtocol) -> None:
        """Unmute ``connection`` when the queue has room again."""
        self._waiting[connection] = None

    def release(self) -> None:
        self.size -= 1
        if self._waiting and not self.full:
            waiting, self._waiting = self._waiting, {}
            for connection in waiting:
                connection.update_muting()


class ConnectionQuotas:
    """Kafka's ConnectionQuotas: ``max.connections`` over all listeners,
    ``max.connections.per.ip`` with ``max.connections.per.ip.overrides`` (host or address:
    count) and ``max.connection.creation.rate`` (new connections per second). Reconfigured
    in place (:meth:`reconfigure`) when the dynamic broker configs change."""

    def __init__(self, *, max_connections: int = INT_MAX,
                 max_connections_per_ip: int = INT_MAX,
                 max_connections_per_ip_overrides: Mapping[str, int] | None = None,
                 max_connection_creation_rate: int = INT_MAX) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = dict(max_connections_per_ip_overrides or {})
        self.max_connection_creation_rate = max_connection_creation_rate
        self.counts: dict[str, int] = {}
        self.total = 0
        self._window_second = -1
        self._window_count = 0

    def reconfigure(self, *, max_connections: int, max_connections_per_ip: int,
                    max_connections_per_ip_overrides: Mapping[str, int],
                    max_connection_creation_rate: int) -> None:
        """New limits; connections already open stay (as Kafka's)."""
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = dict(max_connections_per_ip_overrides)
        self.max_connection_creation_rate = max_connection_creation_rate

    def max_for(self, host: str) -> int:
        return self.max_connections_per_ip_overrides.get(host, self.max_connections_per_ip)

    def accept(self, host: str, now: float) -> str | None:
        """Count a new connection from ``host``; the reason it is refused, or None."""
        second = int(now)
        if second != self._window_second:
            self._window_second = second
            self._window_count = 0
        if self._window_count >= self.max_connection_creation_rate:
            return (f"Throttling connection from {host}: max.connection.creation.rate "
                    f"({self.max_connection_creation_rate}/s) reached")
        count = self.counts.get(host, 0)
        limit = self.max_for(host)
        if count >= limit:
            return (f"Rejected connection from {host}, address already has the configured "
                    f"maximum of {limit} connections.")
        if self.total >= self.max_connections:
            return (f"Rejected connection from {host}: the broker has the configured "
                    f"maximum of {self.max_connections} connections (max.connections).")
        self._window_count += 1
        self.counts[host] = count + 1
        self.total += 1
        return None

    def release(self, host: str) -> None:
        count = self.counts.get(host, 0) - 1
        if count > 0:
            self.counts[host] = count
        else:
            self.counts.pop(host, None)
        self.total -= 1


class _Slot:
    """One request of a connection: its answer once done, and when it went through each
    stage (monotonic seconds; for the RequestChannel metrics)."""

    __slots__ = (
        "api_key",
        "completed",
        "dequeued",
        "done",
        "header",
        "local_done",
        "received",
        "response",
    )

    def __init__(self, api_key: int, received: float, dequeued: float,
                 header: bytes | None) -> None:
        self.done = False
        self.response: Response | None = None
        self.api_key = api_key
        self.received = received
        self.dequeued = dequeued
        self.local_done = dequeued
        self.completed = dequeued
        self.header = header


class RequestChannel:
    """Keeps a connection's responses in request order, whatever order they complete in,
    and times each request (:mod:`kafkaclone.network.request_metrics`)."""

    def __init__(self, send: Callable[[Response], object], close: Callable[[], object],
                 released: Callable[[], object] | None = None,
                 queue: RequestQueue | None = None,
                 metrics: RequestMetrics | None = None,
                 describe: Callable[[], tuple[str, str]] | None = None) -> None:
        self._send = send
        self._close = close
        self._released = released
        self._queue = queue
        self._metrics = metrics
        self._describe = describe
        self._slots: deque[_Slot] = deque()
        self.closed = False
        self._closing = False

    @property
    def in_flight(self) -> int:
        return len(self._slots)

    def track(self, result: Deferred[Response | None], api_key: int = -1,
              received: float = 0.0, dequeued: float = 0.0,
              header: bytes | None = None) -> None:
        """Answer ``result`` in turn. ``api_key`` (-1: an exchange that is not a request,
        untimed), ``received`` and ``dequeued`` time the request."""
        if (result.called and not self._slots and not self.closed and not self._closing
                and not isinstance(result.result, Failure)):
            # Answered at once (most requests) with nothing before it: sent now, without
            # a slot or callbacks; nothing about the muting changed.
            response = cast("Response | None", result.result)
            if api_key < 0 or self._metrics is None:
                if response is not None:
                    self._send(response)
                return
            sending = monotonic()
            if response is not None:
                self._send(response)
            sent = monotonic()
            self._metrics.record_key(api_key, (dequeued - received) * 1000,
                                     (sending - dequeued) * 1000, 0.0, 0.0,
                                     (sent - sending) * 1000)
            if header is not None:
                slot = _Slot(api_key, received, dequeued, header)
                slot.local_done = slot.completed = sending
                self._log_request(slot, sending, sent)
            return
        slot = _Slot(api_key, received, dequeued, header)
        if api_key >= 0:
            slot.local_done = monotonic()
        self._slots.append(slot)
        if self._queue is not None:
            self._queue.size += 1
        result.addCallbacks(self._completed, self._failed, callbackArgs=(slot,),
                            errbackArgs=(slot,))

    def _completed(self, response: Response | None, slot: _Slot) -> None:
        slot.done = True
        slot.response = response
        if slot.api_key >= 0:
            slot.completed = monotonic()
        self._flush()
        if self._queue is not None:
            self._queue.release()
        if self._released is not None:
            self._released()

    def _failed(self, failure: Failure, slot: _Slot) -> None:
        if self._queue is not None:
            self._queue.release()
        if not isinstance(failure.value, CloseConnection):
            log.error("request handler failed; closing the connection", exc_info=failure.value)
        else:
            log.info("closing connection: %s", failure.value)
        self._slots.clear()
        self.shutdown()

    def _flush(self) -> None:
        while self._slots and self._slots[0].done and not self.closed:
            slot = self._slots.popleft()
            if slot.api_key < 0 or self._metrics is None:
                if slot.response is not None:
                    self._send(slot.response)
                continue
            sending = monotonic()
            if slot.response is not None:
                self._send(slot.response)
            self._timed(slot, sending, monotonic())
        if self._closing and not self._slots:
            self.shutdown()

    def _timed(self, slot: _Slot, sending: float, sent: float) -> None:
        assert self._metrics is not None
        self._metrics.record_key(slot.api_key, (slot.dequeued - slot.received) * 1000,
                                 (slot.local_done - slot.dequeued) * 1000,
                                 (slot.completed - slot.local_done) * 1000,
                                 (sending - slot.completed) * 1000, (sent - sending) * 1000)
        if slot.header is not None:
            self._log_request(slot, sending, sent)

    def _log_request(self, slot: _Slot, sending: float, sent: float) -> None:
        """The DEBUG request log's line (Kafka's kafka.request.logger)."""
        assert slot.header is not None
        connection, details = self._describe() if self._describe is not None else ("?", "")
        request_log.debug(
            "Completed request:%s from connection %s;totalTime:%.3f,requestQueueTime:%.3f,"
            "localTime:%.3f,remoteTime:%.3f,throttleTime:0,responseQueueTime:%.3f,"
            "sendTime:%.3f,%s", request_description(slot.header), connection,
            (sent - slot.received) * 1000, (slot.dequeued - slot.received) * 1000,
            (slot.local_done - slot.dequeued) * 1000, (slot.completed - slot.local_done) * 1000,
            (sending - slot.completed) * 1000, (sent - sending) * 1000, details)

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
                 security: ListenerSecurity = PLAINTEXT_SECURITY,
                 request_queue: RequestQueue | None = None,
                 max_in_flight: int = MAX_IN_FLIGHT_REQUESTS,
                 request_metrics: RequestMetrics | None = None,
                 clock: Scheduler | None = None, *, sendfile: bool = True,
                 sendfile_min_bytes: int = SENDFILE_MIN_BYTES) -> None:
        self.dispatcher = dispatcher
        self._sendfile = sendfile
        """Whether file regions may go out with sendfile (on a plain TCP connection); off,
        they are read and written as bytes (the benchmark's copied path)."""
        self._sendfile_min_bytes = sendfile_min_bytes
        self._file_sender: _FileSender | None = None
        self._socket: socket.socket | None = None
        """The plain TCP socket responses are written to directly (direct_write)."""
        self._clock = clock
        self._throttle_timer: DelayedCall | None = None
        self._throttled_until = 0.0
        self.listener_name = listener_name
        self.security = security
        self.authenticator: SaslServerAuthenticator | None = None
        self._peer_certificate_read = False
        self.MAX_LENGTH = max_request_bytes
        self.connection_id = connection_id
        self._buffer = bytearray()
        self._large: bytearray | None = None
        """A large request being received straight into its own buffer (see
        :meth:`dataReceived`), ahead of anything in ``_buffer``."""
        self._large_filled = 0
        self._request_queue = request_queue
        self._max_in_flight = max_in_flight
        self.channel = RequestChannel(self.send_response, self._abort, self.update_muting,
                                      request_queue, request_metrics, self._describe)
        self._timed = request_metrics is not None
        self._data_received_at = 0.0
        self.info: ConnectionInfo | None = None
        self.muted = False
        """Whether the transport is paused (the connection is not read)."""
        self._output_full = False
        """Whether the transport paused this connection as its producer (slow reader)."""
        self._processing = False
        self._corked: list[bytes] | None = None
        """While frames are processed: the response frames answered meanwhile (length
        prefixes and bodies), written together once the batch is done."""

    def connectionMade(self) -> None:
        transport: Any = self.transport
        # As Kafka's Acceptor: no Nagle delay on answers (a follower's fetch answer or an
        # acks=all produce answer would otherwise wait for the peer's delayed ACK).
        if hasattr(transport, "setTcpNoDelay"):
            transport.setTcpNoDelay(True)
        self._sendfile = (self._sendfile and isinstance(transport, tcp.Connection)
                          and not ISSLTransport.providedBy(transport))
        self._socket = direct_socket(transport)
        # The connection produces responses into the transport: Twisted pauses it when the
        # transport's write buffer is full (the peer reads slowly) and resumes it once drained.
        transport.registerProducer(self, True)
        peer = transport.getPeer()
        self.info = ConnectionInfo(self.connection_id, getattr(peer, "host", ""),
                                   getattr(peer, "port", 0), listener_name=self.listener_name,
                                   security_protocol=self.security.security_protocol,
                                   throttle=self.throttle)
        if self.security.sasl is not None:
            self.authenticator = SaslServerAuthenticator(self.security.sasl, self,
                                                         self.connection_id)

    def dataReceived(self, data: bytes) -> None:
        # Int32StringReceiver re-concatenates its whole buffer on every chunk, which is
        # quadratic for the 1 MiB produce requests that arrive in many reads; this keeps the
        # same framing with one growing buffer, from which frames are taken only while the
        # connection is not muted.
        # A large request (a producer's batches) goes straight into a buffer of its size
        # once enough of it is in (framing.large_frame_due): one copy of each byte instead of
        # the append, the growth of the buffer and the slice that takes the frame out.
        if self.channel.closed:
            return
        if self._timed:
            self._data_received_at = monotonic()
        large = self._large
        if large is None:
            self._buffer += data
        else:
            filled = self._large_filled
            take = min(len(large) - filled, len(data))
            if take == len(data):
                large[filled:filled + take] = data
            else:
                with memoryview(data) as view:
                    large[filled:filled + take] = view[:take]
                    self._buffer += view[take:]
            self._large_filled = filled = filled + take
            if filled < len(large):
                return
        self._process_frames()

    def _process_frames(self) -> None:
        if self._processing:
            return  # the loop below re-checks the muting before every frame
        self._processing = True
        # The answers to the frames processed here go out together (one sendmsg for a
        # pipelining client's many small answers, rather than one each).
        self._corked = []
        try:
            buffer = self._buffer
            offset = 0
            while not self.channel.closed:
                large = self._large
                if large is not None:
                    if self._large_filled < len(large) or self._must_mute():
                        break
                    self._large = None
                    self.stringReceived(large)
                    continue
                if len(buffer) - offset < 4 or self._must_mute():
                    break
                (length,) = _FRAME_LENGTH.unpack_from(buffer, offset)
                if length > self.MAX_LENGTH:
                    del buffer[:offset]
                    self.lengthLimitExceeded(length)
                    return
                end = offset + 4 + length
                if len(buffer) < end:
                    received = len(buffer) - offset - 4
                    if large_frame_due(length, received):
                        large = bytearray(length)
                        large[:received] = buffer[offset + 4:]
                        self._large, self._large_filled = large, received
                        offset = len(buffer)
                    break
                # A bytearray slice: the one copy out of the receive buffer, and writable,
                # so the log can assign offsets in the produced batches in place.
                frame = buffer[offset + 4:end]
                offset = end
                self.stringReceived(frame)
            del buffer[:offset]
        finally:
            self._processing = False
            self._write_corked()
            self._corked = None
        self._set_muted(self._must_mute())

    def _write_corked(self) -> None:
        corked = self._corked
        if corked:
            self._corked = []
            write_sequence(self.transport, self._socket, corked)

    # -- back-pressure -----------------------------------------------------------------------

    def throttle(self, throttle_ms: int) -> None:
        """Do not read this connection for ``throttle_ms`` (Kafka's ThrottledChannel: a
        client over its quota). Responses still go out; a longer throttle extends it."""
        if throttle_ms <= 0 or self.channel.closed:
            return
        if self._clock is None:
            from twisted.internet import reactor
            default_clock: Scheduler = reactor
            self._clock = default_clock
        clock = self._clock
        until = clock.seconds() + throttle_ms / 1000
        if until <= self._throttled_until:
            return
        self._throttled_until = until
        timer = self._throttle_timer
        if timer is not None and timer.active():
            timer.cancel()
        self._throttle_timer = clock.callLater(throttle_ms / 1000, self._throttle_ended)
        self._set_muted(True)

    def _throttle_ended(self) -> None:
        self._throttle_timer = None
        self._throttled_until = 0.0
        self.update_muting()

    @property
    def throttled(self) -> bool:
        return self._throttle_timer is not None

    def _must_mute(self) -> bool:
        if self._throttle_timer is not None:
            return True
        if self._output_full or self.channel.in_flight >= self._max_in_flight:
            return True
        queue = self._request_queue
        if queue is not None and queue.full:
            queue.wait(self)
            return True
        return False

    def _set_muted(self, muted: bool) -> None:
        if muted == self.muted or self.channel.closed:
            return
        self.muted = muted
        transport: Any = self.transport
        if transport is None:
            return
        if muted:
            transport.pauseProducing()
        else:
            transport.resumeProducing()

    def update_muting(self) -> None:
        """Re-decide whether to read, after a request completed or the queue made room:
        frames waiting in the buffer are processed first."""
        if self.channel.closed:
            return
        if self._must_mute():
            self._set_muted(True)
        else:
            self._process_frames()

    def pauseProducing(self) -> None:
        """IPushProducer: the transport's write buffer is full."""
        self._output_full = True
        self._set_muted(True)

    def resumeProducing(self) -> None:
        """IPushProducer: the transport's write buffer drained."""
        self._output_full = False
        self.update_muting()

    def stopProducing(self) -> None:
        """IPushProducer: the connection is going away."""
        self.channel.closed = True

    def stringReceived(self, string: bytes | bytearray) -> None:
        assert self.info is not None
        if not self._peer_certificate_read and self.security.principal_mapper is not None:
            self._peer_certificate_read = True
            if not self._principal_from_certificate(self.security.principal_mapper):
                return
        if self.authenticator is not None and not self.authenticator.complete:
            self.authenticator.frame_received(string)
            return
        if not self._timed or len(string) < 2:
            self.channel.track(self._dispatch(string))
            return
        dequeued = monotonic()
        header = bytes(string[:_LOGGED_HEADER_BYTES]) if request_log.isEnabledFor(
            logging.DEBUG) else None
        api_key = (string[0] << 8) | string[1]
        self.channel.track(self._dispatch(string), api_key,
                           min(self._data_received_at, dequeued), dequeued, header)

    def _dispatch(self, frame: bytes | bytearray) -> Deferred[Response | None]:
        """The dispatcher's Deferred for ``frame`` (Twisted's maybeDeferred, inline: a
        raise becomes a failed Deferred)."""
        info = self.info
        assert info is not None
        try:
            return self.dispatcher.dispatch(info, frame)
        except Exception:
            return fail()

    def sendString(self, string: bytes) -> None:
        """The response frame: its length, then the response, written as a sequence (the
        base class concatenates them, a copy of every fetched byte)."""
        transport: Any = self.transport
        if self._file_sender is not None:
            self._file_sender.add((len(string).to_bytes(4, "big"), string))
            return
        corked = self._corked
        if corked is not None and len(string) < CORKED_FRAME_MAX_BYTES:
            corked += (len(string).to_bytes(4, "big"), string)
            if len(corked) >= MAX_PARTS:
                self._write_corked()
            return
        self._write_corked()
        write_sequence(transport, self._socket, (len(string).to_bytes(4, "big"), string))

    def send_response(self, response: Response) -> None:
        """A response frame: bytes as :meth:`sendString`; parts with file regions through
        sendfile, or read and written as bytes where sendfile cannot serve."""
        if not isinstance(response, list):
            self.sendString(response)
            return
        self._write_corked()
        length = in_files = 0
        for part in response:
            length += len(part)
            if isinstance(part, FileRegion):
                in_files += part.size
        prefix = length.to_bytes(4, "big")
        if self._sendfile and (self._file_sender is not None
                               or in_files >= self._sendfile_min_bytes):
            if self._file_sender is None:
                sender = _FileSender(self)
                sender.add((prefix, *response))
                # Sent now if the socket takes it all: no reactor turn before the bytes
                # leave (a follower's fetch answer is a hop of the acks=all round trip),
                # and no producer swap. What the socket does not take waits as before.
                if nothing_buffered(self.transport) and sender.send_now():
                    return
                self._file_sender = sender
                self._output_full = True
                self._set_muted(True)
                sender.start()
            else:
                self._file_sender.add((prefix, *response))
            return
        try:
            data = [part if isinstance(part, bytes) else part.read() for part in response]
        except OSError as exc:
            log.warning("closing connection %s: a fetched segment file cannot be read: %s",
                        self.connection_id, exc)
            self._broken()
            return
        write_sequence(self.transport, self._socket, (prefix, *data))

    def _files_sent(self) -> None:
        """The file sender is done: the connection is the transport's producer again."""
        self._file_sender = None
        transport: Any = self.transport
        transport.registerProducer(self, True)
        self._output_full = False
        self.update_muting()

    def _broken(self) -> None:
        """A response cannot be sent whole: close now, without the rest of the stream."""
        self.channel.closed = True
        if self._corked is not None:
            self._corked = []
        transport: Any = self.transport
        if transport is not None:
            transport.abortConnection()

    def _describe(self) -> tuple[str, str]:
        """The connection id and the request log's trailing details, as Kafka's."""
        info = self.info
        if info is None:
            return self.connection_id, ""
        return (self.connection_id,
                f"securityProtocol:{info.security_protocol.name},principal:{info.principal},"
                f"listener:{info.listener_name}")

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
        self.channel.track(self._dispatch(frame))

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
            self._write_corked()
            transport.loseConnection()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.channel.closed = True
        timer, self._throttle_timer = self._throttle_timer, None
        if timer is not None and timer.active():
            timer.cancel()


class KafkaServerFactory(protocol.ServerFactory):
    """Builds a KafkaServerProtocol per accepted connection and tracks the live ones.

    ``quotas`` (shared by a broker's listeners) refuses connections over the limits: the
    socket is closed at once and the refusal logged at INFO, as Kafka's Acceptor does.
    ``connections_max_idle_ms`` closes a connection with no request in flight that neither
    read nor wrote for that long (Kafka's Selector idle expiry). ``request_metrics``
    times every request (:mod:`kafkaclone.network.request_metrics`). ``sendfile`` (default
    :attr:`sendfile`) lets plain TCP connections send file regions with ``os.sendfile``
    when a response holds at least ``sendfile_min_bytes`` of them; off, they are read and
    written as bytes (Kafka has no such switch: it is there for the benchmark of the copied
    path, benchmarks/copied_fetch_broker.py, and the tests)."""

    sendfile = True

    def __init__(self, dispatcher: RequestDispatcher,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 listener_name: str = "PLAINTEXT",
                 security: ListenerSecurity = PLAINTEXT_SECURITY,
                 *, request_queue: RequestQueue | None = None,
                 quotas: ConnectionQuotas | None = None,
                 connections_max_idle_ms: int | None = None,
                 clock: Scheduler | None = None,
                 request_metrics: RequestMetrics | None = None,
                 sendfile: bool | None = None,
                 sendfile_min_bytes: int = SENDFILE_MIN_BYTES) -> None:
        self.dispatcher = dispatcher
        if sendfile is not None:
            self.sendfile = sendfile
        self.sendfile_min_bytes = sendfile_min_bytes
        self.max_request_bytes = max_request_bytes
        self.listener_name = listener_name
        self.security = security
        self.request_queue = request_queue
        self.quotas = quotas
        self.connections_max_idle_ms = connections_max_idle_ms
        self.clock = clock
        self.request_metrics = request_metrics
        self.connections: set[KafkaServerProtocol] = set()
        self._next_id = 0

    def _now(self) -> float:
        if self.clock is None:
            from twisted.internet import reactor
            clock: Scheduler = reactor
            self.clock = clock
            return clock.seconds()
        return self.clock.seconds()

    def buildProtocol(self, addr: Any) -> KafkaServerProtocol | None:
        host: str = getattr(addr, "host", "") if addr is not None else ""
        if self.quotas is not None:
            refused = self.quotas.accept(host, self._now())
            if refused is not None:
                log.info(refused)
                return None  # Twisted closes the socket at once
        self._next_id += 1
        conn = _TrackedProtocol(self.dispatcher, self.max_request_bytes,
                                f"{self.listener_name}-{self._next_id}", self.listener_name,
                                self.security, self.request_queue,
                                request_metrics=self.request_metrics, clock=self.clock,
                                sendfile=self.sendfile,
                                sendfile_min_bytes=self.sendfile_min_bytes)
        conn.factory = self
        conn.quota_host = host if self.quotas is not None else None
        return conn


class _TrackedProtocol(KafkaServerProtocol):
    factory: KafkaServerFactory
    quota_host: str | None = None
    _idle_timer: DelayedCall | None = None
    _last_active = 0.0

    def connectionMade(self) -> None:
        super().connectionMade()
        self.factory.connections.add(self)
        idle_ms = self.factory.connections_max_idle_ms
        if idle_ms is not None and idle_ms >= 0:
            self._last_active = self.factory._now()
            assert self.factory.clock is not None
            self._idle_timer = self.factory.clock.callLater(idle_ms / 1000, self._check_idle)

    def dataReceived(self, data: bytes) -> None:
        self._last_active = -1.0  # stamped lazily: see _check_idle
        super().dataReceived(data)

    def send_response(self, response: Response) -> None:
        self._last_active = -1.0
        super().send_response(response)

    def _check_idle(self) -> None:
        idle_ms = self.factory.connections_max_idle_ms
        assert idle_ms is not None and self.factory.clock is not None
        now = self.factory.clock.seconds()
        if self._last_active < 0 or self.channel.in_flight:
            # Active since the last check: idle from now at the latest.
            self._last_active = now
        idle_for = now - self._last_active
        if idle_for * 1000 >= idle_ms:
            self._idle_timer = None
            log.debug("closing connection %s: idle for more than connections.max.idle.ms "
                      "(%d)", self.connection_id, idle_ms)
            self.channel.shutdown()
            return
        self._idle_timer = self.factory.clock.callLater(idle_ms / 1000 - idle_for,
                                                        self._check_idle)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        super().connectionLost(reason)
        if self._idle_timer is not None and self._idle_timer.active():
            self._idle_timer.cancel()
        self._idle_timer = None
        if self in self.factory.connections:
            self.factory.connections.discard(self)
            if self.quota_host is not None and self.factory.quotas is not None:
                self.factory.quotas.release(self.quota_host)


_ALL_SENT: Final = object()
_SOCKET_FULL: Final = object()
_BROKEN: Final = object()


class _FileSender:
    """Writes a connection's response parts straight to its socket, file regions with
    ``os.sendfile``, while they last (Kafka's Send.writeTo). It replaces the connection as
    the transport's producer, as a pull producer: Twisted calls :meth:`resumeProducing`
    when its own write buffer has drained, so nothing written through the transport before
    is overtaken. A full socket (EAGAIN) waits for the next such call, asked for with
    ``startWriting``; nothing spins. Parts added meanwhile (later responses) queue behind.
    When Twisted's buffer is empty to begin with, the connection first has it send what the
    socket takes at once (:meth:`send_now`), and starts it only for the rest."""

    def __init__(self, connection: KafkaServerProtocol) -> None:
        self._connection = connection
        transport: Any = connection.transport
        self._transport = transport
        self._socket: socket.socket = transport.getHandle()
        self._parts: deque[bytes | FileRegion] = deque()
        self._sent = 0
        """Bytes of the first part already sent."""
        self._waiting = True
        """Not yet told that Twisted's write buffer is empty."""

    def add(self, parts: tuple[bytes | FileRegion, ...]) -> None:
        self._parts.extend(parts)

    def start(self) -> None:
        transport = self._transport
        transport.unregisterProducer()
        # A pull producer is resumed at once on registration, whatever the buffer holds:
        # that first call only asks to be told when the buffer is empty.
        transport.registerProducer(self, False)

    def send_now(self) -> bool:
        """Before :meth:`start`, with nothing in Twisted's write buffer: send what the socket
        takes now. Whether nothing is left to wait for (all sent, or the connection broke
        and is closing)."""
        return self._write_parts() is not _SOCKET_FULL

    def resumeProducing(self) -> None:
        """IPullProducer: Twisted's write buffer is empty and the socket was writable."""
        if self._waiting:
            self._waiting = False
            self._transport.startWriting()
            return
        outcome = self._write_parts()
        if outcome is _SOCKET_FULL:
            self._transport.startWriting()
        elif outcome is _ALL_SENT:
            self._transport.unregisterProducer()
            self._connection._files_sent()

    def _write_parts(self) -> object:
        """Sends parts until none is left (_ALL_SENT), the socket is full (_SOCKET_FULL), or
        the connection broke (_BROKEN: it is closing)."""
        parts = self._parts
        out = self._socket.fileno()
        while parts:
            part = parts[0]
            try:
                if isinstance(part, FileRegion):
                    remaining = part.size - self._sent
                    sent = os.sendfile(out, part.fileno(), part.position + self._sent,
                                       remaining)
                    if sent == 0:
                        log.warning("closing connection %s: %s ended %d bytes early (the "
                                    "segment was truncated after the read)",
                                    self._connection.connection_id, part, remaining)
                        self._parts.clear()
                        self._connection._broken()
                        return _BROKEN
                else:
                    # More parts behind: let the kernel fill whole packets (TCP_NODELAY).
                    flags = socket.MSG_MORE if len(parts) > 1 else 0
                    sent = self._socket.send(memoryview(part)[self._sent:], flags)
            except (BlockingIOError, InterruptedError):
                return _SOCKET_FULL
            except OSError as exc:
                log.debug("connection %s: send failed: %s", self._connection.connection_id,
                          exc)
                self._parts.clear()
                self._connection._broken()
                return _BROKEN
            self._sent += sent
            if self._sent == len(part):
                parts.popleft()
                self._sent = 0
        return _ALL_SENT

    def stopProducing(self) -> None:
        """IPushProducer/IPullProducer: the connection is going away."""
        self._parts.clear()
        self._connection.channel.closed = True
