"""Authorization: Kafka's AclAuthorizer over ACLs stored in ZooKeeper."""

from typing import Final

ACL_AUTHORIZER_CLASS_NAMES: Final = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)
"""The ``authorizer.class.name`` values served by the AclAuthorizer (Kafka 2.8's class and the
pre-2.4 one it replaced)."""
