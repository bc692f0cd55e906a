"""DescribeGroups (key 15), v0-5: state, protocol and members of groups (Kafka 2.8's
GroupCoordinator.handleDescribeGroup). A group this broker does not know is reported Dead
with no error; members' metadata and assignments are filled in only while Stable; v3+ can
ask for the authorized operations (with no authorizer: READ, DELETE, DESCRIBE)."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import GroupAuthorizationFailedError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DescribeGroupsRequest, DescribeGroupsResponse
from kafkaclone.server.handlers.group_support import (
    GROUP_ACL_OPERATIONS,
    GROUP_AUTHORIZED_OPERATIONS,
)
from kafkaclone.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from kafkaclone.server.handlers.registry import RequestContext, handler

_Group = DescribeGroupsResponse.DescribedGroup
_Member = DescribeGroupsResponse.DescribedGroup.DescribedGroupMember


@handler(ApiKey.DESCRIBE_GROUPS, versions=(0, 5))
async def handle_describe_groups(
        ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    operations = (GROUP_AUTHORIZED_OPERATIONS
                  if ctx.api_version >= 3 and request.include_authorized_operations
                  else AUTHORIZED_OPERATIONS_OMITTED)
    groups = []
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.GROUP, request.groups)
    for group_id in request.groups:
        if group_id in denied:
            groups.append(_Group(error_code=GroupAuthorizationFailedError.code,
                                 group_id=group_id, group_state="", protocol_type="",
                                 protocol_data="", members=[],
                                 authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        error, summary = ctx.broker.group_coordinator.handle_describe_group(group_id)
        groups.append(_Group(
            error_code=error, group_id=group_id, group_state=summary.state,
            protocol_type=summary.protocol_type, protocol_data=summary.protocol,
            members=[_Member(member_id=m.member_id, group_instance_id=m.group_instance_id,
                             client_id=m.client_id, client_host=m.client_host,
                             member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in summary.members],
            authorized_operations=(operations if ctx.broker.authorizer is None
                                   or operations == AUTHORIZED_OPERATIONS_OMITTED
                                   else ctx.authorized_operations(
                                       ResourceType.GROUP, group_id, GROUP_ACL_OPERATIONS))))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
