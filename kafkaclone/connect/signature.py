"""Signed requests between the workers of a ``sessioned`` group (KIP-507; Kafka's
``InternalRequestSignature`` and the session key of ``KafkaConfigBackingStore``).

The leader generates a session key (``inter.worker.key.generation.algorithm``,
``inter.worker.key.size``) and writes it to the config topic as the record ``session-key``
with Kafka's value ``{"key": <base64>, "algorithm": ..., "creation-timestamp": <ms>}``;
every worker reads it from there. The leader writes a new one when
``inter.worker.key.ttl.ms`` has passed. A worker forwarding its connector's task configs
to the leader (``POST /connectors/{name}/tasks``) signs the request body with it
(``inter.worker.signature.algorithm``): the base64 HMAC goes in the header
``X-Connect-Authorization``, the algorithm in ``X-Connect-Request-Signature-Algorithm``.
The leader checks both against its key and ``inter.worker.verification.algorithms``.

Algorithms are the JVM's ``Mac`` names; Python's hmac computes the same digests.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

SIGNATURE_HEADER: Final = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER: Final = "X-Connect-Request-Signature-Algorithm"
SESSION_KEY_RECORD: Final = "session-key"

HMAC_DIGESTS: Final = {"HmacSHA1": "sha1", "HmacSHA224": "sha224", "HmacSHA256": "sha256",
                       "HmacSHA384": "sha384", "HmacSHA512": "sha512"}
"""The Mac algorithms a worker can generate keys for, sign and verify with."""

DEFAULT_KEY_BITS: Final = {"HmacSHA1": 512, "HmacSHA224": 224, "HmacSHA256": 256,
                           "HmacSHA384": 384, "HmacSHA512": 512}
"""The JVM's KeyGenerator default key sizes (used when ``inter.worker.key.size`` is null)."""


class SignatureError(Exception):
    """A request the leader refuses: the HTTP status and Kafka's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class SessionKey:
    key: bytes
    algorithm: str
    creation_timestamp: int

    def to_json(self) -> dict[str, object]:
        return {"key": base64.b64encode(self.key).decode("ascii"),
                "algorithm": self.algorithm, "creation-timestamp": self.creation_timestamp}

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> SessionKey:
        return cls(base64.b64decode(str(value["key"])), str(value["algorithm"]),
                   int(str(value["creation-timestamp"])))


def generate_key(algorithm: str, size_bits: int | None, now_ms: int) -> SessionKey:
    bits = DEFAULT_KEY_BITS[algorithm] if size_bits is None else size_bits
    return SessionKey(secrets.token_bytes((bits + 7) // 8), algorithm, now_ms)


def sign(key: SessionKey, algorithm: str, body: bytes) -> dict[str, str]:
    """The two headers of a signed request."""
    digest = hmac.new(key.key, body, HMAC_DIGESTS[algorithm]).digest()
    return {SIGNATURE_HEADER: base64.b64encode(digest).decode("ascii"),
            SIGNATURE_ALGORITHM_HEADER: algorithm}


def verify(key: SessionKey | None, allowed: tuple[str, ...], body: bytes,
           headers: Mapping[str, str]) -> None:
    """Kafka's ``verifyInternalRequestSignature``; ``headers`` keyed in lower case."""
    signature = headers.get(SIGNATURE_HEADER.lower())
    algorithm = headers.get(SIGNATURE_ALGORITHM_HEADER.lower())
    if signature is None or algorithm is None:
        raise SignatureError(400, "Internal request missing required signature")
    if algorithm not in allowed or algorithm not in HMAC_DIGESTS:
        raise SignatureError(400, f"This worker does not support the algorithm {algorithm} "
                             "for verifying internal requests")
    if key is None:
        raise SignatureError(403, "This worker has no session key yet to verify internal "
                             "requests with")
    try:
        given = base64.b64decode(signature, validate=True)
    except ValueError:
        raise SignatureError(403, "Internal request contained invalid signature") from None
    expected = hmac.new(key.key, body, HMAC_DIGESTS[algorithm]).digest()
    if not hmac.compare_digest(given, expected):
        raise SignatureError(403, "Internal request contained invalid signature")


