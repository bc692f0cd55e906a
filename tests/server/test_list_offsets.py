"""ListOffsets (v0-6), OffsetForLeaderEpoch (v0-4) and DeleteRecords (v0-2) through the
dispatcher on real logs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkaclone.protocol.api_keys import ApiKey
from tests.server.data_path_helpers import (
    DELETE_RECORDS,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    make_broker,
    pending,
    produce_request,
    settled,
)

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 1, 3, 6
REQUEST_TIMED_OUT, INVALID_REQUEST, POLICY_VIOLATION = 7, 42, 44
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE = 74, 75, 78
BASE_TS = 1_600_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    yield b
    close_broker(b)


def produce_at(broker: DataPathBroker, topic: str, timestamp: int, *values: bytes) -> None:
    response = broker.call(ApiKey.PRODUCE, 8, produce_request(
        {(topic, 0): batch(*values, timestamp=timestamp)}))
    assert response.responses[0].partition_responses[0].error_code == NONE


def list_offsets(broker: DataPathBroker, version: int, timestamps: dict[tuple[str, int], int],
                 *, replica_id: int = -1, isolation_level: int = 0,
                 current_leader_epoch: int = -1, max_num_offsets: int = 1) -> dict[Any, Any]:
    s = LIST_OFFSETS.structs
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), ts in timestamps.items():
        by_topic.setdefault(topic, []).append(s["ListOffsetsPartition"](
            partition_index=partition, current_leader_epoch=current_leader_epoch,
            timestamp=ts, max_num_offsets=max_num_offsets))
    response = broker.call(ApiKey.LIST_OFFSETS, version, LIST_OFFSETS(
        replica_id=replica_id, isolation_level=isolation_level,
        topics=[s["ListOffsetsTopic"](name=t, partitions=ps) for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(1, 7))
def test_earliest_latest_and_by_timestamp(broker: DataPathBroker, version: int) -> None:
    broker.host("t", [0], leader_epoch=4)
    produce_at(broker, "t", BASE_TS, b"a", b"b", b"c")       # offsets 0-2, ts +0..+2
    produce_at(broker, "t", BASE_TS + 1000, b"d", b"e")      # offsets 3-4
    tp = ("t", 0)
    answers = {ts: list_offsets(broker, version, {tp: ts})[tp]
               for ts in (-2, -1, BASE_TS + 1, BASE_TS + 500, BASE_TS + 1001, BASE_TS + 5000)}
    assert {ts: (a.error_code, a.offset) for ts, a in answers.items()} == {
        -2: (NONE, 0), -1: (NONE, 5), BASE_TS + 1: (NONE, 1), BASE_TS + 500: (NONE, 3),
        BASE_TS + 1001: (NONE, 4), BASE_TS + 5000: (NONE, -1)}
    assert answers[BASE_TS + 1].timestamp == BASE_TS + 1
    assert answers[BASE_TS + 5000].timestamp == -1
    if version >= 4:
        assert answers[-1].leader_epoch == 4 and answers[BASE_TS + 500].leader_epoch == 4


def test_latest_for_a_consumer_is_the_high_watermark(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    produce_at(broker, "t", BASE_TS, b"a", b"b")
    tp = ("t", 0)
    assert list_offsets(broker, 5, {tp: -1})[tp].offset == 0
    assert list_offsets(broker, 5, {tp: -1}, isolation_level=1)[tp].offset == 0
    assert list_offsets(broker, 5, {tp: -1}, replica_id=2)[tp].offset == 2
    # A record past the high watermark is not visible by timestamp either.
    assert list_offsets(broker, 5, {tp: BASE_TS})[tp].offset == -1
    broker.call(ApiKey.FETCH, 11, fetch_request({tp: 2}, replica_id=2))
    assert list_offsets(broker, 5, {tp: -1})[tp].offset == 2
    assert list_offsets(broker, 5, {tp: BASE_TS})[tp].offset == 0


def test_errors_and_duplicates(broker: DataPathBroker) -> None:
    broker.host("t", [0], leader_epoch=3)
    broker.host("f", [0], leader=2, replicas=(2, 1))
    answers = list_offsets(broker, 5, {("t", 0): -1, ("missing", 0): -1, ("f", 0): -1})
    assert {k: a.error_code for k, a in answers.items()} == {
        ("t", 0): NONE, ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("f", 0): NOT_LEADER_OR_FOLLOWER}
    assert answers[("missing", 0)].offset == -1
    for epoch, code in ((2, FENCED_LEADER_EPOCH), (4, UNKNOWN_LEADER_EPOCH), (3, NONE)):
        got = list_offsets(broker, 5, {("t", 0): -1}, current_leader_epoch=epoch)
        assert got[("t", 0)].error_code == code
    s = LIST_OFFSETS.structs
    twice = broker.call(ApiKey.LIST_OFFSETS, 5, LIST_OFFSETS(replica_id=-1, topics=[
        s["ListOffsetsTopic"](name="t", partitions=[
            s["ListOffsetsPartition"](partition_index=0, timestamp=-1),
            s["ListOffsetsPartition"](partition_index=0, timestamp=-2)])]))
    assert [p.error_code for p in twice.topics[0].partitions] == [INVALID_REQUEST] * 2


def test_new_leader_behind_its_epoch_start_is_offset_not_available(
        broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2), leader_epoch=0)
    produce_at(broker, "t", BASE_TS, b"a")
    broker.host("t", [0], replicas=(1, 2), leader_epoch=1)  # epoch 1 starts at 1, HW 0
    tp = ("t", 0)
    assert list_offsets(broker, 5, {tp: -1})[tp].error_code == OFFSET_NOT_AVAILABLE
    assert list_offsets(broker, 5, {tp: -1}, replica_id=2)[tp].offset == 1


def test_v0_legacy_offsets(broker: DataPathBroker) -> None:
    broker.host("t", [0], configs={"segment.bytes": "300"})
    for i in range(4):
        produce_at(broker, "t", BASE_TS + i, b"x" * 120)
    log = broker.log("t")
    bases = [segment.base_offset for segment in log.log_segments]
    assert len(bases) >= 2
    tp = ("t", 0)
    latest = list_offsets(broker, 0, {tp: -1}, max_num_offsets=10)[tp]
    assert latest.error_code == NONE
    expected = sorted({*bases, log.log_end_offset}, reverse=True)
    if log.active_segment.size == 0:
        expected = sorted(bases, reverse=True)
    assert latest.old_style_offsets == expected
    assert list_offsets(broker, 0, {tp: -2}, max_num_offsets=10)[tp].old_style_offsets == [0]
    assert list_offsets(broker, 0, {tp: -1}, max_num_offsets=1)[tp].old_style_offsets == (
        expected[:1])


def offset_for_epoch(broker: DataPathBroker, version: int, epoch: int, *,
                     current_leader_epoch: int = -1, topic: str = "t") -> Any:
    s = OFFSET_FOR_LEADER_EPOCH.structs
    response = broker.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, OFFSET_FOR_LEADER_EPOCH(
        replica_id=2, topics=[s["OffsetForLeaderTopic"](topic=topic, partitions=[
            s["OffsetForLeaderPartition"](partition=0, current_leader_epoch=current_leader_epoch,
                                          leader_epoch=epoch)])]))
    return response.topics[0].partitions[0]


@pytest.mark.parametrize("version", range(5))
def test_offset_for_leader_epoch(broker: DataPathBroker, version: int) -> None:
    broker.host("t", [0], leader_epoch=0)
    produce_at(broker, "t", BASE_TS, b"a", b"b")
    broker.host("t", [0], leader_epoch=2)
    produce_at(broker, "t", BASE_TS, b"c")
    got = {e: offset_for_epoch(broker, version, e) for e in (0, 1, 2, 3)}
    ends = {e: (r.error_code, r.end_offset) for e, r in got.items()}
    assert ends == {0: (NONE, 2), 1: (NONE, 2), 2: (NONE, 3), 3: (NONE, -1)}
    if version >= 1:
        assert {e: r.leader_epoch for e, r in got.items()} == {0: 0, 1: 0, 2: 2, 3: -1}
    if version >= 2:
        fenced = offset_for_epoch(broker, version, 0, current_leader_epoch=1)
        assert fenced.error_code == FENCED_LEADER_EPOCH
    assert offset_for_epoch(broker, version, 0, topic="nope").error_code == (
        UNKNOWN_TOPIC_OR_PARTITION)


def delete_records(broker: DataPathBroker, version: int, offsets: dict[tuple[str, int], int],
                   timeout_ms: int = 5000) -> Any:
    s = DELETE_RECORDS.structs
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            s["DeleteRecordsPartition"](partition_index=partition, offset=offset))
    return broker.send(ApiKey.DELETE_RECORDS, version, DELETE_RECORDS(
        timeout_ms=timeout_ms,
        topics=[s["DeleteRecordsTopic"](name=t, partitions=ps) for t, ps in by_topic.items()]))


def delete_results(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark)
            for t in response.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(3))
def test_delete_records_single_replica(broker: DataPathBroker, version: int) -> None:
    broker.host("t", [0, 1])
    broker.host("compacted", [0], configs={"cleanup.policy": "compact"})
    for i in range(4):
        produce_at(broker, "t", BASE_TS, b"v%d" % i)
    produce_at(broker, "compacted", BASE_TS, b"v")
    response = settled(delete_records(broker, version, {
        ("t", 0): 2, ("t", 1): 5, ("compacted", 0): 1, ("missing", 0): 1}))
    assert delete_results(response) == {
        ("t", 0): (NONE, 2), ("t", 1): (OFFSET_OUT_OF_RANGE, -1),
        ("compacted", 0): (POLICY_VIOLATION, -1), ("missing", 0): (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert broker.log("t").log_start_offset == 2
    hw = settled(delete_records(broker, version, {("t", 0): -1}))
    assert delete_results(hw) == {("t", 0): (NONE, 4)}


def test_delete_records_waits_for_followers(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    produce_at(broker, "t", BASE_TS, b"a")
    produce_at(broker, "t", BASE_TS, b"b")
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2,
                                                log_start_offset=0))
    waiting = delete_records(broker, 2, {("t", 0): 1})
    assert pending(waiting)
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2,
                                                log_start_offset=1))
    assert delete_results(settled(waiting)) == {("t", 0): (NONE, 1)}
    timing_out = delete_records(broker, 2, {("t", 0): 2}, timeout_ms=1000)
    broker.advance_ms(1001)
    assert delete_results(settled(timing_out)) == {("t", 0): (REQUEST_TIMED_OUT, -1)}
