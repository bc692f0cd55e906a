"""The broker's GroupMetadataLog: appends go through the ReplicaManager as the coordinator
(internal topic allowed, the configured acks), reads cover the local log from its start to
its log end offset in chunks of offsets.load.buffer.size."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.coordinator import GroupCoordinator
from kafkaclone.coordinator.group.metadata import GroupState
from kafkaclone.coordinator.group.metadata_log import group_metadata_key
from kafkaclone.coordinator.group.pending_offsets import txn_offset_commit_batch
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.record import ControlRecordType
from kafkaclone.server.group_metadata_log import ReplicaGroupMetadataLog
from tests.coordinator.helpers import MemoryGroupStore, make_group_config
from tests.server.data_path_helpers import DataPathBroker, close_broker, make_broker, settled

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    data_path = make_broker(tmp_path)
    yield data_path
    close_broker(data_path)


def metadata_log(broker: DataPathBroker, *, acks: int = -1,
                 load_buffer_size: int = 5 * 1024 * 1024) -> ReplicaGroupMetadataLog:
    return ReplicaGroupMetadataLog(broker.replica_manager, required_acks=acks,
                                   timeout_ms=5000, load_buffer_size=load_buffer_size)


def test_append_then_read_back_in_small_chunks(broker: DataPathBroker) -> None:
    broker.host(GROUP_METADATA_TOPIC_NAME, [0, 1])
    log = metadata_log(broker, load_buffer_size=1)  # one batch per read (KIP-74)
    offsets = [settled(Deferred.fromCoroutine(log.append(0, build_record_batch(
        [(b"k%d" % i, b"v%d" % i), (b"k", None)])))) for i in range(3)]
    assert offsets == [0, 2, 4]
    assert broker.log(GROUP_METADATA_TOPIC_NAME, 0).high_watermark == 6
    assert settled(Deferred.fromCoroutine(log.read(0))) == [
        (b"k0", b"v0"), (b"k", None), (b"k1", b"v1"), (b"k", None), (b"k2", b"v2"),
        (b"k", None)]
    assert settled(Deferred.fromCoroutine(log.read(1))) == []


def test_read_goes_to_the_log_end_beyond_the_high_watermark(broker: DataPathBroker) -> None:
    # As Kafka's loadGroupsAndOffsets: a leader that has not heard of the high watermark yet
    # (here a follower that has not fetched holds it at 0) still loads all it has.
    broker.host(GROUP_METADATA_TOPIC_NAME, [0], replicas=(1, 2))
    log = metadata_log(broker, acks=1)
    assert settled(Deferred.fromCoroutine(log.append(0, build_record_batch(
        [(b"k", b"v")])))) == 0
    assert broker.log(GROUP_METADATA_TOPIC_NAME, 0).high_watermark == 0
    assert settled(Deferred.fromCoroutine(log.read(0))) == [(b"k", b"v")]


def test_partitions_not_hosted(broker: DataPathBroker) -> None:
    log = metadata_log(broker)
    assert settled(Deferred.fromCoroutine(log.read(3))) == []
    with pytest.raises(UnknownTopicOrPartitionError):
        settled(Deferred.fromCoroutine(log.append(3, build_record_batch([(b"k", b"v")]))))
    broker.host(GROUP_METADATA_TOPIC_NAME, [0], leader=2, replicas=(2, 1))
    with pytest.raises(NotLeaderOrFollowerError):
        settled(Deferred.fromCoroutine(log.append(0, build_record_batch([(b"k", b"v")]))))


def test_group_load_skips_transactional_offset_commits_and_markers(
        broker: DataPathBroker) -> None:
    """TxnOffsetCommit writes offset commit records (key version 1) in a transaction and
    WriteTxnMarkers its control batch to the same partitions: loading the groups reads past
    both and keeps the group metadata records."""
    broker.host(GROUP_METADATA_TOPIC_NAME, [0])
    log = metadata_log(broker)
    empty_group = (bytes.fromhex("0003") + b"\x00\x08consumer" + struct.pack(">i", 4)
                   + bytes.fromhex("ffffffff") + struct.pack(">q", 9) + struct.pack(">i", 0))
    settled(Deferred.fromCoroutine(log.append(0, build_record_batch(
        [(group_metadata_key("g"), empty_group)]))))
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(offset=42, metadata="m",
                                                          commit_timestamp_ms=9)}
    settled(Deferred.fromCoroutine(log.append(0, txn_offset_commit_batch(
        "g", 7, 0, offsets, 9))))
    settled(Deferred.fromCoroutine(log.append(0, build_end_transaction_marker_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
        timestamp=9))))
    partition_log = broker.log(GROUP_METADATA_TOPIC_NAME, 0)
    assert partition_log.log_end_offset == 3
    read = settled(Deferred.fromCoroutine(log.read(0)))
    assert [key[:2] if key else key for key, _ in read] == [b"\x00\x02", b"\x00\x01"]
    coordinator = GroupCoordinator(1, make_group_config(offsets_topic_num_partitions=1),
                                   MemoryGroupStore(), log, broker.clock)
    coordinator.startup()
    settled(Deferred.fromCoroutine(coordinator.on_election([0])))
    try:
        assert coordinator.owned_partitions == {0}
        group = coordinator.groups["g"]
        assert (group.state, group.generation_id, group.protocol_type) == (
            GroupState.EMPTY, 4, "consumer")
        assert list(coordinator.groups) == ["g"]
    finally:
        coordinator.shutdown()


def test_open_transactions_offsets_come_back_pending_on_load(broker: DataPathBroker) -> None:
    """The offsets of a transaction with no marker in the partition yet (the producer state
    of the log knows it is open) are pending for the coordinator that loads the partition;
    a committed transaction's are not."""
    broker.host(GROUP_METADATA_TOPIC_NAME, [0])
    log = metadata_log(broker)
    committed = {TopicPartition("t", 0): OffsetAndMetadata(offset=5, commit_timestamp_ms=9)}
    open_ = {TopicPartition("t", 1): OffsetAndMetadata(offset=6, commit_timestamp_ms=9)}
    for producer_id, offsets in ((7, committed), (8, open_)):
        settled(Deferred.fromCoroutine(log.append(0, txn_offset_commit_batch(
            "g", producer_id, 0, offsets, 9))))
    settled(Deferred.fromCoroutine(log.append(0, build_end_transaction_marker_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
        timestamp=9))))
    assert log.open_txn_offsets(0) == {8: {"g": open_}}
    assert log.open_txn_offsets(1) == {}
    coordinator = GroupCoordinator(1, make_group_config(offsets_topic_num_partitions=1),
                                   MemoryGroupStore(), log, broker.clock)
    coordinator.startup()
    settled(Deferred.fromCoroutine(coordinator.on_election([0])))
    try:
        assert coordinator.groups["g"].state is GroupState.EMPTY
        assert coordinator.has_pending_txn_offsets("g", TopicPartition("t", 1))
        assert not coordinator.has_pending_txn_offsets("g", TopicPartition("t", 0))
    finally:
        coordinator.shutdown()
