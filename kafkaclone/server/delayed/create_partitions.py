"""DelayedCreatePartitions: CreateTopics and CreatePartitions wait until every partition
they created has a leader in this broker's metadata cache (Kafka's
``DelayedCreatePartitions``), or the request timeout; the topics still leaderless then
are answered REQUEST_TIMED_OUT.

The operation is watched under its topics' names in the broker's topic purgatory and
retried when an UpdateMetadata request names one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from kafkaclone.server.delayed.purgatory import DelayedOperation
from kafkaclone.server.metadata_cache import MetadataCache


class DelayedCreatePartitions(DelayedOperation):
    """Waits until each of ``partitions`` (topic -> partition ids) has a leader; answers
    the topics that have not (none when it completed in time)."""

    def __init__(
        self,
        delay_ms: int,
        partitions: Mapping[str, Collection[int]],
        metadata_cache: MetadataCache,
        respond: Callable[[set[str]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.partitions = dict(partitions)
        self._metadata_cache = metadata_cache
        self._respond = respond

    def _leaderless_topics(self) -> set[str]:
        cache = self._metadata_cache
        leaderless: set[str] = set()
        for topic, partitions in self.partitions.items():
            for partition in partitions:
                state = cache.partition_state(topic, partition)
                if state is None or state.leader < 0:
                    leaderless.add(topic)
                    break
        return leaderless

    def try_complete(self) -> bool:
        if self._leaderless_topics():
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._respond(self._leaderless_topics())
