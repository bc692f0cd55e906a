"""Test support for the group coordinator: an in-memory GroupStore and GroupMetadataLog, and a
driver on task.Clock."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import KafkaError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from kafkaclone.coordinator.group.pending_offsets import txn_offsets_in
from kafkaclone.coordinator.group.store import MembershipMirror, OffsetAndMetadata
from kafkaclone.protocol.messages.consumer_protocol import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    encode_assignment,
    encode_subscription,
)
from kafkaclone.protocol.records.batch import RecordBatch, iter_batches
from kafkaclone.protocol.schema import compile_message
from kafkaclone.server.broker import group_config
from kafkaclone.server.config import KafkaConfig


class MemoryGroupStore:
    """A GroupStore in a dict, recording every call (the ZooKeeper one is tested apart)."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.mirrors: dict[str, MembershipMirror] = {}
        self.commits: list[tuple[str, dict[TopicPartition, OffsetAndMetadata]]] = []
        self.fail_commits = False

    async def commit_offsets(self, group_id: str,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if self.fail_commits:
            raise RuntimeError("store down")
        self.commits.append((group_id, dict(offsets)))
        self.offsets.setdefault(group_id, {}).update(offsets)

    async def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, OffsetAndMetadata]:
        stored = self.offsets.get(group_id, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored[tp] for tp in partitions if tp in stored}

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        stored = self.offsets.get(group_id, {})
        for tp in partitions:
            stored.pop(tp, None)

    async def delete_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)
        self.mirrors.pop(group_id, None)

    async def groups_with_offsets(self) -> list[str]:
        return [g for g, offsets in self.offsets.items() if offsets]

    def update_mirror(self, group_id: str, mirror: MembershipMirror | None) -> None:
        if mirror is None:
            self.mirrors.pop(group_id, None)
        else:
            self.mirrors[group_id] = mirror


class MemoryGroupMetadataLog:
    """A GroupMetadataLog in lists of batches per partition (what the broker's would append
    to its __consumer_offsets partitions); ``fail_with`` makes appends fail."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.fail_with: KafkaError | None = None

    async def append(self, partition: int, records: bytes) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        batches = self.partitions.setdefault(partition, [])
        batches.append(records)
        return len(batches) - 1

    async def read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return self.records(partition)

    def open_txn_offsets(self, partition: int
                         ) -> dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]:
        """The broker's answer, from the batches: a producer's transactional offset
        commits stay open until a control batch of that producer follows them."""
        found: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        for data in self.partitions.get(partition, []):
            for batch in iter_batches(data, allow_partial_tail=False):
                if not isinstance(batch, RecordBatch) or not batch.is_transactional:
                    continue
                if batch.is_control:
                    found.pop(batch.producer_id, None)
                    continue
                for group_id, offsets in txn_offsets_in(memoryview(data),
                                                        batch.producer_id).items():
                    found.setdefault(batch.producer_id, {}).setdefault(
                        group_id, {}).update(offsets)
        return found

    def records(self, partition: int = 0) -> list[tuple[bytes | None, bytes | None]]:
        """What was appended to ``partition`` so far, as (key, value)."""
        return [(record.key, record.value)
                for batch in self.partitions.get(partition, [])
                for entry in iter_batches(batch, allow_partial_tail=False)
                if isinstance(entry, RecordBatch)
                for record in entry.records()]


def subscription(*topics: str) -> bytes:
    message = compile_message(CONSUMER_PROTOCOL_SUBSCRIPTION)
    return encode_subscription(message.cls(topics=list(topics), user_data=None,
                                           owned_partitions=[]), 1)


def assignment(partitions: Mapping[str, list[int]]) -> bytes:
    message = compile_message(CONSUMER_PROTOCOL_ASSIGNMENT)
    struct = message.structs["TopicPartition"]
    return encode_assignment(message.cls(
        assigned_partitions=[struct(topic=t, partitions=p) for t, p in partitions.items()],
        user_data=None), 1)


def make_group_config(**settings: Any) -> GroupConfig:
    """The coordinator's settings as a broker with default configs builds them, with
    ``settings`` (GroupConfig field names) replaced."""
    defaults = group_config(KafkaConfig({"zookeeper.connect": "unused:2181"}))
    return dataclasses.replace(defaults, **settings)


def make_coordinator(clock: task.Clock, store: MemoryGroupStore | None = None,
                     metadata_log: MemoryGroupMetadataLog | None = None,
                     **config: Any) -> GroupCoordinator:
    settings: dict[str, Any] = {"group_initial_rebalance_delay_ms": 0,
                                "offsets_topic_num_partitions": 1}
    settings.update(config)
    coordinator = GroupCoordinator(1, make_group_config(**settings),
                                   store or MemoryGroupStore(),
                                   metadata_log if metadata_log is not None
                                   else MemoryGroupMetadataLog(), clock)
    coordinator.startup()
    done = Deferred.fromCoroutine(coordinator.on_election(
        range(settings["offsets_topic_num_partitions"])))
    assert done.called
    return coordinator


def result_of(d: Deferred[Any]) -> Any:
    """The result of a fired Deferred (AssertionError if it has not fired)."""
    box: list[Any] = []

    def keep(result: Any) -> Any:
        box.append(result)
        return result

    d.addBoth(keep)
    assert box, "the Deferred has not fired"
    if hasattr(box[0], "raiseException"):
        box[0].raiseException()
    return box[0]
