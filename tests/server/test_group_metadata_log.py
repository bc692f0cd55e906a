"""The broker's GroupMetadataLog: appends go through the ReplicaManager as the coordinator
(internal topic allowed, the configured acks), reads cover the local log from its start to
its log end offset in chunks of offsets.load.buffer.size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.server.group_metadata_log import ReplicaGroupMetadataLog
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
