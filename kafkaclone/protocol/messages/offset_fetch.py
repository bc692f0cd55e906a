"""OffsetFetch (key 9), versions 0-7."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(9, "OffsetFetchRequest", valid="0-7", flexible="6+", fields=[
    field("group_id", "string"),
    # From v2, null asks for the offsets of every topic the group has committed.
    field("topics", "[]OffsetFetchRequestTopic", nullable="2+", fields=[
        field("name", "string"),
        field("partition_indexes", "[]int32"),
    ]),
    field("require_stable", "bool", "7+"),
])

RESPONSE = response(9, "OffsetFetchResponse", valid="0-7", flexible="6+", fields=[
    field("throttle_time_ms", "int32", "3+"),
    field("topics", "[]OffsetFetchResponseTopic", fields=[
        field("name", "string"),
        field("partitions", "[]OffsetFetchResponsePartition", fields=[
            field("partition_index", "int32"),
            field("committed_offset", "int64"),
            field("committed_leader_epoch", "int32", "5+", default=-1),
            field("metadata", "string", nullable="0+"),
            field("error_code", "int16"),
        ]),
    ]),
    field("error_code", "int16", "2+", default=0),
])
