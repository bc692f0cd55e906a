"""CreateAcls (key 30), versions 0-2 (Kafka 2.8's CreateAclsRequest.json /
CreateAclsResponse.json; v1 adds the pattern type, KIP-290)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(30, "CreateAclsRequest", valid="0-2", flexible="2+", fields=[
    field("creations", "[]AclCreation", fields=[
        field("resource_type", "int8"),
        field("resource_name", "string"),
        field("resource_pattern_type", "int8", "1+", default=3),
        field("principal", "string"),
        field("host", "string"),
        field("operation", "int8"),
        field("permission_type", "int8"),
    ]),
])

RESPONSE = response(30, "CreateAclsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]AclCreationResult", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+", default=None),
    ]),
])
