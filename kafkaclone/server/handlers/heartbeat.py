"""Heartbeat (key 12), v0-4: keep a member's session alive; REBALANCE_IN_PROGRESS tells it
to rejoin (Kafka 2.8's GroupCoordinator.handleHeartbeat)."""

from __future__ import annotations

from typing import Any

from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.handlers.registry import RequestContext, handler

_RESPONSE = APIS[ApiKey.HEARTBEAT].response


@handler(ApiKey.HEARTBEAT, versions=(0, 4))
async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    error = ctx.broker.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None, request.generation_id)
    return _RESPONSE(throttle_time_ms=0, error_code=error)
