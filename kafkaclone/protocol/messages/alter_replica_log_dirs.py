"""AlterReplicaLogDirs (key 34), versions 0-1 (Kafka 2.8's AlterReplicaLogDirsRequest.json /
AlterReplicaLogDirsResponse.json; v1 is v0 with throttling after the response)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(34, "AlterReplicaLogDirsRequest", valid="0-1", flexible="none", fields=[
    field("dirs", "[]AlterReplicaLogDir", fields=[
        field("path", "string", about="the absolute directory path"),
        field("topics", "[]AlterReplicaLogDirTopic", fields=[
            field("name", "string"),
            field("partitions", "[]int32"),
        ]),
    ]),
])

RESPONSE = response(34, "AlterReplicaLogDirsResponse", valid="0-1", flexible="none", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]AlterReplicaLogDirTopicResult", fields=[
        field("topic_name", "string"),
        field("partitions", "[]AlterReplicaLogDirPartitionResult", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
        ]),
    ]),
])
