"""LeaderAndIsr (key 4), versions 0-5: the controller's leader/follower orders to a broker.

v0-1 list partition states with their topic name (``ungrouped_partition_states``); v2+
group them by topic (``topic_states``); v4+ are flexible; v5 adds the request ``type`` and
topic ids, and its response groups partition errors by topic id.
"""

from kafkaclone.protocol.schema import field, request, response

# Kafka's commonStruct LeaderAndIsrPartitionState, shared by both layouts.
LEADER_AND_ISR_PARTITION_STATE = [
    field("topic_name", "string", "0-1"),
    field("partition_index", "int32"),
    field("controller_epoch", "int32"),
    field("leader", "int32"),
    field("leader_epoch", "int32"),
    field("isr", "[]int32"),
    field("zk_version", "int32"),
    field("replicas", "[]int32"),
    field("adding_replicas", "[]int32", "3+"),
    field("removing_replicas", "[]int32", "3+"),
    field("is_new", "bool", "1+", default=False),
]

REQUEST = request(4, "LeaderAndIsrRequest", valid="0-5", flexible="4+", fields=[
    field("controller_id", "int32"),
    field("controller_epoch", "int32"),
    field("broker_epoch", "int64", "2+", default=-1),
    field("type", "int8", "5+", about="whether the request lists every topic (KIP-516)"),
    field("ungrouped_partition_states", "[]LeaderAndIsrPartitionState", "0-1",
          fields=LEADER_AND_ISR_PARTITION_STATE),
    field("topic_states", "[]LeaderAndIsrTopicState", "2+", fields=[
        field("topic_name", "string", "2+"),
        field("topic_id", "uuid", "5+"),
        field("partition_states", "[]LeaderAndIsrPartitionState", "2+",
              fields=LEADER_AND_ISR_PARTITION_STATE),
    ]),
    field("live_leaders", "[]LeaderAndIsrLiveLeader", fields=[
        field("broker_id", "int32"),
        field("host_name", "string"),
        field("port", "int32"),
    ]),
])

# Kafka's commonStruct LeaderAndIsrPartitionError.
LEADER_AND_ISR_PARTITION_ERROR = [
    field("topic_name", "string", "0-4"),
    field("partition_index", "int32"),
    field("error_code", "int16"),
]

RESPONSE = response(4, "LeaderAndIsrResponse", valid="0-5", flexible="4+", fields=[
    field("error_code", "int16"),
    field("partition_errors", "[]LeaderAndIsrPartitionError", "0-4",
          fields=LEADER_AND_ISR_PARTITION_ERROR),
    field("topics", "[]LeaderAndIsrTopicError", "5+", fields=[
        field("topic_id", "uuid", "5+"),
        field("partition_errors", "[]LeaderAndIsrPartitionError", "5+",
              fields=LEADER_AND_ISR_PARTITION_ERROR),
    ]),
])
