"""CreatePartitions (key 37), versions 0-3."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(37, "CreatePartitionsRequest", valid="0-3", flexible="2+", fields=[
    field("topics", "[]CreatePartitionsTopic", fields=[
        field("name", "string"),
        field("count", "int32", about="the new partition count"),
        field("assignments", "[]CreatePartitionsAssignment", nullable="0+", fields=[
            field("broker_ids", "[]int32"),
        ]),
    ]),
    field("timeout_ms", "int32"),
    field("validate_only", "bool"),
])

RESPONSE = response(37, "CreatePartitionsResponse", valid="0-3", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]CreatePartitionsTopicResult", fields=[
        field("name", "string"),
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+", default=None),
    ]),
])
