"""The admin requests that wait for the controller's UpdateMetadata to reach this broker's
metadata cache (Kafka's ``DelayedCreatePartitions``, ``DelayedDeleteTopics`` and
``DelayedElectLeader``).

Each completes once nothing it waits for is missing from the cache, or expires at the
request's timeout; either way it answers what is still missing (nothing when it completed
in time), which the handler reports as REQUEST_TIMED_OUT. CreateTopics, CreatePartitions
and DeleteTopics wait in the broker's topic purgatory, keyed by topic name; ElectLeaders
in its ElectLeader purgatory, keyed by TopicPartition. The UpdateMetadata handler retries
the operations watching what its request names.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.delayed.purgatory import DelayedOperation
from kafkaclone.server.metadata_cache import MetadataCache

K = TypeVar("K", bound=Hashable)


class DelayedMetadataOperation(DelayedOperation, Generic[K]):
    """Waits until :meth:`missing` is empty; answers what is missing when it completes."""

    def __init__(self, delay_ms: int, metadata_cache: MetadataCache,
                 respond: Callable[[set[K]], None]) -> None:
        super().__init__(delay_ms)
        self.metadata_cache = metadata_cache
        self._respond = respond

    def missing(self) -> set[K]:
        """What the metadata cache does not show yet."""
        raise NotImplementedError

    def try_complete(self) -> bool:
        return not self.missing() and self.force_complete()

    def on_complete(self) -> None:
        self._respond(self.missing())


class DelayedCreatePartitions(DelayedMetadataOperation[str]):
    """CreateTopics / CreatePartitions: every new partition (topic -> partition ids) has a
    leader; missing: the topics with a leaderless partition."""

    def __init__(self, delay_ms: int, partitions: Mapping[str, Collection[int]],
                 metadata_cache: MetadataCache, respond: Callable[[set[str]], None]) -> None:
        super().__init__(delay_ms, metadata_cache, respond)
        self.partitions = dict(partitions)

    def missing(self) -> set[str]:
        cache = self.metadata_cache
        leaderless: set[str] = set()
        for topic, partitions in self.partitions.items():
            for partition in partitions:
                state = cache.partition_state(topic, partition)
                if state is None or state.leader < 0:
                    leaderless.add(topic)
                    break
        return leaderless


class DelayedDeleteTopics(DelayedMetadataOperation[str]):
    """DeleteTopics: the topics are gone from the cache; missing: those still there."""

    def __init__(self, delay_ms: int, topics: Collection[str], metadata_cache: MetadataCache,
                 respond: Callable[[set[str]], None]) -> None:
        super().__init__(delay_ms, metadata_cache, respond)
        self.topics = frozenset(topics)

    def missing(self) -> set[str]:
        return {topic for topic in self.topics if self.metadata_cache.contains(topic)}


class DelayedElectLeader(DelayedMetadataOperation[TopicPartition]):
    """ElectLeaders: each partition has the leader the controller elected; missing: the
    partitions that do not yet."""

    def __init__(self, delay_ms: int, expected_leaders: Mapping[TopicPartition, int],
                 metadata_cache: MetadataCache,
                 respond: Callable[[set[TopicPartition]], None]) -> None:
        super().__init__(delay_ms, metadata_cache, respond)
        self.expected_leaders = dict(expected_leaders)

    def missing(self) -> set[TopicPartition]:
        cache = self.metadata_cache
        waiting: set[TopicPartition] = set()
        for tp, leader in self.expected_leaders.items():
            state = cache.partition_state(tp.topic, tp.partition)
            if state is None or state.leader != leader:
                waiting.add(tp)
        return waiting
