"""Who a request comes from: Kafka's KafkaPrincipal (org.apache.kafka.common.security.auth)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

USER_TYPE: Final = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal: its type (``User``) and name; ``str()`` is Kafka's ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @staticmethod
    def from_string(text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice") (Kafka's
        SecurityUtils.parseKafkaPrincipal); ValueError for text without a ``type:name`` shape."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a string in format principalType:principalName "
                             f"but got {text}")
        return KafkaPrincipal(principal_type, name)


ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
"""The principal of an unauthenticated connection (KafkaPrincipal.ANONYMOUS)."""
