"""KafkaZkClient: Kafka's ZooKeeper operations in Kafka's vocabulary (Kafka's
kafka.zk.KafkaZkClient), over a ZooKeeperClient (``kafkaclone.zk.zookeeper_client``).

The ZooKeeperClient owns the kazoo session and its threads, hands every result, watch event
and session state change to the reactor thread, retries requests cut by a connection loss
and keeps the watch handlers. This class knows what the znodes mean (``znodes``): brokers,
the controller, topics and partition states, ISR changes, configs, producer id blocks and
committed offsets under ``/consumers``. Like Kafka's, it passes watch and session handler
registration through to the ZooKeeperClient.

Every operation is an ``async def`` (``register_broker``, ``update_leader_and_isr`` ...);
callers wrap them with ``Deferred.fromCoroutine``. ZooKeeper errors surface as kazoo's
exceptions (``NodeExistsError``, ``BadVersionError`` ...) unless the method says otherwise.

Controller fencing: every controller write takes ``expected_controller_epoch_zk_version``
(the ``/controller_epoch`` zkVersion the controller got when it was elected). When it is
not ``MATCH_ANY_VERSION`` the write goes out as a multi-op whose first op checks that
version, so a deposed controller's write fails as a whole with ``ControllerMovedError``.
After a session expiry the broker re-registers and the controller re-elects from their
``StateChangeHandler.after_initializing_session``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Unpack

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from kafkaclone.common.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.zk.errors import (
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    ZNodeDecodeError,
)
from kafkaclone.zk.znodes import (
    ACL_ZK_PATHS,
    MATCH_ANY_VERSION,
    PERSISTENT_ZK_PATHS,
    UNKNOWN_VERSION,
    AclChangeNotificationSequenceZNode,
    AclResourceTypeZNode,
    BrokerId,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    BrokerSequenceIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityType,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    ConsumerIdsZNode,
    ConsumerOffsetMetadataZNode,
    ConsumerOffsetZNode,
    ConsumerOwnersZNode,
    ConsumerPathZNode,
    ConsumerRegistration,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    ExtendedAclChangeNotificationSequenceZNode,
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    OffsetCommitMetadata,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    ResourceZNode,
    TopicAssignment,
    TopicPartition,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
    Versioned,
    acl_store_path,
    decode_znode_name,
)
from kafkaclone.zk.zookeeper_client import (
    CheckOp,
    CreateOp,
    DeleteOp,
    SessionOptions,
    SetDataOp,
    StateChangeHandler,
    ZkOp,
    ZkReactor,
    ZNodeChangeHandler,
    ZNodeChildChangeHandler,
    ZooKeeperClient,
    gather,
    hex_session_id,
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

PARTITIONS_PER_MULTI = 200
"""Partitions created or updated per multi-op (a few hundred bytes each, far below
jute.maxbuffer even with the longest topic names)."""


def _chunks(items: Sequence[_T]) -> list[Sequence[_T]]:
    """``items`` in runs of ``PARTITIONS_PER_MULTI``, one multi-op's worth each."""
    return [items[i : i + PARTITIONS_PER_MULTI] for i in range(0, len(items), PARTITIONS_PER_MULTI)]


@dataclass(frozen=True)
class UpdateLeaderAndIsrResult:
    """Per partition: the written LeaderAndIsr (with its new zkVersion) or the error; and the
    partitions whose state znode changed under us (zkVersion mismatch), to re-read and retry."""

    finished_partitions: dict[TopicPartition, LeaderAndIsr | Exception] = field(
        default_factory=dict
    )
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


class KafkaZkClient:
    """Kafka's KafkaZkClient over a ZooKeeperClient. See the module docstring."""

    def __init__(self, zookeeper_client: ZooKeeperClient) -> None:
        self._zookeeper_client = zookeeper_client

    @classmethod
    def from_connect_string(
        cls, connect_string: str, reactor: ZkReactor, **options: Unpack[SessionOptions]
    ) -> KafkaZkClient:
        """A client on a new ZooKeeperClient session (``ZooKeeperClient.from_connect_string``,
        whose options these are); call ``start()``."""
        return cls(ZooKeeperClient.from_connect_string(connect_string, reactor, **options))

    @staticmethod
    async def create_chroot_if_necessary(
        connect_string: str, reactor: ZkReactor, connection_timeout: float | None = None,
        **options: Unpack[SessionOptions],
    ) -> None:
        """Create the chroot of ``host:port/chroot`` if it is missing, as Kafka's broker does
        before its session (kazoo, like ZooKeeper's client, expects the chroot to exist)."""
        hosts, slash, chroot = connect_string.partition("/")
        if not slash or not chroot.strip("/"):
            return
        client = KafkaZkClient.from_connect_string(hosts, reactor, **options)
        try:
            await client.start(connection_timeout)
            await client.make_sure_persistent_path_exists("/" + chroot.strip("/"))
        finally:
            await client.close()

    # -- session and watches (the ZooKeeperClient's) -------------------------------------------

    @property
    def zookeeper_client(self) -> ZooKeeperClient:
        return self._zookeeper_client

    @property
    def kazoo_client(self) -> KazooClient:
        """The underlying kazoo client (for tools and tests; never block on the reactor)."""
        return self._zookeeper_client.kazoo_client

    @property
    def connected(self) -> bool:
        return self._zookeeper_client.connected

    @property
    def session_id(self) -> int | None:
        return self._zookeeper_client.session_id

    async def start(self, connection_timeout: float | None = None) -> None:
        """Connect; ZooKeeperClientTimeoutError (and the client closed) if not connected
        within ``connection_timeout`` seconds (zookeeper.connection.timeout.ms)."""
        await self._zookeeper_client.start(connection_timeout)

    async def close(self) -> None:
        """Close the session; its ephemeral znodes go at once."""
        await self._zookeeper_client.close()

    def register_state_change_handler(self, handler: StateChangeHandler) -> None:
        self._zookeeper_client.register_state_change_handler(handler)

    def unregister_state_change_handler(self, name: str) -> None:
        self._zookeeper_client.unregister_state_change_handler(name)

    def register_znode_change_handler(self, handler: ZNodeChangeHandler) -> None:
        self._zookeeper_client.register_znode_change_handler(handler)

    def unregister_znode_change_handler(self, path: str) -> None:
        self._zookeeper_client.unregister_znode_change_handler(path)

    def register_znode_child_change_handler(self, handler: ZNodeChildChangeHandler) -> None:
        self._zookeeper_client.register_znode_child_change_handler(handler)

    def unregister_znode_child_change_handler(self, path: str) -> None:
        self._zookeeper_client.unregister_znode_child_change_handler(path)

    async def register_znode_change_handler_and_check_existence(
        self, handler: ZNodeChangeHandler
    ) -> bool:
        """Register ``handler``, watch its path, and say whether the znode exists now."""
        self.register_znode_change_handler(handler)
        return await self.path_exists(handler.path)

    # -- generic operations ---------------------------------------------------------------------

    async def path_exists(self, path: str) -> bool:
        """Watches the path if a ZNodeChangeHandler is registered for it."""
        return await self._zookeeper_client.exists(path) is not None

    async def get_data_and_stat(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """The data and kazoo ZnodeStat, None if absent. Watches as ``path_exists``."""
        return await self._zookeeper_client.get_data_and_stat(path)

    async def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        """(data, zkVersion), or (None, UNKNOWN_VERSION) if the znode does not exist."""
        found = await self.get_data_and_stat(path)
        if found is None:
            return None, UNKNOWN_VERSION
        return found[0], int(found[1].version)

    async def get_children(self, path: str, register_watch: bool = False) -> list[str]:
        """The children's names ([] if the znode does not exist). With ``register_watch``,
        and a ZNodeChildChangeHandler registered for ``path``, watches the children."""
        found = await self._zookeeper_client.get_children_and_stat(path, register_watch)
        return [] if found is None else found[0]

    async def set_data(self, path: str, data: bytes, version: int = MATCH_ANY_VERSION) -> int:
        """Set the data (conditionally on ``version``); the new zkVersion."""
        stat = await self._zookeeper_client.set_data(path, data, version)
        return int(stat.version)

    async def create_recursive(
        self, path: str, data: bytes = b"", *, throw_if_path_exists: bool = True
    ) -> None:
        """Create ``path`` and any missing parents (empty). NodeExistsError if it exists,
        unless ``throw_if_path_exists`` is false."""
        try:
            await self._zookeeper_client.create(path, data, make_parents=True)
        except NodeExistsError:
            if throw_if_path_exists:
                raise

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self.create_recursive(path, throw_if_path_exists=False)

    async def create_sequential_persistent_path(self, path: str, data: bytes) -> str:
        """Create ``<path><10-digit sequence>`` (and missing parents); the created path."""
        return await self._zookeeper_client.create(
            path, data, sequential=True, make_parents=True
        )

    async def conditional_update_path(
        self,
        path: str,
        data: bytes,
        expected_version: int,
        checker: Callable[[bytes | None], bool] | None = None,
    ) -> tuple[bool, int]:
        """Kafka's conditionalUpdatePath: (True, new zkVersion) if the znode was at
        ``expected_version``, else (False, UNKNOWN_VERSION). A retried write may find its
        own earlier attempt applied: ``checker`` (given the current data) then says whether
        the current data is what we wrote, and the write counts as done."""
        try:
            return True, await self.set_data(path, data, expected_version)
        except BadVersionError:
            if checker is not None:
                current = await self.get_data_and_stat(path)
                if current is not None and checker(current[0]):
                    return True, int(current[1].version)
            return False, UNKNOWN_VERSION
        except NoNodeError:
            return False, UNKNOWN_VERSION

    async def multi(self, ops: Sequence[ZkOp]) -> list[Any]:
        """One atomic multi-op; per op its result (created path, ZnodeStat, True) or the
        kazoo exception instance for a failed one (others then RolledBackError /
        RuntimeInconsistency)."""
        return await self._zookeeper_client.multi(ops)

    async def guarded(self, op: ZkOp, expected_controller_epoch_zk_version: int) -> Any:
        """Run ``op`` as a controller write: with a version, in a multi-op behind a check of
        ``/controller_epoch``'s zkVersion (ControllerMovedError if it moved); with
        MATCH_ANY_VERSION, unguarded. Returns the op's result or raises its error."""
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            results = await self.multi([op])
            result = results[0]
        elif expected_controller_epoch_zk_version >= 0:
            results = await self.multi(
                [CheckOp(ControllerEpochZNode.PATH, expected_controller_epoch_zk_version), op]
            )
            if isinstance(results[0], BadVersionError | NoNodeError):
                raise ControllerMovedError(
                    "Controller epoch zkVersion check fails. Expected zkVersion = "
                    f"{expected_controller_epoch_zk_version}"
                )
            result = results[1]
        else:
            raise ValueError(
                "expected controller epoch zkVersion must be >= 0 or MATCH_ANY_VERSION, got "
                f"{expected_controller_epoch_zk_version}"
            )
        if isinstance(result, Exception):
            raise result
        return result

    async def _guarded_multi(
        self, ops: Sequence[ZkOp], expected_controller_epoch_zk_version: int
    ) -> list[Any]:
        """``ops`` in one multi-op, behind the controller epoch check as ``guarded``; each
        op's result or error (all or none applied). ControllerMovedError if it moved."""
        if expected_controller_epoch_zk_version == MATCH_ANY_VERSION:
            return await self.multi(ops)
        results = await self.multi(
            [CheckOp(ControllerEpochZNode.PATH, expected_controller_epoch_zk_version), *ops]
        )
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(
                "Controller epoch zkVersion check fails. Expected zkVersion = "
                f"{expected_controller_epoch_zk_version}"
            )
        return results[1:]

    async def _guarded_multis(
        self, chunks: Sequence[Sequence[ZkOp]], expected_controller_epoch_zk_version: int
    ) -> list[list[Any] | None]:
        """Each chunk in one multi-op behind the controller epoch check, the multi-ops
        pipelined (one round trip for all, one request per chunk instead of per op). Per
        chunk its ops' results, or None when the multi-op failed as a whole (some op's
        condition did not hold): the caller redoes that chunk one op at a time, to say
        which. ControllerMovedError if the controller moved."""
        outcomes = await gather(
            self._guarded_multi(chunk, expected_controller_epoch_zk_version) for chunk in chunks
        )
        results: list[list[Any] | None] = []
        for outcome in outcomes:
            if isinstance(outcome, ControllerMovedError):
                raise outcome
            if isinstance(outcome, Exception) or any(isinstance(r, Exception) for r in outcome):
                results.append(None)
            else:
                results.append(outcome)
        return results

    async def _guarded_each(
        self, ops: Sequence[ZkOp], expected_controller_epoch_zk_version: int
    ) -> list[Any]:
        """``guarded`` for each op, pipelined; ControllerMovedError if any found the epoch
        moved, else each op's result or error."""
        outcomes = await gather(
            self.guarded(op, expected_controller_epoch_zk_version) for op in ops
        )
        for outcome in outcomes:
            if isinstance(outcome, ControllerMovedError):
                raise outcome
        return outcomes

    async def delete_recursive(
        self, path: str, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION
    ) -> bool:
        """Delete ``path`` and everything below it; False if it did not exist."""
        while True:
            children = await self.get_children(path)
            for child in children:
                await self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
            try:
                await self.guarded(DeleteOp(path), expected_controller_epoch_zk_version)
                return True
            except NoNodeError:
                return False
            except NotEmptyError:
                continue  # a child appeared meanwhile

    # -- cluster and brokers ------------------------------------------------------------------

    async def create_top_level_paths(self) -> None:
        """Make sure Kafka's persistent top-level paths exist (ZkData.PersistentZkPaths)."""
        await gather(self.make_sure_persistent_path_exists(p) for p in PERSISTENT_ZK_PATHS)

    async def get_cluster_id(self) -> str | None:
        found = await self.get_data_and_stat(ClusterIdZNode.PATH)
        return None if found is None else ClusterIdZNode.decode(found[0])

    async def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster id: ``proposed_cluster_id`` if this call created ``/cluster/id``, the
        existing one otherwise."""
        try:
            await self.create_recursive(
                ClusterIdZNode.PATH, ClusterIdZNode.encode(proposed_cluster_id)
            )
            return proposed_cluster_id
        except NodeExistsError:
            existing = await self.get_cluster_id()
            if existing is None:
                raise RuntimeError("Failed to get cluster id from ZooKeeper") from None
            return existing

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; the broker epoch (its czxid).
        BrokerIdAlreadyRegisteredError if another session holds the id. A znode left by
        this very session (a retried request) counts as registered."""
        path = BrokerIdZNode.path(info.broker_id)
        stat = await self._checked_ephemeral_create(path, BrokerIdZNode.encode(info))
        if stat is None:
            raise BrokerIdAlreadyRegisteredError(info.broker_id)
        logger.info(
            "Registered broker %s at path %s with addresses: %s, czxid (broker epoch): %s",
            info.broker_id,
            path,
            ",".join(ep.connection_string for ep in info.endpoints),
            stat.czxid,
        )
        return int(stat.czxid)

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnodeStat | None:
        """Kafka's CheckedEphemeral: the created znode's stat, the existing one's if this
        session owns it, None if another session does."""
        parent_created = False
        while True:
            results = await self.multi(
                [CreateOp(path, b"", ephemeral=True), SetDataOp(path, data, 0)]
            )
            if not isinstance(results[0], Exception) and not isinstance(results[1], Exception):
                return results[1]
            if isinstance(results[0], NoNodeError) and not parent_created:  # no parent yet
                await self.make_sure_persistent_path_exists(path.rsplit("/", 1)[0] or "/")
                parent_created = True
                continue
            if not isinstance(results[0], NodeExistsError):
                error = results[0] if isinstance(results[0], Exception) else results[1]
                raise error
            found = await self.get_data_and_stat(path)
            if found is None:
                continue  # went away while we looked: try again
            owner = int(found[1].ephemeralOwner)
            if owner != self.session_id:
                logger.error(
                    "Error while creating ephemeral at %s, node already exists and owner "
                    "'%s' does not match current session '%s'",
                    path,
                    hex_session_id(owner),
                    hex_session_id(self.session_id),
                )
                return None
            return found[1]

    async def update_broker_info(self, info: BrokerInfo) -> None:
        await self.set_data(BrokerIdZNode.path(info.broker_id), BrokerIdZNode.encode(info))

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        found = await self.get_data_and_stat(BrokerIdZNode.path(broker_id))
        return None if found is None else BrokerIdZNode.decode(broker_id, found[0])

    async def get_all_broker_ids(self, register_watch: bool = False) -> list[BrokerId]:
        """The registered broker ids, sorted (Kafka's getSortedBrokerList)."""
        children = await self.get_children(BrokerIdsZNode.PATH, register_watch)
        return sorted(BrokerId(int(child)) for child in children)

    async def get_all_brokers_in_cluster(self, register_watch: bool = False) -> list[BrokerInfo]:
        return [info for info, _ in await self._get_brokers_and_epochs(register_watch)]

    async def get_all_broker_and_epochs_in_cluster(
        self, register_watch: bool = False
    ) -> dict[BrokerId, tuple[BrokerInfo, int]]:
        """broker id -> (registration, broker epoch = the znode's czxid)."""
        pairs = await self._get_brokers_and_epochs(register_watch)
        return {info.broker_id: (info, epoch) for info, epoch in pairs}

    async def _get_brokers_and_epochs(self, register_watch: bool) -> list[tuple[BrokerInfo, int]]:
        broker_ids = await self.get_all_broker_ids(register_watch)
        found = await gather(self.get_data_and_stat(BrokerIdZNode.path(b)) for b in broker_ids)
        result = []
        for broker_id, outcome in zip(broker_ids, found, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:  # gone since listed
                result.append((BrokerIdZNode.decode(broker_id, outcome[0]), int(outcome[1].czxid)))
        return result

    async def generate_broker_sequence_id(self) -> int:
        """A new number from ``/brokers/seqid``'s zkVersion (for broker id generation)."""
        while True:
            try:
                return await self.set_data(BrokerSequenceIdZNode.PATH, b"")
            except NoNodeError:
                await self.make_sure_persistent_path_exists(BrokerSequenceIdZNode.PATH)

    # -- controller ------------------------------------------------------------------------------

    async def get_controller_id(self) -> BrokerId | None:
        """The controller's broker id; watches ``/controller`` if a handler is registered."""
        found = await self.get_data_and_stat(ControllerZNode.PATH)
        return None if found is None else ControllerZNode.decode(found[0])

    async def get_controller_epoch(self) -> Versioned[int] | None:
        """The controller epoch and ``/controller_epoch``'s zkVersion."""
        found = await self.get_data_and_stat(ControllerEpochZNode.PATH)
        if found is None:
            return None
        return Versioned(ControllerEpochZNode.decode(found[0]), int(found[1].version))

    async def register_controller_and_increment_controller_epoch(
        self, controller_id: int, timestamp_ms: int | None = None
    ) -> tuple[int, int]:
        """Become controller: create the ephemeral ``/controller`` and bump
        ``/controller_epoch`` in one multi-op. Returns (new epoch, the epoch znode's
        zkVersion), the version every later controller write is guarded by.
        ControllerMovedError if another broker won."""
        current = await self.get_controller_epoch()
        if current is None:
            current = await self._maybe_create_controller_epoch_znode()
        new_epoch = current.value + 1
        logger.debug(
            "Try to create %s and increment controller epoch to %s with expected controller "
            "epoch zkVersion %s",
            ControllerZNode.PATH,
            new_epoch,
            current.zk_version,
        )
        results = await self.multi(
            [
                CreateOp(
                    ControllerZNode.PATH,
                    ControllerZNode.encode(controller_id, timestamp_ms),
                    ephemeral=True,
                ),
                SetDataOp(
                    ControllerEpochZNode.PATH,
                    ControllerEpochZNode.encode(new_epoch),
                    current.zk_version,
                ),
            ]
        )
        if not any(isinstance(result, Exception) for result in results):
            return new_epoch, int(results[1].version)
        if isinstance(results[0], NodeExistsError) or isinstance(results[1], BadVersionError):
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        raise next(
            result
            for result in results
            if isinstance(result, Exception)
            and not isinstance(result, RolledBackError | RuntimeInconsistency)
        )

    async def _check_controller_and_epoch(
        self, controller_id: int, new_epoch: int
    ) -> tuple[int, int]:
        """After a failed election multi-op: did our earlier (retried) attempt win?"""
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(
                f"The ephemeral node at {ControllerZNode.PATH} went away while checking "
                "whether the controller election succeeds. Aborting controller startup procedure"
            )
        if current_controller == controller_id:
            epoch = await self.get_controller_epoch()
            if epoch is None:
                raise RuntimeError(f"{ControllerEpochZNode.PATH} went away")
            if epoch.value == new_epoch:
                return new_epoch, epoch.zk_version
        raise ControllerMovedError(
            "Controller moved to another broker. Aborting controller startup procedure"
        )

    async def _maybe_create_controller_epoch_znode(self) -> Versioned[int]:
        try:
            await self._zookeeper_client.create(
                ControllerEpochZNode.PATH,
                ControllerEpochZNode.encode(ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH),
            )
            logger.info(
                "Successfully created %s with initial epoch %s",
                ControllerEpochZNode.PATH,
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH,
            )
            return Versioned(
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH,
                ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
            )
        except NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise RuntimeError(
                    f"{ControllerEpochZNode.PATH} existed before but went away while reading it"
                ) from None
            return current

    async def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` (guarded; a missing znode is fine)."""
        try:
            await self.guarded(DeleteOp(ControllerZNode.PATH), expected_controller_epoch_zk_version)
        except NoNodeError:
            pass

    # -- topics ------------------------------------------------------------------------------------

    async def get_all_topics_in_cluster(self, register_watch: bool = False) -> set[str]:
        return set(await self.get_children(TopicsZNode.PATH, register_watch))

    async def topic_exists(self, topic: str) -> bool:
        return await self.path_exists(TopicZNode.path(topic))

    async def create_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, Sequence[int]],
    ) -> None:
        """Create ``/brokers/topics/<t>``; NodeExistsError if the topic exists."""
        await self.create_recursive(TopicZNode.path(topic), TopicZNode.encode(topic_id, assignment))

    async def set_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, ReplicaAssignment] | Mapping[int, Sequence[int]],
        expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION,
    ) -> int:
        """Overwrite ``/brokers/topics/<t>`` (new partitions, reassignment); new zkVersion."""
        stat = await self.guarded(
            SetDataOp(TopicZNode.path(topic), TopicZNode.encode(topic_id, assignment)),
            expected_controller_epoch_zk_version,
        )
        return int(stat.version)

    async def get_topic_assignment(self, topic: str) -> Versioned[TopicAssignment] | None:
        found = await self.get_data_and_stat(TopicZNode.path(topic))
        if found is None:
            return None
        return Versioned(TopicZNode.decode(topic, found[0]), int(found[1].version))

    async def get_replica_assignment_and_topic_id_for_topics(
        self, topics: Iterable[str]
    ) -> dict[str, TopicAssignment]:
        """topic -> its id and assignment, for the topics that exist."""
        names = sorted(set(topics))
        outcomes = await gather(self.get_data_and_stat(TopicZNode.path(t)) for t in names)
        result = {}
        for topic, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result[topic] = TopicZNode.decode(topic, outcome[0])
        return result

    async def get_partition_assignment_for_topics(
        self, topics: Iterable[str]
    ) -> dict[str, dict[int, ReplicaAssignment]]:
        assignments = await self.get_replica_assignment_and_topic_id_for_topics(topics)
        return {topic: dict(a.partitions) for topic, a in assignments.items()}

    async def get_topic_ids_for_topics(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        assignments = await self.get_replica_assignment_and_topic_id_for_topics(topics)
        return {t: a.topic_id for t, a in assignments.items() if a.topic_id is not None}

    async def get_topic_partition_count(self, topic: str) -> int | None:
        found = await self.get_topic_assignment(topic)
        return None if found is None else len(found.value.partitions)

    async def get_all_partitions(self) -> set[TopicPartition]:
        topics = sorted(await self.get_all_topics_in_cluster())
        children = await gather(
            self.get_children(TopicPartitionsZNode.path(t)) for t in topics
        )
        result: set[TopicPartition] = set()
        for topic, outcome in zip(topics, children, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            result.update(TopicPartition(topic, int(p)) for p in outcome)
        return result

    async def create_topic_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, Exception | None]:
        """Create each partition's state znode (and its parents), as controller writes.
        Per partition None when created, else the error (NodeExistsError if it was there).
        ControllerMovedError if the controller moved.

        New partitions go ``PARTITIONS_PER_MULTI`` to a multi-op (the partition znode and its
        state), the multi-ops pipelined; a multi-op that fails (some znode existed) is done
        again one znode at a time, to say which."""
        topics = sorted({tp.topic for tp in states})
        await self._create_ignoring_existing(
            [TopicPartitionsZNode.path(t) for t in topics], expected_controller_epoch_zk_version
        )
        chunks = _chunks(list(states))
        created = await self._guarded_multis(
            [
                [
                    op
                    for tp in chunk
                    for op in (
                        CreateOp(TopicPartitionZNode.path(tp)),
                        CreateOp(
                            TopicPartitionStateZNode.path(tp),
                            TopicPartitionStateZNode.encode(states[tp]),
                        ),
                    )
                ]
                for chunk in chunks
            ],
            expected_controller_epoch_zk_version,
        )
        result: dict[TopicPartition, Exception | None] = {}
        for chunk, outcome in zip(chunks, created, strict=True):
            if outcome is None:
                result.update(
                    await self._create_topic_partition_states_each(
                        {tp: states[tp] for tp in chunk}, expected_controller_epoch_zk_version
                    )
                )
            else:
                result.update(dict.fromkeys(chunk))
        return result

    async def _create_topic_partition_states_each(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, Exception | None]:
        await self._create_ignoring_existing(
            [TopicPartitionZNode.path(tp) for tp in states], expected_controller_epoch_zk_version
        )
        partitions = list(states)
        outcomes = await self._guarded_each(
            [
                CreateOp(
                    TopicPartitionStateZNode.path(tp), TopicPartitionStateZNode.encode(states[tp])
                )
                for tp in partitions
            ],
            expected_controller_epoch_zk_version,
        )
        return {
            tp: outcome if isinstance(outcome, Exception) else None
            for tp, outcome in zip(partitions, outcomes, strict=True)
        }

    async def _create_ignoring_existing(self, paths: Sequence[str], expected: int) -> None:
        outcomes = await self._guarded_each([CreateOp(p) for p in paths], expected)
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NodeExistsError):
                raise outcome

    async def get_topic_partition_state(
        self, tp: TopicPartition
    ) -> LeaderIsrAndControllerEpoch | None:
        found = await self.get_data_and_stat(TopicPartitionStateZNode.path(tp))
        if found is None:
            return None
        return TopicPartitionStateZNode.decode(found[0], int(found[1].version))

    async def get_topic_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The states of the partitions that have one."""
        tps = list(partitions)
        reads = await self._zookeeper_client.get_data_many(
            [TopicPartitionStateZNode.path(tp) for tp in tps])
        result = {}
        for tp, read in zip(tps, reads, strict=True):
            if read is not None:
                data, stat = read
                result[tp] = TopicPartitionStateZNode.decode(data, int(stat.version))
        return result

    async def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Write partition states, each conditional on its LeaderAndIsr.zk_version (the
        partition epoch) and all guarded by the controller epoch. A version mismatch puts
        the partition in ``partitions_to_retry``. ControllerMovedError if deposed.

        The writes go ``PARTITIONS_PER_MULTI`` to a multi-op, the multi-ops pipelined (one
        round trip, and one request for the client to send, per chunk instead of per
        partition); a multi-op that fails (some state changed under us) is done again one
        partition at a time, to say which."""
        partitions = list(leader_and_isrs)
        ops = [
            SetDataOp(
                TopicPartitionStateZNode.path(tp),
                TopicPartitionStateZNode.encode(
                    LeaderIsrAndControllerEpoch(leader_and_isrs[tp], controller_epoch)
                ),
                leader_and_isrs[tp].zk_version,
            )
            for tp in partitions
        ]
        chunks = _chunks(ops)
        written = await self._guarded_multis(chunks, expected_controller_epoch_zk_version)
        outcomes: list[Any] = []
        for chunk, outcome in zip(chunks, written, strict=True):
            if outcome is None:
                outcome = await self._guarded_each(chunk, expected_controller_epoch_zk_version)
            outcomes.extend(outcome)
        result = UpdateLeaderAndIsrResult()
        for tp, outcome in zip(partitions, outcomes, strict=True):
            if isinstance(outcome, BadVersionError):
                result.partitions_to_retry.append(tp)
            elif isinstance(outcome, Exception):
                result.finished_partitions[tp] = outcome
            else:
                result.finished_partitions[tp] = leader_and_isrs[tp].with_zk_version(
                    int(outcome.version)
                )
        return result

    async def conditional_update_partition_state(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr, controller_epoch: int
    ) -> tuple[bool, int]:
        """The partition leader's ISR change (Kafka's ReplicationUtils.updateLeaderAndIsr):
        write the state if the znode is still at ``leader_and_isr.zk_version``. (True, new
        zkVersion) or (False, UNKNOWN_VERSION)."""
        new_state = LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)

        def same_state(current: bytes | None) -> bool:
            if current is None:
                return False
            try:
                written = TopicPartitionStateZNode.decode(current, 0)
            except ValueError:
                return False
            return written == LeaderIsrAndControllerEpoch(
                leader_and_isr.with_zk_version(0), controller_epoch
            )

        return await self.conditional_update_path(
            TopicPartitionStateZNode.path(tp),
            TopicPartitionStateZNode.encode(new_state),
            leader_and_isr.zk_version,
            same_state,
        )

    async def delete_topic_znode(
        self, topic: str, expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/brokers/topics/<t>`` and its partition states (topic deletion)."""
        await self.delete_recursive(TopicZNode.path(topic), expected_controller_epoch_zk_version)

    # -- topic deletion ------------------------------------------------------------------------

    async def get_topic_deletions(self, register_watch: bool = False) -> list[str]:
        return sorted(await self.get_children(DeleteTopicsZNode.PATH, register_watch))

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self.path_exists(DeleteTopicsTopicZNode.path(topic))

    async def create_delete_topic_path(self, topic: str) -> None:
        """Mark the topic for deletion; NodeExistsError if it already is."""
        await self.create_recursive(
            DeleteTopicsTopicZNode.path(topic), DeleteTopicsTopicZNode.encode()
        )

    async def delete_topic_deletions(
        self, topics: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        await self._guarded_each(
            [DeleteOp(DeleteTopicsTopicZNode.path(t)) for t in topics],
            expected_controller_epoch_zk_version,
        )

    # -- ISR change notifications ----------------------------------------------------------------

    async def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """Announce ISR changes to the controller; the created sequential znode's path."""
        return await self.create_sequential_persistent_path(
            IsrChangeNotificationSequenceZNode.path(),
            IsrChangeNotificationSequenceZNode.encode(partitions),
        )

    async def get_all_isr_change_notifications(self, register_watch: bool = False) -> list[str]:
        """The pending notifications' sequence numbers, in order."""
        children = await self.get_children(IsrChangeNotificationZNode.PATH, register_watch)
        return sorted(IsrChangeNotificationSequenceZNode.sequence_number(c) for c in children)

    async def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> set[TopicPartition]:
        seqs = list(sequence_numbers)
        outcomes = await gather(
            self.get_data_and_stat(IsrChangeNotificationSequenceZNode.path(s)) for s in seqs
        )
        result: set[TopicPartition] = set()
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result |= IsrChangeNotificationSequenceZNode.decode(outcome[0])
        return result

    async def delete_isr_change_notifications(
        self,
        sequence_numbers: Iterable[str] | None,
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Delete the given notifications (all of them for None); missing ones are fine."""
        if sequence_numbers is None:
            sequence_numbers = await self.get_all_isr_change_notifications()
        outcomes = await self._guarded_each(
            [DeleteOp(IsrChangeNotificationSequenceZNode.path(s)) for s in sequence_numbers],
            expected_controller_epoch_zk_version,
        )
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NoNodeError):
                raise outcome

    # -- log dir event notifications -----------------------------------------------------------

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """Tell the controller this broker lost a log directory; the created znode's path."""
        return await self.create_sequential_persistent_path(
            LogDirEventNotificationSequenceZNode.path(),
            LogDirEventNotificationSequenceZNode.encode(broker_id),
        )

    async def get_all_log_dir_event_notifications(self, register_watch: bool = False
                                                  ) -> list[str]:
        """The pending notifications' sequence numbers, in order."""
        children = await self.get_children(LogDirEventNotificationZNode.PATH, register_watch)
        return sorted(LogDirEventNotificationSequenceZNode.sequence_number(c) for c in children)

    async def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]
                                                 ) -> list[int]:
        seqs = list(sequence_numbers)
        outcomes = await gather(
            self.get_data_and_stat(LogDirEventNotificationSequenceZNode.path(s)) for s in seqs
        )
        result: list[int] = []
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
            if outcome is not None:
                result.append(LogDirEventNotificationSequenceZNode.decode(outcome[0]))
        return result

    async def delete_log_dir_event_notifications(
        self,
        sequence_numbers: Iterable[str] | None,
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Delete the given notifications (all of them for None); missing ones are fine."""
        if sequence_numbers is None:
            sequence_numbers = await self.get_all_log_dir_event_notifications()
        outcomes = await self._guarded_each(
            [DeleteOp(LogDirEventNotificationSequenceZNode.path(s)) for s in sequence_numbers],
            expected_controller_epoch_zk_version,
        )
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NoNodeError):
                raise outcome

    # -- reassignment and preferred leader election ----------------------------------------------

    async def create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]]
    ) -> None:
        await self.create_recursive(
            ReassignPartitionsZNode.PATH, ReassignPartitionsZNode.encode(reassignment)
        )

    async def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        found = await self.get_data_and_stat(ReassignPartitionsZNode.PATH)
        return {} if found is None else ReassignPartitionsZNode.decode(found[0])

    async def set_or_create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]],
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Overwrite ``/admin/reassign_partitions`` (the controller removing the partitions
        it is done with), creating it if it is gone."""
        data = ReassignPartitionsZNode.encode(reassignment)
        try:
            await self.guarded(SetDataOp(ReassignPartitionsZNode.PATH, data),
                               expected_controller_epoch_zk_version)
        except NoNodeError:
            await self.guarded(CreateOp(ReassignPartitionsZNode.PATH, data),
                               expected_controller_epoch_zk_version)

    async def reassign_partitions_in_progress(self) -> bool:
        return await self.path_exists(ReassignPartitionsZNode.PATH)

    async def delete_partition_reassignment(
        self, expected_controller_epoch_zk_version: int
    ) -> None:
        try:
            await self.guarded(
                DeleteOp(ReassignPartitionsZNode.PATH), expected_controller_epoch_zk_version
            )
        except NoNodeError:
            pass

    async def create_preferred_replica_election(
        self, partitions: Iterable[TopicPartition]
    ) -> None:
        await self.create_recursive(
            PreferredReplicaElectionZNode.PATH, PreferredReplicaElectionZNode.encode(partitions)
        )

    async def get_preferred_replica_election(self) -> set[TopicPartition]:
        found = await self.get_data_and_stat(PreferredReplicaElectionZNode.PATH)
        return set() if found is None else PreferredReplicaElectionZNode.decode(found[0])

    async def delete_preferred_replica_election(
        self, expected_controller_epoch_zk_version: int
    ) -> None:
        try:
            await self.guarded(
                DeleteOp(PreferredReplicaElectionZNode.PATH), expected_controller_epoch_zk_version
            )
        except NoNodeError:
            pass

    # -- configs -------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """The entity's overrides ({} if none)."""
        found = await self.get_data_and_stat(ConfigEntityZNode.path(entity_type, entity_name))
        return {} if found is None else ConfigEntityZNode.decode(found[0])

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        names = sorted(set(topics))
        outcomes = await gather(self.get_entity_configs(ConfigEntityType.TOPIC, t) for t in names)
        result = {}
        for topic, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            result[topic] = outcome
        return result

    async def set_or_create_entity_configs(
        self, entity_type: str, entity_name: str, config: Mapping[str, str]
    ) -> None:
        """Write ``/config/<type>/<name>`` (the last writer wins, as in Kafka)."""
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(config)
        try:
            await self.set_data(path, data)
        except NoNodeError:
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:
                await self.set_data(path, data)

    async def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return sorted(await self.get_children(ConfigEntityTypeZNode.path(entity_type)))

    async def create_config_change_notification(self, sanitized_entity_path: str) -> str:
        """Tell every broker that ``<type>/<name>``'s config changed; the znode's path."""
        await self.make_sure_persistent_path_exists(ConfigEntityChangeNotificationZNode.PATH)
        return await self.create_sequential_persistent_path(
            ConfigEntityChangeNotificationSequenceZNode.CREATE_PATH,
            ConfigEntityChangeNotificationSequenceZNode.encode(sanitized_entity_path),
        )

    async def delete_topic_configs(
        self, topics: Iterable[str], expected_controller_epoch_zk_version: int
    ) -> None:
        outcomes = await self._guarded_each(
            [DeleteOp(ConfigEntityZNode.path(ConfigEntityType.TOPIC, t)) for t in topics],
            expected_controller_epoch_zk_version,
        )
        for outcome in outcomes:
            if isinstance(outcome, Exception) and not isinstance(outcome, NoNodeError):
                raise outcome

    # -- ACLs (Kafka's KafkaZkClient ACL methods over ZkAclStore) ---------------------------------

    async def create_acl_paths(self) -> None:
        """The ACL stores, their per-resource-type containers and change paths."""
        for path in ACL_ZK_PATHS:
            await self.make_sure_persistent_path_exists(path)

    async def get_resource_types(self, pattern_type: PatternType) -> list[str]:
        """The resource type names (``Topic``) with a container in ``pattern_type``'s store."""
        return await self.get_children(acl_store_path(pattern_type))

    async def get_resource_names(self, pattern_type: PatternType,
                                 resource_type: ResourceType) -> list[str]:
        return await self.get_children(AclResourceTypeZNode.path(pattern_type, resource_type))

    async def get_versioned_acls_for_resource(
        self, pattern: ResourcePattern
    ) -> Versioned[set[AccessControlEntry]]:
        """The resource's ACLs and their zkVersion (no ACLs at UNKNOWN_VERSION if absent)."""
        found = await self.get_data_and_stat(ResourceZNode.path(pattern))
        if found is None:
            return Versioned(set(), UNKNOWN_VERSION)
        return Versioned(ResourceZNode.decode(found[0]), int(found[1].version))

    async def create_acls_for_resource_if_not_exists(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]
    ) -> tuple[bool, int]:
        """(True, 0) if created, (False, UNKNOWN_VERSION) if someone created it first. The
        resource type's container must exist (``create_acl_paths``): a name holding ``/``
        fails with NoNodeError rather than making nested znodes."""
        try:
            await self._zookeeper_client.create(ResourceZNode.path(pattern),
                                                ResourceZNode.encode(entries))
            return True, 0
        except NodeExistsError:
            return False, UNKNOWN_VERSION

    async def conditional_set_acls_for_resource(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry],
        expected_version: int,
    ) -> tuple[bool, int]:
        return await self.conditional_update_path(
            ResourceZNode.path(pattern), ResourceZNode.encode(entries), expected_version)

    async def delete_resource(self, pattern: ResourcePattern, expected_version: int) -> bool:
        """Delete the resource's znode if still at ``expected_version`` (True also when it
        was already gone, as Kafka's conditionalDelete)."""
        try:
            await self._zookeeper_client.delete(ResourceZNode.path(pattern), expected_version)
            return True
        except NoNodeError:
            return True
        except BadVersionError:
            return False

    async def create_acl_change_notification(self, pattern: ResourcePattern) -> str:
        """Tell every broker that ``pattern``'s ACLs changed; the znode's path."""
        if pattern.pattern_type == PatternType.LITERAL:
            create_path = AclChangeNotificationSequenceZNode.CREATE_PATH
            data = AclChangeNotificationSequenceZNode.encode(pattern)
        else:
            create_path = ExtendedAclChangeNotificationSequenceZNode.CREATE_PATH
            data = ExtendedAclChangeNotificationSequenceZNode.encode(pattern)
        return await self.create_sequential_persistent_path(create_path, data)

    # -- producer ids ------------------------------------------------------------------------------

    async def allocate_producer_id_block(
        self, broker_id: int, block_size: int = 1000
    ) -> ProducerIdBlock:
        """Claim the next block of producer ids (Kafka's ProducerIdManager): read
        ``/latest_producer_id_block``, write the following block conditionally, retry on
        a race with another broker."""
        await self.make_sure_persistent_path_exists(ProducerIdBlockZNode.PATH)
        while True:
            data, zk_version = await self.get_data_and_version(ProducerIdBlockZNode.PATH)
            current = ProducerIdBlockZNode.decode(data) if data else None
            if current is None:
                block = ProducerIdBlock(broker_id, 0, block_size - 1)
            else:
                if current.block_end > 2**63 - 1 - block_size:
                    raise RuntimeError("Have exhausted all producerIds.")
                block = ProducerIdBlock(
                    broker_id, current.block_end + 1, current.block_end + block_size
                )
            encoded = ProducerIdBlockZNode.encode(block)
            succeeded, _ = await self.conditional_update_path(
                ProducerIdBlockZNode.PATH, encoded, zk_version, _equals(encoded)
            )
            if succeeded:
                return block

    # -- committed offsets and group mirrors (offsets.storage=zookeeper) -------------------------

    async def get_consumer_offset(self, group: str, tp: TopicPartition) -> int | None:
        found = await self.get_data_and_stat(
            ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
        return None if found is None else ConsumerOffsetZNode.decode(found[0])

    async def set_or_create_consumer_offset(
        self, group: str, tp: TopicPartition, offset: int
    ) -> None:
        path = ConsumerOffsetZNode.path(group, tp.topic, tp.partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            await self.set_data(path, data)
        except NoNodeError:
            try:
                await self.create_recursive(path, data)
            except NodeExistsError:
                await self.set_data(path, data)

    async def get_consumer_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every offset committed for ``group``."""
        topics = sorted(await self.get_children(ConsumerOffsetZNode.offsets_path(group)))
        partitions = await gather(
            self.get_children(ConsumerOffsetZNode.topic_path(group, t)) for t in topics
        )
        tps: list[TopicPartition] = []
        for topic, outcome in zip(topics, partitions, strict=True):
            if isinstance(outcome, Exception):
                raise outcome
            tps.extend(TopicPartition(topic, int(p)) for p in outcome)
        offsets = await gather(self.get_consumer_offset(group, tp) for tp in tps)
        result = {}
        for tp, offset in zip(tps, offsets, strict=True):
            if isinstance(offset, Exception):
                raise offset
            if offset is not None:
                result[tp] = offset
        return result

    async def get_consumer_groups(self) -> list[str]:
        """The group ids under ``/consumers`` (decoded, see ``encode_znode_name``)."""
        return sorted(decode_znode_name(name)
                      for name in await self.get_children(ConsumerPathZNode.PATH))

    async def commit_consumer_offsets(
        self, group: str, commits: Mapping[TopicPartition, tuple[int, OffsetCommitMetadata]],
        *, max_attempts: int = 5,
    ) -> None:
        """Write the offsets of one OffsetCommit in one multi-op: each offset as decimal
        text at ``/consumers/<g>/offsets/<t>/<p>`` and its metadata in the child
        ``.../<p>/metadata``. The first attempt sets existing znodes (the steady state of a
        consuming group); if some are missing, what exists is looked up and one multi-op
        creates the missing znodes (parents included) and sets the others."""
        if not commits:
            return
        ops: list[ZkOp] = []
        for tp, (offset, metadata) in commits.items():
            ops.append(SetDataOp(ConsumerOffsetZNode.path(group, tp.topic, tp.partition),
                                 ConsumerOffsetZNode.encode(offset)))
            ops.append(SetDataOp(ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition),
                                 ConsumerOffsetMetadataZNode.encode(metadata)))
        results = await self.multi(ops)
        attempt = 1
        while any(isinstance(r, Exception) for r in results):
            failure = next(r for r in results
                           if isinstance(r, Exception)
                           and not isinstance(r, RolledBackError | RuntimeInconsistency))
            if not isinstance(failure, NoNodeError | NodeExistsError) or attempt >= max_attempts:
                raise failure
            attempt += 1
            ops = await self._create_or_set_offset_ops(group, commits)
            results = await self.multi(ops)

    async def _create_or_set_offset_ops(
        self, group: str, commits: Mapping[TopicPartition, tuple[int, OffsetCommitMetadata]],
    ) -> list[ZkOp]:
        containers = [ConsumerPathZNode.PATH, ConsumerOffsetZNode.group_path(group),
                      ConsumerOffsetZNode.offsets_path(group)]
        containers += sorted({ConsumerOffsetZNode.topic_path(group, tp.topic) for tp in commits})
        leaves: list[tuple[str, bytes]] = []
        for tp, (offset, metadata) in commits.items():
            leaves.append((ConsumerOffsetZNode.path(group, tp.topic, tp.partition),
                           ConsumerOffsetZNode.encode(offset)))
            leaves.append((ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition),
                           ConsumerOffsetMetadataZNode.encode(metadata)))
        paths = containers + [path for path, _ in leaves]
        exists = await gather(self._zookeeper_client.exists(path) for path in paths)
        existing = {path for path, stat in zip(paths, exists, strict=True)
                    if not isinstance(stat, Exception) and stat is not None}
        ops: list[ZkOp] = [CreateOp(path) for path in containers if path not in existing]
        for path, data in leaves:
            ops.append(SetDataOp(path, data) if path in existing else CreateOp(path, data))
        return ops

    async def get_consumer_offsets_with_metadata(
        self, group: str, partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[TopicPartition, tuple[int, OffsetCommitMetadata]]:
        """The committed offsets of ``group`` (all of them when ``partitions`` is None)
        with their metadata; a partition without an offset is left out, an offset without
        a metadata child (written by another tool) has empty metadata."""
        if partitions is None:
            tps: list[TopicPartition] = []
            topics = sorted(await self.get_children(ConsumerOffsetZNode.offsets_path(group)))
            listed = await gather(
                self.get_children(ConsumerOffsetZNode.topic_path(group, t)) for t in topics)
            for topic, outcome in zip(topics, listed, strict=True):
                if isinstance(outcome, Exception):
                    raise outcome
                tps.extend(TopicPartition(topic, int(p)) for p in outcome if p.isdigit())
        else:
            tps = list(dict.fromkeys(partitions))
        found = await gather(self._get_offset_with_metadata(group, tp) for tp in tps)
        result: dict[TopicPartition, tuple[int, OffsetCommitMetadata]] = {}
        for tp, item in zip(tps, found, strict=True):
            if isinstance(item, Exception):
                raise item
            if item is not None:
                result[tp] = item
        return result

    async def _get_offset_with_metadata(
        self, group: str, tp: TopicPartition
    ) -> tuple[int, OffsetCommitMetadata] | None:
        offset_data = await self.get_data_and_stat(ConsumerOffsetZNode.path(group, tp.topic,
                                                                    tp.partition))
        if offset_data is None:
            return None
        offset = ConsumerOffsetZNode.decode(offset_data[0])
        metadata_data = await self.get_data_and_stat(
            ConsumerOffsetMetadataZNode.path(group, tp.topic, tp.partition))
        if metadata_data is None:
            return offset, OffsetCommitMetadata(commit_timestamp_ms=int(offset_data[1].mtime))
        try:
            return offset, ConsumerOffsetMetadataZNode.decode(metadata_data[0])
        except ZNodeDecodeError:
            logger.warning("Ignoring unreadable offset metadata of group %s, %s", group, tp)
            return offset, OffsetCommitMetadata(commit_timestamp_ms=int(offset_data[1].mtime))

    async def delete_consumer_offsets(self, group: str,
                                      partitions: Iterable[TopicPartition]) -> None:
        """Delete committed offsets (each offset znode with its metadata child)."""
        outcomes = await gather(
            self.delete_recursive(ConsumerOffsetZNode.path(group, tp.topic, tp.partition))
            for tp in partitions)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    async def delete_consumer_group(self, group: str) -> bool:
        """Delete ``/consumers/<g>`` and everything below it; False if it did not exist."""
        return await self.delete_recursive(ConsumerOffsetZNode.group_path(group))

    async def register_consumer(
        self, group: str, member_id: str, registration: ConsumerRegistration
    ) -> None:
        """Mirror a group member as an ephemeral ``/consumers/<g>/ids/<member>``."""
        await self._ensure_parent(ConsumerIdsZNode.ids_path(group))
        await self._create_or_set_ephemeral(
            ConsumerIdsZNode.path(group, member_id), ConsumerIdsZNode.encode(registration)
        )

    async def set_partition_owner(self, group: str, tp: TopicPartition, consumer_id: str) -> None:
        """Mirror partition ownership as an ephemeral ``/consumers/<g>/owners/<t>/<p>``."""
        await self._ensure_parent(ConsumerOwnersZNode.topic_path(group, tp.topic))
        await self._create_or_set_ephemeral(
            ConsumerOwnersZNode.path(group, tp.topic, tp.partition),
            ConsumerOwnersZNode.encode(consumer_id),
        )

    async def delete_path(self, path: str, version: int = MATCH_ANY_VERSION) -> bool:
        """Delete one znode; False if it did not exist."""
        try:
            await self._zookeeper_client.delete(path, version)
            return True
        except NoNodeError:
            return False

    async def _ensure_parent(self, path: str) -> None:
        await self.make_sure_persistent_path_exists(path)

    async def _create_or_set_ephemeral(self, path: str, data: bytes) -> None:
        try:
            await self._zookeeper_client.create(path, data, ephemeral=True)
        except NodeExistsError:
            await self.set_data(path, data)


def _equals(expected: bytes) -> Callable[[bytes | None], bool]:
    return lambda current: current == expected

