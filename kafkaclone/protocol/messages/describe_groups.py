"""DescribeGroups (key 15), versions 0-5."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(15, "DescribeGroupsRequest", valid="0-5", flexible="5+", fields=[
    field("groups", "[]string"),
    field("include_authorized_operations", "bool", "3+"),
])

RESPONSE = response(15, "DescribeGroupsResponse", valid="0-5", flexible="5+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("groups", "[]DescribedGroup", fields=[
        field("error_code", "int16"),
        field("group_id", "string"),
        field("group_state", "string"),
        field("protocol_type", "string"),
        # Only filled in while the group is Stable.
        field("protocol_data", "string"),
        field("members", "[]DescribedGroupMember", fields=[
            field("member_id", "string"),
            field("group_instance_id", "string", "4+", nullable="4+", default=None),
            field("client_id", "string"),
            field("client_host", "string"),
            field("member_metadata", "bytes"),
            field("member_assignment", "bytes"),
        ]),
        # INT32_MIN: not requested (include_authorized_operations false).
        field("authorized_operations", "int32", "3+", default=-2147483648),
    ]),
])
