"""SaslHandshake (key 17), v0-1, once the connection needs no exchange: on a PLAINTEXT or
SSL listener, or after a SASL connection has authenticated (Kafka's
KafkaApis.handleSaslHandshakeRequest): ILLEGAL_SASL_STATE. Before authentication the
socket server's SaslServerAuthenticator answers it (kafkaclone.network.authenticator)."""

from __future__ import annotations

from kafkaclone.common.errors import IllegalSaslStateError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import SaslHandshakeRequest, SaslHandshakeResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.SASL_HANDSHAKE, versions=(0, 1))
async def handle_sasl_handshake(ctx: RequestContext,
                                request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=[])
