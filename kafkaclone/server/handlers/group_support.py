"""What the consumer group handlers share: the broker's GroupCoordinator and client hosts."""

from __future__ import annotations

from typing import Any

from kafkaclone.common.errors import CoordinatorNotAvailableError
from kafkaclone.coordinator.group.coordinator import GroupCoordinator
from kafkaclone.server.handlers.registry import RequestContext

GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 6, 8))
"""With no authorizer, every group operation Kafka knows is allowed: READ, DELETE, DESCRIBE."""


def coordinator_of(ctx: RequestContext) -> GroupCoordinator:
    """The broker's group coordinator (COORDINATOR_NOT_AVAILABLE while it is not running)."""
    coordinator: Any = getattr(ctx.broker, "group_coordinator", None)
    if not isinstance(coordinator, GroupCoordinator):
        raise CoordinatorNotAvailableError("the group coordinator is not running")
    return coordinator


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka reports it (``InetAddress.toString``: ``/127.0.0.1``)."""
    return f"/{ctx.connection.client_host}"
