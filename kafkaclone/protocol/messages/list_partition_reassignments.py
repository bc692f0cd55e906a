"""ListPartitionReassignments (key 46), version 0 (KIP-455): the reassignments in progress."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(46, "ListPartitionReassignmentsRequest", valid="0", flexible="0+", fields=[
    field("timeout_ms", "int32", default=60000),
    field("topics", "[]ListPartitionReassignmentsTopics", nullable="0+", default=None,
          about="the partitions to list; null lists every reassignment in progress", fields=[
              field("name", "string"),
              field("partition_indexes", "[]int32"),
          ]),
])

RESPONSE = response(46, "ListPartitionReassignmentsResponse", valid="0", flexible="0+",
                    fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+", default=None),
    field("topics", "[]OngoingTopicReassignment", fields=[
        field("name", "string"),
        field("partitions", "[]OngoingPartitionReassignment", fields=[
            field("partition_index", "int32"),
            field("replicas", "[]int32"),
            field("adding_replicas", "[]int32"),
            field("removing_replicas", "[]int32"),
        ]),
    ]),
])
