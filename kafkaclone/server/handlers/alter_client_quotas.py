"""AlterClientQuotas (key 49), v0-1: set or remove the quotas of user / client-id entities
(Kafka 2.8's KafkaApis.handleAlterClientQuotasRequest, ZkAdminManager.alterClientQuotas;
KIP-546). Needs AlterConfigs on the cluster; each entity succeeds or fails on its own."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.zk import client_quotas

_Entry = AlterClientQuotasResponse.EntryData
_Entity = _Entry.EntityData


async def _alter(ctx: RequestContext, entry: AlterClientQuotasRequest.EntryData,
                 validate_only: bool) -> tuple[int, str | None]:
    entity: client_quotas.Entity = {}
    try:
        for part in entry.entity:
            if part.entity_type in entity:
                raise InvalidRequestError(
                    f"Duplicate {part.entity_type} entity type in client quota entity")
            entity[part.entity_type] = part.entity_name
        ops = [(op.key, None if op.remove else op.value) for op in entry.ops]
        await client_quotas.alter_client_quotas(ctx.broker.zk_client, entity, ops,
                                                validate_only)
    except KafkaError as exc:
        return exc.code, exc.message
    return 0, None


@handler(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1))
async def handle_alter_client_quotas(
        ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER_CONFIGS)
    entries = []
    for entry in request.entries:
        if allowed:
            code, message = await _alter(ctx, entry, request.validate_only)
        else:
            denied = ClusterAuthorizationFailedError()
            code, message = denied.code, denied.message
        entries.append(_Entry(error_code=code, error_message=message, entity=[
            _Entity(entity_type=part.entity_type, entity_name=part.entity_name)
            for part in entry.entity]))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=entries)
