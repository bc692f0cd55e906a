"""ListGroups (key 16), v0-4: the groups this broker coordinates (Kafka 2.8's
GroupCoordinator.handleListGroups); v4 filters by state (KIP-518) and reports it.
COORDINATOR_LOAD_IN_PROGRESS while some of its partitions are still loading."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ListGroupsRequest, ListGroupsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

_Group = ListGroupsResponse.ListedGroup


@handler(ApiKey.LIST_GROUPS, versions=(0, 4))
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = list(request.states_filter) if ctx.api_version >= 4 else []
    error, listed = ctx.broker.group_coordinator.handle_list_groups(states)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        # Without Describe on the cluster, only the groups the principal may Describe.
        hidden = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.GROUP,
                                        (g for g, _, _ in listed))
        listed = [entry for entry in listed if entry[0] not in hidden]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
        _Group(group_id=g, protocol_type=p, group_state=s) for g, p, s in listed])
