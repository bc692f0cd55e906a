"""IncrementalAlterConfigs (key 44), versions 0-1."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(44, "IncrementalAlterConfigsRequest", valid="0-1", flexible="1+", fields=[
    field("resources", "[]AlterConfigsResource", fields=[
        field("resource_type", "int8"),
        field("resource_name", "string"),
        field("configs", "[]AlterableConfig", fields=[
            field("name", "string"),
            field("config_operation", "int8", about="0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT"),
            field("value", "string", nullable="0+"),
        ]),
    ]),
    field("validate_only", "bool"),
])

RESPONSE = response(44, "IncrementalAlterConfigsResponse", valid="0-1", flexible="1+", fields=[
    field("throttle_time_ms", "int32"),
    field("responses", "[]AlterConfigsResourceResponse", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
        field("resource_type", "int8"),
        field("resource_name", "string"),
    ]),
])
