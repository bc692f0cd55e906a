"""The dispatcher's fast header path (a route per API and version, the client id decoded
once per distinct id) answers exactly as the full header decoder does."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred

from kafkaclone.network.socket_server import CloseConnection, ConnectionInfo, Response
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import HeartbeatRequest, HeartbeatResponse
from kafkaclone.server.handlers.registry import RegisteredHandler, RequestContext
from kafkaclone.server.request_handler import RequestHandler

pytestmark = pytest.mark.timeout(30)

CONNECTION = ConnectionInfo("test-connection", "127.0.0.1", 50000)


class Recorder:
    """A Heartbeat handler that remembers the context and body of every request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, int, int, str]] = []

    async def handle(self, ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        self.seen.append((ctx.client_id, ctx.api_version, ctx.correlation_id,
                          request.group_id))
        return HeartbeatResponse(throttle_time_ms=7, error_code=0)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def dispatcher(recorder: Recorder) -> RequestHandler:
    handlers = {ApiKey.HEARTBEAT: RegisteredHandler(ApiKey.HEARTBEAT, 0, 4, recorder.handle)}
    return RequestHandler(broker=object(), handlers=handlers)  # type: ignore[arg-type]


def frame(version: int, correlation_id: int, client_id: str | None,
          header_tags: list[tuple[int, bytes]] | None = None) -> bytearray:
    body = HeartbeatRequest(group_id=f"g{correlation_id}", generation_id=1, member_id="m")
    target = api.APIS[ApiKey.HEARTBEAT]
    header = api.RequestHeader.cls(request_api_key=ApiKey.HEARTBEAT, request_api_version=version,
                                   correlation_id=correlation_id, client_id=client_id,
                                   unknown_tagged_fields=header_tags or [])
    out = bytearray()
    api.RequestHeader.encode_into(header, target.request_header_version(version), out)
    target.request.encode_into(body, version, out)
    return out


def answer(d: Deferred[Response | None]) -> bytes:
    results: list[Any] = []
    d.addBoth(results.append)
    assert results and isinstance(results[0], bytes), results
    return results[0]


@pytest.mark.parametrize("version", [0, 3, 4])
def test_every_request_reads_its_own_header(dispatcher: RequestHandler, recorder: Recorder,
                                            version: int) -> None:
    client_ids = ["producer-1", "producer-2", None, "producer-1", "ünïcode", None]
    for correlation_id, client_id in enumerate(client_ids):
        response = answer(dispatcher.dispatch(CONNECTION, frame(version, correlation_id,
                                                                client_id)))
        assert response == api.encode_response(
            ApiKey.HEARTBEAT, version, correlation_id,
            HeartbeatResponse(throttle_time_ms=7, error_code=0))
    assert recorder.seen == [(client_id, version, correlation_id, f"g{correlation_id}")
                             for correlation_id, client_id in enumerate(client_ids)]


def test_a_flexible_header_with_tagged_fields(dispatcher: RequestHandler,
                                              recorder: Recorder) -> None:
    answer(dispatcher.dispatch(CONNECTION, frame(4, 1, "plain")))
    response = answer(dispatcher.dispatch(CONNECTION, frame(4, 2, "tagged", [(5, b"xy")])))
    _, decoded = api.decode_response(ApiKey.HEARTBEAT, 4, response)
    assert decoded.throttle_time_ms == 7
    assert recorder.seen == [("plain", 4, 1, "g1"), ("tagged", 4, 2, "g2")]


def test_a_client_id_that_is_not_utf8_closes_the_connection(dispatcher: RequestHandler
                                                            ) -> None:
    answer(dispatcher.dispatch(CONNECTION, frame(3, 1, "ok")))
    bad = frame(3, 2, "ab")
    position = bad.index(b"ab")
    bad[position:position + 2] = b"\xff\xfe"
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(CONNECTION, bad)


def test_a_truncated_header_closes_the_connection(dispatcher: RequestHandler) -> None:
    answer(dispatcher.dispatch(CONNECTION, frame(3, 1, "ok")))
    with pytest.raises(CloseConnection):
        dispatcher.dispatch(CONNECTION, frame(3, 2, "a-long-client-id")[:14])
