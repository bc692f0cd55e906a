"""FindCoordinator (key 10), versions 0-3."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(10, "FindCoordinatorRequest", valid="0-3", flexible="3+", fields=[
    field("key", "string", about="The coordinator key: a group id or a transactional id."),
    field("key_type", "int8", "1+", default=0, about="0: group, 1: transaction."),
])

RESPONSE = response(10, "FindCoordinatorResponse", valid="0-3", flexible="3+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("error_message", "string", "1+", nullable="1+"),
    field("node_id", "int32"),
    field("host", "string"),
    field("port", "int32"),
])
