"""DescribeCluster (key 60), version 0 (Kafka 2.8's DescribeClusterRequest.json /
DescribeClusterResponse.json, KIP-700)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(60, "DescribeClusterRequest", valid="0", flexible="0+", fields=[
    field("include_cluster_authorized_operations", "bool"),
])

RESPONSE = response(60, "DescribeClusterResponse", valid="0", flexible="0+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+", default=None),
    field("cluster_id", "string"),
    field("controller_id", "int32", default=-1),
    field("brokers", "[]DescribeClusterBroker", fields=[
        field("broker_id", "int32"),
        field("host", "string"),
        field("port", "int32"),
        field("rack", "string", nullable="0+", default=None),
    ]),
    field("cluster_authorized_operations", "int32", default=-2147483648),
])
