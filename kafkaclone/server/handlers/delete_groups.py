"""DeleteGroups (key 42), v0-2: delete Empty groups with their committed offsets
(``/consumers/<g>`` and everything below it). A group with members is NON_EMPTY_GROUP, an
unknown one GROUP_ID_NOT_FOUND (Kafka 2.8's GroupCoordinator.handleDeleteGroups)."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import GroupAuthorizationFailedError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DeleteGroupsRequest, DeleteGroupsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

_Result = DeleteGroupsResponse.DeletableGroupResult


@handler(ApiKey.DELETE_GROUPS, versions=(0, 2))
async def handle_delete_groups(
        ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.groups_names))
    denied = ctx.unauthorized_names(AclOperation.DELETE, ResourceType.GROUP, names)
    errors = await ctx.broker.group_coordinator.handle_delete_groups(
        [name for name in names if name not in denied])
    errors.update(dict.fromkeys(denied, GroupAuthorizationFailedError.code))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _Result(group_id=name, error_code=errors[name]) for name in names])
