"""OffsetCommit (key 8), versions 0-8."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(8, "OffsetCommitRequest", valid="0-8", flexible="8+", fields=[
    field("group_id", "string"),
    field("generation_id", "int32", "1+", default=-1),
    field("member_id", "string", "1+"),
    field("group_instance_id", "string", "7+", nullable="7+", default=None),
    # -1: the broker's offsets.retention.minutes.
    field("retention_time_ms", "int64", "2-4", default=-1),
    field("topics", "[]OffsetCommitRequestTopic", fields=[
        field("name", "string"),
        field("partitions", "[]OffsetCommitRequestPartition", fields=[
            field("partition_index", "int32"),
            field("committed_offset", "int64"),
            field("committed_leader_epoch", "int32", "6+", default=-1),
            field("commit_timestamp", "int64", "1", default=-1),
            field("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
])

RESPONSE = response(8, "OffsetCommitResponse", valid="0-8", flexible="8+", fields=[
    field("throttle_time_ms", "int32", "3+"),
    field("topics", "[]OffsetCommitResponseTopic", fields=[
        field("name", "string"),
        field("partitions", "[]OffsetCommitResponsePartition", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
        ]),
    ]),
])
