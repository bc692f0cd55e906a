"""AlterConfigs (key 33), versions 0-2 (Kafka 2.8)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(33, "AlterConfigsRequest", valid="0-2", flexible="2+", fields=[
    field("resources", "[]AlterConfigsResource", fields=[
        field("resource_type", "int8"),
        field("resource_name", "string"),
        field("configs", "[]AlterableConfig", fields=[
            field("name", "string"),
            field("value", "string", nullable="0+"),
        ]),
    ]),
    field("validate_only", "bool"),
])

RESPONSE = response(33, "AlterConfigsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("responses", "[]AlterConfigsResourceResponse", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
        field("resource_type", "int8"),
        field("resource_name", "string"),
    ]),
])
