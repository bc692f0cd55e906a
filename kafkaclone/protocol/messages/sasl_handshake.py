"""SaslHandshake (key 17), versions 0-1 (Kafka 2.8's SaslHandshakeRequest.json /
SaslHandshakeResponse.json). Never flexible: clients up to 2.4 negotiate it wrongly
(KAFKA-9577)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(17, "SaslHandshakeRequest", valid="0-1", flexible="none", fields=[
    field("mechanism", "string"),
])

RESPONSE = response(17, "SaslHandshakeResponse", valid="0-1", flexible="none", fields=[
    field("error_code", "int16"),
    field("mechanisms", "[]string", about="The mechanisms enabled in the server."),
])
