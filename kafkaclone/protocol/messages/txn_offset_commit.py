"""TxnOffsetCommit (key 28), versions 0-3 (Kafka 2.8's TxnOffsetCommitRequest.json /
TxnOffsetCommitResponse.json): a transactional producer commits a group's offsets inside its
transaction; they stay pending until the transaction's marker."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(28, "TxnOffsetCommitRequest", valid="0-3", flexible="3+", fields=[
    field("transactional_id", "string"),
    field("group_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("generation_id", "int32", "3+", default=-1),
    field("member_id", "string", "3+", default=""),
    field("group_instance_id", "string", "3+", nullable="3+", default=None),
    field("topics", "[]TxnOffsetCommitRequestTopic", fields=[
        field("name", "string"),
        field("partitions", "[]TxnOffsetCommitRequestPartition", fields=[
            field("partition_index", "int32"),
            field("committed_offset", "int64"),
            field("committed_leader_epoch", "int32", "2+", default=-1),
            field("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
])

RESPONSE = response(28, "TxnOffsetCommitResponse", valid="0-3", flexible="3+", fields=[
    field("throttle_time_ms", "int32"),
    field("topics", "[]TxnOffsetCommitResponseTopic", fields=[
        field("name", "string"),
        field("partitions", "[]TxnOffsetCommitResponsePartition", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
        ]),
    ]),
])
