"""Fetch (key 1), versions 0-12 (Kafka 2.8's FetchRequest.json / FetchResponse.json).

Version 12 is the first flexible version; it adds LastFetchedEpoch to the request and the
tagged DivergingEpoch, CurrentLeader and SnapshotId fields to each partition of the response.
"""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(1, "FetchRequest", valid="0-12", flexible="12+", fields=[
    field("cluster_id", "string", "12+", nullable="12+", default=None, tag=0,
          about="The cluster id if known, to validate metadata fetches (KIP-595)."),
    field("replica_id", "int32", about="The follower's broker id, or -1 for a consumer."),
    field("max_wait_ms", "int32"),
    field("min_bytes", "int32"),
    field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    field("isolation_level", "int8", "4+", default=0,
          about="0: READ_UNCOMMITTED, 1: READ_COMMITTED."),
    field("session_id", "int32", "7+", default=0),
    field("session_epoch", "int32", "7+", default=-1),
    field("topics", "[]FetchTopic", fields=[
        field("topic", "string"),
        field("partitions", "[]FetchPartition", fields=[
            field("partition", "int32"),
            field("current_leader_epoch", "int32", "9+", default=-1),
            field("fetch_offset", "int64"),
            field("last_fetched_epoch", "int32", "12+", default=-1),
            field("log_start_offset", "int64", "5+", default=-1,
                  about="The follower's log start offset; -1 from a consumer."),
            field("partition_max_bytes", "int32"),
        ]),
    ]),
    field("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=[
        field("topic", "string", "7+"),
        field("partitions", "[]int32", "7+"),
    ], about="In an incremental fetch request, the partitions to remove from the session."),
    field("rack_id", "string", "11+", default=""),
])

RESPONSE = response(1, "FetchResponse", valid="0-12", flexible="12+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16", "7+", about="The top level error code."),
    field("session_id", "int32", "7+", default=0),
    field("responses", "[]FetchableTopicResponse", fields=[
        field("topic", "string"),
        field("partitions", "[]PartitionData", fields=[
            field("partition_index", "int32"),
            field("error_code", "int16"),
            field("high_watermark", "int64"),
            field("last_stable_offset", "int64", "4+", default=-1),
            field("log_start_offset", "int64", "5+", default=-1),
            field("diverging_epoch", "EpochEndOffset", "12+", tag=0, fields=[
                field("epoch", "int32", "12+", default=-1),
                field("end_offset", "int64", "12+", default=-1),
            ]),
            field("current_leader", "LeaderIdAndEpoch", "12+", tag=1, fields=[
                field("leader_id", "int32", "12+", default=-1),
                field("leader_epoch", "int32", "12+", default=-1),
            ]),
            field("snapshot_id", "SnapshotId", "12+", tag=2, fields=[
                field("end_offset", "int64", default=-1),
                field("epoch", "int32", default=-1),
            ]),
            field("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=[
                field("producer_id", "int64", "4+"),
                field("first_offset", "int64", "4+"),
            ]),
            field("preferred_read_replica", "int32", "11+", default=-1),
            # Records, or a range of a segment file sent as it is (zero-copy fetch).
            field("records", "file_records", nullable="0+"),
        ]),
    ]),
])
