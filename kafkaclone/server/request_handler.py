"""Turns request frames into handler calls and handler results into response frames.

This is the broker's request dispatcher (Kafka's ``KafkaApis.handle``). For each frame:

- a header that does not parse, an unknown API key, or an API the broker does not serve:
  the connection is closed, as Kafka does (the client sees a disconnect, never a crash);
- ApiVersions at a version the broker does not know: a v0 response with
  UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511);
- any other API at a version outside the served range: the connection is closed;
- a body that does not parse: the connection is closed (bytes after a complete body are
  ignored, as Kafka's parser ignores them);
- otherwise the registered handler runs and its result is encoded with the request's
  version and correlation id. A handler that returns ``None`` sends no response (Produce
  with acks=0).
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any, Final, TypeVar

from twisted.internet.defer import Deferred, fail, succeed

from kafkaclone.common.errors import KafkaError, UnsupportedVersionError
from kafkaclone.network.socket_server import CloseConnection, ConnectionInfo, Response
from kafkaclone.protocol import api as protocol_api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import FetchRequest, RequestHeader
from kafkaclone.server.handlers.api_versions import unsupported_version_response
from kafkaclone.server.handlers.registry import (
    DECLINED,
    FastPathFn,
    RegisteredHandler,
    RequestContext,
    load_handlers,
)
from kafkaclone.server.metrics import BrokerMetrics
from kafkaclone.server.quota import NANOS_TO_PERCENTAGE_PER_SECOND, NO_QUOTAS, QuotaManagers
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class RequestHandler:
    """The dispatcher the socket server calls for every request frame."""

    def __init__(self, broker: BrokerServices,
                 handlers: dict[ApiKey, RegisteredHandler] | None = None,
                 metrics: BrokerMetrics | None = None,
                 quotas: QuotaManagers = NO_QUOTAS) -> None:
        self.broker = broker
        self.quotas = quotas
        """The client quotas applied to every request (none by default)."""
        self.handlers = load_handlers() if handlers is None else handlers
        self.metrics = metrics
        """Per-API request counts and times, when the broker serves metrics."""
        self._routes: dict[int, _Route] = {}
        """By ``api_key << 16 | api_version``: the requests seen and served."""
        self._client_ids: dict[bytes, str] = {}

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[Response | None]:
        started = time.perf_counter()
        route: _Route | None = None
        if len(frame) >= _HEADER.size:
            key, version, correlation_id, id_length = _HEADER.unpack_from(frame)
            route = self._routes.get((key << 16) | version) if version >= 0 else None
        if route is not None:
            body_pos, client_id = self._read_client_id(frame, id_length, route.flexible_header)
            if body_pos < 0:
                route = None
        if route is None:
            found = self._route_slowly(connection, frame)
            if isinstance(found, Deferred):
                return found
            route, header, body_pos = found
            key, version = header.request_api_key, header.request_api_version
            correlation_id = header.correlation_id
            client_id = None if header.client_id is None else str(header.client_id)
        target = route.api
        fast = route.fast
        if fast is not None and isinstance(frame, bytearray):
            if not self.quotas.any_enabled:
                answered = self._fast_path(fast, route, connection, frame, body_pos, key,
                                           version, correlation_id, client_id, started)
                if answered is not None:
                    return answered
        try:
            view = memoryview(frame)
            body, end = target.request.decode(view, version, body_pos)
            if end != len(view):
                # Kafka's parser reads what the schema says and ignores the rest, and real
                # clients rely on it (librdkafka 2.x appends bytes to its all-topics
                # Metadata v11 request), so trailing bytes are not an error.
                log.debug("ignoring %d bytes after %s v%d from %s", len(view) - end,
                          target.request.name, version, connection.connection_id)
        except KafkaError as exc:
            raise CloseConnection(
                f"malformed {target.request.name} v{version}: {exc.message}") from exc

        ctx = RequestContext(target, version, correlation_id, client_id, connection, self.broker,
                             len(frame), self.quotas)
        timing = _Timing(started)
        coroutine = _call(route, ctx, body, key, version, correlation_id, timing)
        # Most requests complete without waiting (Metadata, acks=1 Produce, a Fetch with
        # data): run the coroutine's first step here and answer at once, without Twisted's
        # coroutine driver. One that awaits (acks=all, a long poll, ZooKeeper) is handed to
        # Deferred.fromCoroutine where it stopped: its first step re-enters the awaited
        # Deferred's iterator, which yields the Deferred again until it has fired.
        result: Deferred[Response | None]
        try:
            coroutine.send(None)
        except StopIteration as finished:
            result = succeed(finished.value)
        except Exception:
            result = fail()
        else:
            timing.first_step = time.perf_counter() - started
            result = Deferred.fromCoroutine(coroutine)
        if self.metrics is not None:
            result.addBoth(_recorded, self.metrics, key, started)
        return result


    def _fast_path(self, fast: FastPathFn, route: _Route, connection: ConnectionInfo,
                   frame: bytearray, body_pos: int, key: int, version: int,
                   correlation_id: int, client_id: str | None, started: float
                   ) -> Deferred[Response | None] | None:
        """The handler's fast path's answer (see :func:`registry.fast_path`), or None if it
        declined the request. No quota is on: nothing is throttled, as in ``_call``."""
        ctx = RequestContext(route.api, version, correlation_id, client_id, connection,
                             self.broker, len(frame), self.quotas)
        result: Deferred[Response | None]
        try:
            response = fast(ctx, frame, body_pos)
            if response is DECLINED:
                return None
            if isinstance(response, Deferred):  # it waits (Produce with acks=-1)
                result = response.addCallback(_fast_path_encoded, route, version,
                                              correlation_id)
            else:
                result = succeed(None if response is None else route.encode_response(
                    version, correlation_id, response))
        except Exception:
            result = fail()
        if self.metrics is not None:
            result.addBoth(_recorded, self.metrics, key, started)
        return result

    def _read_client_id(self, frame: bytes | bytearray, length: int,
                        flexible: bool) -> tuple[int, str | None]:
        """The body's position and the header's client id (a nullable INT16 string, in
        the flexible header v2 too, then its tagged fields); -1 when the header is not the
        plain case (tagged fields present, a bad length or text): the full decoder reads
        it then. Client ids are decoded once (a connection sends the same one every time)."""
        position = _HEADER.size
        if length < 0:
            client_id = None
            if length != -1:
                return -1, None
        else:
            raw = bytes(frame[position:position + length])
            position += length
            if len(raw) != length:
                return -1, None
            client_id = self._client_ids.get(raw)
            if client_id is None:
                try:
                    client_id = raw.decode("utf-8")
                except UnicodeDecodeError:
                    return -1, None
                if len(self._client_ids) >= _CLIENT_IDS_KEPT:
                    self._client_ids.clear()
                self._client_ids[raw] = client_id
        if flexible:
            if position >= len(frame) or frame[position] != 0:
                return -1, None  # tagged fields
            position += 1
        return position, client_id

    def _route_slowly(self, connection: ConnectionInfo, frame: bytes | bytearray
                      ) -> tuple[_Route, RequestHeader, int] | Deferred[Response | None]:
        """The route of a request the quick header read did not serve (kept for the next
        one of its API and version), with its header fully decoded and the body's position;
        the answer itself for an ApiVersions of a version the broker does not know
        (KIP-511). CloseConnection for a header that does not parse or a request the
        broker does not serve."""
        try:
            key, version, correlation_id = protocol_api.peek_request_header(frame)
            header, target, body_pos = protocol_api.decode_request_header(frame)
        except UnsupportedVersionError as exc:
            if key == ApiKey.API_VERSIONS:
                return succeed(protocol_api.encode_response(
                    ApiKey.API_VERSIONS, 0, correlation_id, unsupported_version_response()))
            raise CloseConnection(f"{exc.message} (from {connection.client_host})") from exc
        except KafkaError as exc:
            raise CloseConnection(f"unreadable request header: {exc.message}") from exc

        registered = self.handlers.get(target.key)
        if registered is None or not registered.serves(version):
            if key == ApiKey.API_VERSIONS:
                return succeed(protocol_api.encode_response(
                    ApiKey.API_VERSIONS, 0, correlation_id, unsupported_version_response()))
            raise CloseConnection(f"{target.name} v{version} is not served by this broker")
        route = self._routes.get((key << 16) | version)
        if route is None:
            route = _Route(registered, target, version)
            if target.request_header_version(version) != 0:
                self._routes[(key << 16) | version] = route
        return route, header, body_pos


_HEADER: Final = struct.Struct(">hhih")
"""A request header's api key, api version, correlation id and client id length (header
v1 and v2; v0, ControlledShutdown v0's, has no client id and takes the full decoder)."""
_CLIENT_IDS_KEPT: Final = 1024


class _Route:
    """What the dispatcher needs of one API at one version, found once: its handler, its
    header versions, and how its response starts (the response header)."""

    __slots__ = ("api", "fast", "flexible_header", "registered", "response_header")

    def __init__(self, registered: RegisteredHandler, api: protocol_api.Api,
                 version: int) -> None:
        self.registered = registered
        self.api = api
        self.fast = registered.fast_path_for(version)
        self.flexible_header = api.request_header_version(version) == 2
        self.response_header = api.response_header_version(version)

    def encode_response(self, version: int, correlation_id: int, body: Any) -> bytes:
        """:func:`kafkaclone.protocol.api.encode_response`, the header written directly:
        the correlation id, then (header v1) no tagged fields. ``body`` a response or an
        :class:`~kafkaclone.protocol.api.EncodedResponse` of this version (sent as is)."""
        out = bytearray(correlation_id.to_bytes(4, "big", signed=True))
        if self.response_header == 1:
            out.append(0)
        protocol_api.encode_response_body_into(self.api, version, body, out)
        return bytes(out)


class _Timing:
    """When a request's handling started, and how long its first, synchronous step took if
    it then waited (a long poll, acks=all, ZooKeeper): the request quota counts the time
    the handler worked, not the time it waited."""

    __slots__ = ("first_step", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.first_step: float | None = None


_EXEMPT_FROM_REQUEST_QUOTA: Final = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.API_VERSIONS,
    ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
})
"""Kafka's inter-broker (ClusterAction) APIs and those a client needs before it can read
throttle times: never throttled by request_percentage (ClientRequestQuotaManager's exempt
sensor)."""


async def _call(route: _Route, ctx: RequestContext, body: Any, key: int,
                version: int, correlation_id: int, timing: _Timing) -> Response | None:
    """The handler, and its response encoded (in the coroutine rather than in a callback
    added to its Deferred: one callback fewer per request). A Fetch response is encoded
    in parts: its records may be ranges of segment files, sent with sendfile."""
    response = await route.registered.fn(ctx, body)
    if ctx.quotas.any_enabled:
        _throttle(ctx, key, body, response, timing)
    if response is None:
        return None
    if key == ApiKey.FETCH:
        return protocol_api.encode_response_parts(key, version, correlation_id, response)
    return route.encode_response(version, correlation_id, response)


def _throttle(ctx: RequestContext, key: int, body: Any, response: Any,
              timing: _Timing) -> None:
    """Kafka's sendResponseMaybeThrottle: the request_percentage throttle time (the handling
    time recorded against the client's rate), the larger of it and the bandwidth throttle
    a Produce or Fetch handler put in the answer goes into its ``throttle_time_ms``, and the
    connection is muted that long. Every answer with the field carries it (KIP-219)."""
    throttle_ms = 0
    if key not in _EXEMPT_FROM_REQUEST_QUOTA and not _from_follower(key, body):
        handled = timing.first_step
        if handled is None:
            handled = time.perf_counter() - timing.started
        throttle_ms = ctx.quotas.request.record_and_get_throttle_time_ms(
            ctx.connection.principal.name, ctx.client_id or "",
            handled * 1e9 * NANOS_TO_PERCENTAGE_PER_SECOND, ctx.broker.reactor.seconds() * 1000)
    if response is not None and hasattr(response, "throttle_time_ms"):
        throttle_ms = max(throttle_ms, response.throttle_time_ms)
        response.throttle_time_ms = throttle_ms
    if throttle_ms and ctx.connection.throttle is not None:
        ctx.connection.throttle(throttle_ms)


def _from_follower(key: int, body: Any) -> bool:
    """A replica's Fetch: governed by replication quotas, never by client quotas."""
    if key != ApiKey.FETCH:
        return False
    fetch: FetchRequest = body
    return fetch.replica_id >= 0


def _fast_path_encoded(response: Any, route: _Route, version: int,
                       correlation_id: int) -> Response:
    return route.encode_response(version, correlation_id, response)


def _recorded(result: _T, metrics: BrokerMetrics, key: int, started: float) -> _T:
    metrics.record_request(key, started)
    return result
