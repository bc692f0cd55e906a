"""Produce (key 0), versions 0-9 (Kafka 2.8's ProduceRequest.json / ProduceResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(0, "ProduceRequest", valid="0-9", flexible="9+", fields=[
    field("transactional_id", "string", "3+", nullable="3+", default=None,
          about="The transactional ID, or null if the producer is not transactional."),
    field("acks", "int16", about="0: no acknowledgment, 1: the leader only, -1: the full ISR."),
    field("timeout_ms", "int32"),
    field("topic_data", "[]TopicProduceData", fields=[
        field("name", "string"),
        field("partition_data", "[]PartitionProduceData", fields=[
            field("index", "int32"),
            field("records", "records", nullable="0+"),
        ]),
    ]),
])

RESPONSE = response(0, "ProduceResponse", valid="0-9", flexible="9+", fields=[
    field("responses", "[]TopicProduceResponse", fields=[
        field("name", "string"),
        field("partition_responses", "[]PartitionProduceResponse", fields=[
            field("index", "int32"),
            field("error_code", "int16"),
            field("base_offset", "int64"),
            field("log_append_time_ms", "int64", "2+", default=-1,
                  about="-1 unless the topic uses LogAppendTime."),
            field("log_start_offset", "int64", "5+", default=-1),
            field("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                field("batch_index", "int32", "8+"),
                field("batch_index_error_message", "string", "8+", nullable="8+",
                      default=None),
            ], about="The records that caused the whole batch to be dropped (KIP-467)."),
            field("error_message", "string", "8+", nullable="8+", default=None),
        ]),
    ]),
    field("throttle_time_ms", "int32", "1+", default=0),
])
