"""CreateTopics (key 19), versions 0-7 (Kafka 2.8)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(19, "CreateTopicsRequest", valid="0-7", flexible="5+", fields=[
    field("topics", "[]CreatableTopic", fields=[
        field("name", "string"),
        field("num_partitions", "int32", about="-1: use the assignments or the broker default"),
        field("replication_factor", "int16",
              about="-1: use the assignments or the broker default"),
        field("assignments", "[]CreatableReplicaAssignment", fields=[
            field("partition_index", "int32"),
            field("broker_ids", "[]int32"),
        ]),
        # Kafka's own spelling of the struct name.
        field("configs", "[]CreateableTopicConfig", fields=[
            field("name", "string"),
            field("value", "string", nullable="0+"),
        ]),
    ]),
    field("timeout_ms", "int32", default=60000),
    field("validate_only", "bool", "1+", default=False),
])

RESPONSE = response(19, "CreateTopicsResponse", valid="0-7", flexible="5+", fields=[
    field("throttle_time_ms", "int32", "2+"),
    field("topics", "[]CreatableTopicResult", fields=[
        field("name", "string"),
        field("topic_id", "uuid", "7+"),
        field("error_code", "int16"),
        field("error_message", "string", "1+", nullable="0+"),
        field("topic_config_error_code", "int16", "5+", tag=0),
        field("num_partitions", "int32", "5+", default=-1),
        field("replication_factor", "int16", "5+", default=-1),
        field("configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=[
            field("name", "string", "5+"),
            field("value", "string", "5+", nullable="5+"),
            field("read_only", "bool", "5+"),
            field("config_source", "int8", "5+", default=-1),
            field("is_sensitive", "bool", "5+"),
        ]),
    ]),
])
