"""The pending transactional offsets of the group coordinator and Kafka's offset commit
records that carry them in __consumer_offsets (issue 15)."""

from __future__ import annotations

from collections.abc import Mapping

from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import NONE
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.metadata import GroupState
from kafkaclone.coordinator.group.pending_offsets import (
    PendingTxnOffsets,
    decode_offset_commit,
    encode_offset_commit_key,
    encode_offset_commit_value,
    txn_offset_commit_batch,
    txn_offsets_in,
)
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.protocol.records import RecordBatch, build_record_batch
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.record import ControlRecordType
from tests.coordinator.helpers import MemoryGroupMetadataLog, make_coordinator, result_of

TP = TopicPartition("t", 3)


def test_offset_commit_record_is_kafkas() -> None:
    key = encode_offset_commit_key("g", TP)
    assert key == (b"\x00\x01"            # key version 1: an offset commit
                   + b"\x00\x01g"         # group
                   + b"\x00\x01t"         # topic
                   + b"\x00\x00\x00\x03")  # partition
    value = encode_offset_commit_value(OffsetAndMetadata(42, "m", 5, 1000))
    assert value == (b"\x00\x03"                            # value version 3
                     + b"\x00\x00\x00\x00\x00\x00\x00\x2a"  # offset
                     + b"\x00\x00\x00\x05"                  # leader epoch
                     + b"\x00\x01m"                         # metadata
                     + b"\x00\x00\x00\x00\x00\x00\x03\xe8")  # commit timestamp
    assert decode_offset_commit(key, value) == ("g", TP, OffsetAndMetadata(42, "m", 5, 1000))
    group_metadata_key = b"\x00\x02\x00\x01g"
    assert decode_offset_commit(group_metadata_key, b"") is None


def test_a_producers_transactional_batches_are_read_back() -> None:
    first = txn_offset_commit_batch("g", 9, 0, {TP: OffsetAndMetadata(1, "", -1, 5)}, 5)
    other = txn_offset_commit_batch("g", 8, 0, {TP: OffsetAndMetadata(50, "", -1, 5)}, 5)
    later = txn_offset_commit_batch("g", 9, 0, {TP: OffsetAndMetadata(2, "", -1, 6),
                                                TopicPartition("t", 0): OffsetAndMetadata(
                                                    7, "", -1, 6)}, 6)
    plain = build_record_batch([(b"k", b"v", None, 5)])
    batch = RecordBatch(first)
    assert batch.is_transactional and batch.producer_id == 9 and batch.producer_epoch == 0
    records = memoryview(first + other + plain + later)
    assert txn_offsets_in(records, 9) == {"g": {TP: OffsetAndMetadata(2, "", -1, 6),
                                                TopicPartition("t", 0): OffsetAndMetadata(
                                                    7, "", -1, 6)}}


def test_pending_offsets_per_group_and_producer() -> None:
    pending = PendingTxnOffsets()
    pending.add("g", 1, {TP: OffsetAndMetadata(5)})
    pending.add("h", 1, {TopicPartition("t", 0): OffsetAndMetadata(6)})
    pending.add("g", 2, {TopicPartition("t", 1): OffsetAndMetadata(7)})
    assert pending.has_pending("g", TP) and not pending.has_pending("h", TP)
    assert sorted(pending.groups_of_producer(1)) == ["g", "h"]
    pending.remove("g", 1)
    assert not pending.has_pending("g", TP)
    assert pending.has_pending("g", TopicPartition("t", 1))
    pending.drop_groups(["g", "h"])
    assert pending.groups_of_producer(1) == [] and pending.groups_of_producer(2) == []


def test_a_new_coordinator_keeps_the_open_transactions_offsets_pending() -> None:
    """The group coordinator moves while transactions hold offsets in the partition: the
    new one rebuilds them from the log per producer (Kafka's loadGroupsAndOffsets) and
    keeps them pending until the producer's marker, which the old one never saw."""
    log = MemoryGroupMetadataLog()
    coordinator = make_coordinator(task.Clock(), metadata_log=log)
    other = TopicPartition("t", 0)

    def txn_commit(producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
                   ) -> None:
        async def persist(valid: Mapping[TopicPartition, OffsetAndMetadata]) -> int:
            await log.append(0, txn_offset_commit_batch("g", producer_id, 0, valid, 5))
            return NONE

        done = Deferred.fromCoroutine(coordinator.handle_txn_commit_offsets(
            "g", producer_id, "", None, -1, offsets, persist))
        assert result_of(done) == dict.fromkeys(offsets, NONE)

    def marker(producer_id: int, control_type: ControlRecordType) -> bytes:
        return build_end_transaction_marker_batch(
            control_type, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0)

    txn_commit(7, {TP: OffsetAndMetadata(10)})  # committed below
    txn_commit(8, {other: OffsetAndMetadata(20)})  # aborted below
    result_of(Deferred.fromCoroutine(log.append(0, marker(7, ControlRecordType.COMMIT))))
    txn_commit(7, {TP: OffsetAndMetadata(11)})  # the next transaction, still open
    result_of(Deferred.fromCoroutine(log.append(0, marker(8, ControlRecordType.ABORT))))
    txn_commit(9, {other: OffsetAndMetadata(30)})  # open

    coordinator.on_resignation(0)
    assert "g" not in coordinator.groups and not coordinator.has_pending_txn_offsets("g", TP)
    successor = make_coordinator(task.Clock(), metadata_log=log)
    assert successor.groups["g"].state is GroupState.EMPTY
    assert successor.pending_txn_offsets.groups_of_producer(7) == ["g"]
    assert successor.pending_txn_offsets.groups_of_producer(8) == []
    assert successor.has_pending_txn_offsets("g", TP)
    assert successor.has_pending_txn_offsets("g", other)
    # The markers come to the new coordinator: nothing stays pending.
    successor.complete_txn_offsets(7, [0])
    assert not successor.has_pending_txn_offsets("g", TP)
    assert successor.has_pending_txn_offsets("g", other)
    successor.complete_txn_offsets(9, [0])
    assert not successor.has_pending_txn_offsets("g", other)
    # A partition with every transaction completed loads nothing pending.
    for producer_id in (7, 9):
        result_of(Deferred.fromCoroutine(log.append(
            0, marker(producer_id, ControlRecordType.COMMIT))))
    reloaded = make_coordinator(task.Clock(), metadata_log=log)
    assert not reloaded.has_pending_txn_offsets("g", TP)
    assert not reloaded.has_pending_txn_offsets("g", other)
