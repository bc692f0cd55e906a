"""ListGroups (key 16), versions 0-4."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(16, "ListGroupsRequest", valid="0-4", flexible="3+", fields=[
    # Empty: groups in every state (KIP-518).
    field("states_filter", "[]string", "4+"),
])

RESPONSE = response(16, "ListGroupsResponse", valid="0-4", flexible="3+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("groups", "[]ListedGroup", fields=[
        field("group_id", "string"),
        field("protocol_type", "string"),
        field("group_state", "string", "4+"),
    ]),
])
