"""DelayedFetch: a fetch waiting for ``min_bytes`` (Kafka's ``DelayedFetch``), and the
types a fetch is described and answered with.

A fetch that found fewer than ``min_bytes`` waits up to ``max_wait_ms``. It completes
early when, for one of its partitions, this broker stopped being the leader, the leader
epoch moved, the log was truncated below the fetch offset, the readable end (log end
offset for followers, high watermark for consumers) moved to a later segment, or enough
bytes accumulated; then the partitions are read again and answered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from kafkaclone.cluster.partition import FetchIsolation, Partition
from kafkaclone.common.file_region import FileRegion
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import UNKNOWN_OFFSET, AbortedTransaction, LogOffsetMetadata
from kafkaclone.server.delayed.purgatory import DelayedOperation, PartitionSource
from kafkaclone.server.replica_selector import ClientMetadata


class FetchParams(NamedTuple):
    """A fetch request as the ReplicaManager needs it (Kafka's FetchParams)."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    fetch_only_from_leader: bool = True
    client_metadata: ClientMetadata | None = None
    """A consumer's Fetch v11+: its rack, for the preferred read replica (KIP-392)."""
    file_regions: bool = False
    """Read records as ranges of the segment files (FileRegion), to be sent with sendfile,
    rather than as bytes: the Fetch handler's answers that are not down-converted."""

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class PartitionFetchInfo(NamedTuple):
    fetch_offset: int
    log_start_offset: int
    """The follower's log start offset (-1 from consumers)."""
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


class LogReadResult(NamedTuple):
    """One partition's read (Kafka's LogReadResult)."""

    error_code: int
    records: memoryview | FileRegion | None
    fetch_offset_metadata: LogOffsetMetadata
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    follower_log_start_offset: int
    fetch_time_ms: int
    diverging_epoch: tuple[int, int] | None = None
    preferred_read_replica: int = -1
    """The follower the consumer should fetch from instead (no records then); -1: none."""
    aborted_transactions: list[AbortedTransaction] | None = None
    """read_committed: the aborted transactions the records overlap."""

    @property
    def size(self) -> int:
        return 0 if self.records is None else len(self.records)


UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(UNKNOWN_OFFSET)


class FetchReader(PartitionSource, Protocol):
    def read_from_local_log(self, params: FetchParams,
                            infos: Sequence[tuple[TopicPartition, PartitionFetchInfo]],
                            ) -> list[tuple[TopicPartition, LogReadResult]]: ...

    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """A follower's throttled replica over the leader's replication quota: its bytes do
        not count towards ``min_bytes``."""
        ...


class DelayedFetch(DelayedOperation):
    """A long poll: waits until ``min_bytes`` are readable or something changed."""

    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        statuses: Sequence[tuple[TopicPartition, PartitionFetchInfo, LogOffsetMetadata]],
        reader: FetchReader,
        respond: Callable[[list[tuple[TopicPartition, LogReadResult]]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.statuses = list(statuses)
        self._reader = reader
        self._respond = respond

    def try_complete(self) -> bool:
        params = self.params
        get_partition = self._reader.get_partition
        isolation = params.isolation
        fetch_only_from_leader = params.fetch_only_from_leader
        accumulated = 0
        for tp, info, start in self.statuses:
            start_offset = start.message_offset
            if start_offset == UNKNOWN_OFFSET:
                continue
            partition = get_partition(tp)
            if partition is None:
                return self.force_complete()  # the partition went away
            if not partition.is_current_leader_epoch(info.current_leader_epoch):
                return self.force_complete()  # fenced, or an epoch not known here yet
            if fetch_only_from_leader and not partition.is_leader:
                return self.force_complete()
            log = partition.log
            if log is None:
                return self.force_complete()
            if isolation is FetchIsolation.LOG_END:
                end_offset = log.log_end_offset
            elif isolation is FetchIsolation.TXN_COMMITTED:
                end_offset = log.last_stable_offset
            else:
                end_offset = log.high_watermark
            if end_offset == start_offset:
                continue
            if params.is_from_follower and self._reader.should_leader_throttle(
                    partition, params.replica_id):
                continue
            if end_offset < start_offset:
                return self.force_complete()  # the log was truncated
            if params.min_bytes <= 1:
                return self.force_complete()
            end = (log.log_end_offset_metadata if end_offset == log.log_end_offset
                   else log.convert_to_offset_metadata(end_offset))
            if start.segment_base_offset != end.segment_base_offset:
                return self.force_complete()  # the readable end is in a later segment
            accumulated += min(end.relative_position_in_segment
                               - start.relative_position_in_segment, info.max_bytes)
        if accumulated >= params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        results = self._reader.read_from_local_log(
            self.params, [(tp, info) for tp, info, _ in self.statuses])
        self._respond(results)
