"""What the consumer group handlers share: authorized operations and client hosts."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.server.handlers.registry import RequestContext

GROUP_ACL_OPERATIONS = (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE)
"""The operations Kafka knows on a group (their bits are DescribeGroups' authorized
operations)."""
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in GROUP_ACL_OPERATIONS)
"""With no authorizer, every group operation Kafka knows is allowed: READ, DELETE, DESCRIBE."""


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it (``InetAddress.toString``: ``/127.0.0.1``)."""
    return f"/{ctx.connection.client_host}"
