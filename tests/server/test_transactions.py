"""Transactions on the partition side (issue 15), on a local cluster of two broker processes,
with the test acting as the transaction coordinator: raw Produce of transactional batches,
then raw WriteTxnMarkers. A read_committed confluent-kafka consumer blocks at the open
transaction, then sees the committed records and never the aborted ones, while
read_uncommitted sees all; WriteTxnMarkers answers Kafka's per-partition errors; the
transactional offsets of TxnOffsetCommit stay pending (OffsetFetch require_stable:
UNSTABLE_OFFSET_COMMIT) until the COMMIT marker reaches the group's __consumer_offsets
partition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.common.jvm import java_string_hash, kafka_abs
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import RecordBatch, build_record_batch
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import (
    _connection_to,
    _fetch_body,
    _produce_body,
    _produce_error,
    ask,
    create_topic,
    wait_for_leaders,
)

pytestmark = pytest.mark.timeout(300)

NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 3, 6
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, UNSTABLE_OFFSET_COMMIT = 47, 52, 88
OFFSETS_PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={"default.replication.factor": "1",
                                    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
                                    "offsets.topic.replication.factor": "1"}) as local:
        yield local


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1,
          transactional: bool = False) -> bytes:
    return build_record_batch([(None, value, None, int(time.time() * 1000)) for value in values],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                               is_transactional=transactional)


def markers_body(markers: list[tuple[int, int, bool, str, list[int], int]]) -> Any:
    request = api.APIS[ApiKey.WRITE_TXN_MARKERS].request
    s = request.structs
    return request(markers=[
        s["WritableTxnMarker"](producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                               topics=[s["WritableTxnMarkerTopic"](name=topic,
                                                                   partition_indexes=parts)],
                               coordinator_epoch=coordinator_epoch)
        for pid, epoch, commit, topic, parts, coordinator_epoch in markers])


def marker_errors(response: Any) -> list[int]:
    return [p.error_code for m in response.markers for t in m.topics for p in t.partitions]


def write_markers(cluster: LocalCluster, broker_id: int,
                  markers: list[tuple[int, int, bool, str, list[int], int]],
                  version: int = 1) -> list[int]:
    with _connection_to(cluster, broker_id) as conn:
        return marker_errors(ask(conn, ApiKey.WRITE_TXN_MARKERS, markers_body(markers), version))


def produce(cluster: LocalCluster, leader: int, topic: str, records: bytes) -> int:
    body = _produce_body(topic, 0, records, acks=-1)
    if RecordBatch(records).is_transactional:
        body.transactional_id = "txn-test"  # a transactional batch needs one (Kafka 2.8)
    with _connection_to(cluster, leader) as conn:
        error, offset = _produce_error(ask(conn, ApiKey.PRODUCE, body, 8))
    assert error == NONE
    return int(offset)


def consume(cluster: LocalCluster, topic: str, isolation: str, *, expected: int,
            seconds: float = 20.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(got) < expected:
            message = consumer.poll(0.3)
            if message is None or message.error() is not None:
                continue
            got.append(message.value())
    finally:
        consumer.close()
    return got


def read_committed_fetch(cluster: LocalCluster, leader: int, topic: str) -> Any:
    body = _fetch_body(topic, 0, 0)
    body.isolation_level = 1
    with _connection_to(cluster, leader) as conn:
        return ask(conn, ApiKey.FETCH, body, 11).responses[0].partitions[0]


def test_read_committed_sees_committed_and_never_aborted(cluster: LocalCluster) -> None:
    topic = "txn-e2e"
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    a, b = 7001, 7002
    produce(cluster, leader, topic, batch([b"plain-0"]))                                 # 0
    first_a = produce(cluster, leader, topic, batch([b"a-0", b"a-1"], pid=a, epoch=0, seq=0,
                                                     transactional=True))                # 1-2
    first_b = produce(cluster, leader, topic, batch([b"b-0"], pid=b, epoch=0, seq=0,
                                                     transactional=True))                # 3
    assert (first_a, first_b) == (1, 3)
    # Both transactions are open: read_committed stops at A's first offset.
    assert consume(cluster, topic, "read_committed", expected=2, seconds=4) == [b"plain-0"]
    partition = read_committed_fetch(cluster, leader, topic)
    assert partition.last_stable_offset == 1 and partition.high_watermark == 4
    assert consume(cluster, topic, "read_uncommitted", expected=4) == [
        b"plain-0", b"a-0", b"a-1", b"b-0"]

    assert write_markers(cluster, leader, [(a, 0, True, topic, [0], 0),
                                           (b, 0, False, topic, [0], 0)]) == [NONE, NONE]
    produce(cluster, leader, topic, batch([b"plain-1"]))
    assert consume(cluster, topic, "read_committed", expected=4) == [
        b"plain-0", b"a-0", b"a-1", b"plain-1"]
    partition = read_committed_fetch(cluster, leader, topic)
    assert partition.last_stable_offset == partition.high_watermark == 7
    assert [(t.producer_id, t.first_offset) for t in partition.aborted_transactions] == [(b, 3)]
    # ListOffsets latest under read_committed is the LSO.
    request = api.APIS[ApiKey.LIST_OFFSETS].request
    s = request.structs
    with _connection_to(cluster, leader) as conn:
        produce(cluster, leader, topic, batch([b"c-0"], pid=7003, epoch=0, seq=0,
                                              transactional=True))                      # 7
        offsets = [ask(conn, ApiKey.LIST_OFFSETS, request(replica_id=-1, isolation_level=level,
                   topics=[s["ListOffsetsTopic"](name=topic, partitions=[
                       s["ListOffsetsPartition"](partition_index=0, timestamp=-1)])]), 5)
                   .topics[0].partitions[0].offset for level in (0, 1)]
    assert offsets == [8, 7]


def test_write_txn_markers_errors(cluster: LocalCluster) -> None:
    topic = "txn-errors"
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    follower = 2 if leader == 1 else 1
    pid = 7100
    produce(cluster, leader, topic, batch([b"x"], pid=pid, epoch=5, seq=0, transactional=True))
    assert write_markers(cluster, leader, [(pid, 5, True, "no-such-topic", [0], 0)]) == [
        UNKNOWN_TOPIC_OR_PARTITION]
    assert write_markers(cluster, follower, [(pid, 5, True, topic, [0], 0)]) == [
        NOT_LEADER_OR_FOLLOWER]
    assert write_markers(cluster, leader, [(pid, 4, True, topic, [0], 0)], version=0) == [
        INVALID_PRODUCER_EPOCH]
    assert write_markers(cluster, leader, [(pid, 5, False, topic, [0], 3)]) == [NONE]
    produce(cluster, leader, topic, batch([b"y"], pid=pid, epoch=5, seq=1, transactional=True))
    assert write_markers(cluster, leader, [(pid, 5, True, topic, [0], 2)]) == [
        TRANSACTION_COORDINATOR_FENCED]
    assert read_committed_fetch(cluster, leader, topic).last_stable_offset == 2


def offsets_partition(group: str, partitions: int = OFFSETS_PARTITIONS) -> int:
    return kafka_abs(java_string_hash(group)) % partitions


def find_coordinator(cluster: LocalCluster, group: str, via: int = 1) -> int:
    """The group's coordinator, as broker ``via`` answers FindCoordinator."""
    request = api.APIS[ApiKey.FIND_COORDINATOR].request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with _connection_to(cluster, via) as conn:
            response = ask(conn, ApiKey.FIND_COORDINATOR, request(key=group, key_type=0), 2)
        if response.error_code == NONE:
            return int(response.node_id)
        time.sleep(0.3)
    raise AssertionError(f"no coordinator for {group}")


def txn_offset_commit(cluster: LocalCluster, broker: int, group: str, pid: int, topic: str,
                      offset: int) -> int:
    request = api.APIS[ApiKey.TXN_OFFSET_COMMIT].request
    s = request.structs
    body = request(transactional_id="t", group_id=group, producer_id=pid, producer_epoch=0,
                   generation_id=-1, member_id="", group_instance_id=None, topics=[
                       s["TxnOffsetCommitRequestTopic"](name=topic, partitions=[
                           s["TxnOffsetCommitRequestPartition"](
                               partition_index=0, committed_offset=offset,
                               committed_leader_epoch=-1, committed_metadata="m")])])
    with _connection_to(cluster, broker) as conn:
        response = ask(conn, ApiKey.TXN_OFFSET_COMMIT, body, 3)
    return int(response.topics[0].partitions[0].error_code)


def offset_fetch(cluster: LocalCluster, broker: int, group: str, topic: str
                 ) -> tuple[int, int]:
    request = api.APIS[ApiKey.OFFSET_FETCH].request
    s = request.structs
    body = request(group_id=group, require_stable=True, topics=[
        s["OffsetFetchRequestTopic"](name=topic, partition_indexes=[0])])
    with _connection_to(cluster, broker) as conn:
        partition = ask(conn, ApiKey.OFFSET_FETCH, body, 7).topics[0].partitions[0]
    return int(partition.error_code), int(partition.committed_offset)


def test_txn_offsets_land_on_commit_and_vanish_on_abort(cluster: LocalCluster) -> None:
    topic = "txn-offsets"
    create_topic(cluster, topic, partitions=1, replication_factor=1)
    group = "txn-group"
    coordinator = find_coordinator(cluster, group)
    pid = 7200
    assert txn_offset_commit(cluster, coordinator, group, pid, topic, 42) == NONE
    assert offset_fetch(cluster, coordinator, group, topic) == (UNSTABLE_OFFSET_COMMIT, -1)
    offsets_topic = "__consumer_offsets"
    assert write_markers(cluster, coordinator, [
        (pid, 0, True, offsets_topic, [offsets_partition(group)], 0)]) == [NONE]
    assert offset_fetch(cluster, coordinator, group, topic) == (NONE, 42)
    # The next transaction aborts: its offset never lands.
    assert txn_offset_commit(cluster, coordinator, group, pid, topic, 99) == NONE
    assert write_markers(cluster, coordinator, [
        (pid, 0, False, offsets_topic, [offsets_partition(group)], 0)]) == [NONE]
    assert offset_fetch(cluster, coordinator, group, topic) == (NONE, 42)
