"""DelayedDeleteRecords: DeleteRecords waits until every live replica's log start offset
reached the requested offset (Kafka's ``DelayedDeleteRecords``), or the request timeout
(REQUEST_TIMED_OUT)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.purgatory import DelayedOperation, PartitionSource


@dataclass
class DeleteRecordsPartitionStatus:
    required_offset: int
    low_watermark: int = -1
    error_code: int = NONE
    acks_pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, DeleteRecordsPartitionStatus],
        partitions: PartitionSource,
        respond: Callable[[dict[TopicPartition, DeleteRecordsPartitionStatus]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = dict(statuses)
        self._partitions = partitions
        self._respond = respond
        for status in self.statuses.values():
            if status.error_code != NONE:
                status.acks_pending = False

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._partitions.get_partition(tp)
            try:
                if partition is None:
                    raise UnknownTopicOrPartitionError()
                low_watermark = partition.low_watermark_if_leader()
            except KafkaError as exc:
                status.acks_pending = False
                status.error_code = exc.code
                status.low_watermark = -1
                continue
            if low_watermark >= status.required_offset:
                status.acks_pending = False
                status.low_watermark = low_watermark
        if any(status.acks_pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.error_code = RequestTimedOutError.code
                status.low_watermark = -1

    def on_complete(self) -> None:
        self._respond(self.statuses)
