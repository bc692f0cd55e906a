"""WriteTxnMarkers (key 27), versions 0-1 (Kafka 2.8's WriteTxnMarkersRequest.json /
WriteTxnMarkersResponse.json): the transaction coordinator asks a partition leader to
write COMMIT or ABORT markers."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(27, "WriteTxnMarkersRequest", valid="0-1", flexible="1+", fields=[
    field("markers", "[]WritableTxnMarker", fields=[
        field("producer_id", "int64"),
        field("producer_epoch", "int16"),
        field("transaction_result", "bool",
              about="The result of the transaction to write: false for ABORT, true for COMMIT."),
        field("topics", "[]WritableTxnMarkerTopic", fields=[
            field("name", "string"),
            field("partition_indexes", "[]int32"),
        ]),
        field("coordinator_epoch", "int32"),
    ]),
])

RESPONSE = response(27, "WriteTxnMarkersResponse", valid="0-1", flexible="1+", fields=[
    field("markers", "[]WritableTxnMarkerResult", fields=[
        field("producer_id", "int64"),
        field("topics", "[]WritableTxnMarkerTopicResult", fields=[
            field("name", "string"),
            field("partitions", "[]WritableTxnMarkerPartitionResult", fields=[
                field("partition_index", "int32"),
                field("error_code", "int16"),
            ]),
        ]),
    ]),
])
