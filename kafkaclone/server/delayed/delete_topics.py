"""DelayedDeleteTopics: DeleteTopics waits until the controller's UpdateMetadata removed
every topic it marked for deletion from this broker's metadata cache (Kafka's
``DelayedDeleteTopics``), or the request timeout; the topics still there then are
answered REQUEST_TIMED_OUT.

The operation is watched under its topics' names in the broker's topic purgatory and
retried when an UpdateMetadata request names one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from kafkaclone.server.delayed.purgatory import DelayedOperation
from kafkaclone.server.metadata_cache import MetadataCache


class DelayedDeleteTopics(DelayedOperation):
    """Waits until none of ``topics`` is in the metadata cache; answers the topics that
    still are (none when it completed in time)."""

    def __init__(
        self,
        delay_ms: int,
        topics: Collection[str],
        metadata_cache: MetadataCache,
        respond: Callable[[set[str]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.topics = frozenset(topics)
        self._metadata_cache = metadata_cache
        self._respond = respond

    def _pending_topics(self) -> set[str]:
        return {topic for topic in self.topics if self._metadata_cache.contains(topic)}

    def try_complete(self) -> bool:
        if self._pending_topics():
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self._respond(self._pending_topics())
