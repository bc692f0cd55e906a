"""DeleteRecords (key 21), versions 0-2 (Kafka 2.8's DeleteRecordsRequest.json /
DeleteRecordsResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(21, "DeleteRecordsRequest", valid="0-2", flexible="2+", fields=[
    field("topics", "[]DeleteRecordsTopic", fields=[
        field("name", "string"),
        field("partitions", "[]DeleteRecordsPartition", fields=[
            field("partition_index", "int32"),
            field("offset", "int64", about="Delete every record before this offset."),
        ]),
    ]),
    field("timeout_ms", "int32"),
])

RESPONSE = response(21, "DeleteRecordsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("topics", "[]DeleteRecordsTopicResult", fields=[
        field("name", "string"),
        field("partitions", "[]DeleteRecordsPartitionResult", fields=[
            field("partition_index", "int32"),
            field("low_watermark", "int64"),
            field("error_code", "int16"),
        ]),
    ]),
])
