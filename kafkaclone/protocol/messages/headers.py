"""Request and response headers (RequestHeader.json, ResponseHeader.json)."""

from kafkaclone.protocol.schema import data, field

REQUEST_HEADER = data("RequestHeader", valid="0-2", flexible="2+", fields=[
    field("request_api_key", "int16"),
    field("request_api_version", "int16"),
    field("correlation_id", "int32"),
    # The client id is never a compact string, even in the flexible header v2.
    field("client_id", "string", "1+", nullable="1+", flexible="none", default=None),
])

RESPONSE_HEADER = data("ResponseHeader", valid="0-1", flexible="1+", fields=[
    field("correlation_id", "int32"),
])
