"""AlterPartitionReassignments (key 45), version 0 (KIP-455): start or cancel reassignments."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(45, "AlterPartitionReassignmentsRequest", valid="0", flexible="0+", fields=[
    field("timeout_ms", "int32", default=60000),
    field("topics", "[]ReassignableTopic", fields=[
        field("name", "string"),
        field("partitions", "[]ReassignablePartition", fields=[
            field("partition_index", "int32"),
            field("replicas", "[]int32", nullable="0+", default=None,
                  about="the target replicas; null cancels the partition's reassignment"),
        ]),
    ]),
])

RESPONSE = response(45, "AlterPartitionReassignmentsResponse", valid="0", flexible="0+",
                    fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+", default=None),
    field("responses", "[]ReassignableTopicResponse", fields=[
        field("name", "string"),
        field("partitions", "[]ReassignablePartitionResponse", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
            field("error_message", "string", nullable="0+", default=None),
        ]),
    ]),
])
