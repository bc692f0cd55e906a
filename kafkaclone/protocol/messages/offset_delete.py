"""OffsetDelete (key 47), version 0."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(47, "OffsetDeleteRequest", valid="0", flexible="none", fields=[
    field("group_id", "string"),
    field("topics", "[]OffsetDeleteRequestTopic", fields=[
        field("name", "string"),
        field("partitions", "[]OffsetDeleteRequestPartition", fields=[
            field("partition_index", "int32"),
        ]),
    ]),
])

RESPONSE = response(47, "OffsetDeleteResponse", valid="0", flexible="none", fields=[
    field("error_code", "int16"),
    field("throttle_time_ms", "int32"),
    field("topics", "[]OffsetDeleteResponseTopic", fields=[
        field("name", "string"),
        field("partitions", "[]OffsetDeleteResponsePartition", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
        ]),
    ]),
])
