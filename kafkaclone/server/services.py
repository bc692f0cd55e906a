"""What API handlers may use of the broker they run in.

Handlers receive the broker through ``RequestContext.broker``; these Protocols name the parts
they rely on, so a handler can be tested with any object that provides them. ``KafkaBroker``
(kafkaclone.server.broker) is the real implementation. Every part exists once the broker
serves requests (its socket server starts after them); only the controller comes later.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkaclone.common.clock import Scheduler
    from kafkaclone.common.errors import KafkaError
    from kafkaclone.common.topic_partition import TopicPartition
    from kafkaclone.coordinator.group.coordinator import GroupCoordinator
    from kafkaclone.coordinator.transaction.coordinator import TransactionCoordinator
    from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
    from kafkaclone.log.cleaner import LogCleaner
    from kafkaclone.log.manager import LogManager
    from kafkaclone.server.authorizer.acl_authorizer import AclAuthorizer
    from kafkaclone.server.config import KafkaConfig
    from kafkaclone.server.delayed.admin import DelayedElectLeader
    from kafkaclone.server.delayed.purgatory import DelayedOperation, DelayedOperationPurgatory
    from kafkaclone.server.metadata_cache import MetadataCache
    from kafkaclone.server.replica_manager import ReplicaManager
    from kafkaclone.zk.admin import AdminZkClient
    from kafkaclone.zk.client import KafkaZkClient
    from kafkaclone.zk.znodes import ReplicaAssignment


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

    async def elect_leaders(self, partitions: Iterable[TopicPartition] | None,
                            election_type: int) -> dict[TopicPartition, KafkaError | int]:
        """ElectLeaders: each partition's outcome (the new leader's id when one was
        elected); ``partitions`` None means every partition. Raises NotControllerError
        when not active."""
        ...

    async def alter_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments: start (target replicas) or cancel (None) each
        partition's reassignment; each partition's error, None when accepted. Raises
        NotControllerError when not active."""
        ...

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the assignment of each (listed) partition being
        reassigned. Raises NotControllerError when not active."""
        ...


class BrokerServices(Protocol):
    broker_id: int
    cluster_id: str | None
    controller_epoch: int
    """The highest controller epoch seen in a controller request (Kafka's ReplicaManager)."""
    broker_epoch: int
    """The czxid of this broker's /brokers/ids znode: its registration generation."""
    auto_create_topics_enable: bool
    authorizer: AclAuthorizer | None
    """None when no ``authorizer.class.name`` is configured: every request is allowed."""
    log_cleaner: LogCleaner | None
    """None when ``log.cleaner.enable=false``."""

    @property
    def config(self) -> KafkaConfig: ...

    @property
    def reactor(self) -> Scheduler:
        """The clock the broker runs on (timestamps, timers for delayed operations)."""
        ...

    @property
    def metadata_cache(self) -> MetadataCache: ...

    @property
    def zk_client(self) -> KafkaZkClient: ...

    @property
    def admin_zk(self) -> AdminZkClient: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def group_coordinator(self) -> GroupCoordinator:
        """Answers COORDINATOR_NOT_AVAILABLE itself while it is not active."""
        ...

    @property
    def producer_id_manager(self) -> ProducerIdManager:
        """Hands out producer ids (InitProducerId)."""
        ...

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
        EndTxn; answers COORDINATOR_NOT_AVAILABLE itself while it is not active."""
        ...

    @property
    def controller(self) -> ControllerService | None:
        """None until the broker stands for controller (after it registered)."""
        ...

    @property
    def topic_purgatory(self) -> DelayedOperationPurgatory[DelayedOperation]:
        """CreateTopics, CreatePartitions and DeleteTopics waiting for UpdateMetadata, keyed
        by topic name (Kafka's ZkAdminManager.topicPurgatory)."""
        ...

    @property
    def elect_leader_purgatory(self) -> DelayedOperationPurgatory[DelayedElectLeader]:
        """ElectLeaders waiting for UpdateMetadata, keyed by TopicPartition (Kafka's
        ReplicaManager.delayedElectLeaderPurgatory)."""
        ...

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]:
        """Create topics a Metadata request named; the error code to report for each
        (LEADER_NOT_AVAILABLE once creation is under way, as Kafka answers)."""
        ...
