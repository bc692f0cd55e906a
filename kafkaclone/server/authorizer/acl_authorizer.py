"""Kafka's AclAuthorizer (kafka.security.authorizer.AclAuthorizer, Kafka 2.8, ZooKeeper mode).

ACLs live in ZooKeeper, one znode per resource pattern (``/kafka-acl/Topic/orders``,
``/kafka-acl-extended/prefixed/Group/app-``), and every broker keeps all of them in memory:
loaded at start, then refreshed resource by resource when a change notification appears
under ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes`` (ZkNodeChangeNotificationListener).
Requests are authorized against that cache only, so :meth:`AclAuthorizer.authorize` is a few
dictionary lookups and never waits for ZooKeeper.

A request is allowed when its principal is a super user (``super.users``), or when some ACL
on the resource allows it and none denies it:

- the ACLs that apply to a resource are those of its literal name, of the literal wildcard
  ``*`` of its type and of every PREFIXED pattern its name starts with;
- with no such ACL at all, ``allow.everyone.if.no.acl.found`` decides;
- an ACL applies to the principal itself or to ``User:*``, from its host or ``*``, for the
  operation itself or ``All``; DENY wins over ALLOW;
- an ALLOW of Read, Write, Delete or Alter also allows Describe; of AlterConfigs, also
  DescribeConfigs.

Writes (CreateAcls, DeleteAcls, kafka-acls.sh) change the resource's znode conditionally on
its zkVersion, re-reading and retrying when another broker wrote first (updateResourceAcls),
then announce the resource with a sequential change notification.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from kafkaclone.common.acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.common.errors import InvalidRequestError, KafkaError, UnknownServerError
from kafkaclone.common.security import KafkaPrincipal
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.znodes import (
    ACL_CHANGE_SEQUENCE_NUMBER_PREFIX,
    UNKNOWN_VERSION,
    AclChangeNotificationSequenceZNode,
    AclChangeNotificationZNode,
    ExtendedAclChangeNotificationSequenceZNode,
    ExtendedAclChangeNotificationZNode,
    Versioned,
)
from kafkaclone.zk.zookeeper_client import StateChangeHandler, ZNodeChildChangeHandler

logger = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
"""How long a change notification stays (ZkNodeChangeNotificationListener's default)."""
MAX_UPDATE_RETRIES: Final = 10
"""Conditional writes attempted per resource before giving up (AclAuthorizer.maxUpdateRetries)."""

_SPECIFIC_PATTERN_TYPES: Final = (PatternType.LITERAL, PatternType.PREFIXED)


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not value:
        return frozenset()
    return frozenset(str(KafkaPrincipal.parse(item.strip()))
                     for item in value.split(";") if item.strip())


def matching_acl_exists(acls: Iterable[AccessControlEntry], principal: str, host: str,
                        operation: AclOperation, permission_type: AclPermissionType) -> bool:
    """Whether an ACL of ``permission_type`` applies to the principal (or ``User:*``), the
    host (or ``*``) and the operation (or ``All``): AclAuthorizer.matchingAclExists."""
    return any(acl.permission_type == permission_type
               and acl.principal in (principal, WILDCARD_PRINCIPAL)
               and acl.operation in (operation, AclOperation.ALL)
               and acl.host in (host, WILDCARD_HOST)
               for acl in acls)


def acls_allow(acls: Sequence[AccessControlEntry], principal: str, host: str,
               operation: AclOperation, allow_everyone_if_no_acl_found: bool) -> bool:
    """AclAuthorizer.aclsAllowAccess over the ACLs that apply to the resource."""
    if not acls:
        return allow_everyone_if_no_acl_found
    if matching_acl_exists(acls, principal, host, operation, AclPermissionType.DENY):
        return False
    return any(matching_acl_exists(acls, principal, host, allowing, AclPermissionType.ALLOW)
               for allowing in IMPLIED_BY.get(operation, (operation,)))


@dataclass
class AclDeleteResult:
    """One DeleteAcls filter's outcome: the bindings it deleted, each with the error that
    kept its deletion from being written (None when it was)."""

    error: KafkaError | None
    deleted: list[tuple[AclBinding, KafkaError | None]]


class AclAuthorizer:
    """Authorizes requests against the ACLs of every broker's shared ZooKeeper store."""

    def __init__(self, zk_client: KafkaZkClient, reactor: Any, *,
                 super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._zk = zk_client
        self._reactor = reactor
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._versions: dict[ResourcePattern, int] = {}
        self._listeners = [
            _ChangeListener(zk_client, reactor, self.refresh, AclChangeNotificationZNode.PATH,
                            AclChangeNotificationSequenceZNode.decode),
            _ChangeListener(zk_client, reactor, self.refresh,
                            ExtendedAclChangeNotificationZNode.PATH,
                            ExtendedAclChangeNotificationSequenceZNode.decode),
        ]

    # -- lifecycle -------------------------------------------------------------------------

    async def startup(self) -> None:
        """Create the ACL paths, load every ACL, then follow the change notifications."""
        await self._zk.create_acl_paths()
        await self._load_cache()
        for listener in self._listeners:
            await listener.startup()

    def shutdown(self) -> None:
        for listener in self._listeners:
            listener.shutdown()

    async def _load_cache(self) -> None:
        for pattern_type in _SPECIFIC_PATTERN_TYPES:
            for type_name in await self._zk.get_resource_types(pattern_type):
                resource_type = ResourceType.from_string(type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    continue
                for name in await self._zk.get_resource_names(pattern_type, resource_type):
                    await self.refresh(ResourcePattern(resource_type, name, pattern_type))

    async def refresh(self, pattern: ResourcePattern) -> None:
        """Re-read one resource's ACLs from ZooKeeper into the cache (a change notification)."""
        try:
            versioned = await self._zk.get_versioned_acls_for_resource(pattern)
        except ZNodeDecodeError as exc:
            logger.error("Ignoring the unreadable ACLs of %s: %s", pattern, exc)
            return
        self._update_cache(pattern, versioned)

    # -- the cache -------------------------------------------------------------------------

    def _update_cache(self, pattern: ResourcePattern,
                      versioned: Versioned[set[AccessControlEntry]]) -> None:
        entries = frozenset(versioned.value)
        if pattern.pattern_type == PatternType.LITERAL:
            key = (pattern.resource_type, pattern.name)
            if entries:
                self._literal[key] = entries
            else:
                self._literal.pop(key, None)
        else:
            by_prefix = self._prefixed.setdefault(pattern.resource_type, {})
            if entries:
                by_prefix[pattern.name] = entries
            else:
                by_prefix.pop(pattern.name, None)
        if entries:
            self._versions[pattern] = versioned.zk_version
        else:
            self._versions.pop(pattern, None)

    def _cached(self, pattern: ResourcePattern) -> Versioned[set[AccessControlEntry]]:
        if pattern.pattern_type == PatternType.LITERAL:
            entries = self._literal.get((pattern.resource_type, pattern.name), frozenset())
        else:
            entries = self._prefixed.get(pattern.resource_type, {}).get(pattern.name, frozenset())
        return Versioned(set(entries), self._versions.get(pattern, UNKNOWN_VERSION))

    def bindings(self) -> list[AclBinding]:
        """Every cached ACL."""
        result = [AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL), entry)
                  for (resource_type, name), entries in self._literal.items()
                  for entry in entries]
        result += [AclBinding(ResourcePattern(resource_type, prefix, PatternType.PREFIXED), entry)
                   for resource_type, by_prefix in self._prefixed.items()
                   for prefix, entries in by_prefix.items() for entry in entries]
        return result

    def matching_acls(self, resource_type: ResourceType,
                      name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to the resource: its literal name's, the wildcard's and those
        of every prefix of its name (AclAuthorizer.matchingAcls)."""
        acls: list[AccessControlEntry] = []
        acls.extend(self._literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            acls.extend(self._literal.get((resource_type, WILDCARD_RESOURCE), ()))
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for end in range(1, len(name) + 1):
                acls.extend(by_prefix.get(name[:end], ()))
        return acls

    # -- authorization ---------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` connecting from ``host`` may do ``operation`` on the
        LITERAL resource ``resource_type``/``name``."""
        who = str(principal)
        if who in self.super_users:
            return True
        allowed = acls_allow(self.matching_acls(resource_type, name), who, host, operation,
                             self.allow_everyone_if_no_acl_found)
        if not allowed:
            logger.debug("Principal = %s is Denied Operation = %s from host = %s on resource "
                         "= %s:LITERAL:%s", who, operation.pascal_name, host,
                         resource_type.pascal_name, name)
        return allowed

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str,
                                   operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (KIP-679's
        authorizeByResourceType: an ALLOW, literal or prefixed, that no DENY covers)."""
        who = str(principal)
        if who in self.super_users:
            return True
        deny_literals: set[str] = set()
        deny_prefixes: set[str] = set()
        allow_literals: set[str] = set()
        allow_prefixes: set[str] = set()
        found = False
        for binding in self.bindings():
            if binding.pattern.resource_type != resource_type:
                continue
            found = True
            entry = binding.entry
            if entry.principal not in (who, WILDCARD_PRINCIPAL) \
                    or entry.host not in (host, WILDCARD_HOST) \
                    or entry.operation not in (operation, AclOperation.ALL):
                continue
            literal = binding.pattern.pattern_type == PatternType.LITERAL
            if entry.permission_type == AclPermissionType.DENY:
                (deny_literals if literal else deny_prefixes).add(binding.pattern.name)
            else:
                (allow_literals if literal else allow_prefixes).add(binding.pattern.name)
        if not found:
            return self.allow_everyone_if_no_acl_found
        if WILDCARD_RESOURCE in deny_literals:
            return False

        def denied(name: str) -> bool:
            return any(name.startswith(prefix) for prefix in deny_prefixes)

        if WILDCARD_RESOURCE in allow_literals:
            return True
        return any(not denied(prefix) for prefix in allow_prefixes) or any(
            name not in deny_literals and not denied(name) for name in allow_literals)

    # -- ACL management (CreateAcls / DescribeAcls / DeleteAcls) ---------------------------

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The cached ACLs the filter matches (AclAuthorizer.acls)."""
        return sorted(binding for binding in self.bindings() if binding_filter.matches(binding))

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Add the ACLs; per binding, None or the error that kept it from being stored."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            unknown = binding.unknown_element()
            if unknown is not None:
                results[index] = InvalidRequestError(
                    f"Failed to create ACL: ACL binding contains unknown elements ({unknown})")
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        for pattern, indexes in by_pattern.items():
            entries = {bindings[i].entry for i in indexes}
            try:
                await self._update_resource_acls(pattern, entries.union)
            except KafkaError as exc:
                for i in indexes:
                    results[i] = exc
            except Exception as exc:  # reported per binding, as Kafka does
                logger.error("Failed to update ACLs for %s", pattern, exc_info=exc)
                for i in indexes:
                    results[i] = UnknownServerError(f"Failed to update ACLs for {pattern}")
        return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Delete the ACLs each filter matches; each deleted binding is reported under the
        first filter that matched it (AclAuthorizer.deleteAcls)."""
        results = [AclDeleteResult(None, []) for _ in filters]
        valid: list[tuple[int, AclBindingFilter]] = []
        for index, binding_filter in enumerate(filters):
            unknown = binding_filter.unknown_element()
            if unknown is None:
                valid.append((index, binding_filter))
            else:
                results[index].error = InvalidRequestError(
                    f"Filter contains unknown elements ({unknown})")
        patterns = sorted({binding.pattern for binding in self.bindings()})
        for pattern in patterns:
            matching = [(i, f) for i, f in valid if f.pattern_filter.matches(pattern)]
            if not matching:
                continue
            deleted_here: dict[AclBinding, int] = {}

            def remaining(current: set[AccessControlEntry], pattern: ResourcePattern = pattern,
                          matching: list[tuple[int, AclBindingFilter]] = matching,
                          deleted_here: dict[AclBinding, int] = deleted_here,
                          ) -> set[AccessControlEntry]:
                deleted_here.clear()
                kept = set()
                for entry in current:
                    first = next((i for i, f in matching if f.entry_filter.matches(entry)), None)
                    if first is None:
                        kept.add(entry)
                    else:
                        deleted_here[AclBinding(pattern, entry)] = first
                return kept

            error: KafkaError | None = None
            try:
                await self._update_resource_acls(pattern, remaining)
            except KafkaError as exc:
                error = exc
            except Exception as exc:  # reported per binding, as Kafka does
                logger.error("Failed to update ACLs for %s", pattern, exc_info=exc)
                error = UnknownServerError(f"Failed to update ACLs for {pattern}")
            for binding, index in sorted(deleted_here.items()):
                results[index].deleted.append((binding, error))
        return results

    async def _update_resource_acls(
        self, pattern: ResourcePattern,
        new_acls: Callable[[set[AccessControlEntry]], set[AccessControlEntry]],
    ) -> bool:
        """Write ``new_acls(current)`` for the resource, conditionally on the zkVersion read,
        re-reading from ZooKeeper and retrying when another writer came first; announce the
        change. Whether the ACLs changed."""
        current = self._cached(pattern)
        if current.zk_version == UNKNOWN_VERSION:
            current = await self._zk.get_versioned_acls_for_resource(pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            wanted: set[AccessControlEntry] = new_acls(current.value)
            if wanted:
                if current.zk_version == UNKNOWN_VERSION:
                    done, version = await self._zk.create_acls_for_resource_if_not_exists(
                        pattern, wanted)
                else:
                    done, version = await self._zk.conditional_set_acls_for_resource(
                        pattern, wanted, current.zk_version)
            else:
                done = await self._zk.delete_resource(pattern, current.zk_version)
                version = UNKNOWN_VERSION
            if done:
                break
            current = await self._zk.get_versioned_acls_for_resource(pattern)
        else:
            raise UnknownServerError(
                f"Failed to update ACLs for {pattern} after trying a maximum of "
                f"{MAX_UPDATE_RETRIES} times")
        if wanted == current.value:
            return False
        self._update_cache(pattern, Versioned(wanted, version))
        await self._zk.create_acl_change_notification(pattern)
        return True


class _ChangeListener:
    """Follows one change-notification path (Kafka's ZkNodeChangeNotificationListener):
    every notification newer than the last one processed makes the authorizer re-read the
    resource it names; notifications older than 15 minutes are deleted."""

    def __init__(self, zk_client: KafkaZkClient, reactor: Any,
                 refresh: Callable[[ResourcePattern], Awaitable[None]], path: str,
                 decode: Callable[[bytes], ResourcePattern]) -> None:
        self._zk = zk_client
        self._reactor = reactor
        self._refresh = refresh
        self.path = path
        self._decode = decode
        self.last_executed_change = -1
        self._running = False
        self._processing: Deferred[None] | None = None
        self._again = False
        outer = self

        class _Changes(ZNodeChildChangeHandler):
            def handle_child_change(self) -> None:
                outer.schedule()

        class _Session(StateChangeHandler):
            def after_initializing_session(self) -> None:
                outer.schedule()

        self._child_handler = _Changes(path)
        self._session_handler = _Session(f"acl-changes:{path}")

    async def startup(self) -> None:
        self._running = True
        self._zk.register_znode_child_change_handler(self._child_handler)
        self._zk.register_state_change_handler(self._session_handler)
        await self._process_notifications()

    def shutdown(self) -> None:
        self._running = False
        self._zk.unregister_znode_child_change_handler(self.path)
        self._zk.unregister_state_change_handler(self._session_handler.name)

    def schedule(self) -> None:
        """One pass at a time; another after it when more notifications arrived meanwhile."""
        if not self._running:
            return
        if self._processing is not None:
            self._again = True
            return
        self._processing = Deferred.fromCoroutine(self._process_notifications())

        def done(result: object) -> None:
            self._processing = None
            if self._again:
                self._again = False
                self.schedule()

        def failed(failure: Failure) -> None:
            if self._running:  # after shutdown the ZooKeeper session may be gone
                logger.error("Processing ACL changes failed: %s", failure.getErrorMessage())

        self._processing.addErrback(failed)
        self._processing.addBoth(done)

    async def _process_notifications(self) -> None:
        children = await self._zk.get_children(self.path, register_watch=True)
        now_ms = int(self._reactor.seconds() * 1000)
        for child in sorted(children):
            if not child.startswith(ACL_CHANGE_SEQUENCE_NUMBER_PREFIX):
                continue
            try:
                sequence = int(child[len(ACL_CHANGE_SEQUENCE_NUMBER_PREFIX):])
            except ValueError:
                continue
            found = await self._zk.get_data_and_stat(f"{self.path}/{child}")
            if found is None:
                continue
            data, stat = found
            if sequence > self.last_executed_change:
                try:
                    await self._refresh(self._decode(data))
                except ZNodeDecodeError as exc:
                    logger.error("Skipping ACL change notification %s: %s", child, exc)
                self.last_executed_change = sequence
            if int(stat.ctime) < now_ms - CHANGE_EXPIRATION_MS:
                await self._zk.delete_path(f"{self.path}/{child}")
