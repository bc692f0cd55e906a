"""DeleteAcls (key 31), v0-2: Kafka 2.8's KafkaApis.handleDeleteAcls.

Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED for every filter otherwise);
without an authorizer every filter is SECURITY_DISABLED. Otherwise each filter's result
lists the ACLs it deleted (an ACL that several filters match is reported under the first).
"""

from __future__ import annotations

from kafkaclone.common.acl import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from kafkaclone.common.errors import (
    KafkaError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DeleteAclsRequest, DeleteAclsResponse
from kafkaclone.server.handlers.acl_support import acl_api_refusal
from kafkaclone.server.handlers.registry import RequestContext, handler

_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = DeleteAclsResponse.DeleteAclsFilterResult.DeleteAclsMatchingAcl


def _filter(wire: DeleteAclsRequest.DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(wire.resource_type_filter),
                              wire.resource_name_filter,
                              PatternType.from_code(wire.pattern_type_filter)),
        AccessControlEntryFilter(wire.principal_filter, wire.host_filter,
                                 AclOperation.from_code(wire.operation),
                                 AclPermissionType.from_code(wire.permission_type)))


def _code(error: KafkaError | None) -> tuple[int, str | None]:
    return (0, None) if error is None else (error.code, error.message)


@handler(ApiKey.DELETE_ACLS, versions=(0, 2))
async def handle_delete_acls(ctx: RequestContext,
                             request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = ctx.broker.authorizer
    refusal = acl_api_refusal(ctx, AclOperation.ALTER)
    if refusal is not None or authorizer is None:
        code, message = _code(refusal)
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            _FilterResult(error_code=code, error_message=message, matching_acls=[])
            for _ in request.filters])
    results = await authorizer.delete_acls([_filter(wire) for wire in request.filters])
    filter_results = []
    for result in results:
        code, message = _code(result.error)
        matching = []
        for binding, error in result.deleted:
            acl_code, acl_message = _code(error)
            matching.append(_Matching(
                error_code=acl_code, error_message=acl_message,
                resource_type=binding.pattern.resource_type, resource_name=binding.pattern.name,
                pattern_type=binding.pattern.pattern_type, principal=binding.entry.principal,
                host=binding.entry.host, operation=binding.entry.operation,
                permission_type=binding.entry.permission_type))
        filter_results.append(_FilterResult(error_code=code, error_message=message,
                                            matching_acls=matching))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=filter_results)
