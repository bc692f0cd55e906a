"""SyncGroup (key 14), versions 0-5."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(14, "SyncGroupRequest", valid="0-5", flexible="4+", fields=[
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+", default=None),
    field("protocol_type", "string", "5+", nullable="5+", default=None),
    field("protocol_name", "string", "5+", nullable="5+", default=None),
    field("assignments", "[]SyncGroupRequestAssignment", fields=[
        field("member_id", "string"),
        field("assignment", "bytes"),
    ]),
])

RESPONSE = response(14, "SyncGroupResponse", valid="0-5", flexible="4+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("protocol_type", "string", "5+", nullable="5+", default=None),
    field("protocol_name", "string", "5+", nullable="5+", default=None),
    field("assignment", "bytes"),
])
