"""DescribeClientQuotas (key 48), v0-1: the quotas of the user / client-id entities a filter
selects (Kafka 2.8's KafkaApis.handleDescribeClientQuotasRequest, ZkAdminManager; KIP-546).
Needs DescribeConfigs on the cluster."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.zk import client_quotas
from kafkaclone.zk.client_quotas import FilterComponent

_Entry = DescribeClientQuotasResponse.EntryData
_Entity = _Entry.EntityData
_Value = _Entry.ValueData


def _component(data: DescribeClientQuotasRequest.ComponentData) -> FilterComponent:
    if data.match_type == client_quotas.MATCH_EXACT:
        if data.match is None:
            raise InvalidRequestError(
                f"Request must specify a match for entity type {data.entity_type}")
        return FilterComponent(data.entity_type, data.match)
    if data.match_type == client_quotas.MATCH_DEFAULT:
        return FilterComponent(data.entity_type, None)
    if data.match_type == client_quotas.MATCH_SPECIFIED:
        return FilterComponent(data.entity_type, any_name=True)
    raise InvalidRequestError(f"Unexpected match type: {data.match_type}")


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1))
async def handle_describe_client_quotas(
        ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        error = ClusterAuthorizationFailedError()
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error.code,
                                            error_message=error.message, entries=None)
    try:
        components = [_component(data) for data in request.components]
        found = await client_quotas.describe_client_quotas(ctx.broker.zk_client, components,
                                                           request.strict)
    except KafkaError as exc:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=exc.code,
                                            error_message=exc.message, entries=None)
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        entries=[_Entry(entity=[_Entity(entity_type=entity_type, entity_name=name)
                                for entity_type, name in entity.items()],
                        values=[_Value(key=key, value=value) for key, value in quotas.items()])
                 for entity, quotas in found])
