"""JoinGroup (key 11), versions 0-7."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(11, "JoinGroupRequest", valid="0-7", flexible="6+", fields=[
    field("group_id", "string"),
    field("session_timeout_ms", "int32"),
    # Absent before v1: the session timeout serves as the rebalance timeout.
    field("rebalance_timeout_ms", "int32", "1+", default=-1),
    field("member_id", "string"),
    field("group_instance_id", "string", "5+", nullable="5+", default=None),
    field("protocol_type", "string"),
    field("protocols", "[]JoinGroupRequestProtocol", fields=[
        field("name", "string"),
        field("metadata", "bytes"),
    ]),
])

RESPONSE = response(11, "JoinGroupResponse", valid="0-7", flexible="6+", fields=[
    field("throttle_time_ms", "int32", "2+"),
    field("error_code", "int16"),
    field("generation_id", "int32", default=-1),
    field("protocol_type", "string", "7+", nullable="7+", default=None),
    field("protocol_name", "string", nullable="7+"),
    field("leader", "string"),
    field("member_id", "string"),
    field("members", "[]JoinGroupResponseMember", fields=[
        field("member_id", "string"),
        field("group_instance_id", "string", "5+", nullable="5+", default=None),
        field("metadata", "bytes"),
    ]),
])
