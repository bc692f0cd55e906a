"""LeaveGroup (key 13), versions 0-4."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(13, "LeaveGroupRequest", valid="0-4", flexible="4+", fields=[
    field("group_id", "string"),
    field("member_id", "string", "0-2"),
    # From v3 one request can remove several members (KIP-345 batch leave).
    field("members", "[]MemberIdentity", "3+", fields=[
        field("member_id", "string", "3+"),
        field("group_instance_id", "string", "3+", nullable="3+", default=None),
    ]),
])

RESPONSE = response(13, "LeaveGroupResponse", valid="0-4", flexible="4+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("members", "[]MemberResponse", "3+", fields=[
        field("member_id", "string", "3+"),
        field("group_instance_id", "string", "3+", nullable="3+"),
        field("error_code", "int16", "3+"),
    ]),
])
