"""ElectLeaders (key 43), versions 0-2 (KIP-183; the election type from v1, KIP-460)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(43, "ElectLeadersRequest", valid="0-2", flexible="2+", fields=[
    field("election_type", "int8", "1+",
          about="0 elects the preferred replica, 1 the first live replica if no in-sync "
                "replica is live (unclean)"),
    field("topic_partitions", "[]TopicPartitions", nullable="0+",
          about="the partitions to elect leaders for; null for every partition", fields=[
              field("topic", "string"),
              field("partitions", "[]int32"),
          ]),
    field("timeout_ms", "int32", default=60000),
])

RESPONSE = response(43, "ElectLeadersResponse", valid="0-2", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16", "1+"),
    field("replica_election_results", "[]ReplicaElectionResult", fields=[
        field("topic", "string"),
        field("partition_result", "[]PartitionResult", fields=[
            field("partition_id", "int32"),
            field("error_code", "int16"),
            field("error_message", "string", nullable="0+", default=None),
        ]),
    ]),
])
