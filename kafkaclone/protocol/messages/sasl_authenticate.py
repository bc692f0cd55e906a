"""SaslAuthenticate (key 36), versions 0-2 (Kafka 2.8's SaslAuthenticateRequest.json /
SaslAuthenticateResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(36, "SaslAuthenticateRequest", valid="0-2", flexible="2+", fields=[
    field("auth_bytes", "bytes"),
])

RESPONSE = response(36, "SaslAuthenticateResponse", valid="0-2", flexible="2+", fields=[
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("auth_bytes", "bytes"),
    field("session_lifetime_ms", "int64", "1+", default=0),
])
