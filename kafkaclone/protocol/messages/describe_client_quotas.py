"""DescribeClientQuotas (key 48), versions 0-1 (Kafka 2.8's DescribeClientQuotasRequest.json /
Response.json, KIP-546). Version 1 is the first flexible version."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(48, "DescribeClientQuotasRequest", valid="0-1", flexible="1+", fields=[
    field("components", "[]ComponentData", about="Filter components to apply to quota entities.",
          fields=[
        field("entity_type", "string", about="The entity type that the filter component "
              "applies to."),
        field("match_type", "int8", about="How to match the entity {0 = exact name, "
              "1 = default name, 2 = any specified name}."),
        field("match", "string", nullable="0+", about="The string to match against, or null "
              "if unused for the match type."),
    ]),
    field("strict", "bool", about="Whether the match is strict, i.e. should exclude entities "
          "with unspecified entity types."),
])

RESPONSE = response(48, "DescribeClientQuotasResponse", valid="0-1", flexible="1+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("entries", "[]EntryData", nullable="0+", fields=[
        field("entity", "[]EntityData", fields=[
            field("entity_type", "string"),
            field("entity_name", "string", nullable="0+"),
        ]),
        field("values", "[]ValueData", fields=[
            field("key", "string"),
            field("value", "float64"),
        ]),
    ]),
])
