"""ACL vocabulary: Kafka's org.apache.kafka.common.acl and org.apache.kafka.common.resource.

The enums carry Kafka's wire codes (CreateAcls, DescribeAcls, DeleteAcls) and know their two
spellings: the Java enum name (``TOPIC``, ``CLUSTER_ACTION``) and the name Kafka writes in
ZooKeeper and prints in PascalCase (``Topic``, ``ClusterAction``; SecurityUtils'
resourceTypeName / operationName / permissionTypeName). A :class:`ResourcePattern` and an
:class:`AccessControlEntry` make an :class:`AclBinding`; the ``*Filter`` classes match them
as Kafka's ResourcePatternFilter / AccessControlEntryFilter do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, TypeVar

WILDCARD_RESOURCE: Final = "*"
"""A LITERAL resource name that matches every name (ResourcePattern.WILDCARD_RESOURCE)."""
WILDCARD_PRINCIPAL: Final = "User:*"
"""A principal that matches every principal (AclEntry.WildcardPrincipalString)."""
WILDCARD_HOST: Final = "*"
CLUSTER_NAME: Final = "kafka-cluster"
"""The one name of the CLUSTER resource (Resource.CLUSTER_NAME)."""


def _pascal(name: str) -> str:
    return "".join(word.capitalize() for word in name.split("_"))


E = TypeVar("E", bound="_AclEnum")


class _AclEnum(enum.IntEnum):
    @property
    def pascal_name(self) -> str:
        """``Topic``, ``ClusterAction``: how Kafka writes it in ZooKeeper."""
        return _pascal(self.name)

    @classmethod
    def from_string(cls: type[E], text: str) -> E:
        """The member named ``text`` in either spelling, case-insensitively
        (``topic``, ``Topic``, ``TOPIC``, ``ClusterAction``, ``cluster_action``); UNKNOWN
        for anything else."""
        wanted = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        return cls(0)

    @classmethod
    def from_code(cls: type[E], code: int) -> E:
        """The member with wire code ``code``; UNKNOWN for an unknown code."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        """LITERAL or PREFIXED: a pattern an ACL can be stored under."""
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}
"""The operations whose ALLOW also allows the key (AclAuthorizer: Describe is implied by
Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs). ALL allows everything."""


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A resource an ACL is attached to: a literal name (``*`` for every name) or a prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """Who may (or may not) do what from where: principal (``User:alice``), host (an IP
    address or ``*``), operation and permission."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def unknown_element(self) -> str | None:
        """What makes this binding impossible to store, None if nothing
        (AclBinding.isUnknown and AuthorizerUtils.validateAclBinding)."""
        if self.pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return "resource type"
        if not self.pattern.pattern_type.is_specific:
            return "pattern type"
        if self.entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return "operation"
        if self.entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
            return "permission type"
        return None


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Matches resource patterns (ResourcePatternFilter): ANY type, a null name and the ANY
    pattern type match everything; MATCH matches the patterns that would apply to the named
    resource (its literal name, the wildcard, and the prefixes of the name)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
                f"patternType={self.pattern_type.name})")

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) \
                and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def unknown_element(self) -> str | None:
        if self.resource_type == ResourceType.UNKNOWN:
            return "resource type"
        if self.pattern_type == PatternType.UNKNOWN:
            return "pattern type"
        return None


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Matches entries (AccessControlEntryFilter): null / ANY fields match everything."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY
                     or self.permission_type == entry.permission_type))

    def unknown_element(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "operation"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "permission type"
        return None


@dataclass(frozen=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) \
            and self.entry_filter.matches(binding.entry)

    def unknown_element(self) -> str | None:
        return self.pattern_filter.unknown_element() or self.entry_filter.unknown_element()


ANY_FILTER: Final = AclBindingFilter(ResourcePatternFilter(), AccessControlEntryFilter())
