"""DescribeLogDirs (key 35), versions 0-2 (Kafka 2.8's DescribeLogDirsRequest.json /
DescribeLogDirsResponse.json; v1 is v0 with throttling after the response, v2 flexible)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(35, "DescribeLogDirsRequest", valid="0-2", flexible="2+", fields=[
    field("topics", "[]DescribableLogDirTopic", nullable="0+",
          about="the partitions to describe; null for every partition", fields=[
              field("topic", "string"),
              field("partitions", "[]int32"),
          ]),
])

RESPONSE = response(35, "DescribeLogDirsResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]DescribeLogDirsResult", fields=[
        field("error_code", "int16", about="KAFKA_STORAGE_ERROR for an offline directory"),
        field("log_dir", "string", about="the absolute log directory path"),
        field("topics", "[]DescribeLogDirsTopic", fields=[
            field("name", "string"),
            field("partitions", "[]DescribeLogDirsPartition", fields=[
                field("partition_index", "int32"),
                field("partition_size", "int64", about="the size of the log's segments"),
                field("offset_lag", "int64",
                      about="the high watermark minus the log end offset (current log), or "
                            "the current log's end offset minus this one's (future log)"),
                field("is_future_key", "bool",
                      about="a log AlterReplicaLogDirs created to replace the current one"),
            ]),
        ]),
    ]),
])
