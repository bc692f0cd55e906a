"""Fetch through the dispatcher: consumers up to the high watermark, followers up to the log
end offset (and what their fetches do on the leader: high watermark, ISR expand and
shrink), KIP-74 byte limits, long polls, errors, fetch sessions, leader epochs, follower
fetching (KIP-392)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.server.replica_selector import RackAwareReplicaSelector
from tests.server.data_path_helpers import (
    FETCH,
    START_MS,
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    fetched,
    make_broker,
    pending,
    produce_request,
    records_of,
    settled,
)

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 1, 3, 6
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    yield b
    close_broker(b)


def produce(broker: DataPathBroker, topic: str, partition: int, *values: bytes) -> None:
    response = broker.call(ApiKey.PRODUCE, 8, produce_request({(topic, partition): batch(*values)}))
    assert response.responses[0].partition_responses[0].error_code == NONE


@pytest.mark.parametrize("version", range(4, 13))
def test_consumer_reads_up_to_the_high_watermark_follower_to_the_end(
        broker: DataPathBroker, version: int) -> None:
    broker.host("t", [0], replicas=(1, 2))
    produce(broker, "t", 0, b"a", b"b")
    consumer = fetched(broker.call(ApiKey.FETCH, version, fetch_request({("t", 0): 0})), "t", 0)
    assert (consumer.error_code, consumer.high_watermark, records_of(consumer)) == (NONE, 0, [])
    if version >= 5:
        assert consumer.log_start_offset == 0
    follower = fetched(broker.call(ApiKey.FETCH, version, fetch_request(
        {("t", 0): 0}, replica_id=2, log_start_offset=0)), "t", 0)
    assert records_of(follower) == [(0, b"a"), (1, b"b")]
    # The follower's next fetch says it has both: the high watermark moves (the follower
    # learns it from its next fetch, as in Kafka: a read reports the state it read).
    follower = fetched(broker.call(ApiKey.FETCH, version, fetch_request(
        {("t", 0): 2}, replica_id=2, log_start_offset=0)), "t", 0)
    assert records_of(follower) == [] and follower.high_watermark == 0
    assert broker.log("t").high_watermark == 2
    follower = fetched(broker.call(ApiKey.FETCH, version, fetch_request(
        {("t", 0): 2}, replica_id=2, log_start_offset=0)), "t", 0)
    assert follower.high_watermark == 2
    consumer = fetched(broker.call(ApiKey.FETCH, version, fetch_request({("t", 0): 0})), "t", 0)
    assert records_of(consumer) == [(0, b"a"), (1, b"b")]
    assert consumer.high_watermark == 2
    if version >= 4:
        assert consumer.last_stable_offset == 2 and consumer.aborted_transactions is None


def test_read_committed_reads_to_the_last_stable_offset(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    produce(broker, "t", 0, b"a")
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0},
                                                               isolation_level=1)), "t", 0)
    assert data.last_stable_offset == 1 and data.aborted_transactions == []
    assert records_of(data) == [(0, b"a")]


def test_offset_out_of_range_and_unknown_partitions(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    broker.host("f", [0], leader=2, replicas=(2, 1))
    produce(broker, "t", 0, b"a")
    produce(broker, "t", 0, b"b")
    response = broker.call(ApiKey.FETCH, 11, fetch_request(
        {("t", 0): 3, ("missing", 0): 0, ("f", 0): 0}))
    beyond = fetched(response, "t", 0)
    assert (beyond.error_code, beyond.high_watermark, beyond.log_start_offset) == (
        OFFSET_OUT_OF_RANGE, -1, -1)
    assert bytes(beyond.records or b"") == b""
    assert fetched(response, "missing", 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
    # Kafka 2.8: a v11+ consumer may read a follower (KIP-392; here it has nothing below its
    # high watermark); before v11 only the leader answers.
    assert fetched(response, "f", 0).error_code == NONE
    older = broker.call(ApiKey.FETCH, 10, fetch_request({("f", 0): 0}))
    assert fetched(older, "f", 0).error_code == NOT_LEADER_OR_FOLLOWER
    # At the log end offset exactly: no error, no data.
    at_end = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2})), "t", 0)
    assert (at_end.error_code, records_of(at_end)) == (NONE, [])
    # Below the log start offset (after DeleteRecords) is out of range too.
    broker.log("t").delete_records_before(1)
    below = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0})), "t", 0)
    assert below.error_code == OFFSET_OUT_OF_RANGE
    fine = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1})), "t", 0)
    assert (fine.log_start_offset, records_of(fine)) == (1, [(1, b"b")])


def test_kip74_first_batch_whole_then_limits(broker: DataPathBroker) -> None:
    broker.host("t", [0, 1])
    for _ in range(3):
        produce(broker, "t", 0, b"x" * 500)
        produce(broker, "t", 1, b"y" * 500)
    one_batch = len(batch(b"x" * 500))
    # partition_max_bytes far below one batch: the first batch still comes whole, and the
    # request limit is then used up, so partition 1 gets nothing.
    response = broker.call(ApiKey.FETCH, 11, fetch_request(
        {("t", 0): 0, ("t", 1): 0}, partition_max_bytes=10, max_bytes=10))
    assert [o for o, _ in records_of(fetched(response, "t", 0))] == [0]
    assert records_of(fetched(response, "t", 1)) == []
    # Per-partition limits of two batches, a request limit of three.
    response = broker.call(ApiKey.FETCH, 11, fetch_request(
        {("t", 0): 0, ("t", 1): 0}, partition_max_bytes=2 * one_batch,
        max_bytes=3 * one_batch))
    assert [o for o, _ in records_of(fetched(response, "t", 0))] == [0, 1]
    assert [o for o, _ in records_of(fetched(response, "t", 1))] == [0]


def test_long_poll_woken_by_an_append(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, max_wait_ms=5000))
    assert pending(waiting)
    broker.advance_ms(100)
    assert pending(waiting)
    produce(broker, "t", 0, b"wake")
    assert records_of(fetched(settled(waiting), "t", 0)) == [(0, b"wake")]


def test_long_poll_expires_empty(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, max_wait_ms=500))
    broker.advance_ms(499)
    assert pending(waiting)
    broker.advance_ms(2)
    data = fetched(settled(waiting), "t", 0)
    assert (data.error_code, records_of(data)) == (NONE, [])
    assert broker.replica_manager.delayed_fetch.delayed == 0


def test_long_poll_min_bytes(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    size = len(batch(b"z" * 100))
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, max_wait_ms=5000,
                                                          min_bytes=2 * size + 1))
    produce(broker, "t", 0, b"z" * 100)
    produce(broker, "t", 0, b"z" * 100)
    assert pending(waiting)
    produce(broker, "t", 0, b"z" * 100)
    assert [o for o, _ in records_of(fetched(settled(waiting), "t", 0))] == [0, 1, 2]


def test_consumer_long_poll_woken_by_the_high_watermark(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, max_wait_ms=5000))
    produce(broker, "t", 0, b"a")
    assert pending(waiting)  # not committed yet
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1}, replica_id=2))
    assert records_of(fetched(settled(waiting), "t", 0)) == [(0, b"a")]


def test_follower_long_poll_and_leader_change(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, replica_id=2,
                                                          max_wait_ms=5000))
    assert pending(waiting)
    broker.host("t", [0], leader=2, replicas=(1, 2), leader_epoch=1)
    assert fetched(settled(waiting), "t", 0).error_code == NOT_LEADER_OR_FOLLOWER


def test_fetch_sessions(broker: DataPathBroker) -> None:
    broker.host("t", [0, 1, 2])
    produce(broker, "t", 0, b"a")
    produce(broker, "t", 1, b"b")
    unknown = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, session_id=77,
                                                          session_epoch=3))
    assert (unknown.error_code, unknown.responses) == (FETCH_SESSION_ID_NOT_FOUND, [])
    sessionless = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}))
    assert (sessionless.error_code, sessionless.session_id) == (NONE, 0)
    assert len(broker.replica_manager.fetch_sessions) == 0
    # A full fetch at epoch 0 creates a session and answers every partition.
    full = broker.call(ApiKey.FETCH, 11, fetch_request(
        {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}, session_epoch=0))
    session_id = full.session_id
    assert full.error_code == NONE and session_id != 0
    assert [records_of(fetched(full, "t", p)) for p in range(3)] == [[(0, b"a")], [(0, b"b")], []]
    # Incremental, epoch 1: partitions 0 and 1 moved on; nothing is new anywhere.
    quiet = broker.call(ApiKey.FETCH, 11, fetch_request(
        {("t", 0): 1, ("t", 1): 1}, session_id=session_id, session_epoch=1))
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (NONE, session_id, [])
    # Epoch 2: new data on partition 2 (still at offset 0 in the session) is all it gets.
    produce(broker, "t", 2, b"c")
    news = broker.call(ApiKey.FETCH, 11, fetch_request({}, session_id=session_id,
                                                       session_epoch=2))
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in news.responses] == [
        ("t", [2])]
    assert records_of(fetched(news, "t", 2)) == [(0, b"c")]
    # A stale epoch is refused; partition 1 forgotten, then the session closed (epoch -1).
    stale = broker.call(ApiKey.FETCH, 11, fetch_request({}, session_id=session_id,
                                                        session_epoch=2))
    assert stale.error_code == INVALID_FETCH_SESSION_EPOCH
    session = broker.replica_manager.fetch_sessions.get(session_id)
    assert session is not None and set(session.partitions) == {
        TopicPartition("t", p) for p in range(3)}
    body = fetch_request({}, session_id=session_id, session_epoch=3)
    body.forgotten_topics_data = [FETCH.structs["ForgottenTopic"](topic="t", partitions=[1])]
    broker.call(ApiKey.FETCH, 11, body)
    assert set(session.partitions) == {TopicPartition("t", 0), TopicPartition("t", 2)}
    closing = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1}, session_id=session_id,
                                                          session_epoch=-1))
    assert (closing.error_code, closing.session_id) == (NONE, 0)
    assert len(broker.replica_manager.fetch_sessions) == 0


def test_fetch_session_cache_is_bounded(tmp_path: Path) -> None:
    from kafkaclone.server.fetch_session import CachedPartition, FetchSessionCache

    clock = Clock()
    cache = FetchSessionCache(2, clock, min_eviction_ms=1000)
    parts: dict[TopicPartition, CachedPartition] = {}
    first = cache.maybe_create(False, dict(parts))
    second = cache.maybe_create(False, dict(parts))
    assert 0 not in (first, second) and first != second
    assert cache.maybe_create(False, dict(parts)) == 0  # full, nothing idle long enough
    follower = cache.maybe_create(True, dict(parts))  # a follower evicts a client session
    assert follower != 0 and len(cache) == 2 and first not in cache.sessions
    clock.advance(2)
    cache.get(follower)
    third = cache.maybe_create(False, dict(parts))  # the idle client session goes
    assert third != 0 and set(cache.sessions) == {follower, third}


def test_leader_epoch_fencing(broker: DataPathBroker) -> None:
    broker.host("t", [0], leader_epoch=5)
    produce(broker, "t", 0, b"a")
    for epoch, code in ((4, FENCED_LEADER_EPOCH), (6, UNKNOWN_LEADER_EPOCH), (5, NONE),
                        (-1, NONE)):
        data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request(
            {("t", 0): 0}, current_leader_epoch=epoch)), "t", 0)
        assert data.error_code == code, epoch


def test_diverging_epoch_for_a_follower(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2), leader_epoch=0)
    produce(broker, "t", 0, b"a", b"b")
    broker.host("t", [0], replicas=(1, 2), leader_epoch=3)
    produce(broker, "t", 0, b"c")
    # The follower claims epoch 2 up to offset 3; the leader has epoch 0 ending at 2.
    data = fetched(broker.call(ApiKey.FETCH, 12, fetch_request(
        {("t", 0): 3}, replica_id=2, last_fetched_epoch=2)), "t", 0)
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 2)
    assert records_of(data) == []
    same = fetched(broker.call(ApiKey.FETCH, 12, fetch_request(
        {("t", 0): 2}, replica_id=2, last_fetched_epoch=0)), "t", 0)
    assert same.diverging_epoch.epoch == -1 and [o for o, _ in records_of(same)] == [2]


def test_isr_expands_when_a_follower_catches_up_and_shrinks_when_it_lags(
        broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2, 3), isr=(1, 2))
    partition = broker.replica_manager.get_partition(TopicPartition("t", 0))
    assert partition is not None
    produce(broker, "t", 0, b"a", b"b")
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2))
    assert broker.log("t").high_watermark == 2 and partition.isr == (1, 2)
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1}, replica_id=3))
    assert partition.isr == (1, 2)  # below the high watermark: not in sync yet
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=3))
    assert partition.isr == (1, 2, 3)
    # Replica 2 keeps fetching at the end; 3 stops. New data; after the lag time 3 leaves.
    produce(broker, "t", 0, b"c")
    broker.advance_ms(6_000)
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 3}, replica_id=2))
    broker.replica_manager.maybe_shrink_isr()
    assert partition.isr == (1, 2, 3)
    broker.advance_ms(6_000)
    broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 3}, replica_id=2))
    broker.replica_manager.maybe_shrink_isr()
    assert partition.isr == (1, 2)
    assert broker.log("t").high_watermark == 3


def test_isr_expiry_runs_on_the_clock(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    partition = broker.replica_manager.get_partition(TopicPartition("t", 0))
    assert partition is not None
    produce(broker, "t", 0, b"a")
    broker.advance_ms(10_000)
    assert partition.isr == (1, 2)
    broker.advance_ms(5_001)  # the task runs every replica.lag.time.max.ms / 2
    assert partition.isr == (1,)


def test_fetch_from_a_non_replica_returns_no_records(broker: DataPathBroker) -> None:
    broker.host("t", [0], replicas=(1, 2))
    produce(broker, "t", 0, b"a")
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, replica_id=9)),
                   "t", 0)
    assert (data.error_code, records_of(data)) == (NONE, [])
    assert broker.log("t").high_watermark == 0


# -- follower fetching (KIP-392) ------------------------------------------------------------------


def _three_racks(broker: DataPathBroker) -> None:
    """Broker 1 (this one, rack a) leads t-0, replicated to 2 (rack b) and 3 (rack c), with
    RackAwareReplicaSelector configured; both followers have fetched offsets 0-2."""
    broker.metadata_cache.racks = {1: "a", 2: "b", 3: "c"}
    broker.replica_manager.replica_selector = RackAwareReplicaSelector()
    broker.host("t", [0], replicas=(1, 2, 3))
    produce(broker, "t", 0, b"a", b"b", b"c")
    for follower in (2, 3):
        broker.call(ApiKey.FETCH, 12, fetch_request({("t", 0): 3}, replica_id=follower,
                                                    log_start_offset=0))


def test_leader_sends_a_consumer_to_the_follower_in_its_rack(broker: DataPathBroker) -> None:
    _three_racks(broker)
    for rack, preferred in (("b", 2), ("c", 3)):
        data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1},
                                                                   rack_id=rack)), "t", 0)
        assert (data.error_code, data.preferred_read_replica, records_of(data)) == (
            NONE, preferred, [])
        assert (data.high_watermark, data.log_start_offset) == (3, 0)
    # The leader's own rack, an unknown rack, no rack, a version before 11: the leader reads.
    for version, rack in ((11, "a"), (11, "elsewhere"), (11, ""), (10, "b")):
        data = fetched(broker.call(ApiKey.FETCH, version, fetch_request({("t", 0): 1},
                                                                        rack_id=rack)), "t", 0)
        assert records_of(data) == [(0, b"a"), (1, b"b"), (2, b"c")]  # the whole batch
        if version >= 11:
            assert data.preferred_read_replica == -1


def test_only_followers_that_have_the_offset_are_preferred(broker: DataPathBroker) -> None:
    _three_racks(broker)
    produce(broker, "t", 0, b"d")
    broker.call(ApiKey.FETCH, 12, fetch_request({("t", 0): 4}, replica_id=2,
                                                log_start_offset=0))
    # Follower 3 is at 3: a consumer of rack c at offset 4 stays on the leader (Kafka 2.8
    # filters on the follower's log end offset, whether in the ISR or not).
    behind = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 4}, rack_id="c")),
                     "t", 0)
    assert (behind.error_code, behind.preferred_read_replica) == (NONE, -1)
    ahead = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 4}, rack_id="b")),
                    "t", 0)
    assert ahead.preferred_read_replica == 2
    # A dead follower (not in the metadata cache's live brokers) is never preferred.
    broker.metadata_cache.dead_brokers.add(2)
    gone = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 4}, rack_id="b")),
                   "t", 0)
    assert gone.preferred_read_replica == -1


def test_without_a_selector_the_leader_serves(broker: DataPathBroker) -> None:
    _three_racks(broker)
    broker.replica_manager.replica_selector = None
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, rack_id="b")),
                   "t", 0)
    assert (data.preferred_read_replica, len(records_of(data))) == (-1, 3)


def test_preferred_replica_answer_waits_like_an_empty_read(broker: DataPathBroker) -> None:
    # Kafka 2.8: the redirect reads no bytes, so with min_bytes a consumer's long poll waits
    # max_wait_ms, then answers the preferred replica.
    _three_racks(broker)
    waiting = broker.send(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, rack_id="b",
                                                          max_wait_ms=500))
    assert pending(waiting)
    broker.advance_ms(500)
    assert fetched(settled(waiting), "t", 0).preferred_read_replica == 2


def test_a_follower_serves_consumers_up_to_its_high_watermark(broker: DataPathBroker) -> None:
    broker.host("f", [0], leader=2, replicas=(2, 1), leader_epoch=1)
    partition = broker.replica_manager.get_partition(TopicPartition("f", 0))
    assert partition is not None
    for base, values in ((0, (b"a", b"b")), (2, (b"c",))):
        partition.append_records_to_follower(build_record_batch(
            [(None, v, None, START_MS + i) for i, v in enumerate(values)], base_offset=base))
    partition.update_follower_high_watermark(2)
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("f", 0): 0})), "f", 0)
    assert (data.error_code, data.high_watermark) == (NONE, 2)
    assert records_of(data) == [(0, b"a"), (1, b"b")]  # the batch up to the high watermark
    # Between its high watermark and its log end offset: nothing yet, no error.
    between = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("f", 0): 3})), "f", 0)
    assert (between.error_code, records_of(between)) == (NONE, [])
    # Beyond its log end offset: OFFSET_OUT_OF_RANGE (the consumer goes back to the leader).
    beyond = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("f", 0): 4})), "f", 0)
    assert beyond.error_code == OFFSET_OUT_OF_RANGE
    # A fetch naming an older leader epoch is fenced on the follower too.
    fenced = fetched(broker.call(ApiKey.FETCH, 11, fetch_request(
        {("f", 0): 0}, current_leader_epoch=0)), "f", 0)
    assert fenced.error_code == FENCED_LEADER_EPOCH
    # A consumer before v11 and a debugging consumer before v11 only read the leader.
    for replica_id in (-1, -2):
        old = fetched(broker.call(ApiKey.FETCH, 10, fetch_request(
            {("f", 0): 0}, replica_id=replica_id)), "f", 0)
        assert old.error_code == NOT_LEADER_OR_FOLLOWER


def test_an_incremental_fetch_session_always_carries_the_preferred_replica(
        broker: DataPathBroker) -> None:
    # Kafka's CachedPartition.maybeUpdateResponseData: a preferred read replica must respond.
    _three_racks(broker)
    full = broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, rack_id="b",
                                                       session_id=0, session_epoch=0))
    assert fetched(full, "t", 0).preferred_read_replica == 2 and full.session_id != 0
    incremental = broker.call(ApiKey.FETCH, 11, fetch_request(
        {}, rack_id="b", session_id=full.session_id, session_epoch=1))
    assert fetched(incremental, "t", 0).preferred_read_replica == 2


def test_preferred_replica_answer_carries_the_last_stable_offset(
        broker: DataPathBroker) -> None:
    _three_racks(broker)
    # An open transaction at offset 3, replicated: the LSO stays at 3, the HW moves to 4.
    broker.log("t").append(build_record_batch([(None, b"open")], producer_id=5,
                                              producer_epoch=0, base_sequence=0,
                                              is_transactional=True), leader_epoch=0)
    for follower in (2, 3):
        broker.call(ApiKey.FETCH, 12, fetch_request({("t", 0): 4}, replica_id=follower,
                                                    log_start_offset=0))
    data = fetched(broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 1}, rack_id="b",
                                                               isolation_level=1)), "t", 0)
    assert (data.preferred_read_replica, data.high_watermark, data.last_stable_offset) == (
        2, 4, 3)


def test_an_idle_partition_reads_as_the_general_read_would(broker: DataPathBroker) -> None:
    """A fetch offset at the log end is answered from the log's offsets without a read
    (ReplicaManager._read_if_idle); every field is what the general read answers, and the
    cases it does not cover (a diverging epoch, fencing, a consumer between the high
    watermark and the log end, a follower of a partition led elsewhere) still go through
    the read."""
    from kafkaclone.cluster.partition import FetchIsolation
    from kafkaclone.server.delayed.fetch import FetchParams, PartitionFetchInfo

    broker.host("t", [0, 1], replicas=(1, 2), leader_epoch=0)
    produce(broker, "t", 0, b"a", b"b")
    broker.host("t", [0, 1], replicas=(1, 2), leader_epoch=3)
    produce(broker, "t", 0, b"c")  # offsets 0-1 at epoch 0, 2 at epoch 3; HW 0, LEO 3
    broker.host("other", [0], leader=2, replicas=(1, 2))
    manager = broker.replica_manager
    follower = FetchParams(2, 500, 1, 1 << 20, FetchIsolation.LOG_END)
    consumer = FetchParams(-1, 500, 1, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    committed = FetchParams(-1, 500, 1, 1 << 20, FetchIsolation.TXN_COMMITTED)
    t0, t1, other = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("other", 0)
    cases = [
        (follower, t0, PartitionFetchInfo(3, 0, 1 << 20, 3, 3)),    # idle
        (follower, t0, PartitionFetchInfo(3, 0, 1 << 20, -1, -1)),  # idle, no epochs
        (follower, t1, PartitionFetchInfo(0, 0, 1 << 20, 3, 3)),    # idle, empty log
        (follower, t0, PartitionFetchInfo(3, 0, 1 << 20, 3, 2)),    # diverging
        (follower, t0, PartitionFetchInfo(3, 0, 1 << 20, 2, 3)),    # fenced
        (follower, t0, PartitionFetchInfo(3, 0, 1 << 20, 4, 3)),    # unknown epoch
        (follower, t0, PartitionFetchInfo(2, 0, 1 << 20, 3, 3)),    # data
        (follower, t0, PartitionFetchInfo(4, 0, 1 << 20, 3, 3)),    # out of range
        (follower, other, PartitionFetchInfo(0, 0, 1 << 20, 0, 0)),  # led elsewhere
        (consumer, t0, PartitionFetchInfo(3, -1, 1 << 20)),         # beyond the HW
        (consumer, t1, PartitionFetchInfo(0, -1, 1 << 20)),         # idle
        (committed, t1, PartitionFetchInfo(0, -1, 1 << 20)),        # idle
    ]
    fetch_time = broker.now_ms()
    for params, tp, info in cases:
        ((_, quick),) = manager.read_from_local_log(params, [(tp, info)])
        general = manager._read_partition(params, tp, info, info.max_bytes, True, fetch_time,
                                          None)
        assert quick._replace(records=None) == general._replace(records=None), (tp, info)
        assert bytes(quick.records or b"") == bytes(general.records or b""), (tp, info)
    # The idle cases did not read (their records are the shared empty view).
    idle = [manager._read_if_idle(manager.all_partitions[tp], info, params, fetch_time)
            for params, tp, info in cases if tp in manager.all_partitions]
    assert sum(result is not None for result in idle) == 5


def test_idle_incremental_fetches_keep_a_follower_caught_up(broker: DataPathBroker) -> None:
    """A follower's incremental fetches that name nothing (it is at the log end) still
    record it as caught up on every fetch (Kafka's updateFollowerFetchState for every
    partition of the session), so new data does not drop it from the ISR; one that stops
    fetching is dropped after replica.lag.time.max.ms. The ISR expands through a session."""
    broker.host("t", [0], replicas=(1, 2, 3), isr=(1, 2))
    partition = broker.replica_manager.get_partition(TopicPartition("t", 0))
    assert partition is not None
    produce(broker, "t", 0, b"a")
    sessions = {}
    for replica in (2, 3):
        full = broker.call(ApiKey.FETCH, 12, fetch_request(
            {("t", 0): 1}, replica_id=replica, session_epoch=0, current_leader_epoch=0,
            last_fetched_epoch=0, log_start_offset=0))
        assert full.error_code == NONE and full.session_id != 0
        sessions[replica] = full.session_id
    assert partition.isr == (1, 2, 3)  # expanded by replica 3's session-opening fetch
    # Replica 2 fetches (idle, naming nothing) every 4 s for 20 s; replica 3 does not.
    epoch = 1
    for _ in range(5):
        broker.advance_ms(4_000)
        answer = broker.send(ApiKey.FETCH, 12, fetch_request(
            {}, replica_id=2, max_wait_ms=500, session_id=sessions[2], session_epoch=epoch))
        assert pending(answer)  # nothing new: it waits
        broker.advance_ms(500)
        # The first answer carries the high watermark both full fetches moved; then none.
        responses = settled(answer).responses
        assert [(p.high_watermark, records_of(p)) for t in responses for p in t.partitions] \
            == ([(1, [])] if epoch == 1 else [])
        epoch += 1
    produce(broker, "t", 0, b"b")
    broker.replica_manager.maybe_shrink_isr()
    assert partition.isr == (1, 2)  # 3 last caught up 22 s ago (lag max 10 s), 2 0.5 s ago
    # Replica 2's next incremental fetch gets the new record and the session goes on.
    answer = settled(broker.send(ApiKey.FETCH, 12, fetch_request(
        {}, replica_id=2, max_wait_ms=500, session_id=sessions[2], session_epoch=epoch)))
    assert records_of(fetched(answer, "t", 0)) == [(1, b"b")]
    # Replica 3 comes back in its session (at offset 1, the high watermark: replica 2 has
    # not fetched past it yet): it catches up, so it is back in the ISR, and gets the record.
    answer = settled(broker.send(ApiKey.FETCH, 12, fetch_request(
        {}, replica_id=3, max_wait_ms=500, session_id=sessions[3], session_epoch=1)))
    assert records_of(fetched(answer, "t", 0)) == [(1, b"b")]
    assert broker.log("t").high_watermark == 1 and partition.isr == (1, 2, 3)
