"""SASL on a broker connection (Kafka's SaslServerAuthenticator, KIP-43 and KIP-152).

Until a SASL_PLAINTEXT or SASL_SSL connection has authenticated it may send only:

1. ApiVersions (any number, before the handshake), answered by the broker's dispatcher;
2. SaslHandshake v0 or v1 naming a mechanism of ``sasl.enabled.mechanisms`` (otherwise
   UNSUPPORTED_SASL_MECHANISM and the connection is closed);
3. the mechanism's tokens: after SaslHandshake v1, each in a SaslAuthenticate v0-2 request;
   after SaslHandshake v0, as raw length-prefixed frames without a Kafka header, answered
   the same way (clients from before KIP-152).

Anything else closes the connection, as Kafka does. A failed authentication is answered
SASL_AUTHENTICATION_FAILED with Kafka's message ("Authentication failed during
authentication due to invalid credentials with SASL mechanism <m>") and the connection is
closed once the answer is out; in the raw-token mode the connection is just closed. On
success the connection's principal becomes ``User:<name>``.

Mechanisms: PLAIN (RFC 4616, users from the listener's ``user_<name>="<password>"`` JAAS
options) and SCRAM-SHA-256/512 (kafkaclone.common.scram, credentials from a
:class:`ScramCredentialCache` the broker keeps in step with ``/config/users``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from kafkaclone.common.errors import (
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kafkaclone.common.scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramError,
    ScramServerExchange,
)
from kafkaclone.common.security import KafkaPrincipal
from kafkaclone.protocol import api as protocol_api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

log = logging.getLogger(__name__)

PLAIN: Final = "PLAIN"
SERVED_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)
"""The mechanisms this broker can serve (GSSAPI and OAUTHBEARER are not built)."""


class ScramCredentialCache:
    """The SCRAM credentials of every user, per mechanism (Kafka's CredentialCache): filled
    from ``/config/users/<user>`` at start and on change notifications."""

    def __init__(self) -> None:
        self._by_mechanism: dict[str, dict[str, ScramCredential]] = {
            mechanism: {} for mechanism in SCRAM_MECHANISMS}

    def credentials(self, mechanism: str) -> Mapping[str, ScramCredential]:
        return self._by_mechanism[mechanism]

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s credentials with those in its config (a malformed one is
        dropped with a warning: the user cannot authenticate with it)."""
        for mechanism, credentials in self._by_mechanism.items():
            value = config.get(mechanism)
            credentials.pop(user, None)
            if value is None:
                continue
            try:
                credentials[user] = ScramCredential.from_config_value(value)
            except ValueError as exc:
                log.warning("Ignoring the %s credential of user %s: %s", mechanism, user, exc)

    def remove_user(self, user: str) -> None:
        for credentials in self._by_mechanism.values():
            credentials.pop(user, None)


@dataclass(frozen=True)
class SaslServerConfig:
    """A SASL listener's settings: the enabled mechanisms, PLAIN's users (name ->
    password, from the JAAS config) and the SCRAM credentials."""

    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credentials: ScramCredentialCache = field(default_factory=ScramCredentialCache)


class SaslMechanismServer(Protocol):
    """One exchange of one mechanism: evaluate each client token, give the answer."""

    complete: bool
    username: str | None

    def evaluate(self, token: bytes) -> bytes: ...


class _SaslFailed(Exception):
    """The client's credentials were refused (the reason is logged, never sent)."""


class PlainServer:
    """RFC 4616: one token ``authzid NUL authcid NUL passwd`` (Kafka's PlainSaslServer)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", errors="replace").split("\x00")
        if len(parts) != 3:
            raise _SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, username, password = parts
        if not username:
            raise _SaslFailed("Authentication failed: username not specified")
        if authzid and authzid != username:
            raise _SaslFailed("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise _SaslFailed("Authentication failed: Invalid username or password")
        self.username = username
        self.complete = True
        return b""


class ScramServer:
    """The two rounds of SCRAM (Kafka's ScramSaslServer)."""

    def __init__(self, mechanism: str, credentials: Mapping[str, ScramCredential]) -> None:
        self._exchange = ScramServerExchange(mechanism)
        self._credentials = credentials
        self._round = 0
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._round == 0:
                self._round = 1
                return self._exchange.client_first(token, self._credentials)
            if self._round == 1:
                self._round = 2
                answer = self._exchange.client_final(token)
                self.username = self._exchange.username
                self.complete = True
                return answer
        except ScramError as exc:
            raise _SaslFailed(str(exc)) from None
        raise _SaslFailed("SCRAM exchange already complete")


def mechanism_server(mechanism: str, config: SaslServerConfig) -> SaslMechanismServer:
    if mechanism == PLAIN:
        return PlainServer(config.plain_users)
    return ScramServer(mechanism, config.scram_credentials.credentials(mechanism))


class _State:
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    RAW_TOKENS = "AUTHENTICATE (raw tokens)"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class AuthenticatorChannel(Protocol):
    """What the authenticator needs of its connection."""

    def forward(self, frame: bytes | bytearray) -> None:
        """Hand an ApiVersions request to the broker's dispatcher, in request order."""

    def respond(self, response: bytes) -> None:
        """Queue an answer frame in request order."""

    def close(self, reason: str) -> None:
        """Close the connection once what is queued has been sent."""

    def authenticated(self, principal: KafkaPrincipal) -> None:
        """The exchange succeeded."""


class SaslServerAuthenticator:
    """One connection's SASL state machine (see the module docstring)."""

    def __init__(self, config: SaslServerConfig, channel: AuthenticatorChannel,
                 connection_id: str,
                 mechanism_factory: Callable[[str, SaslServerConfig], SaslMechanismServer]
                 = mechanism_server) -> None:
        self._config = config
        self._channel = channel
        self._connection_id = connection_id
        self._mechanism_factory = mechanism_factory
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._mechanism = ""
        self._server: SaslMechanismServer | None = None

    @property
    def complete(self) -> bool:
        return self._state == _State.COMPLETE

    def frame_received(self, frame: bytes | bytearray) -> None:
        if self._state == _State.FAILED:
            return
        if self._state == _State.RAW_TOKENS:
            self._raw_token(bytes(frame))
            return
        try:
            key, version, correlation_id = protocol_api.peek_request_header(frame)
        except KafkaError:
            self._fail("unreadable request header during SASL authentication")
            return
        if key == ApiKey.API_VERSIONS and self._state == _State.HANDSHAKE_OR_VERSIONS:
            self._channel.forward(frame)
        elif key == ApiKey.SASL_HANDSHAKE and self._state == _State.HANDSHAKE_OR_VERSIONS:
            self._handshake(frame, version, correlation_id)
        elif key == ApiKey.SASL_AUTHENTICATE and self._state == _State.AUTHENTICATE:
            self._authenticate(frame, version, correlation_id)
        else:
            self._fail(f"Unexpected Kafka request of type {_api_name(key)} during SASL "
                       f"handshake (state {self._state})")

    def _decode(self, frame: bytes | bytearray, version: int) -> object | None:
        try:
            _, target, position = protocol_api.decode_request_header(frame)
            body: object = target.request.decode(memoryview(frame), version, position)[0]
        except KafkaError as exc:
            self._fail(f"malformed SASL request: {exc.message}")
            return None
        return body

    def _handshake(self, frame: bytes | bytearray, version: int, correlation_id: int) -> None:
        request = self._decode(frame, version)
        if not isinstance(request, SaslHandshakeRequest):
            return
        enabled = list(self._config.enabled_mechanisms)
        if request.mechanism not in enabled:
            self._channel.respond(protocol_api.encode_response(
                ApiKey.SASL_HANDSHAKE, version, correlation_id,
                SaslHandshakeResponse(error_code=UnsupportedSaslMechanismError.code,
                                      mechanisms=enabled)))
            self._fail(f"Unsupported SASL mechanism {request.mechanism}", answered=True)
            return
        self._mechanism = request.mechanism
        self._server = self._mechanism_factory(request.mechanism, self._config)
        self._state = _State.AUTHENTICATE if version >= 1 else _State.RAW_TOKENS
        self._channel.respond(protocol_api.encode_response(
            ApiKey.SASL_HANDSHAKE, version, correlation_id,
            SaslHandshakeResponse(error_code=0, mechanisms=enabled)))

    def _authenticate(self, frame: bytes | bytearray, version: int,
                      correlation_id: int) -> None:
        request = self._decode(frame, version)
        if not isinstance(request, SaslAuthenticateRequest):
            return
        server = self._server
        assert server is not None
        try:
            answer = server.evaluate(bytes(request.auth_bytes))
        except _SaslFailed as exc:
            log.info("Failed authentication with %s (%s)", self._connection_id, exc)
            self._channel.respond(protocol_api.encode_response(
                ApiKey.SASL_AUTHENTICATE, version, correlation_id,
                SaslAuthenticateResponse(
                    error_code=SaslAuthenticationFailedError.code,
                    error_message=self.failure_message, auth_bytes=b"")))
            self._fail("authentication failed", answered=True)
            return
        self._channel.respond(protocol_api.encode_response(
            ApiKey.SASL_AUTHENTICATE, version, correlation_id,
            SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=answer,
                                     session_lifetime_ms=0)))
        self._maybe_complete(server)

    def _raw_token(self, token: bytes) -> None:
        server = self._server
        assert server is not None
        try:
            answer = server.evaluate(token)
        except _SaslFailed as exc:
            log.info("Failed authentication with %s (%s)", self._connection_id, exc)
            self._fail("authentication failed")
            return
        self._channel.respond(answer)
        self._maybe_complete(server)

    def _maybe_complete(self, server: SaslMechanismServer) -> None:
        if server.complete and server.username is not None:
            self._state = _State.COMPLETE
            self._channel.authenticated(KafkaPrincipal.user(server.username))

    @property
    def failure_message(self) -> str:
        return ("Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self._mechanism}")

    def _fail(self, reason: str, *, answered: bool = False) -> None:
        self._state = _State.FAILED
        if not answered:
            log.info("closing connection %s: %s", self._connection_id, reason)
        self._channel.close(reason)


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)
