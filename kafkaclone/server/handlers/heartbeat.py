"""Heartbeat (key 12), v0-4: keep a member's session alive; REBALANCE_IN_PROGRESS tells it
to rejoin (Kafka 2.8's GroupCoordinator.handleHeartbeat)."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import GroupAuthorizationFailedError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import HeartbeatRequest, HeartbeatResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.HEARTBEAT, versions=(0, 4))
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0,
                                 error_code=GroupAuthorizationFailedError.code)
    error = ctx.broker.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None, request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
