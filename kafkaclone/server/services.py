"""What API handlers may use of the broker they run in.

Handlers receive the broker through ``RequestContext.broker``; these Protocols name the parts
they rely on, so a handler can be tested with any object that provides them. ``KafkaBroker``
(kafkaclone.server.broker) is the real implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from kafkaclone.server.metadata_cache import MetadataCache

if TYPE_CHECKING:
    from kafkaclone.common.topic_partition import TopicPartition
    from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
    from kafkaclone.zk.admin import AdminZkClient
    from kafkaclone.zk.client import KafkaZkClient


class ControllerService(Protocol):
    """The controller as the broker's handlers see it (kafkaclone.controller)."""

    @property
    def is_active(self) -> bool:
        """Whether this broker is the controller now."""
        ...

    @property
    def epoch(self) -> int:
        ...

    async def controlled_shutdown(self, broker_id: int,
                                  broker_epoch: int) -> set[TopicPartition]:
        """Move leadership away from ``broker_id``; the partitions it still leads.
        Raises NotControllerError when not active, StaleBrokerEpochError for an old epoch."""
        ...


class BrokerServices(Protocol):
    broker_id: int
    cluster_id: str | None
    metadata_cache: MetadataCache
    controller_epoch: int
    """The highest controller epoch seen in a controller request (Kafka's ReplicaManager)."""
    broker_epoch: int
    """The czxid of this broker's /brokers/ids znode: its registration generation."""
    auto_create_topics_enable: bool
    config: Any
    """The broker's KafkaConfig (kafkaclone.server.config)."""
    zk_client: KafkaZkClient
    admin_zk: AdminZkClient
    log_manager: Any
    """The broker's LogManager (kafkaclone.log)."""
    replica_manager: Any
    """The broker's ReplicaManager (kafkaclone.server.replica_manager)."""
    controller: ControllerService
    group_coordinator: Any
    """The broker's GroupCoordinator (kafkaclone.coordinator.group), None until started."""
    producer_id_manager: ProducerIdManager | None
    """Hands out producer ids (InitProducerId); None until started."""
    reactor: Any
    """The Twisted reactor the broker runs on (timers for delayed operations)."""

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics a Metadata request named; the error code to report for each
        (LEADER_NOT_AVAILABLE once creation is under way, as Kafka answers)."""
        ...
