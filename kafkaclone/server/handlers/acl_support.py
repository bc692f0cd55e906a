"""What the three ACL APIs share (Kafka's KafkaApis for CreateAcls, DescribeAcls,
DeleteAcls): the cluster permission they need, and SECURITY_DISABLED without an
authorizer."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    SecurityDisabledError,
)
from kafkaclone.server.handlers.registry import RequestContext


def acl_api_refusal(ctx: RequestContext, operation: AclOperation) -> KafkaError | None:
    """Why the request is refused as a whole (``operation`` on the cluster missing, or no
    authorizer configured), or None."""
    if not ctx.authorize_cluster(operation):
        return ClusterAuthorizationFailedError()
    if ctx.broker.authorizer is None:
        return SecurityDisabledError("No Authorizer is configured on the broker")
    return None
