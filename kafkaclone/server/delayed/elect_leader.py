"""DelayedElectLeader: ElectLeaders waits until this broker's metadata cache shows the
leader the controller elected for each partition (Kafka's ``DelayedElectLeader``), or the
request timeout; the partitions not there yet are answered REQUEST_TIMED_OUT.

The operation is watched under its partitions in the broker's ElectLeader purgatory and
retried when an UpdateMetadata request names one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.purgatory import DelayedOperation
from kafkaclone.server.metadata_cache import MetadataCache


class DelayedElectLeader(DelayedOperation):
    """Waits until each partition of ``expected_leaders`` has that leader in the metadata
    cache; answers the partitions that have not (none when it completed in time)."""

    def __init__(
        self,
        delay_ms: int,
        expected_leaders: Mapping[TopicPartition, int],
        metadata_cache: MetadataCache,
        respond: Callable[[set[TopicPartition]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.expected_leaders = dict(expected_leaders)
        self._metadata_cache = metadata_cache
        self._respond = respond

    def _waiting_partitions(self) -> set[TopicPartition]:
        cache = self._metadata_cache
        waiting: set[TopicPartition] = set()
        for tp, leader in self.expected_leaders.items():
            state = cache.partition_state(tp.topic, tp.partition)
            if state is None or state.leader != leader:
                waiting.add(tp)
        return waiting

    def try_complete(self) -> bool:
        if self._waiting_partitions():
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._respond(self._waiting_partitions())
