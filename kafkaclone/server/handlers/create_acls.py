"""CreateAcls (key 30), v0-2: Kafka 2.8's KafkaApis.handleCreateAcls.

Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise);
without an authorizer every creation is SECURITY_DISABLED. A CLUSTER resource not named
``kafka-cluster``, an empty resource name or a principal without ``type:name`` is
INVALID_REQUEST; the rest go to the AclAuthorizer, which answers per creation.
"""

from __future__ import annotations

from kafkaclone.common.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.common.errors import (
    InvalidRequestError,
    KafkaError,
)
from kafkaclone.common.security import KafkaPrincipal
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import CreateAclsRequest, CreateAclsResponse
from kafkaclone.server.handlers.acl_support import acl_api_refusal
from kafkaclone.server.handlers.registry import RequestContext, handler

_Result = CreateAclsResponse.AclCreationResult


def _binding(creation: CreateAclsRequest.AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(creation.resource_type), creation.resource_name,
                        PatternType.from_code(creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host,
                           AclOperation.from_code(creation.operation),
                           AclPermissionType.from_code(creation.permission_type)))


def _invalid(binding: AclBinding) -> KafkaError | None:
    pattern = binding.pattern
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return InvalidRequestError(
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return InvalidRequestError("Invalid empty resource name specified.")
    try:
        KafkaPrincipal.parse(binding.entry.principal)
    except ValueError as exc:
        return InvalidRequestError(f"Failed to create ACL: {exc}")
    return None


def _result(error: KafkaError | None) -> _Result:
    if error is None:
        return _Result(error_code=0, error_message=None)
    return _Result(error_code=error.code, error_message=error.message)


@handler(ApiKey.CREATE_ACLS, versions=(0, 2))
async def handle_create_acls(ctx: RequestContext,
                             request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = ctx.broker.authorizer
    refusal = acl_api_refusal(ctx, AclOperation.ALTER)
    if refusal is not None or authorizer is None:
        return CreateAclsResponse(throttle_time_ms=0,
                                  results=[_result(refusal) for _ in request.creations])
    bindings = [_binding(creation) for creation in request.creations]
    errors: list[KafkaError | None] = [_invalid(binding) for binding in bindings]
    valid = [i for i, error in enumerate(errors) if error is None]
    for i, error in zip(valid, await authorizer.create_acls([bindings[i] for i in valid]),
                        strict=True):
        errors[i] = error
    return CreateAclsResponse(throttle_time_ms=0, results=[_result(e) for e in errors])
