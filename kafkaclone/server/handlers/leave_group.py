"""LeaveGroup (key 13), v0-4: members leave at once instead of waiting for their session to
expire (Kafka 2.8's GroupCoordinator.handleLeaveGroup); from v3 several members per request,
by member id or by ``group.instance.id`` (KIP-345). Before v3 the member's own error is the
response's error."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import NONE, GroupAuthorizationFailedError
from kafkaclone.coordinator.group.coordinator import LeaveMember
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import LeaveGroupRequest, LeaveGroupResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

_Member = LeaveGroupResponse.MemberResponse


@handler(ApiKey.LEAVE_GROUP, versions=(0, 4))
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0,
                                  error_code=GroupAuthorizationFailedError.code, members=[])
    if version >= 3:
        leaving = [LeaveMember(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [LeaveMember(request.member_id, None)]
    error, results = ctx.broker.group_coordinator.handle_leave_group(request.group_id, leaving)
    if version < 3 and error == NONE and results:
        error = results[0][1]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[
        _Member(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code)
        for m, code in results])
