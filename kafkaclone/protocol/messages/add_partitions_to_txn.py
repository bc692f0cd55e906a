"""AddPartitionsToTxn (key 24), versions 0-3 (Kafka 2.8's AddPartitionsToTxnRequest.json /
AddPartitionsToTxnResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(24, "AddPartitionsToTxnRequest", valid="0-3", flexible="3+", fields=[
    field("transactional_id", "string", about="The transactional id of this transaction."),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("topics", "[]AddPartitionsToTxnTopic", fields=[
        field("name", "string"),
        field("partitions", "[]int32"),
    ]),
])

RESPONSE = response(24, "AddPartitionsToTxnResponse", valid="0-3", flexible="3+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]AddPartitionsToTxnTopicResult", fields=[
        field("name", "string"),
        field("results", "[]AddPartitionsToTxnPartitionResult", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
        ]),
    ]),
])
