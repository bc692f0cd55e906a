"""OffsetForLeaderEpoch (key 23), versions 0-4 (Kafka 2.8's OffsetForLeaderEpochRequest.json /
OffsetForLeaderEpochResponse.json). Followers use it to find where to truncate their log."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(23, "OffsetForLeaderEpochRequest", valid="0-4", flexible="4+", fields=[
    field("replica_id", "int32", "3+", default=-2,
          about="The follower's broker id, -1 for a consumer, -2 for a debug consumer."),
    field("topics", "[]OffsetForLeaderTopic", fields=[
        field("topic", "string"),
        field("partitions", "[]OffsetForLeaderPartition", fields=[
            field("partition", "int32"),
            field("current_leader_epoch", "int32", "2+", default=-1),
            field("leader_epoch", "int32", about="The epoch to look up an end offset for."),
        ]),
    ]),
])

RESPONSE = response(23, "OffsetForLeaderEpochResponse", valid="0-4", flexible="4+", fields=[
    field("throttle_time_ms", "int32", "2+"),
    field("topics", "[]OffsetForLeaderTopicResult", fields=[
        field("topic", "string"),
        field("partitions", "[]EpochEndOffset", fields=[
            field("error_code", "int16"),
            field("partition", "int32"),
            field("leader_epoch", "int32", "1+", default=-1),
            field("end_offset", "int64", default=-1),
        ]),
    ]),
])
