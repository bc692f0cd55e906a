"""Types the producer, consumer and tools share: TopicPartition, ConsumerRecord, and the
special offsets (confluent-kafka's values)."""

from __future__ import annotations

from typing import Any, Final

from kafkaclone.common.errors import KafkaError

OFFSET_BEGINNING: Final = -2
OFFSET_END: Final = -1
OFFSET_STORED: Final = -1000
OFFSET_INVALID: Final = -1001

TIMESTAMP_NOT_AVAILABLE: Final = -1
TIMESTAMP_CREATE_TIME: Final = 0
TIMESTAMP_LOG_APPEND_TIME: Final = 1


class TopicPartition:
    """A topic's partition, with an offset (or a timestamp for ``offsets_for_times``) and
    the error of the call that returned it. Equal and hashed by topic and partition, as
    confluent-kafka's."""

    __slots__ = ("error", "leader_epoch", "metadata", "offset", "partition", "topic")

    def __init__(self, topic: str, partition: int = -1, offset: int = OFFSET_INVALID,
                 metadata: str | None = None, leader_epoch: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        error = "" if self.error is None else f", error={self.error!r}"
        return (f"TopicPartition(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}{error})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self.topic == other.topic and self.partition == other.partition

    def __lt__(self, other: TopicPartition) -> bool:
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))


class ConsumerRecord:
    """One consumed record."""

    __slots__ = (
        "headers",
        "key",
        "leader_epoch",
        "offset",
        "partition",
        "timestamp",
        "timestamp_type",
        "topic",
        "value",
    )

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: Any, value: Any, headers: list[Any],
                 leader_epoch: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.leader_epoch = leader_epoch

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r})")


class ConsumerGroupMetadata:
    """A consumer's group membership as a transactional producer needs it
    (``Producer.send_offsets_to_transaction``): the group coordinator refuses offsets from
    a member of an older generation (Kafka's ConsumerGroupMetadata, KIP-447)."""

    __slots__ = ("generation_id", "group_id", "group_instance_id", "member_id")

    def __init__(self, group_id: str, generation_id: int = -1, member_id: str = "",
                 group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id

    def __repr__(self) -> str:
        return (f"ConsumerGroupMetadata(group_id={self.group_id!r}, generation_id="
                f"{self.generation_id}, member_id={self.member_id!r}, group_instance_id="
                f"{self.group_instance_id!r})")
