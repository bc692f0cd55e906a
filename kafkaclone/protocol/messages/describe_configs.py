"""DescribeConfigs (key 32), versions 0-4 (Kafka 2.8)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(32, "DescribeConfigsRequest", valid="0-4", flexible="4+", fields=[
    field("resources", "[]DescribeConfigsResource", fields=[
        field("resource_type", "int8"),
        field("resource_name", "string"),
        field("configuration_keys", "[]string", nullable="0+", about="null: every key"),
    ]),
    field("include_synonyms", "bool", "1+", default=False),
    field("include_documentation", "bool", "3+", default=False),
])

RESPONSE = response(32, "DescribeConfigsResponse", valid="0-4", flexible="4+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]DescribeConfigsResult", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
        field("resource_type", "int8"),
        field("resource_name", "string"),
        field("configs", "[]DescribeConfigsResourceResult", fields=[
            field("name", "string"),
            field("value", "string", nullable="0+"),
            field("read_only", "bool"),
            field("is_default", "bool", "0"),
            # -1 is a placeholder: the v0 meaning depends on the resource (Kafka's note).
            field("config_source", "int8", "1+", default=-1),
            field("is_sensitive", "bool"),
            field("synonyms", "[]DescribeConfigsSynonym", "1+", fields=[
                field("name", "string", "1+"),
                field("value", "string", "1+", nullable="0+"),
                field("source", "int8", "1+"),
            ]),
            field("config_type", "int8", "3+", default=0),
            field("documentation", "string", "3+", nullable="0+"),
        ]),
    ]),
])
