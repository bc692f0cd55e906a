"""SaslAuthenticate (key 36), v0-2, once the connection needs no exchange (Kafka's
KafkaApis.handleSaslAuthenticateRequest): ILLEGAL_SASL_STATE. During authentication the
socket server's SaslServerAuthenticator answers it (kafkaclone.network.authenticator)."""

from __future__ import annotations

from kafkaclone.common.errors import IllegalSaslStateError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import SaslAuthenticateRequest, SaslAuthenticateResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.SASL_AUTHENTICATE, versions=(0, 2))
async def handle_sasl_authenticate(ctx: RequestContext,
                                   request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=IllegalSaslStateError.code,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"")
