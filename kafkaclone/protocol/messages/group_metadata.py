"""The group metadata records of ``__consumer_offsets`` (Kafka's GroupMetadataKey.json and
GroupMetadataValue.json).

Not API bodies: a group coordinator writes them as the key and value of a record, each an
int16 version followed by the body (kafkaclone.coordinator.group.metadata_log). Key
versions 0 and 1 are Kafka's offset commit keys (group, topic, partition); version 2 is a
group's. Values are written as version 3.
"""

from kafkaclone.protocol.schema import data, field

GROUP_METADATA_KEY = data(
    "GroupMetadataKey", valid="2", flexible="none", fields=[
        field("group", "string", "2"),
    ],
)

GROUP_METADATA_VALUE = data(
    "GroupMetadataValue", valid="0-3", flexible="none", fields=[
        field("protocol_type", "string"),
        field("generation", "int32"),
        field("protocol", "string", nullable="0+"),
        field("leader", "string", nullable="0+"),
        field("current_state_timestamp", "int64", "2+", default=-1),
        field("members", "[]MemberMetadata", fields=[
            field("member_id", "string"),
            field("group_instance_id", "string", "3+", nullable="3+", default=None),
            field("client_id", "string"),
            field("client_host", "string"),
            field("rebalance_timeout", "int32", "1+", default=0),
            field("session_timeout", "int32"),
            field("subscription", "bytes"),
            field("assignment", "bytes"),
        ]),
    ],
)
