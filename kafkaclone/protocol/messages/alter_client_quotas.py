"""AlterClientQuotas (key 49), versions 0-1 (Kafka 2.8's AlterClientQuotasRequest.json /
Response.json, KIP-546). Version 1 is the first flexible version."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(49, "AlterClientQuotasRequest", valid="0-1", flexible="1+", fields=[
    field("entries", "[]EntryData", about="The quota configuration entries to alter.", fields=[
        field("entity", "[]EntityData", about="The quota entity to alter.", fields=[
            field("entity_type", "string"),
            field("entity_name", "string", nullable="0+",
                  about="The name of the entity, or null if the default."),
        ]),
        field("ops", "[]OpData", fields=[
            field("key", "string", about="The quota configuration key."),
            field("value", "float64", about="The value to set, otherwise ignored if the value "
                  "is to be removed."),
            field("remove", "bool", about="Whether the quota configuration value should be "
                  "removed, otherwise set."),
        ]),
    ]),
    field("validate_only", "bool", about="Whether the alteration should be validated, but not "
          "performed."),
])

RESPONSE = response(49, "AlterClientQuotasResponse", valid="0-1", flexible="1+", fields=[
    field("throttle_time_ms", "int32"),
    field("entries", "[]EntryData", fields=[
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
        field("entity", "[]EntityData", fields=[
            field("entity_type", "string"),
            field("entity_name", "string", nullable="0+"),
        ]),
    ]),
])
