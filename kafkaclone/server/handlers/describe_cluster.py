"""DescribeCluster (key 60), v0 (KIP-700): the live brokers on the listener the request
came in on, the controller and the cluster id, from the metadata cache, as Kafka 2.8's
KafkaApis.handleDescribeCluster answers (with no authorizer every operation is allowed)."""

from __future__ import annotations

from kafkaclone.common.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkaclone.common.errors import NONE
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DescribeClusterRequest, DescribeClusterResponse
from kafkaclone.server.handlers.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_ACL_OPERATIONS,
    CLUSTER_OPERATIONS,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_Broker = DescribeClusterResponse.DescribeClusterBroker


def _cluster_operations(ctx: RequestContext) -> int:
    """What the principal may do on the cluster (0 without Describe on it)."""
    if ctx.broker.authorizer is None:
        return CLUSTER_OPERATIONS
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_ACL_OPERATIONS)


@handler(ApiKey.DESCRIBE_CLUSTER, versions=(0, 0))
async def handle_describe_cluster(
        ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker: BrokerServices = ctx.broker
    cache = broker.metadata_cache
    controller_id = cache.controller_id
    return DescribeClusterResponse(
        error_code=NONE,
        error_message=None,
        cluster_id=broker.cluster_id or "",
        controller_id=-1 if controller_id is None else controller_id,
        brokers=[_Broker(broker_id=b.id, host=ep.host or "", port=ep.port, rack=b.rack)
                 for b, ep in cache.alive_endpoints(ctx.connection.listener_name)],
        cluster_authorized_operations=(_cluster_operations(ctx)
                                       if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
