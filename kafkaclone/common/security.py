"""Who is on the other end of a connection (Kafka's KafkaPrincipal).

A principal is a type and a name, written ``User:alice``. Kafka's authenticators give
``User:ANONYMOUS`` to a PLAINTEXT connection and to an SSL connection without a client
certificate; a SASL connection gets ``User:<authenticated name>``; an SSL connection with a
client certificate gets the name ``ssl.principal.mapping.rules`` makes of its subject DN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

USER_TYPE: Final = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal: ``principal_type`` (always ``User`` for the built-in authenticators)
    and ``name``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice") (Kafka's
        SecurityUtils.parseKafkaPrincipal); ValueError for text without a ``type:name``
        shape."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a string in format principalType:principalName "
                             f"but got {text}")
        return cls(principal_type, name)


ANONYMOUS: Final = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
"""The principal of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS)."""


def sanitize(name: str) -> str:
    """A user or client id as a znode name (Kafka's Sanitizer.sanitize: URL-encoded, ``*``
    as %2A)."""
    return quote(name, safe="-._")


def desanitize(name: str) -> str:
    return unquote(name)
