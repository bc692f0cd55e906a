"""WriteTxnMarkers (key 27), versions 0-1 (Kafka 2.8's WriteTxnMarkersRequest.json /
WriteTxnMarkersResponse.json): the transaction coordinator asks a partition leader to append
COMMIT or ABORT control batches."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(27, "WriteTxnMarkersRequest", valid="0-1", flexible="1+", fields=[
    field("markers", "[]WritableTxnMarker", fields=[
        field("producer_id", "int64", about="The current producer ID."),
        field("producer_epoch", "int16",
              about="The current epoch associated with the producer ID."),
        field("transaction_result", "bool",
              about="The result of the transaction to write to the partitions (false = ABORT, "
                    "true = COMMIT)."),
        field("topics", "[]WritableTxnMarkerTopic", fields=[
            field("name", "string"),
            field("partition_indexes", "[]int32"),
        ]),
        field("coordinator_epoch", "int32",
              about="Epoch associated with the transaction state partition hosted by this "
                    "transaction coordinator."),
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
