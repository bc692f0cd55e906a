"""AdminZkClient: topic creation, deletion, partition addition and config changes, written
to ZooKeeper the way Kafka 2.8's AdminZkClient does. The controller's watches do the rest.

Everything is validated before anything is written: a request that fails validation
leaves ZooKeeper untouched. Errors are the project's Kafka error classes (Kafka's codes:
``InvalidTopicExceptionError``, ``TopicAlreadyExistsError``, ``InvalidPartitionsError``,
``InvalidReplicationFactorError``, ``InvalidReplicaAssignmentError``,
``InvalidConfigError``, ``UnknownTopicOrPartitionError``, ``BrokerNotAvailableError``).

Replica placement is Kafka's AdminUtils.assignReplicasToBrokers
(``assign_replicas_to_brokers``): rack-unaware when no broker has a ``broker.rack``,
rack-aware when all have one (the rack-alternated broker list, each partition's replicas on
as many different racks as there are), an error when only some have one. Which racks the
placement sees is the caller's :class:`RackAwareMode` (``get_broker_metadatas``).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import NamedTuple

from kazoo.exceptions import NodeExistsError

from kafkaclone.common.errors import (
    BrokerNotAvailableError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicExceptionError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import has_collision, has_collision_chars, validate_topic_name
from kafkaclone.log.config import LogConfig
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import AdminOperationError, TopicAlreadyMarkedForDeletionError
from kafkaclone.zk.znodes import (
    ConfigEntityType,
    ConfigEntityZNode,
    ReplicaAssignment,
    TopicAssignment,
    TopicZNode,
)
from kafkaclone.zk.zookeeper_client import MAX_REQUEST_DATA_BYTES

logger = logging.getLogger(__name__)

__all__ = ["AdminZkClient", "BrokerMetadata", "RackAwareMode", "assign_replicas_to_brokers",
           "has_collision", "has_collision_chars", "rack_alternated_broker_list",
           "validate_topic_name"]

ConfigValidator = Callable[[Mapping[str, str]], None]
"""Raises InvalidConfigError for configs that must not be written."""


# -- Kafka's AdminUtils ----------------------------------------------------------------------


class BrokerMetadata(NamedTuple):
    """A broker as replica placement sees it (Kafka's admin BrokerMetadata)."""

    id: int
    rack: str | None = None


class RackAwareMode(Enum):
    """Which broker racks placement uses (Kafka's RackAwareMode).

    ENFORCED: the racks; some brokers with a rack and some without is an error (the
    default of the admin tools). SAFE: the racks if every broker has one, none otherwise
    (auto-created topics). DISABLED: no racks (kafka-topics.sh ``--disable-rack-aware``).
    """

    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int | None = None,
    fixed_replica_shift: int | None = None,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's replica assignment (AdminUtils.assignReplicasToBrokers).

    Without racks (no broker has one), the first replica of partition p goes to broker
    ``(p + start) % n`` (round robin from a random start); the others follow at an
    increasing shift from it, the shift growing by one each time the partitions have gone
    round all brokers, so followers spread too. With racks (every broker has one), the same
    runs over the rack-alternated broker list (:func:`rack_alternated_broker_list`), and a
    follower is skipped while its rack already holds a replica of the partition and some
    rack holds none, or its broker does and some broker holds none: each partition's
    replicas are on min(replication factor, racks) racks, leaders spread evenly. Some
    brokers with a rack and some without is AdminOperationError.

    ``fixed_start_index`` fixes the start and, unless ``fixed_replica_shift`` is given,
    the initial shift too (as Kafka's fixedStartIndex does); otherwise both are random.
    Brokers are taken in the order given (Kafka sorts them by id).
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    racks = {b.id: b.rack for b in brokers if b.rack is not None}
    if racks and len(racks) < len(brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    rng = rng or random.Random()
    broker_list = rack_alternated_broker_list(racks) if racks else [b.id for b in brokers]
    n_brokers = len(broker_list)
    if fixed_start_index is not None and fixed_start_index >= 0:
        start_index = fixed_start_index
        next_replica_shift = (
            fixed_replica_shift if fixed_replica_shift is not None else fixed_start_index
        )
    else:
        start_index = rng.randrange(n_brokers)
        next_replica_shift = (
            fixed_replica_shift if fixed_replica_shift is not None else rng.randrange(n_brokers)
        )
    assignment: dict[int, tuple[int, ...]] = {}
    current_partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % n_brokers
        if racks:
            replicas = _rack_aware_replicas(broker_list, racks, first_replica_index,
                                            next_replica_shift, replication_factor)
        else:
            replicas = (broker_list[first_replica_index], *(
                broker_list[_replica_index(first_replica_index, next_replica_shift, j,
                                           n_brokers)]
                for j in range(replication_factor - 1)
            ))
        assignment[current_partition_id] = replicas
        current_partition_id += 1
    return assignment


def _rack_aware_replicas(
    broker_list: Sequence[int],
    racks: Mapping[int, str],
    first_replica_index: int,
    replica_shift: int,
    replication_factor: int,
) -> tuple[int, ...]:
    """One partition's replicas (the loop body of Kafka's assignReplicasToBrokersRackAware)."""
    n_brokers = len(broker_list)
    n_racks = len(set(racks.values()))
    leader = broker_list[first_replica_index]
    replicas = [leader]
    racks_with_replicas = {racks[leader]}
    brokers_with_replicas = {leader}
    k = 0
    for _ in range(replication_factor - 1):
        while True:
            broker = broker_list[_replica_index(first_replica_index, replica_shift * n_racks, k,
                                                n_brokers)]
            rack = racks[broker]
            k += 1
            if ((rack not in racks_with_replicas or len(racks_with_replicas) == n_racks)
                    and (broker not in brokers_with_replicas
                         or len(brokers_with_replicas) == n_brokers)):
                replicas.append(broker)
                racks_with_replicas.add(rack)
                brokers_with_replicas.add(broker)
                break
    return tuple(replicas)


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """The brokers taken one rack at a time, racks in name order, each rack's brokers in id
    order (Kafka's getRackAlternatedBrokerList): rack1 -> 0,1; rack2 -> 2; rack3 -> 3,4
    gives 0, 2, 3, 1, 4."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def _replica_index(
    first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int
) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def validate_topic_config(configs: Mapping[str, str]) -> None:
    """Kafka's LogConfig.validate: known topic config names, valid values."""
    LogConfig.from_props(configs)


class AdminZkClient:
    """Topic and config administration through ZooKeeper (Kafka's AdminZkClient)."""

    def __init__(
        self,
        zk_client: KafkaZkClient,
        *,
        rng: random.Random | None = None,
        topic_config_validator: ConfigValidator = validate_topic_config,
        broker_config_validator: ConfigValidator | None = None,
    ) -> None:
        self._zk = zk_client
        self._rng = rng or random.Random()
        self._validate_topic_config = topic_config_validator
        self._validate_broker_config = broker_config_validator

    async def get_broker_ids(self) -> list[int]:
        """The live brokers, sorted by id."""
        return [int(b) for b in await self._zk.get_all_broker_ids()]

    async def get_broker_metadatas(
        self, rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED
    ) -> list[BrokerMetadata]:
        """The live brokers as replica placement sees them under ``rack_aware_mode``,
        sorted by id (Kafka's AdminZkClient.getBrokerMetadatas)."""
        brokers = await self._zk.get_all_brokers_in_cluster()
        with_rack = [b for b in brokers if b.rack is not None]
        if rack_aware_mode is RackAwareMode.ENFORCED and 0 < len(with_rack) < len(brokers):
            raise AdminOperationError(
                "Not all brokers have rack information. Add --disable-rack-aware in command "
                "line to make replica assignment without rack information."
            )
        use_racks = rack_aware_mode is RackAwareMode.ENFORCED or (
            rack_aware_mode is RackAwareMode.SAFE and len(with_rack) == len(brokers))
        return sorted(
            (BrokerMetadata(int(b.broker_id), b.rack if use_racks else None) for b in brokers),
            key=lambda b: b.id,
        )

    # -- topics ----------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        fixed_start_index: int | None = None,
        fixed_replica_shift: int | None = None,
        topic_id: uuid.UUID | None = None,
        rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    ) -> TopicAssignment:
        """Create a topic: ``/config/topics/<t>`` then ``/brokers/topics/<t>``.

        Without ``replica_assignment``, ``partitions`` x ``replication_factor`` replicas are
        placed on the live brokers, with their racks as ``rack_aware_mode`` says
        (``fixed_*`` pin Kafka's random start and shift); with
        it, ``partitions`` and ``replication_factor`` are ignored. ``validate_only`` checks
        everything and writes nothing. Returns the topic's id and assignment.
        """
        configs = dict(configs or {})
        validate_topic_name(topic)
        if await self._zk.topic_exists(topic):
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        if replica_assignment is None:
            assignment = assign_replicas_to_brokers(
                await self.get_broker_metadatas(rack_aware_mode),
                partitions,
                replication_factor,
                fixed_start_index=fixed_start_index,
                fixed_replica_shift=fixed_replica_shift,
                rng=self._rng,
            )
        else:
            assignment = {p: tuple(replicas) for p, replicas in replica_assignment.items()}
        await self.validate_topic_create(topic, assignment, configs)
        new_topic_id = topic_id or uuid.uuid4()
        if not validate_only:
            await self.create_topic_with_assignment(topic, configs, assignment, new_topic_id)
        return TopicAssignment(
            topic,
            new_topic_id,
            {p: ReplicaAssignment(replicas) for p, replicas in sorted(assignment.items())},
        )

    async def validate_topic_create(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
    ) -> None:
        """Kafka's validateTopicCreate: name, existence, collisions, assignment, configs."""
        validate_topic_name(topic)
        if await self._zk.topic_exists(topic):
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        if has_collision_chars(topic):
            logger.warning(
                "Topic %s: due to limitations in metric names, topics with a period ('.') or "
                "underscore ('_') could collide. To avoid issues it is best to use either, "
                "but not both.",
                topic,
            )
            all_topics = await self._zk.get_all_topics_in_cluster()
            if topic in all_topics:
                raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
            colliding = sorted(t for t in all_topics if has_collision(topic, t))
            if colliding:
                raise InvalidTopicExceptionError(
                    f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}"
                )
        if not assignment:
            raise InvalidReplicaAssignmentError("The replica assignment is empty")
        if len({len(replicas) for replicas in assignment.values()}) != 1:
            raise InvalidReplicaAssignmentError(
                "All partitions should have the same number of replicas"
            )
        for partition, replicas in assignment.items():
            if not replicas:
                raise InvalidReplicaAssignmentError(
                    f"Cannot have replication factor of 0 for partition id {partition}."
                )
            if len(replicas) != len(set(replicas)):
                raise InvalidReplicaAssignmentError(
                    f"Duplicate replica assignment found: {_format_assignment(assignment)}"
                )
        if sorted(assignment) != list(range(len(assignment))):
            raise InvalidReplicaAssignmentError(
                "partitions should be a consecutive 0-based integer sequence"
            )
        check_assignment_size(topic, assignment)
        self._validate_topic_config(configs)

    async def create_topic_with_assignment(
        self,
        topic: str,
        configs: Mapping[str, str],
        assignment: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID,
    ) -> None:
        """Write a validated topic: its config overrides, then its assignment."""
        logger.info(
            "Creating topic %s with configuration %s and initial partition assignment %s",
            topic,
            dict(configs),
            _format_assignment(assignment),
        )
        # Not transactional with the assignment, as in Kafka: the config comes first so the
        # controller and brokers find it when they see the topic.
        await self._zk.set_or_create_entity_configs(ConfigEntityType.TOPIC, topic, configs)
        try:
            await self._zk.create_topic_assignment(topic, topic_id, assignment)
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None

    async def delete_topic(self, topic: str) -> None:
        """Mark the topic for deletion (``/admin/delete_topics/<t>``); the controller deletes
        it. TopicAlreadyMarkedForDeletionError if it already is."""
        if not await self._zk.topic_exists(topic):
            raise UnknownTopicOrPartitionError(f"Topic `{topic}` to delete does not exist")
        try:
            await self._zk.create_delete_topic_path(topic)
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletionError(
                f"topic {topic} is already marked for deletion"
            ) from None

    async def add_partitions(
        self,
        topic: str,
        num_partitions: int,
        replica_assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    ) -> dict[int, tuple[int, ...]]:
        """Grow the topic to ``num_partitions`` (Kafka's CreatePartitions path).
        ``replica_assignment``: the replicas of each new partition, in order; by default
        they are placed like Kafka's (createNewPartitionsAssignment: the start is the
        position of partition 0's first replica among the brokers sorted by id, the
        partition ids continue from the current count), racks as ``rack_aware_mode``
        says. Returns the whole new assignment."""
        current = await self._zk.get_topic_assignment(topic)
        if current is None:
            raise UnknownTopicOrPartitionError(f"The topic '{topic}' does not exist.")
        if await self._zk.is_topic_marked_for_deletion(topic):
            raise InvalidTopicExceptionError(f"The topic '{topic}' is queued for deletion.")
        existing = current.value.partitions
        old_count = len(existing)
        increment = num_partitions - old_count
        if increment < 0:
            raise InvalidPartitionsError(
                f"Topic currently has {old_count} partitions, which is higher than the "
                f"requested {num_partitions}."
            )
        if increment == 0:
            raise InvalidPartitionsError(f"Topic already has {old_count} partitions.")
        if 0 not in existing:
            raise InvalidReplicaAssignmentError(
                f"Unexpected existing replica assignment for topic '{topic}', partition id 0 "
                "is missing."
            )
        brokers = await self.get_broker_metadatas(rack_aware_mode)
        broker_ids = [b.id for b in brokers]
        partition0 = existing[0].replicas
        if replica_assignment is not None:
            assigned = {b for replicas in replica_assignment for b in replicas}
            unknown = sorted(assigned - set(broker_ids))
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                )
            if len(replica_assignment) != increment:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {increment} but "
                    f"{len(replica_assignment)} assignments provided."
                )
            new_partitions = {
                old_count + i: tuple(replicas) for i, replicas in enumerate(replica_assignment)
            }
            _validate_replica_assignment(new_partitions, len(partition0), set(broker_ids))
        else:
            start_index = next(
                (i for i, b in enumerate(broker_ids) if b >= partition0[0]), 0
            )
            new_partitions = assign_replicas_to_brokers(
                brokers,
                increment,
                len(partition0),
                fixed_start_index=start_index,
                start_partition_id=old_count,
            )
        combined: dict[int, ReplicaAssignment] = dict(existing)
        combined.update({p: ReplicaAssignment(r) for p, r in new_partitions.items()})
        check_assignment_size(topic, combined)
        if not validate_only:
            logger.info(
                "Creating %s partitions for '%s' with the following replica assignment: %s.",
                increment,
                topic,
                _format_assignment(new_partitions),
            )
            await self._zk.set_topic_assignment(topic, current.value.topic_id, combined)
        return {p: a.replicas for p, a in sorted(combined.items())}

    # -- configs --------------------------------------------------------------------------------

    async def fetch_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        return await self._zk.get_entity_configs(entity_type, entity_name)

    async def get_all_topic_configs(self) -> dict[str, dict[str, str]]:
        return await self._zk.get_topic_configs(await self._zk.get_all_topics_in_cluster())

    async def change_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides with ``configs`` (the complete new set) and notify
        the brokers."""
        validate_topic_name(topic)
        if not await self._zk.topic_exists(topic):
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
        self._validate_topic_config(configs)
        await self._change_entity_config(ConfigEntityType.TOPIC, topic, configs)

    async def change_broker_config(
        self, broker_id: int | None, configs: Mapping[str, str]
    ) -> None:
        """Replace a broker's dynamic overrides (``None``: the cluster-wide default,
        ``/config/brokers/<default>``) and notify the brokers."""
        if self._validate_broker_config is not None:
            self._validate_broker_config(configs)
        name = ConfigEntityZNode.DEFAULT_ENTITY_NAME if broker_id is None else str(broker_id)
        await self._change_entity_config(ConfigEntityType.BROKER, name, configs)

    async def _change_entity_config(
        self, entity_type: str, entity_name: str, configs: Mapping[str, str]
    ) -> None:
        await self._zk.set_or_create_entity_configs(entity_type, entity_name, configs)
        await self._zk.create_config_change_notification(f"{entity_type}/{entity_name}")


def check_assignment_size(
    topic: str, assignment: Mapping[int, ReplicaAssignment] | Mapping[int, Sequence[int]]
) -> None:
    """PolicyViolationError if ``/brokers/topics/<t>`` would exceed ZooKeeper's limit
    (jute.maxbuffer). Kafka sends such a write and its ZooKeeper session then fails; this
    refuses it before anything is written."""
    size = len(TopicZNode.path(topic)) + len(TopicZNode.encode(uuid.UUID(int=0), assignment))
    if size > MAX_REQUEST_DATA_BYTES:
        raise PolicyViolationError(
            f"The replica assignment of topic '{topic}' ({len(assignment)} partitions) takes "
            f"{size} bytes in ZooKeeper, more than its limit of {MAX_REQUEST_DATA_BYTES} bytes "
            "(jute.maxbuffer): use fewer partitions or a lower replication factor."
        )


def _validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], expected_replication_factor: int, brokers: set[int]
) -> None:
    for partition, replicas in assignment.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(replicas) != len(set(replicas)):
            raise InvalidReplicaAssignmentError(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}."
            )
        if not set(replicas) <= brokers:
            raise BrokerNotAvailableError(
                f"Some brokers specified for partition id {partition} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, available brokers: "
                f"{', '.join(map(str, sorted(brokers)))}."
            )
    bad = sorted(
        (p, len(r)) for p, r in assignment.items() if len(r) != expected_replication_factor
    )
    if bad:
        raise InvalidReplicaAssignmentError(
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{expected_replication_factor} while partitions [{', '.join(str(p) for p, _ in bad)}] "
            f"have replication factors [{', '.join(str(n) for _, n in bad)}], respectively."
        )


def _format_assignment(assignment: Mapping[int, Sequence[int]]) -> str:
    return ", ".join(
        f"{p} -> [{', '.join(map(str, replicas))}]" for p, replicas in sorted(assignment.items())
    )
