"""DescribeAcls (key 29), v0-2: Kafka 2.8's KafkaApis.handleDescribeAcls.

Needs Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); without an
authorizer the answer is SECURITY_DISABLED. Otherwise the ACLs the filter matches, grouped
by resource pattern (DescribeAclsResponse.aclsResources).
"""

from __future__ import annotations

from itertools import groupby

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
    InvalidRequestError,
    KafkaError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DescribeAclsRequest, DescribeAclsResponse
from kafkaclone.server.handlers.acl_support import acl_api_refusal
from kafkaclone.server.handlers.registry import RequestContext, handler

_Resource = DescribeAclsResponse.DescribeAclsResource
_Acl = DescribeAclsResponse.DescribeAclsResource.AclDescription


def _error(error: KafkaError) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=error.code,
                                error_message=error.message, resources=[])


@handler(ApiKey.DESCRIBE_ACLS, versions=(0, 2))
async def handle_describe_acls(ctx: RequestContext,
                               request: DescribeAclsRequest) -> DescribeAclsResponse:
    refusal = acl_api_refusal(ctx, AclOperation.DESCRIBE)
    if refusal is not None:
        return _error(refusal)
    authorizer = ctx.broker.authorizer
    assert authorizer is not None  # acl_api_refusal answered SECURITY_DISABLED otherwise
    binding_filter = AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(request.resource_type_filter),
                              request.resource_name_filter,
                              PatternType.from_code(request.pattern_type_filter)),
        AccessControlEntryFilter(request.principal_filter, request.host_filter,
                                 AclOperation.from_code(request.operation),
                                 AclPermissionType.from_code(request.permission_type)))
    unknown = binding_filter.unknown_element()
    if unknown is not None:
        return _error(InvalidRequestError(f"The filter contains an unknown {unknown}"))
    resources = [
        _Resource(resource_type=pattern.resource_type, resource_name=pattern.name,
                  pattern_type=pattern.pattern_type,
                  acls=[_Acl(principal=b.entry.principal, host=b.entry.host,
                             operation=b.entry.operation,
                             permission_type=b.entry.permission_type) for b in bindings])
        for pattern, bindings in groupby(authorizer.acls(binding_filter), lambda b: b.pattern)
    ]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                resources=resources)
