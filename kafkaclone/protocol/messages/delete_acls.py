"""DeleteAcls (key 31), versions 0-2 (Kafka 2.8's DeleteAclsRequest.json /
DeleteAclsResponse.json; v1 adds the pattern type, KIP-290)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(31, "DeleteAclsRequest", valid="0-2", flexible="2+", fields=[
    field("filters", "[]DeleteAclsFilter", fields=[
        field("resource_type_filter", "int8"),
        field("resource_name_filter", "string", nullable="0+", default=None),
        field("pattern_type_filter", "int8", "1+", default=3),
        field("principal_filter", "string", nullable="0+", default=None),
        field("host_filter", "string", nullable="0+", default=None),
        field("operation", "int8"),
        field("permission_type", "int8"),
    ]),
])

RESPONSE = response(31, "DeleteAclsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("filter_results", "[]DeleteAclsFilterResult", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+", default=None),
        field("matching_acls", "[]DeleteAclsMatchingAcl", fields=[
            field("error_code", "int16"),
            field("error_message", "string", nullable="0+", default=None),
            field("resource_type", "int8"),
            field("resource_name", "string"),
            field("pattern_type", "int8", "1+", default=3),
            field("principal", "string"),
            field("host", "string"),
            field("operation", "int8"),
            field("permission_type", "int8"),
        ]),
    ]),
])
