"""JoinGroup (key 11), v0-7: join (or rejoin) a group; answered when the group's join phase
completes (Kafka 2.8's GroupCoordinator.handleJoinGroup; see
kafkaclone.coordinator.group.coordinator). v0 has no rebalance timeout (the session timeout
serves); from v4 a member without an id is told MEMBER_ID_REQUIRED with one to use (KIP-394);
v5 adds static membership (``group.instance.id``); v7 reports the protocol type."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import GroupAuthorizationFailedError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import JoinGroupRequest, JoinGroupResponse
from kafkaclone.server.handlers.group_support import client_host
from kafkaclone.server.handlers.registry import RequestContext, handler

_Member = JoinGroupResponse.JoinGroupResponseMember


@handler(ApiKey.JOIN_GROUP, versions=(0, 7))
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=GroupAuthorizationFailedError.code,
            generation_id=-1, protocol_type=None, protocol_name=None if version >= 7 else "",
            leader="", member_id=request.member_id, members=[])
    instance_id = request.group_instance_id if version >= 5 else None
    rebalance_timeout = (request.rebalance_timeout_ms if version >= 1
                         else request.session_timeout_ms)
    result = await ctx.broker.group_coordinator.handle_join_group(
        request.group_id, request.member_id, instance_id,
        version >= 4 and instance_id is None, ctx.client_id or "", client_host(ctx),
        rebalance_timeout, request.session_timeout_ms, request.protocol_type,
        [(p.name, bytes(p.metadata)) for p in request.protocols])
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=(result.protocol_name if version >= 7 else result.protocol_name or ""),
        leader=result.leader_id, member_id=result.member_id,
        members=[_Member(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members])
