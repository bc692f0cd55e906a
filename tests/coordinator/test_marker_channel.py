"""The markers channel on a task.Clock with fake connections: batching per broker, retries
against the new leader after NOT_LEADER_OR_FOLLOWER and after a failed connection, deleted
partitions skipped, and entries dropped when their coordinator resigns."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    NONE,
    NetworkExceptionError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.coordinator import TxnMarkerEntry
from kafkaclone.coordinator.transaction.marker_channel import (
    MarkerDestination,
    TransactionMarkerChannelManager,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

pytestmark = pytest.mark.timeout(30)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult


class Leaders:
    def __init__(self) -> None:
        self.leaders: dict[TopicPartition, int] = {A0: 1, A1: 2, B0: 1}

    def leader_of(self, tp: TopicPartition) -> MarkerDestination | None:
        leader = self.leaders.get(tp)
        return None if leader is None else MarkerDestination(leader, f"b{leader}", 9092)

    def partition_exists(self, tp: TopicPartition) -> bool:
        return tp in self.leaders


class FakeConnection:
    """Answers each request with ``errors`` (default NONE), or fails while ``down``."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.requests: list[WriteTxnMarkersRequest] = []
        self.errors: dict[TopicPartition, int] = {}
        self.down = False
        self.hold: Deferred[None] | None = None

    async def send(self, api_key: int, api_version: int, body: Any) -> Any:
        assert (api_key, api_version) == (ApiKey.WRITE_TXN_MARKERS, 1)
        self.requests.append(body)
        if self.hold is not None:
            await self.hold
        if self.down:
            raise NetworkExceptionError("down")
        return WriteTxnMarkersResponse(markers=[
            _Result(producer_id=m.producer_id, topics=[
                _TopicResult(name=t.name, partitions=[
                    _PartitionResult(partition_index=p,
                                     error_code=self.errors.get(TopicPartition(t.name, p), NONE))
                    for p in t.partition_indexes])
                for t in m.topics])
            for m in body.markers])

    def close(self) -> None:
        pass


def entry(pid: int, *partitions: TopicPartition, txn_partition: int = 0) -> TxnMarkerEntry:
    return TxnMarkerEntry(f"tx{pid}", txn_partition, 3, pid, 1, True, frozenset(partitions))


def setup() -> tuple[task.Clock, Leaders, dict[int, FakeConnection],
                     TransactionMarkerChannelManager]:
    clock = task.Clock()
    leaders = Leaders()
    connections: dict[int, FakeConnection] = {}

    def connect(destination: MarkerDestination) -> FakeConnection:
        return connections.setdefault(destination.broker_id, FakeConnection(destination.broker_id))

    return clock, leaders, connections, TransactionMarkerChannelManager(
        clock, leaders, connect, retry_backoff=0.1)


def send(channel: TransactionMarkerChannelManager, e: TxnMarkerEntry) -> list[Any]:
    box: list[Any] = []
    Deferred.fromCoroutine(channel.send_markers(e)).addBoth(box.append)
    return box


def test_markers_are_batched_per_broker() -> None:
    _, _, connections, channel = setup()
    connections[1] = FakeConnection(1)
    hold: Deferred[None] = Deferred()
    connections[1].hold = hold
    first = send(channel, entry(10, A0, A1))
    second = send(channel, entry(11, B0))
    third = send(channel, entry(12, A0))
    hold.callback(None)
    assert first == [None] and second == [None] and third == [None]
    # broker 1: the first request held one marker; the two queued meanwhile went together.
    assert [[m.producer_id for m in r.markers] for r in connections[1].requests] == [
        [10], [11, 12]]
    [request] = connections[2].requests
    marker = request.markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result,
            marker.coordinator_epoch) == (10, 1, True, 3)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("a", [1])]


def test_not_leader_is_retried_against_the_new_leader() -> None:
    clock, leaders, connections, channel = setup()
    connections[1] = FakeConnection(1)
    connections[1].errors = {A0: NotLeaderOrFollowerError.code}
    done = send(channel, entry(10, A0))
    assert done == []
    leaders.leaders[A0] = 2
    clock.advance(0.1)
    assert done == [None]
    assert len(connections[2].requests) == 1


def test_a_failed_connection_is_retried_and_deleted_partitions_skipped() -> None:
    clock, leaders, connections, channel = setup()
    connections[1] = FakeConnection(1)
    connections[1].down = True
    done = send(channel, entry(10, A0, B0))
    clock.advance(0.1)
    assert done == [] and len(connections[1].requests) == 2
    del leaders.leaders[B0]  # topic b deleted meanwhile
    connections[1].down = False
    clock.advance(0.1)
    assert done == [None]
    assert [t.name for t in connections[1].requests[-1].markers[0].topics] == ["a"]


def test_resigning_drops_the_entries_of_that_partition() -> None:
    clock, leaders, _, channel = setup()
    leaders.leaders[A0] = -1
    leaders.leader_of = lambda tp: None  # type: ignore[method-assign]
    dropped = send(channel, entry(10, A0, txn_partition=7))
    kept = send(channel, entry(11, A0, txn_partition=8))
    channel.remove_markers_for_txn_partition(7)
    assert dropped[0].check(NotCoordinatorError)
    clock.advance(1)
    assert kept == []
