"""Metadata (key 3), versions 0-11 (Kafka 2.8's MetadataRequest.json / MetadataResponse.json).

In version 0 an empty topic list asks for every topic; from version 1 on that is a null list.
Version 10 adds topic ids (KIP-516); version 11 drops the cluster authorized operations, which
moved to DescribeCluster (KIP-700).
"""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(3, "MetadataRequest", valid="0-11", flexible="9+", fields=[
    field("topics", "[]MetadataRequestTopic", nullable="1+", fields=[
        field("topic_id", "uuid", "10+"),
        field("name", "string", nullable="10+"),
    ]),
    field("allow_auto_topic_creation", "bool", "4+", default=True),
    field("include_cluster_authorized_operations", "bool", "8-10"),
    field("include_topic_authorized_operations", "bool", "8+"),
])

RESPONSE = response(3, "MetadataResponse", valid="0-11", flexible="9+", fields=[
    field("throttle_time_ms", "int32", "3+"),
    field("brokers", "[]MetadataResponseBroker", fields=[
        field("node_id", "int32"),
        field("host", "string"),
        field("port", "int32"),
        field("rack", "string", "1+", nullable="1+", default=None),
    ]),
    field("cluster_id", "string", "2+", nullable="2+", default=None),
    field("controller_id", "int32", "1+", default=-1),
    field("topics", "[]MetadataResponseTopic", fields=[
        field("error_code", "int16"),
        field("name", "string"),
        field("topic_id", "uuid", "10+"),
        field("is_internal", "bool", "1+", default=False),
        field("partitions", "[]MetadataResponsePartition", fields=[
            field("error_code", "int16"),
            field("partition_index", "int32"),
            field("leader_id", "int32"),
            field("leader_epoch", "int32", "7+", default=-1),
            field("replica_nodes", "[]int32"),
            field("isr_nodes", "[]int32"),
            field("offline_replicas", "[]int32", "5+"),
        ]),
        field("topic_authorized_operations", "int32", "8+", default=-2147483648,
              about="A bit field of the operations the client may perform on the topic."),
    ]),
    field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
])
