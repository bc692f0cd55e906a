"""ACL vocabulary: Kafka's enum spellings and codes, and the filters' matching rules
(ResourcePatternFilter / AccessControlEntryFilter)."""

from __future__ import annotations

from kafkaclone.common.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafkaclone.common.security import ANONYMOUS, KafkaPrincipal


def test_enum_codes_and_spellings_are_kafkas() -> None:
    assert (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
            ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN) == (2, 3, 4, 5, 6)
    assert AclOperation.IDEMPOTENT_WRITE == 12 and AclPermissionType.ALLOW == 3
    assert PatternType.PREFIXED == 4
    assert ResourceType.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert AclOperation.CLUSTER_ACTION.pascal_name == "ClusterAction"
    for text in ("ClusterAction", "CLUSTER_ACTION", "clusteraction", "cluster-action"):
        assert AclOperation.from_string(text) is AclOperation.CLUSTER_ACTION
    assert ResourceType.from_string("Topic") is ResourceType.TOPIC
    assert ResourceType.from_string("nonsense") is ResourceType.UNKNOWN
    assert AclOperation.from_code(99) is AclOperation.UNKNOWN


def test_principal_text_form() -> None:
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse("User:CN=a,O=b") == KafkaPrincipal("User", "CN=a,O=b")
    for bad in ("alice", ":alice", "User:"):
        try:
            KafkaPrincipal.parse(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_printed_forms_match_kafkas_tool_output() -> None:
    pattern = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    entry = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert str(pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


LITERAL = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
WILDCARD = ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL)
PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
OTHER_PREFIX = ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, "orders", PatternType.LITERAL)


def matching(pattern_filter: ResourcePatternFilter) -> set[ResourcePattern]:
    return {p for p in (LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP)
            if pattern_filter.matches(p)}


def test_pattern_filters() -> None:
    assert matching(ResourcePatternFilter()) == {LITERAL, WILDCARD, PREFIX, OTHER_PREFIX, GROUP}
    assert matching(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)) \
        == {LITERAL}
    # ANY: the exact name in any pattern type, no wildcard or prefix matching.
    assert matching(ResourcePatternFilter(ResourceType.ANY, "orders", PatternType.ANY)) \
        == {LITERAL, GROUP}
    # MATCH: every pattern that applies to the named resource.
    assert matching(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)) \
        == {LITERAL, WILDCARD, PREFIX}
    assert matching(ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.PREFIXED)) \
        == {PREFIX, OTHER_PREFIX}


def test_entry_filters_and_unknown_elements() -> None:
    entry = AccessControlEntry("User:alice", "10.0.0.1", AclOperation.READ,
                               AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter(principal="User:alice", host="10.0.0.1").matches(entry)
    assert not AccessControlEntryFilter(host="*").matches(entry)
    assert not AccessControlEntryFilter(operation=AclOperation.WRITE).matches(entry)
    assert AclBinding(LITERAL, entry).unknown_element() is None
    assert AclBinding(ResourcePattern(ResourceType.ANY, "x"), entry).unknown_element() \
        == "resource type"
    assert AclBinding(ResourcePattern(ResourceType.TOPIC, "x", PatternType.MATCH),
                      entry).unknown_element() == "pattern type"
