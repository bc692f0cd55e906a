"""SyncGroup (key 14), v0-5: the leader hands in the assignment, every member gets its own
(Kafka 2.8's GroupCoordinator.handleSyncGroup). v3 adds static membership; v5 checks and
reports the protocol type and name."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import GroupAuthorizationFailedError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import SyncGroupRequest, SyncGroupResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.SYNC_GROUP, versions=(0, 5))
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=GroupAuthorizationFailedError.code,
                                 protocol_type=None, protocol_name=None, assignment=b"")
    result = await ctx.broker.group_coordinator.handle_sync_group(
        request.group_id, request.generation_id, request.member_id,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        request.group_instance_id if version >= 3 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments})
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error_code,
                     protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                     assignment=result.assignment)
