"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them (Kafka's
ScramFormatter, ScramSaslServer, ScramSaslClient and ScramCredentialUtils).

Written on ``hashlib``/``hmac`` rather than the ``scramp`` library: the exchange is a few
HMACs, the broker must verify against Kafka's stored form (salt, StoredKey, ServerKey,
iterations read from ``/config/users/<user>``) and answer with Kafka's error texts, the
broker and the project's blocking clients both need it (so it sits on the common floor,
which takes no third-party dependency for it), and Kafka's ``tokenauth`` extension must be
read from the client-first message; by hand that is shorter than adapting a library.

Credentials are stored as Kafka writes them under ``/config/users/<user>`` with the
mechanism name as the config key: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,
iterations=<n>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

SCRAM_MECHANISMS: Final[dict[str, str]] = {
    "SCRAM-SHA-256": "sha256",
    "SCRAM-SHA-512": "sha512",
}
"""The mechanism names Kafka serves, with their hash."""
MIN_ITERATIONS: Final = 4096
"""Kafka's ScramMechanism.minIterations (both mechanisms)."""
DEFAULT_ITERATIONS: Final = 4096


class ScramError(Exception):
    """The exchange failed: a malformed message, an unknown user or a wrong proof."""


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps of a password (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config_value(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_config_value(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString; ValueError if malformed."""
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, equals, value = item.partition("=")
            if not equals:
                raise ValueError("SCRAM credential is not salt=,stored_key=,server_key=,"
                                 "iterations=")
            fields[key.strip()] = value.strip()
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"SCRAM credential is malformed: {exc.__class__.__name__}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hash_name(mechanism: str) -> str:
    try:
        return SCRAM_MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unsupported SCRAM mechanism {mechanism}") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt,
                               iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (Kafka's ScramFormatter.generateCredential)."""
    hash_name = _hash_name(mechanism)
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum "
                         f"{MIN_ITERATIONS} for {mechanism}")
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted, b"Server Key"), iterations)


def _nonce() -> str:
    return secrets.token_urlsafe(24)


def _attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for item in message.split(","):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ScramError("Invalid SCRAM message")
        attributes[key] = value
    return attributes


def _decode_saslname(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username")
    return name.replace("=2C", ",").replace("=3D", "=")


def _encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramServerExchange:
    """The broker's side of one exchange: client-first -> server-first, client-final ->
    server-final. ``lookup(username)`` gives the user's credential or None."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self.username: str | None = None
        self.token_auth = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def client_first(self, message: bytes,
                     credential_of: Mapping[str, ScramCredential]) -> bytes:
        text = message.decode("utf-8", errors="replace")
        gs2_cbind, _, rest = text.partition(",")
        authzid, comma, bare = rest.partition(",")
        if gs2_cbind not in {"n", "y"} or not comma:
            raise ScramError("Invalid SCRAM client first message")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or "m" in attributes:
            raise ScramError("Invalid SCRAM client first message")
        username = _decode_saslname(attributes["n"])
        if authzid and authzid != f"a={attributes['n']}":
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        self.token_auth = attributes.get("tokenauth", "false").lower() == "true"
        credential = None if self.token_auth else credential_of.get(username)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.username = username
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attributes["r"] + _nonce()
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode("ascii")

    def client_final(self, message: bytes) -> bytes:
        credential = self._credential
        if credential is None:
            raise ScramError("Invalid SCRAM state")
        text = message.decode("utf-8", errors="replace")
        without_proof, _, proof_part = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        # Kafka's ScramSaslServer checks endsWith, not equality: older librdkafka (kcat on
        # Debian) sends its own nonce again in front of the combined one.
        if not attributes.get("r", "").endswith(self._nonce) or not proof_part:
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message") from None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 without_proof)).encode("utf-8")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise ScramError("Authentication failed: Invalid client credentials")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        return f"v={_b64(server_signature)}".encode("ascii")


class ScramClientExchange:
    """A client's side: ``first()``, then ``final(server_first)``, then
    ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._password = password
        self._nonce = _nonce()
        self._client_first_bare = f"n={_encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        attributes = _attributes(text)
        if "e" in attributes:
            raise ScramError(f"SCRAM server error: {attributes['e']}")
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or "s" not in attributes or "i" not in attributes:
            raise ScramError("Invalid SCRAM server first message")
        salt = base64.b64decode(attributes["s"])
        iterations = int(attributes["i"])
        salted = salted_password(self._mechanism, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attributes = _attributes(server_final.decode("utf-8", errors="replace"))
        if "e" in attributes:
            raise ScramError(f"SCRAM server error: {attributes['e']}")
        if not hmac.compare_digest(base64.b64decode(attributes.get("v", "")),
                                   self._server_signature):
            raise ScramError("Invalid server signature in SCRAM server final message")
