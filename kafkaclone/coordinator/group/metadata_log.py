"""Group metadata in ``__consumer_offsets``: Kafka 2.8's group metadata records and the
seam through which the coordinator appends and reads them.

Each group's coordinator writes the group (generation, protocol, leader, members with
their subscription and assignment) to the group's ``__consumer_offsets`` partition as one
record keyed by the group id, so compaction keeps the latest per group; a removed group
gets a tombstone (null value). A broker that becomes the partition's leader reads it from
the start to its log end and resumes every group it finds (Kafka's
GroupMetadataManager.storeGroup and loadGroupsAndOffsets). Committed offsets are not in
this log: they stay in ZooKeeper (``offsets.storage=zookeeper``).

The key and value are Kafka's, byte for byte: GroupMetadataKey version 2 (the group id) and
GroupMetadataValue version 3 (protocol type, generation, protocol, leader, state timestamp,
members with their ids, client, timeouts, subscription and assignment), each an int16
version followed by the body, declared once in kafkaclone.protocol.messages.group_metadata
(the byte layout is drawn in docs/storage.md). Versions 0-3 of the value are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from kafkaclone.common.errors import DecodeError
from kafkaclone.coordinator.group.metadata import GroupMetadata, GroupState, MemberMetadata
from kafkaclone.protocol import types as t
from kafkaclone.protocol.message_types import GroupMetadataKey, GroupMetadataValue
from kafkaclone.protocol.messages.group_metadata import GROUP_METADATA_KEY, GROUP_METADATA_VALUE
from kafkaclone.protocol.schema import Message, compile_message

if TYPE_CHECKING:
    from kafkaclone.common.topic_partition import TopicPartition
    from kafkaclone.coordinator.group.store import OffsetAndMetadata

KEY: Final[Message[GroupMetadataKey]] = compile_message(GROUP_METADATA_KEY)
VALUE: Final[Message[GroupMetadataValue]] = compile_message(GROUP_METADATA_VALUE)

GROUP_METADATA_KEY_VERSION: Final = 2
GROUP_METADATA_VALUE_VERSION: Final = 3
"""What Kafka 2.8 writes (inter.broker.protocol.version 2.3 and later)."""
NO_TIMESTAMP: Final = -1


class GroupMetadataLog(Protocol):
    """The coordinator's ``__consumer_offsets`` partitions (the broker implements this on
    its ReplicaManager: kafkaclone.server.group_metadata_log)."""

    async def append(self, partition: int, records: bytes) -> int:
        """Append one record batch to ``partition``, which this broker leads, as the
        coordinator (acks per ``offsets.commit.required.acks``); its first offset. The
        append's KafkaError if it fails."""
        ...

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """(key, value) of every record of ``partition`` from its log start offset to its
        log end offset, in offset order, control records left out; [] when this broker has
        no log for it."""
        ...

    def open_txn_offsets(self, partition: int
                         ) -> dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]:
        """The offsets of the transactional offset commits in ``partition`` whose producer
        has no COMMIT or ABORT marker after them yet, per producer id and group (Kafka's
        loadGroupsAndOffsets keeps them pending); {} when this broker has no log for it.
        Synchronous: nothing can come between this read and the caller's use of it."""
        ...


@dataclass(frozen=True)
class GroupMetadataRecordKey:
    """A decoded key: its version and, for a group metadata key, the group id."""

    version: int
    group_id: str | None


def group_metadata_key(group_id: str) -> bytes:
    """The record key of a group (GroupMetadataKey version 2)."""
    out = bytearray(t.INT16.pack(GROUP_METADATA_KEY_VERSION))
    KEY.encode_into(GroupMetadataKey(group=group_id), GROUP_METADATA_KEY_VERSION, out)
    return bytes(out)


def read_message_key(key: bytes) -> GroupMetadataRecordKey:
    """The version of a ``__consumer_offsets`` key and the group of a group metadata key
    (an offset commit key's group is not decoded). DecodeError for a short key."""
    if len(key) < 2:
        raise DecodeError(f"__consumer_offsets key of {len(key)} bytes has no version")
    (version,) = t.INT16.unpack_from(key, 0)
    if version != GROUP_METADATA_KEY_VERSION:
        return GroupMetadataRecordKey(version, None)
    decoded, _end = KEY.decode(key, version, 2)
    return GroupMetadataRecordKey(version, decoded.group)


def group_metadata_value(group: GroupMetadata, assignment: Mapping[str, bytes],
                         version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    """The record value of a group (Kafka's groupMetadataValue): every member with its
    subscription for the group's protocol and its entry of ``assignment``."""
    members = []
    for member in group.members.values():
        if group.protocol_name is None:
            raise ValueError(f"Attempted to write non-empty group metadata of group "
                             f"{group.group_id} with no defined protocol")
        members.append(GroupMetadataValue.MemberMetadata(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata(group.protocol_name),
            assignment=assignment[member.member_id],
        ))
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=group.state_timestamp_ms,
        members=members,
    )
    out = bytearray(t.INT16.pack(version))
    VALUE.encode_into(value, version, out)
    return bytes(out)


def decode_group_metadata_value(value: bytes) -> tuple[int, GroupMetadataValue]:
    """(version, GroupMetadataValue). DecodeError for a version Kafka 2.8 does not know
    or a body that does not parse."""
    if len(value) < 2:
        raise DecodeError(f"GroupMetadataValue of {len(value)} bytes has no version")
    (version,) = t.INT16.unpack_from(value, 0)
    if not VALUE.min_version <= version <= VALUE.max_version:
        raise DecodeError(f"Unknown group metadata message version: {version}")
    decoded, _end = VALUE.decode(value, version, 2)
    return version, decoded


def read_group_metadata(group_id: str, value: bytes) -> GroupMetadata:
    """The group a value describes, as a freshly elected coordinator resumes it (Kafka's
    readGroupMessageValue and GroupMetadata.loadGroup): Stable with its members if it has
    any, Empty otherwise; each member supports just the group's protocol, with the
    subscription it was given. A value without a state timestamp (v0, v1) gives -1 (Kafka's
    None: offset expiry then goes by commit timestamps). Heartbeat timers are the
    coordinator's to start."""
    version, decoded = decode_group_metadata_value(value)
    group = GroupMetadata(
        group_id,
        state=GroupState.STABLE if decoded.members else GroupState.EMPTY,
        state_timestamp_ms=decoded.current_state_timestamp if version >= 2 else NO_TIMESTAMP,
        generation_id=decoded.generation,
        protocol_name=decoded.protocol,
        leader_id=decoded.leader,
    )
    for m in decoded.members:
        group.add(MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id if version >= 3 else None,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout if version >= 1 else m.session_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=decoded.protocol_type,
            supported_protocols=[(decoded.protocol or "", bytes(m.subscription))],
            assignment=bytes(m.assignment),
        ))
    group.protocol_type = decoded.protocol_type or None
    return group


__all__ = [
    "GroupMetadataLog",
    "GroupMetadataRecordKey",
    "decode_group_metadata_value",
    "group_metadata_key",
    "group_metadata_value",
    "read_group_metadata",
    "read_message_key",
]
