"""Heartbeat (key 12), versions 0-4."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(12, "HeartbeatRequest", valid="0-4", flexible="4+", fields=[
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+", default=None),
])

RESPONSE = response(12, "HeartbeatResponse", valid="0-4", flexible="4+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
])
