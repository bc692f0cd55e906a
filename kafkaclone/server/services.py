"""What API handlers may use of the broker they run in.

Handlers receive the broker through ``RequestContext.broker``; this Protocol names the parts
they rely on, so a handler can be tested with any object that provides them.
"""

from __future__ import annotations

from typing import Protocol

from kafkaclone.server.metadata_cache import MetadataCache


class BrokerServices(Protocol):
    broker_id: int
    cluster_id: str | None
    metadata_cache: MetadataCache
    controller_epoch: int
    """The highest controller epoch seen in a controller request (Kafka's ReplicaManager)."""
    broker_epoch: int
    """The czxid of this broker's /brokers/ids znode: its registration generation."""
    auto_create_topics_enable: bool

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics a Metadata request named; the error code to report for each
        (LEADER_NOT_AVAILABLE once creation is under way, as Kafka answers)."""
        ...
