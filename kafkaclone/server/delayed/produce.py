"""DelayedProduce: an acks=-1 produce waiting until the high watermark passes its batches
(Kafka's ``DelayedProduce``).

Each partition that appended waits for ``required_offset`` (its last offset + 1). A
partition is done when its high watermark reached it (NOT_ENOUGH_REPLICAS_AFTER_APPEND if
the ISR shrank below min.insync.replicas meanwhile), when this broker stops being its leader
(NOT_LEADER_OR_FOLLOWER; KAFKA_STORAGE_ERROR when its log directory failed), or when the
request timeout expires (REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkaclone.common.errors import (
    NONE,
    RequestTimedOutError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.purgatory import DelayedOperation, PartitionSource

logger = logging.getLogger(__name__)


@dataclass
class ProducePartitionResult:
    """One partition's answer to a produce (Kafka's PartitionResponse)."""

    error_code: int = NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass
class ProducePartitionStatus:
    required_offset: int
    result: ProducePartitionResult
    acks_pending: bool = True


class DelayedProduce(DelayedOperation):
    """Waits until every appended partition's high watermark reaches its batches."""

    def __init__(
        self,
        delay_ms: int,
        statuses: Mapping[TopicPartition, ProducePartitionStatus],
        partitions: PartitionSource,
        respond: Callable[[dict[TopicPartition, ProducePartitionResult]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = dict(statuses)
        self._partitions = partitions
        self._respond = respond
        for status in self.statuses.values():
            if status.result.error_code != NONE:
                status.acks_pending = False

    def try_complete(self) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._partitions.get_partition(tp)
            if partition is None:
                done, error = True, self._partitions.missing_partition_error(tp)
            else:
                done, error = partition.check_enough_replicas_reach_offset(
                    status.required_offset)
            if error != NONE or done:
                status.acks_pending = False
                status.result.error_code = error
        if any(status.acks_pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for tp, status in self.statuses.items():
            if status.acks_pending:
                logger.debug("Expiring produce request for %s at offset %d", tp,
                             status.required_offset)
                status.acks_pending = False
                status.result.error_code = RequestTimedOutError.code

    def on_complete(self) -> None:
        self._respond({tp: status.result for tp, status in self.statuses.items()})

