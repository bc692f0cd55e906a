"""The SASL exchange in front of the dispatcher, driven through StringTransport: SCRAM over
SaslHandshake v1 + SaslAuthenticate, PLAIN over SaslHandshake v0 + raw tokens, Kafka's
refusals (another API before authentication, an unknown mechanism, bad credentials)."""

from __future__ import annotations

import struct

from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import StringTransport

from kafkaclone.common.endpoint import SecurityProtocol
from kafkaclone.common.errors import (
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from kafkaclone.common.scram import ScramClientExchange, make_credential
from kafkaclone.common.security import ANONYMOUS, KafkaPrincipal
from kafkaclone.network.authenticator import SaslServerConfig, ScramCredentialCache
from kafkaclone.network.socket_server import (
    ConnectionInfo,
    KafkaServerFactory,
    KafkaServerProtocol,
    ListenerSecurity,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)


class RecordingDispatcher:
    """Answers every request it is given with b"ok" and remembers who sent it."""

    def __init__(self) -> None:
        self.seen: list[tuple[ConnectionInfo, int]] = []

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        self.seen.append((connection, api.peek_request_header(frame)[0]))
        return succeed(b"ok")


def connect(config: SaslServerConfig) -> tuple[KafkaServerProtocol, StringTransport,
                                                RecordingDispatcher]:
    dispatcher = RecordingDispatcher()
    factory = KafkaServerFactory(dispatcher, 1 << 20, "SASL_PLAINTEXT",
                                 ListenerSecurity(SecurityProtocol.SASL_PLAINTEXT, None, config))
    conn = factory.buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport, dispatcher


def send(conn: KafkaServerProtocol, key: ApiKey, version: int, body: object,
         correlation_id: int = 7) -> None:
    frame = api.encode_request(key, version, correlation_id, "test", body)
    data = struct.pack(">i", len(frame)) + frame
    for i in range(len(data)):  # one byte at a time
        conn.dataReceived(data[i:i + 1])


def send_raw(conn: KafkaServerProtocol, token: bytes) -> None:
    conn.dataReceived(struct.pack(">i", len(token)) + token)


def take_frames(transport: StringTransport) -> list[bytes]:
    data = transport.value()
    transport.clear()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos + 4:pos + 4 + length])
        pos += 4 + length
    return out


def response(key: ApiKey, version: int, frame: bytes) -> object:
    return api.decode_response(key, version, frame)[1]


def scram_config(password: str = "alice-secret") -> SaslServerConfig:
    cache = ScramCredentialCache()
    cache.update_user("alice", {
        "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", password).to_config_value()})
    return SaslServerConfig(("SCRAM-SHA-512", "PLAIN"), {"bob": "bob-secret"}, cache)


def test_scram_exchange_authenticates_then_requests_are_dispatched_as_the_user() -> None:
    conn, transport, dispatcher = connect(scram_config())
    send(conn, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1"))
    assert take_frames(transport) == [b"ok"]
    assert dispatcher.seen[0][0].principal == ANONYMOUS
    send(conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    handshake = response(ApiKey.SASL_HANDSHAKE, 1, take_frames(transport)[0])
    assert handshake.error_code == 0
    assert handshake.mechanisms == ["SCRAM-SHA-512", "PLAIN"]

    client = ScramClientExchange("SCRAM-SHA-512", "alice", "alice-secret")
    send(conn, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=client.first()))
    first = response(ApiKey.SASL_AUTHENTICATE, 2, take_frames(transport)[0])
    send(conn, ApiKey.SASL_AUTHENTICATE, 2,
         SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
    final = response(ApiKey.SASL_AUTHENTICATE, 2, take_frames(transport)[0])
    assert final.error_code == 0
    client.verify(final.auth_bytes)  # the broker proved it knows the credential too

    send(conn, ApiKey.METADATA, 9, MetadataRequest(topics=[]))
    assert take_frames(transport) == [b"ok"]
    assert dispatcher.seen[-1][0].principal == KafkaPrincipal("User", "alice")
    assert str(dispatcher.seen[-1][0].principal) == "User:alice"


def test_wrong_password_gets_kafkas_message_then_the_connection_closes() -> None:
    conn, transport, dispatcher = connect(scram_config())
    send(conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    take_frames(transport)
    client = ScramClientExchange("SCRAM-SHA-512", "alice", "not-her-password")
    send(conn, ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=client.first()))
    first = response(ApiKey.SASL_AUTHENTICATE, 1, take_frames(transport)[0])
    send(conn, ApiKey.SASL_AUTHENTICATE, 1,
         SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
    failed = response(ApiKey.SASL_AUTHENTICATE, 1, take_frames(transport)[0])
    assert failed.error_code == SaslAuthenticationFailedError.code
    assert failed.error_message == ("Authentication failed during authentication due to "
                                    "invalid credentials with SASL mechanism SCRAM-SHA-512")
    assert transport.disconnecting
    assert dispatcher.seen == []


def test_unknown_user_is_refused_at_the_first_message() -> None:
    conn, transport, _ = connect(scram_config())
    send(conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    take_frames(transport)
    client = ScramClientExchange("SCRAM-SHA-512", "mallory", "x")
    send(conn, ApiKey.SASL_AUTHENTICATE, 0, SaslAuthenticateRequest(auth_bytes=client.first()))
    failed = response(ApiKey.SASL_AUTHENTICATE, 0, take_frames(transport)[0])
    assert failed.error_code == SaslAuthenticationFailedError.code
    assert transport.disconnecting


def test_plain_over_handshake_v0_uses_raw_tokens() -> None:
    conn, transport, dispatcher = connect(scram_config())
    send(conn, ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
    assert response(ApiKey.SASL_HANDSHAKE, 0, take_frames(transport)[0]).error_code == 0
    send_raw(conn, b"\x00bob\x00bob-secret")
    assert take_frames(transport) == [b""]  # PLAIN's empty answer, framed without a header
    send(conn, ApiKey.METADATA, 9, MetadataRequest(topics=[]))
    assert take_frames(transport) == [b"ok"]
    assert dispatcher.seen[-1][0].principal == KafkaPrincipal.user("bob")


def test_plain_raw_token_with_a_bad_password_closes_without_answer() -> None:
    conn, transport, _ = connect(scram_config())
    send(conn, ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
    take_frames(transport)
    send_raw(conn, b"\x00bob\x00guess")
    assert take_frames(transport) == []
    assert transport.disconnecting


def test_another_api_before_authentication_closes_the_connection() -> None:
    conn, transport, dispatcher = connect(scram_config())
    send(conn, ApiKey.METADATA, 9, MetadataRequest(topics=[]))
    assert take_frames(transport) == []
    assert transport.disconnecting
    assert dispatcher.seen == []


def test_a_mechanism_not_enabled_is_refused() -> None:
    conn, transport, _ = connect(scram_config())
    send(conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    refused = response(ApiKey.SASL_HANDSHAKE, 1, take_frames(transport)[0])
    assert refused.error_code == UnsupportedSaslMechanismError.code
    assert refused.mechanisms == ["SCRAM-SHA-512", "PLAIN"]
    assert transport.disconnecting


def test_credentials_follow_the_cache() -> None:
    config = scram_config()
    config.scram_credentials.update_user("alice", {})  # the user's config was deleted
    conn, transport, _ = connect(config)
    send(conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    take_frames(transport)
    client = ScramClientExchange("SCRAM-SHA-512", "alice", "alice-secret")
    send(conn, ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=client.first()))
    failed = response(ApiKey.SASL_AUTHENTICATE, 1, take_frames(transport)[0])
    assert failed.error_code == SaslAuthenticationFailedError.code
