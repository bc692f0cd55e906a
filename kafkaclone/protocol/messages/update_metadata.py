"""UpdateMetadata (key 6), versions 0-7: the controller's cluster metadata push to brokers.

v0-4 list partition states with their topic name (``ungrouped_partition_states``); v5+
group them by topic (``topic_states``) and carry the broker epoch; v6+ are flexible; v7
adds topic ids.
"""

from kafkaclone.protocol.schema import field, request, response

# Kafka's commonStruct UpdateMetadataPartitionState, shared by both layouts.
UPDATE_METADATA_PARTITION_STATE = [
    field("topic_name", "string", "0-4"),
    field("partition_index", "int32"),
    field("controller_epoch", "int32"),
    field("leader", "int32"),
    field("leader_epoch", "int32"),
    field("isr", "[]int32"),
    field("zk_version", "int32"),
    field("replicas", "[]int32"),
    field("offline_replicas", "[]int32", "4+"),
]

REQUEST = request(6, "UpdateMetadataRequest", valid="0-7", flexible="6+", fields=[
    field("controller_id", "int32"),
    field("controller_epoch", "int32"),
    field("broker_epoch", "int64", "5+", default=-1),
    field("ungrouped_partition_states", "[]UpdateMetadataPartitionState", "0-4",
          fields=UPDATE_METADATA_PARTITION_STATE),
    field("topic_states", "[]UpdateMetadataTopicState", "5+", fields=[
        field("topic_name", "string", "5+"),
        field("topic_id", "uuid", "7+"),
        field("partition_states", "[]UpdateMetadataPartitionState", "5+",
              fields=UPDATE_METADATA_PARTITION_STATE),
    ]),
    field("live_brokers", "[]UpdateMetadataBroker", fields=[
        field("id", "int32"),
        # v0 has a single host and port per broker instead of endpoints.
        field("v0_host", "string", "0"),
        field("v0_port", "int32", "0"),
        field("endpoints", "[]UpdateMetadataEndpoint", "1+", fields=[
            field("port", "int32", "1+"),
            field("host", "string", "1+"),
            field("listener", "string", "3+"),
            field("security_protocol", "int16", "1+"),
        ]),
        field("rack", "string", "2+", nullable="0+"),
    ]),
])

RESPONSE = response(6, "UpdateMetadataResponse", valid="0-7", flexible="6+", fields=[
    field("error_code", "int16"),
])
