"""Where a group coordinator keeps committed offsets and mirrors membership: ZooKeeper,
under ``/consumers`` (``offsets.storage=zookeeper``, Kafka's legacy layout).

- ``/consumers/<g>/offsets/<t>/<p>``: the committed offset as decimal text, what legacy
  tools read; its child ``metadata`` holds the commit's metadata string, leader epoch and
  timestamps as JSON (``zk_schema/consumer_offset_metadata.v1.schema.json``). All the
  offsets of one OffsetCommit are written in one ZooKeeper multi-op, so a commit is atomic.
- ``/consumers/<g>/ids/<member>`` (ephemeral): each member of a stable group, in the old
  consumer's registration format (its subscribed topics); ``/consumers/<g>/owners/<t>/<p>``
  (ephemeral): the member id the partition is assigned to. Written by the coordinator after
  each rebalance, removed when the group empties or moves; ephemeral, so they vanish with
  the coordinator's ZooKeeper session (and are written again when a new session starts).

Group and member ids that are not legal znode names are percent-encoded
(:func:`kafkaclone.zk.znodes.encode_znode_name`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from twisted.internet.defer import Deferred, DeferredList

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import (
    ConsumerIdsZNode,
    ConsumerOffsetZNode,
    ConsumerOwnersZNode,
    ConsumerRegistration,
    OffsetCommitMetadata,
)
from kafkaclone.zk.zookeeper_client import StateChangeHandler

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's OffsetAndMetadata)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None

    def to_zk(self) -> tuple[int, OffsetCommitMetadata]:
        return self.offset, OffsetCommitMetadata(self.metadata, self.leader_epoch,
                                                 self.commit_timestamp_ms,
                                                 self.expire_timestamp_ms)

    @classmethod
    def from_zk(cls, offset: int, extra: OffsetCommitMetadata) -> OffsetAndMetadata:
        return cls(offset, extra.metadata, extra.leader_epoch, extra.commit_timestamp_ms,
                   extra.expire_timestamp_ms)


@dataclass(frozen=True)
class MembershipMirror:
    """What a stable group looks like to monitoring tools."""

    members: Mapping[str, tuple[str, ...]]
    """member id -> subscribed topics"""
    owners: Mapping[TopicPartition, str]
    """partition -> member id"""


class GroupStore(Protocol):
    async def commit_offsets(self, group_id: str,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...

    async def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, OffsetAndMetadata]: ...

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[TopicPartition]) -> None: ...

    async def delete_group(self, group_id: str) -> None: ...

    async def groups_with_offsets(self) -> list[str]: ...

    def update_mirror(self, group_id: str, mirror: MembershipMirror | None) -> None:
        """Write (None: remove) the group's membership mirror, in the background."""
        ...


MIRROR_SESSION_HANDLER: Final = "group-membership-mirror"


class _MirrorSessionHandler(StateChangeHandler):
    """The mirror's znodes are ephemeral: after a session expiry, write them again."""

    def __init__(self, store: ZkGroupStore) -> None:
        super().__init__(MIRROR_SESSION_HANDLER)
        self._store = store

    def after_initializing_session(self) -> None:
        self._store.rewrite_mirrors()


class ZkGroupStore:
    """:class:`GroupStore` in ZooKeeper, through the broker's KafkaZkClient."""

    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk_client = zk_client
        self._written: dict[str, MembershipMirror] = {}
        self._mirror_chain: dict[str, Deferred[None]] = {}
        zk_client.register_state_change_handler(_MirrorSessionHandler(self))

    def close(self) -> None:
        self.zk_client.unregister_state_change_handler(MIRROR_SESSION_HANDLER)

    def rewrite_mirrors(self) -> None:
        """Write every group's last mirror again (its ephemeral znodes went with the old
        ZooKeeper session)."""
        written, self._written = self._written, {}
        for group_id, mirror in written.items():
            self.update_mirror(group_id, mirror)

    async def commit_offsets(self, group_id: str,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        await self.zk_client.commit_consumer_offsets(
            group_id, {tp: value.to_zk() for tp, value in offsets.items()})

    async def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, OffsetAndMetadata]:
        found = await self.zk_client.get_consumer_offsets_with_metadata(group_id, partitions)
        return {tp: OffsetAndMetadata.from_zk(offset, extra)
                for tp, (offset, extra) in found.items()}

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        await self.zk_client.delete_consumer_offsets(group_id, partitions)

    async def delete_group(self, group_id: str) -> None:
        self._written.pop(group_id, None)  # its mirror goes with it
        await self.zk_client.delete_consumer_group(group_id)

    async def groups_with_offsets(self) -> list[str]:
        groups = await self.zk_client.get_consumer_groups()
        children = await DeferredList(
            [Deferred.fromCoroutine(
                self.zk_client.get_children(ConsumerOffsetZNode.offsets_path(group_id)))
             for group_id in groups], consumeErrors=True)
        return [group_id for group_id, (ok, topics) in zip(groups, children, strict=True)
                if ok and topics]

    # -- the membership mirror ---------------------------------------------------------------

    def update_mirror(self, group_id: str, mirror: MembershipMirror | None) -> None:
        """Queue a mirror write behind the group's previous one (they never interleave)."""
        previous = self._mirror_chain.get(group_id)

        async def write() -> None:
            if previous is not None:
                await previous
            try:
                await self._write_mirror(group_id, mirror)
            except Exception as exc:  # a mirror for tools: never fails the group
                logger.warning("Could not mirror the membership of group %s in ZooKeeper: %s",
                               group_id, exc)

        d = Deferred.fromCoroutine(write())
        self._mirror_chain[group_id] = d

        def done(_: object) -> None:
            if self._mirror_chain.get(group_id) is d:
                del self._mirror_chain[group_id]

        d.addBoth(done)

    async def _write_mirror(self, group_id: str, mirror: MembershipMirror | None) -> None:
        zk = self.zk_client
        old = self._written.get(group_id, MembershipMirror({}, {}))
        new = mirror if mirror is not None else MembershipMirror({}, {})
        for member_id in set(old.members) - set(new.members):
            await zk.delete_path(ConsumerIdsZNode.path(group_id, member_id))
        for tp in set(old.owners) - set(new.owners):
            await zk.delete_path(ConsumerOwnersZNode.path(group_id, tp.topic, tp.partition))
        for member_id, topics in new.members.items():
            if old.members.get(member_id) != topics:
                await zk.register_consumer(group_id, member_id, ConsumerRegistration(
                    subscription={topic: 1 for topic in topics}))
        for tp, member_id in new.owners.items():
            if old.owners.get(tp) != member_id:
                await zk.set_partition_owner(group_id, tp, member_id)
        if mirror is None:
            self._written.pop(group_id, None)
        else:
            self._written[group_id] = mirror
