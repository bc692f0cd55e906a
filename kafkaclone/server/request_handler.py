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
import time
from typing import Any, TypeVar

from twisted.internet.defer import Deferred, succeed

from kafkaclone.common.errors import KafkaError, UnsupportedVersionError
from kafkaclone.network.socket_server import CloseConnection, ConnectionInfo
from kafkaclone.protocol import api as protocol_api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.handlers.api_versions import unsupported_version_response
from kafkaclone.server.handlers.registry import (
    RegisteredHandler,
    RequestContext,
    load_handlers,
)
from kafkaclone.server.metrics import BrokerMetrics
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class RequestHandler:
    """The dispatcher the socket server calls for every request frame."""

    def __init__(self, broker: BrokerServices,
                 handlers: dict[ApiKey, RegisteredHandler] | None = None,
                 metrics: BrokerMetrics | None = None) -> None:
        self.broker = broker
        self.handlers = load_handlers() if handlers is None else handlers
        self.metrics = metrics
        """Per-API request counts and times, when the broker serves metrics."""

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        started = time.perf_counter()
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

        client_id = None if header.client_id is None else str(header.client_id)
        ctx = RequestContext(target, version, correlation_id, client_id, connection, self.broker)
        result: Deferred[Any] = Deferred.fromCoroutine(_call(registered, ctx, body))
        result.addCallback(self._encode, key, version, correlation_id)
        if self.metrics is not None:
            result.addBoth(_recorded, self.metrics, key, started)
        return result

    @staticmethod
    def _encode(response: Any, key: int, version: int, correlation_id: int) -> bytes | None:
        if response is None:
            return None
        return protocol_api.encode_response(key, version, correlation_id, response)


async def _call(registered: RegisteredHandler, ctx: RequestContext, body: Any) -> Any:
    return await registered.fn(ctx, body)


def _recorded(result: _T, metrics: BrokerMetrics, key: int, started: float) -> _T:
    metrics.record_request(key, started)
    return result
