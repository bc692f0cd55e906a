"""The handler registry: one handler per API, registered with the versions it serves.

A handler module registers its handler with the :func:`handler` decorator, naming the API
and the inclusive range of versions it serves: ``@handler(ApiKey.HEARTBEAT, versions=(0, 4))``
over ``handle_heartbeat(ctx, request)`` in handlers/heartbeat.py. A handler takes its API's
request class and returns its response class (the typed classes of
:mod:`kafkaclone.protocol.message_types`), so mypy checks every field it reads or sets.

Authorization is asked of the context: ``ctx.authorize(operation, resource_type, name)``,
``ctx.authorize_cluster(operation)`` and ``ctx.unauthorized_names(...)`` consult the broker's
AclAuthorizer, and without one cost a single attribute check (everything is allowed).

The broker's ApiVersions answer is computed from this registry, so an API is advertised
exactly when, and at exactly the versions, something serves it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypeVar

from kafkaclone.common.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkaclone.network.socket_server import ConnectionInfo
from kafkaclone.protocol.api import APIS, Api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.quota import NO_QUOTAS, QuotaManagers

if TYPE_CHECKING:
    from kafkaclone.server.services import BrokerServices


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body. Not to be changed by a
    handler (not frozen only because a frozen dataclass costs some µs more to build, once
    per request)."""

    api: Api
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: ConnectionInfo
    broker: BrokerServices
    request_size: int = 0
    """The request's size in bytes (its header included, as Kafka's sizeInBytes)."""
    quotas: QuotaManagers = NO_QUOTAS
    """The broker's client quotas (produce, fetch, request)."""

    def authorize(self, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether the request's principal may do ``operation`` on the resource (Kafka's
        KafkaApis.authorize); always True without an authorizer."""
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize(
            self.connection.principal, self.connection.client_host, operation,
            resource_type, name)

    def authorize_cluster(self, operation: AclOperation) -> bool:
        """``authorize`` on the cluster resource (``kafka-cluster``)."""
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_by_resource_type(self, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on some resource of the type (KIP-679; Kafka 2.8's
        InitProducerId lets an idempotent producer in with IdempotentWrite on the cluster or
        Write on any topic); always True without an authorizer."""
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(
            self.connection.principal, self.connection.client_host, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str,
                              operations: Iterable[AclOperation]) -> int:
        """The bit field of ``operations`` allowed on the resource (Kafka's
        authorizedOperations, as Metadata, DescribeCluster and DescribeGroups report it)."""
        return sum(1 << op for op in operations if self.authorize(op, resource_type, name))

    def unauthorized_names(self, operation: AclOperation, resource_type: ResourceType,
                           names: Iterable[str]) -> frozenset[str]:
        """The names among ``names`` the principal may not do ``operation`` on (the
        complement of Kafka's filterByAuthorized); empty without an authorizer, at the cost
        of one attribute check."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return _NONE_DENIED
        principal, host = self.connection.principal, self.connection.client_host
        return frozenset(name for name in set(names) if not authorizer.authorize(
            principal, host, operation, resource_type, name))


_NONE_DENIED: Final[frozenset[str]] = frozenset()


RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")
HandlerFn = Callable[[RequestContext, RequestT], Awaitable[ResponseT]]
"""A handler of one API: its request class in, its response class out."""


class FastPathDeclined(Enum):
    DECLINED = "declined"


DECLINED: Final = FastPathDeclined.DECLINED
"""What a fast path answers for a request it does not serve (the handler gets it)."""

FastPathFn = Callable[[RequestContext, bytearray, int], Any]
"""A handler's fast path for its common shape (:func:`fast_path`): the context, the
request frame (writable) and the body's position in it; the response (or an
:class:`~kafkaclone.protocol.api.EncodedResponse`), None for no response, or
:data:`DECLINED`."""


@dataclass(frozen=True)
class RegisteredHandler:
    key: ApiKey
    min_version: int
    max_version: int
    fn: HandlerFn[Any, Any]
    fast: FastPathFn | None = None
    fast_versions: tuple[int, int] = (0, -1)

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def fast_path_for(self, version: int) -> FastPathFn | None:
        low, high = self.fast_versions
        return self.fast if low <= version <= high else None


HANDLERS: Final[dict[ApiKey, RegisteredHandler]] = {}


def handler(
    key: ApiKey, *, versions: tuple[int, int]
) -> Callable[[HandlerFn[RequestT, ResponseT]], HandlerFn[RequestT, ResponseT]]:
    """Register ``fn`` as the handler of ``key`` for the inclusive version range."""
    low, high = versions
    declared = APIS[key]
    if low < declared.min_version or high > declared.max_version or low > high:
        raise ValueError(
            f"{key.name} handler versions {low}-{high} are outside the declared "
            f"{declared.min_version}-{declared.max_version}"
        )

    def register(fn: HandlerFn[RequestT, ResponseT]) -> HandlerFn[RequestT, ResponseT]:
        if key in HANDLERS:
            raise ValueError(f"{key.name} already has a handler")
        HANDLERS[key] = RegisteredHandler(key, low, high, fn)
        return fn

    return register


def fast_path(key: ApiKey, *, versions: tuple[int, int]
              ) -> Callable[[FastPathFn], FastPathFn]:
    """Register ``fn`` as the fast path of ``key``'s handler (registered first) for the
    inclusive version range: the dispatcher tries it before decoding the request, when no
    client quota is on. It reads the frame itself and answers synchronously, exactly as the
    handler would, or returns :data:`DECLINED` before changing anything for a request it
    does not serve, which then goes to the handler."""
    low, high = versions

    def register(fn: FastPathFn) -> FastPathFn:
        registered = HANDLERS[key]
        if low < registered.min_version or high > registered.max_version or low > high:
            raise ValueError(f"{key.name} fast path versions {low}-{high} are not served")
        HANDLERS[key] = replace(registered, fast=fn, fast_versions=versions)
        return fn

    return register


def load_handlers() -> dict[ApiKey, RegisteredHandler]:
    """Import every handler module in this package; returns the registry."""
    package = importlib.import_module(__package__ or "kafkaclone.server.handlers")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "registry":
            importlib.import_module(f"{package.__name__}.{info.name}")
    return HANDLERS


def supported_versions() -> list[tuple[ApiKey, int, int]]:
    """(key, min, max) of every served API, by key: what ApiVersions advertises."""
    return [(h.key, h.min_version, h.max_version) for _, h in sorted(HANDLERS.items())]
