"""Produce through the dispatcher on a ReplicaManager with real logs and a task.Clock:
acks 0/1/-1, every per-partition error Kafka answers, broker-side compression and
LogAppendTime."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.network.socket_server import CloseConnection
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, RecordBatch
from tests.server.data_path_helpers import (
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    fetched,
    make_broker,
    pending,
    produce_errors,
    produce_partition,
    produce_request,
    records_of,
    settled,
)

NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE = 7, 6, 10
RECORD_LIST_TOO_LARGE, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 18, 19, 20
INVALID_REQUIRED_ACKS, INVALID_TIMESTAMP, INVALID_TOPIC_EXCEPTION = 21, 32, 17
UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD = 76, 87


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    yield b
    close_broker(b)


@pytest.mark.parametrize("version", range(3, 10))
def test_acks_1_appends_and_answers_base_offsets(broker: DataPathBroker, version: int) -> None:
    broker.host("t", [0, 1])
    first = broker.call(ApiKey.PRODUCE, version, produce_request(
        {("t", 0): batch(b"a", b"b", b"c"), ("t", 1): batch(b"x")}))
    assert produce_errors(first) == {("t", 0): NONE, ("t", 1): NONE}
    second = broker.call(ApiKey.PRODUCE, version, produce_request({("t", 0): batch(b"d")}))
    p = produce_partition(second, "t", 0)
    assert (p.error_code, p.base_offset) == (NONE, 3)
    if version >= 2:
        assert p.log_append_time_ms == -1
    if version >= 5:
        assert p.log_start_offset == 0
    log = broker.log("t", 0)
    assert (log.log_end_offset, log.high_watermark) == (4, 4)  # ISR = the leader alone
    response = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}))
    assert records_of(fetched(response, "t", 0)) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_acks_0_sends_no_response_and_closes_on_error(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    assert broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                           acks=0)) is None
    assert broker.log("t").log_end_offset == 1
    with pytest.raises(CloseConnection):
        broker.call(ApiKey.PRODUCE, 8, produce_request({("nope", 0): batch(b"a")}, acks=0))


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_required_acks(broker: DataPathBroker, acks: int) -> None:
    broker.host("t", [0])
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                              acks=acks))
    assert produce_errors(response) == {("t", 0): INVALID_REQUIRED_ACKS}
    assert broker.log("t").log_end_offset == 0


def test_unknown_partition_follower_and_not_hosted(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    broker.host("f", [0], leader=2, replicas=(2, 1))
    broker.metadata_cache.partitions.add(TopicPartition("elsewhere", 0))
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({
        ("t", 0): batch(b"ok"), ("t", 7): batch(b"a"), ("missing", 0): batch(b"a"),
        ("f", 0): batch(b"a"), ("elsewhere", 0): batch(b"a")}))
    assert produce_errors(response) == {
        ("t", 0): NONE, ("t", 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION, ("f", 0): NOT_LEADER_OR_FOLLOWER,
        ("elsewhere", 0): NOT_LEADER_OR_FOLLOWER}
    assert broker.log("f").log_end_offset == 0


def test_corrupt_crc_appends_nothing(broker: DataPathBroker) -> None:
    broker.host("t", [0, 1])
    corrupt = bytearray(batch(b"a", b"b"))
    corrupt[-1] ^= 0xFF  # a record byte: covered by the CRC
    response = broker.call(ApiKey.PRODUCE, 8, produce_request(
        {("t", 0): bytes(corrupt), ("t", 1): batch(b"fine")}))
    assert produce_errors(response) == {("t", 0): CORRUPT_MESSAGE, ("t", 1): NONE}
    assert produce_partition(response, "t", 0).base_offset == -1
    assert broker.log("t", 0).log_end_offset == 0
    assert broker.log("t", 0).size == 0
    assert broker.log("t", 1).log_end_offset == 1


def test_record_batch_shape_errors(broker: DataPathBroker) -> None:
    broker.host("t", range(5))
    two_batches = batch(b"a") + batch(b"b")
    shifted = bytearray(batch(b"a"))
    shifted[7] = 5  # baseOffset 5: a client's batch must start at 0
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({
        ("t", 0): two_batches, ("t", 1): b"", ("t", 2): None, ("t", 3): bytes(shifted),
        ("t", 4): batch(b"ok")}))
    assert produce_errors(response) == {("t", 0): INVALID_RECORD, ("t", 1): INVALID_RECORD,
                                        ("t", 2): INVALID_RECORD, ("t", 3): INVALID_RECORD,
                                        ("t", 4): NONE}
    assert [broker.log("t", p).log_end_offset for p in range(5)] == [0, 0, 0, 0, 1]


def test_zstd_needs_produce_v7(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    zstd = batch(b"a", codec=Codec.ZSTD)
    old = broker.call(ApiKey.PRODUCE, 6, produce_request({("t", 0): zstd}))
    assert produce_errors(old) == {("t", 0): UNSUPPORTED_COMPRESSION_TYPE}
    new = broker.call(ApiKey.PRODUCE, 7, produce_request({("t", 0): zstd}))
    assert produce_errors(new) == {("t", 0): NONE}


def test_message_and_record_list_too_large(broker: DataPathBroker) -> None:
    broker.host("small", [0], configs={"max.message.bytes": "200"})
    broker.host("tiny-segments", [0], configs={"segment.bytes": "14"})
    big = batch(b"x" * 300)
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("small", 0): big}))
    assert produce_errors(response) == {("small", 0): MESSAGE_TOO_LARGE}
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("tiny-segments", 0): big}))
    assert produce_errors(response) == {("tiny-segments", 0): RECORD_LIST_TOO_LARGE}


def test_invalid_timestamp(broker: DataPathBroker) -> None:
    broker.host("strict", [0], configs={"message.timestamp.difference.max.ms": "60000"})
    old = batch(b"a", timestamp=broker.now_ms() - 3_600_000)
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("strict", 0): old}))
    assert produce_errors(response) == {("strict", 0): INVALID_TIMESTAMP}
    fresh = batch(b"a", timestamp=broker.now_ms())
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("strict", 0): fresh}))
    assert produce_errors(response) == {("strict", 0): NONE}


def test_internal_topic_refused_to_clients(broker: DataPathBroker) -> None:
    broker.host("__consumer_offsets", [0])
    response = broker.call(ApiKey.PRODUCE, 8, produce_request(
        {("__consumer_offsets", 0): batch(b"a")}))
    assert produce_errors(response) == {("__consumer_offsets", 0): INVALID_TOPIC_EXCEPTION}


def test_acks_all_waits_for_the_high_watermark(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2), configs={"min.insync.replicas": "2"})
    waiting = broker.send(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a", b"b")},
                                                             acks=-1))
    assert pending(waiting)
    assert broker.log("t").log_end_offset == 2 and broker.log("t").high_watermark == 0
    # The follower fetches the data, then fetches again from the end: it has it all.
    follow = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, replica_id=2))
    assert [o for o, _ in records_of(fetched(follow, "t", 0))] == [0, 1]
    assert pending(waiting)
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2))
    response = settled(waiting)
    p = produce_partition(response, "t", 0)
    assert (p.error_code, p.base_offset) == (NONE, 0)
    assert broker.log("t").high_watermark == 2


def test_acks_all_times_out(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    waiting = broker.send(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                             acks=-1, timeout_ms=1500))
    broker.advance_ms(1400)
    assert pending(waiting)
    broker.advance_ms(200)
    assert produce_errors(settled(waiting)) == {("t", 0): REQUEST_TIMED_OUT}
    assert broker.log("t").log_end_offset == 1  # appended on the leader all the same


def test_not_enough_replicas_before_append(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2), isr=(1,), configs={"min.insync.replicas": "2"})
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                              acks=-1))
    assert produce_errors(response) == {("t", 0): NOT_ENOUGH_REPLICAS}
    assert broker.log("t").log_end_offset == 0
    # acks=1 does not care about min.insync.replicas.
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")}))
    assert produce_errors(response) == {("t", 0): NONE}


def test_not_enough_replicas_after_append(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2), configs={"min.insync.replicas": "2"})
    waiting = broker.send(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                             acks=-1, timeout_ms=60_000))
    # The follower never fetches: after replica.lag.time.max.ms it leaves the ISR, the high
    # watermark reaches the batch, and the ISR is below min.insync.replicas.
    broker.advance_ms(10_001)
    broker.replica_manager.maybe_shrink_isr()
    partition = broker.replica_manager.get_partition(TopicPartition("t", 0))
    assert partition is not None and partition.isr == (1,)
    assert produce_errors(settled(waiting)) == {("t", 0): NOT_ENOUGH_REPLICAS_AFTER_APPEND}


def test_leadership_loss_answers_waiting_produce(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    waiting = broker.send(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                             acks=-1, timeout_ms=60_000))
    broker.host("t", [0], leader=2, replicas=(1, 2), leader_epoch=1)
    assert produce_errors(settled(waiting)) == {("t", 0): NOT_LEADER_OR_FOLLOWER}


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_topic_compression_type_recompresses(broker: DataPathBroker, codec: Codec) -> None:
    broker.host("c", [0], configs={"compression.type": codec.name.lower()})
    broker.host("p", [0], configs={"compression.type": "producer"})
    values = [b"value-%d" % i * 10 for i in range(20)]
    for topic in ("c", "p"):
        response = broker.call(ApiKey.PRODUCE, 8, produce_request({(topic, 0): batch(*values)}))
        assert produce_errors(response) == {(topic, 0): NONE}
    for topic, expected in (("c", codec), ("p", Codec.NONE)):
        data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({(topic, 0): 0})), topic, 0)
        assert RecordBatch(bytes(data.records)).compression == expected
        assert [v for _, v in records_of(data)] == values


def test_producer_compression_is_kept_byte_for_byte(broker: DataPathBroker) -> None:
    broker.host("p", [0])
    sent = batch(b"a" * 100, b"b" * 100, codec=Codec.LZ4)
    broker.call(ApiKey.PRODUCE, 8, produce_request({("p", 0): sent}))
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("p", 0): 0})), "p", 0)
    stored = bytes(data.records)
    # Only baseOffset (0 already) and partitionLeaderEpoch (outside the CRC) change.
    assert stored[:12] == sent[:12] and stored[16:] == sent[16:]
    assert RecordBatch(stored).partition_leader_epoch == 0


def test_log_append_time(broker: DataPathBroker) -> None:
    broker.host("lat", [0], configs={"message.timestamp.type": "LogAppendTime"})
    response = broker.call(ApiKey.PRODUCE, 8, produce_request(
        {("lat", 0): batch(b"a", b"b", timestamp=1000)}))
    p = produce_partition(response, "lat", 0)
    assert (p.error_code, p.log_append_time_ms) == (NONE, broker.now_ms())
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("lat", 0): 0})), "lat", 0)
    stored = RecordBatch(bytes(data.records))
    assert stored.timestamp_type == 1 and stored.max_timestamp == broker.now_ms()
    assert stored.is_valid()


def test_high_watermark_checkpointed_at_shutdown(tmp_path: Path) -> None:
    from kafkaclone.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT, OffsetCheckpointFile

    b = make_broker(tmp_path)
    b.host("t", [0], replicas=(1, 2))
    b.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a", b"b", b"c")}))
    b.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2))
    assert b.log("t").high_watermark == 2
    b.replica_manager.shutdown()
    checkpoint = OffsetCheckpointFile(tmp_path / "logs" / REPLICATION_OFFSET_CHECKPOINT).read()
    assert checkpoint[TopicPartition("t", 0)] == 2
    b.log_manager.shutdown()


def test_shutdown_never_acknowledges_a_waiting_acks_all_produce(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    waiting = broker.send(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a")},
                                                             acks=-1, timeout_ms=60_000))
    assert pending(waiting)
    broker.replica_manager.delayed_produce.shutdown()
    assert produce_errors(settled(waiting)) == {("t", 0): REQUEST_TIMED_OUT}
