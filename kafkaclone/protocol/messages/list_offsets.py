"""ListOffsets (key 2), versions 0-6 (Kafka 2.8's ListOffsetsRequest.json /
ListOffsetsResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(2, "ListOffsetsRequest", valid="0-6", flexible="6+", fields=[
    field("replica_id", "int32", about="The requesting broker's id, or -1 for a consumer."),
    field("isolation_level", "int8", "2+"),
    field("topics", "[]ListOffsetsTopic", fields=[
        field("name", "string"),
        field("partitions", "[]ListOffsetsPartition", fields=[
            field("partition_index", "int32"),
            field("current_leader_epoch", "int32", "4+", default=-1),
            field("timestamp", "int64", about="-1: latest offset, -2: earliest offset."),
            field("max_num_offsets", "int32", "0", default=1),
        ]),
    ]),
])

RESPONSE = response(2, "ListOffsetsResponse", valid="0-6", flexible="6+", fields=[
    field("throttle_time_ms", "int32", "2+"),
    field("topics", "[]ListOffsetsTopicResponse", fields=[
        field("name", "string"),
        field("partitions", "[]ListOffsetsPartitionResponse", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
            field("old_style_offsets", "[]int64", "0"),
            field("timestamp", "int64", "1+", default=-1),
            field("offset", "int64", "1+", default=-1),
            field("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
])
