"""DeleteGroups (key 42), versions 0-2."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(42, "DeleteGroupsRequest", valid="0-2", flexible="2+", fields=[
    field("groups_names", "[]string"),
])

RESPONSE = response(42, "DeleteGroupsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]DeletableGroupResult", fields=[
        field("group_id", "string"),
        field("error_code", "int16"),
    ]),
])
