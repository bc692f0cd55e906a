"""StopReplica (key 5), versions 0-3: the controller tells a broker to stop replicas.

v0 lists partitions with their topic name (``ungrouped_partitions``), v1-2 group partition
indexes by topic (``topics``), both with one request-wide ``delete_partitions`` flag; v2+
are flexible; v3 carries a leader epoch and a delete flag per partition (``topic_states``).
"""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(5, "StopReplicaRequest", valid="0-3", flexible="2+", fields=[
    field("controller_id", "int32"),
    field("controller_epoch", "int32"),
    field("broker_epoch", "int64", "1+", default=-1),
    field("delete_partitions", "bool", "0-2"),
    field("ungrouped_partitions", "[]StopReplicaPartitionV0", "0", fields=[
        field("topic_name", "string", "0"),
        field("partition_index", "int32", "0"),
    ]),
    field("topics", "[]StopReplicaTopicV1", "1-2", fields=[
        field("name", "string", "1-2"),
        field("partition_indexes", "[]int32", "1-2"),
    ]),
    field("topic_states", "[]StopReplicaTopicState", "3+", fields=[
        field("topic_name", "string", "3+"),
        field("partition_states", "[]StopReplicaPartitionState", "3+", fields=[
            field("partition_index", "int32", "3+"),
            field("leader_epoch", "int32", "3+", default=-1),
            field("delete_partition", "bool", "3+"),
        ]),
    ]),
])

RESPONSE = response(5, "StopReplicaResponse", valid="0-3", flexible="2+", fields=[
    field("error_code", "int16"),
    field("partition_errors", "[]StopReplicaPartitionError", fields=[
        field("topic_name", "string"),
        field("partition_index", "int32"),
        field("error_code", "int16"),
    ]),
])
