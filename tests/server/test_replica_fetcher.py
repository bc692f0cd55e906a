"""Replica fetchers without processes: three brokers' ReplicaManagers (real logs in temporary
directories) on one ``task.Clock``, their fetchers talking to each other through the real
request dispatcher (frames encoded and decoded) instead of sockets.

Covered: replication and acks=-1, follower high watermarks, truncation when a follower's
log diverged (on fetch, KIP-595, and through OffsetForLeaderEpoch with an older
inter.broker.protocol.version), OFFSET_OUT_OF_RANGE below the leader's log start, fenced
leader epochs, a source broker that is down, fetcher assignment and leader changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState
from kafkaclone.common.errors import NetworkExceptionError
from kafkaclone.common.log_summary import EXAMPLES
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.network.socket_server import response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.replica_fetcher import (
    BrokerEndPoint,
    ReplicaFetcherConfig,
    ReplicaFetchState,
    fetcher_id_for,
    java_string_hash,
)
from kafkaclone.server.replica_manager import ReplicaManager, ReplicaManagerConfig
from tests.server.data_path_helpers import (
    CONNECTION,
    DELETE_RECORDS,
    START_MS,
    DataPathBroker,
    TopicConfigs,
    batch,
    pending,
    produce_errors,
    produce_request,
    settled,
)

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("t", 0)
NEW_IBP = "2.8-IV1"
OLD_IBP = "2.6-IV0"
"""Before 2.7-IV1 followers truncate through OffsetForLeaderEpoch, not on fetch."""
LATENCY = 0.001


class MetadataCache:
    """Every broker alive at 127.0.0.1:9000+id, unless the test kills it."""

    def __init__(self, broker_ids: list[int]) -> None:
        self.broker_ids = broker_ids
        self.dead: set[int] = set()
        self.ports = {b: 9000 + b for b in broker_ids}
        self.partitions: set[TopicPartition] = set()

    def partition_state(self, topic: str, partition: int) -> Any:
        return object() if TopicPartition(topic, partition) in self.partitions else None

    def is_alive(self, broker_id: int) -> bool:
        return broker_id not in self.dead

    def alive_endpoints(self, listener: str) -> list[tuple[Any, Any]]:
        return [(SimpleNamespace(id=b), SimpleNamespace(host="127.0.0.1", port=self.ports[b]))
                for b in self.broker_ids if b not in self.dead]


class Connection:
    """A fetcher's connection to a broker: the request goes through that broker's
    dispatcher; close() fails what is in flight, as a socket does."""

    def __init__(self, network: Network, target: int, client_id: str) -> None:
        self.network = network
        self.target = target
        self.client_id = client_id
        self.closed = False
        self.in_flight: list[Deferred[Any]] = []
        self.sent: list[int] = []
        self.bodies: list[tuple[int, Any]] = []

    def send(self, api_key: int, api_version: int, body: Any) -> Deferred[Any]:
        if self.closed or self.target in self.network.down:
            return fail(NetworkExceptionError(f"broker {self.target} unreachable"))
        self.sent.append(api_key)
        self.bodies.append((api_key, body))
        frame = api.encode_request(api_key, api_version, 7, self.client_id, body)
        broker = self.network.brokers[self.target]
        answered = broker.dispatcher.dispatch(CONNECTION, bytearray(frame))
        result: Deferred[Any] = Deferred()
        self.in_flight.append(result)

        def done(outcome: Any) -> None:
            # Answers take a network hop: the follower sees them a moment later (their
            # bytes as they were when sent).
            if not isinstance(outcome, Failure) and outcome is not None:
                outcome = response_bytes(outcome)
            self.network.clock.callLater(LATENCY, deliver, outcome)

        def deliver(outcome: Any) -> None:
            if result in self.in_flight:
                self.in_flight.remove(result)
            if result.called:
                return
            if isinstance(outcome, Failure):
                result.errback(outcome)
            elif self.target in self.network.down:
                result.errback(NetworkExceptionError("connection lost"))
            else:
                result.callback(api.decode_response(api_key, api_version, outcome)[1])

        answered.addBoth(done)
        return result

    def close(self) -> None:
        self.closed = True
        for d in list(self.in_flight):
            if not d.called:
                d.errback(NetworkExceptionError("closed"))
        self.in_flight.clear()


class Network:
    def __init__(self, tmp_path: Path, ibp: str = NEW_IBP, broker_ids: tuple[int, ...] = (1, 2, 3),
                 **fetcher_overrides: Any) -> None:
        self.clock = Clock()
        self.clock.advance(START_MS / 1000.0)
        self.cache = MetadataCache(list(broker_ids))
        self.down: set[int] = set()
        self.connections: list[Connection] = []
        self.brokers: dict[int, DataPathBroker] = {}
        for broker_id in broker_ids:
            props = {"log.dirs": str(tmp_path / f"broker-{broker_id}"),
                     "broker.id": str(broker_id)}
            log_manager = LogManager(LogManagerConfig.from_props(props), clock=self.clock)
            log_manager.startup()
            configs = TopicConfigs()
            fetcher_config = ReplicaFetcherConfig(
                broker_id=broker_id, inter_broker_protocol_version=ibp, **fetcher_overrides)
            manager = ReplicaManager(
                broker_id, log_manager, configs, clock=self.clock,
                config=ReplicaManagerConfig(replica_lag_time_max_ms=10_000),
                metadata_cache=self.cache, fetcher_config=fetcher_config,
                fetcher_connection_factory=self.connect)
            manager.startup()
            self.brokers[broker_id] = DataPathBroker(manager, self.cache, self.clock,  # type: ignore[arg-type]
                                                     log_manager, configs, broker_id=broker_id)

    def connect(self, source: BrokerEndPoint, client_id: str) -> Connection:
        assert source.port == self.cache.ports[source.id]
        connection = Connection(self, source.id, client_id)
        self.connections.append(connection)
        return connection

    def pump(self, seconds: float, step: float = 0.01) -> None:
        for _ in range(int(seconds / step)):
            self.clock.advance(step)

    def leader_and_isr(self, broker_ids: tuple[int, ...], *, leader: int, leader_epoch: int,
                       replicas: tuple[int, ...] = (1, 2, 3),
                       isr: tuple[int, ...] | None = None, tp: TopicPartition = TP) -> None:
        state = LeaderAndIsrPartitionState(
            tp.topic, tp.partition, controller_epoch=1, leader=leader,
            leader_epoch=leader_epoch, isr=isr or replicas, zk_version=0,
            replicas=replicas, is_new=True)
        self.cache.partitions.add(tp)
        for broker_id in broker_ids:
            result = settled(Deferred.fromCoroutine(
                self.brokers[broker_id].replica_manager.become_leader_or_follower(
                    9, 1, [state])))
            assert result.error_code == 0 and set(result.partition_errors.values()) == {0}

    def produce(self, broker_id: int, *values: bytes, acks: int = 1,
                tp: TopicPartition = TP) -> Deferred[Any]:
        return self.brokers[broker_id].send(ApiKey.PRODUCE, 8, produce_request(
            {(tp.topic, tp.partition): batch(*values)}, acks=acks))

    def log(self, broker_id: int, tp: TopicPartition = TP) -> Any:
        return self.brokers[broker_id].log(tp.topic, tp.partition)

    def log_bytes(self, broker_id: int, tp: TopicPartition = TP) -> bytes:
        directory = Path(self.log(broker_id, tp).dir)
        return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))

    def fetchers(self, broker_id: int) -> Any:
        manager = self.brokers[broker_id].replica_manager.replica_fetcher_manager
        assert manager is not None
        return manager

    def close(self) -> None:
        for broker in self.brokers.values():
            stopped = broker.replica_manager.shutdown()
            self.pump(0.05)
            assert stopped.called
            broker.log_manager.shutdown()


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    net = Network(tmp_path)
    yield net
    net.close()


def test_followers_replicate_and_complete_acks_all(network: Network) -> None:
    network.leader_and_isr((1, 2, 3), leader=1, leader_epoch=0)
    produced = network.produce(1, b"a", b"b", b"c", acks=-1)
    assert pending(produced)
    network.pump(0.2)
    assert produce_errors(settled(produced)) == {("t", 0): 0}
    network.pump(1.0)  # the next fetches carry the leader's high watermark
    for broker_id in (1, 2, 3):
        log = network.log(broker_id)
        assert (log.log_end_offset, log.high_watermark) == (3, 3), broker_id
    assert network.log_bytes(2) == network.log_bytes(1) == network.log_bytes(3)
    for _ in range(5):
        produced = network.produce(1, b"x" * 100, b"y", acks=-1)
        network.pump(0.1)
        assert produce_errors(settled(produced)) == {("t", 0): 0}
    assert network.log(1).log_end_offset == 13
    assert network.log_bytes(2) == network.log_bytes(1) == network.log_bytes(3)
    leader = network.brokers[1].replica_manager.get_partition(TP)
    assert leader is not None and leader.isr == (1, 2, 3)
    # One fetcher per source broker on each follower, fetching with its broker id.
    assert list(network.fetchers(2).fetchers) == [(1, 0)]
    fetcher = network.fetchers(2).fetchers[(1, 0)]
    assert fetcher.name == "ReplicaFetcherThread-0-1"
    assert network.fetchers(1).fetchers == {}


def _diverge(network: Network) -> None:
    """Brokers 1 and 2 share offsets 0-2 (epoch 0); then 2 leads epoch 1 alone and writes
    offsets 3-4 that never replicate; then 1 leads epoch 2 and writes other records at 3-5."""
    network.leader_and_isr((1, 2), leader=1, leader_epoch=0, replicas=(1, 2))
    settled(network.produce(1, b"a", acks=1))
    settled(network.produce(1, b"b", b"c", acks=1))
    network.pump(1.0)
    assert network.log(2).log_end_offset == 3
    network.leader_and_isr((2,), leader=2, leader_epoch=1, replicas=(1, 2))
    settled(network.produce(2, b"lost-1", b"lost-2", acks=1))
    assert network.log(2).log_end_offset == 5
    network.leader_and_isr((1,), leader=1, leader_epoch=2, replicas=(1, 2), isr=(1,))
    settled(network.produce(1, b"kept-1", b"kept-2", b"kept-3", acks=1))
    assert network.log(1).log_end_offset == 6


@pytest.mark.parametrize("ibp", [NEW_IBP, OLD_IBP])
def test_a_diverged_follower_truncates_its_suffix(tmp_path: Path, ibp: str) -> None:
    network = Network(tmp_path, ibp, broker_ids=(1, 2))
    try:
        _diverge(network)
        network.leader_and_isr((2,), leader=1, leader_epoch=2, replicas=(1, 2), isr=(1,))
        network.pump(1.0)
        follower, leader = network.log(2), network.log(1)
        assert follower.log_end_offset == leader.log_end_offset == 6
        assert network.log_bytes(2) == network.log_bytes(1)
        assert follower.end_offset_for_epoch(1) == (0, 3)  # epoch 1 is gone
        assert follower.latest_epoch == 2
        sent = network.connections[-1].sent
        if ibp == OLD_IBP:
            assert ApiKey.OFFSET_FOR_LEADER_EPOCH in sent
        else:
            assert ApiKey.OFFSET_FOR_LEADER_EPOCH not in sent  # the fetch said it diverged
        partition = network.brokers[1].replica_manager.get_partition(TP)
        assert partition is not None
        network.pump(0.5)
        assert partition.isr == (1, 2)  # the follower caught up and rejoined
    finally:
        network.close()


@pytest.mark.parametrize("ibp", [NEW_IBP, OLD_IBP])
def test_truncation_asks_again_for_an_epoch_the_follower_does_not_know(
        tmp_path: Path, ibp: str) -> None:
    """Broker 1 has epochs 0 and 2, broker 2 epochs 0 and 1. Broker 1 follows broker 2:
    asked about epoch 2, broker 2 answers epoch 1 (ending at 5), which broker 1 does not
    know: it truncates to the end of its epoch 0 (3) and asks again about epoch 0."""
    network = Network(tmp_path, ibp, broker_ids=(1, 2))
    try:
        _diverge(network)
        network.leader_and_isr((1, 2), leader=2, leader_epoch=3, replicas=(1, 2), isr=(2,))
        network.pump(1.0)
        assert network.log(1).log_end_offset == network.log(2).log_end_offset == 5
        assert network.log_bytes(1) == network.log_bytes(2)
        assert network.log(1).end_offset_for_epoch(1) == (1, 5)  # epoch 2 is gone
        assert network.log(1).latest_epoch == 1
        epoch_requests = network.connections[-1].sent.count(ApiKey.OFFSET_FOR_LEADER_EPOCH)
        assert epoch_requests == (2 if ibp == OLD_IBP else 1)
    finally:
        network.close()


def test_a_follower_below_the_leaders_log_start_restarts_there(network: Network) -> None:
    network.leader_and_isr((1,), leader=1, leader_epoch=0, replicas=(1, 2), isr=(1,))
    for _ in range(5):
        settled(network.produce(1, b"a", b"b", acks=1))
    leader = network.brokers[1].replica_manager
    partition = leader.get_partition(TP)
    assert partition is not None
    partition.delete_records_on_leader(8)
    network.leader_and_isr((2,), leader=1, leader_epoch=0, replicas=(1, 2), isr=(1,))
    network.pump(1.0)
    follower = network.log(2)
    assert (follower.log_start_offset, follower.log_end_offset) == (8, 10)
    state = network.fetchers(2).fetch_state(TP)
    assert state is not None and state.fetch_offset == 10
    assert ApiKey.LIST_OFFSETS in network.connections[-1].sent


def test_a_fenced_follower_waits_for_the_next_leader_and_isr(network: Network) -> None:
    network.leader_and_isr((1,), leader=1, leader_epoch=3, replicas=(1, 2))
    settled(network.produce(1, b"a", acks=1))
    network.leader_and_isr((2,), leader=1, leader_epoch=2, replicas=(1, 2))  # stale view
    network.pump(0.5)
    fetchers = network.fetchers(2)
    assert fetchers.fetch_state(TP) is None and TP in fetchers.failed_partitions
    assert network.log(2).log_end_offset == 0
    network.leader_and_isr((2,), leader=1, leader_epoch=3, replicas=(1, 2))
    network.pump(0.5)
    assert network.log(2).log_end_offset == 1
    assert TP not in fetchers.failed_partitions


def test_many_fenced_partitions_fail_together_in_one_log_line(
        network: Network, caplog: pytest.LogCaptureFixture) -> None:
    """A new controller's ISR changes fence thousands of partitions in one answer: each
    waits for its LeaderAndIsr, and the log has one line for them, not two per partition."""
    tps = [TopicPartition("many", p) for p in range(EXAMPLES + 5)]
    for tp in tps:
        network.leader_and_isr((1,), leader=1, leader_epoch=3, replicas=(1, 2), tp=tp)
    with caplog.at_level(logging.INFO, logger="kafkaclone.server.replica_fetcher"):
        for tp in tps:  # a stale view of each
            network.leader_and_isr((2,), leader=1, leader_epoch=2, replicas=(1, 2), tp=tp)
        network.pump(0.5)
    fetchers = network.fetchers(2)
    assert set(tps) <= set(fetchers.failed_partitions)
    assert all(fetchers.fetch_state(tp) is None for tp in tps)
    lines = [r.getMessage() for r in caplog.records if "older epoch" in r.getMessage()
             or "marked as failed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"[ReplicaFetcherThread-0-1] {len(tps)} partitions have an older "
                               "epoch than the current leader (many-0 (epoch 2), ")


def test_fetching_from_a_broker_that_is_down_backs_off_then_catches_up(
        network: Network) -> None:
    network.leader_and_isr((1,), leader=1, leader_epoch=0, replicas=(1, 2))
    settled(network.produce(1, b"a", b"b", acks=1))
    network.down.add(1)
    network.leader_and_isr((2,), leader=1, leader_epoch=0, replicas=(1, 2))
    fetcher = network.fetchers(2).fetchers[(1, 0)]
    network.pump(0.05)
    state = fetcher.partition_states[TP]
    assert state.is_delayed(network.clock.seconds())
    attempts = fetcher.fetch_requests_sent
    network.pump(0.5)
    assert fetcher.fetch_requests_sent == attempts  # replica.fetch.backoff.ms: 1 s
    network.pump(2.0)
    assert fetcher.fetch_requests_sent > attempts  # retried, still down
    assert network.log(2).log_end_offset == 0
    network.down.discard(1)
    network.pump(2.0)
    assert network.log(2).log_end_offset == 2


def test_leader_changes_move_partitions_between_fetchers(tmp_path: Path) -> None:
    network = Network(tmp_path, num_replica_fetchers=2)
    try:
        tps = [TopicPartition("t", p) for p in range(4)]
        for tp in tps:
            network.leader_and_isr((1, 3), leader=1, leader_epoch=0, tp=tp)
        fetchers = network.fetchers(3)
        expected = {(1, fetcher_id_for(tp, 2)) for tp in tps}
        assert set(fetchers.fetchers) == expected
        for tp in tps:
            fetcher = fetchers.fetcher_for(tp)
            assert fetcher is not None and fetcher.fetcher_id == fetcher_id_for(tp, 2)
        # Partition 0 moves to leader 2 (epoch 1); the others stay.
        network.leader_and_isr((2, 3), leader=2, leader_epoch=1, tp=tps[0])
        moved = fetchers.fetcher_for(tps[0])
        assert moved is not None and moved.source.id == 2
        assert fetchers.fetch_state(tps[0]).current_leader_epoch == 1
        # Broker 3 leads partition 1 now: no fetcher for it; an idle fetcher stops.
        network.leader_and_isr((3,), leader=3, leader_epoch=1, tp=tps[1])
        assert fetchers.fetcher_for(tps[1]) is None
        remaining = {(1, fetcher_id_for(tp, 2)) for tp in tps[2:]} | {(2, fetcher_id_for(
            tps[0], 2))}
        assert set(fetchers.fetchers) == remaining
        # StopReplica removes the rest.
        from kafkaclone.server.replica_manager import StopReplicaState

        settled(Deferred.fromCoroutine(network.brokers[3].replica_manager.stop_replicas(
            9, 1, {tp: StopReplicaState() for tp in (tps[0], *tps[2:])})))
        assert fetchers.fetchers == {}
    finally:
        network.close()


def test_new_followers_start_as_kafka_28_does(tmp_path: Path) -> None:
    network = Network(tmp_path, OLD_IBP)
    try:
        network.down.add(1)  # keep the follower from leaving its initial state
        network.leader_and_isr((2,), leader=1, leader_epoch=0)
        state = network.fetchers(2).fetch_state(TP)
        assert state is not None and state.state is ReplicaFetchState.TRUNCATING
    finally:
        network.close()


def test_fetcher_ids_follow_javas_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("caf\u00e9") == 3045921
    # abs(31 * hash + partition) % n in 32-bit ints: 31 * 99162322 + 3 overflows.
    assert fetcher_id_for(TopicPartition("hello", 3), 7) == 1220935311 % 7
    assert fetcher_id_for(TopicPartition("t", 0), 1) == 0
    assert {fetcher_id_for(TopicPartition("t", p), 3) for p in range(6)} == {0, 1, 2}


def _fetches(connection: Connection) -> list[Any]:
    return [body for key, body in connection.bodies if key == ApiKey.FETCH]


def _named(fetch: Any) -> set[tuple[str, int]]:
    return {(t.topic, p.partition) for t in fetch.topics for p in t.partitions}


def test_followers_fetch_in_an_incremental_session(network: Network) -> None:
    tps = [TopicPartition("t", p) for p in range(3)]
    for tp in tps:
        network.leader_and_isr((1, 2), leader=1, leader_epoch=0, replicas=(1, 2), tp=tp)
    network.pump(1.5)
    connection = network.connections[-1]
    fetches = _fetches(connection)
    first = fetches[0]
    assert (first.session_id, first.session_epoch) == (0, 0)  # full, asks for a session
    assert _named(first) == {("t", 0), ("t", 1), ("t", 2)}
    session = network.brokers[1].replica_manager.fetch_sessions
    assert len(session) == 1
    later = fetches[-1]
    assert later.session_id != 0 and later.session_epoch == len(fetches) - 1
    assert _named(later) == set()  # nothing moved: an empty incremental fetch
    settled(network.produce(1, b"a", b"b", tp=tps[1]))
    network.pump(0.2)
    assert network.log(2, tps[1]).log_end_offset == 2
    # Only the partition whose fetch offset moved is named again.
    named = [_named(f) for f in _fetches(connection)[len(fetches):]]
    assert named[0] == {("t", 1)} and all(n == set() for n in named[1:])
    # A partition that leaves the fetcher is forgotten by the session.
    network.leader_and_isr((2,), leader=2, leader_epoch=1, replicas=(1, 2), tp=tps[2])
    network.pump(1.0)
    forgotten = [(t.topic, p) for f in _fetches(connection)[len(fetches):]
                 for t in f.forgotten_topics_data for p in t.partitions]
    assert forgotten == [("t", 2)]


def test_a_lost_fetch_session_starts_over_with_a_full_fetch(network: Network) -> None:
    network.leader_and_isr((1, 2), leader=1, leader_epoch=0, replicas=(1, 2))
    network.pump(1.5)
    connection = network.connections[-1]
    sessions = network.brokers[1].replica_manager.fetch_sessions
    (lost,) = list(sessions.sessions)
    sessions.remove(lost)  # the leader evicted it (or restarted)
    settled(network.produce(1, b"a", acks=1))
    before = len(_fetches(connection))
    network.pump(1.5)
    after = _fetches(connection)[before:]
    assert any(f.session_epoch == 0 for f in after)  # FETCH_SESSION_ID_NOT_FOUND, then full
    assert network.log(2).log_end_offset == 1
    assert len(sessions) == 1 and lost not in sessions.sessions


@pytest.mark.parametrize(("ibp", "on_fetch", "fetch", "epochs", "list_offsets"), [
    ("2.8-IV1", True, 12, 4, 6),
    ("2.7-IV2", True, 12, 3, 5),
    ("2.7-IV1", True, 12, 3, 5),
    ("2.7-IV0", False, 11, 3, 5),
    ("2.6-IV0", False, 11, 3, 5),
])
def test_request_versions_follow_the_inter_broker_protocol(
        ibp: str, on_fetch: bool, fetch: int, epochs: int, list_offsets: int) -> None:
    config = ReplicaFetcherConfig(1, inter_broker_protocol_version=ibp)
    assert config.truncation_on_fetch is on_fetch
    assert (config.fetch_version, config.offset_for_leader_epoch_version,
            config.list_offsets_version) == (fetch, epochs, list_offsets)


def test_a_leader_missing_from_the_metadata_cache_is_not_followed_yet(
        network: Network) -> None:
    network.leader_and_isr((1,), leader=1, leader_epoch=4, replicas=(1, 2))
    settled(network.produce(1, b"a", acks=1))
    network.cache.dead.add(1)
    network.leader_and_isr((2,), leader=1, leader_epoch=4, replicas=(1, 2))
    follower = network.brokers[2].replica_manager.get_partition(TP)
    assert follower is not None and follower.log is not None  # its log exists (KAFKA-1647)
    assert follower.leader_epoch == -1  # not made a follower: the same request may retry
    assert network.fetchers(2).fetch_state(TP) is None
    network.cache.dead.discard(1)
    network.leader_and_isr((2,), leader=1, leader_epoch=4, replicas=(1, 2))
    network.pump(0.5)
    assert network.log(2).log_end_offset == 1


def test_delete_records_completes_once_followers_moved_their_log_start(
        network: Network) -> None:
    network.leader_and_isr((1, 2, 3), leader=1, leader_epoch=0)
    for i in range(4):
        settled(network.produce(1, b"v%d" % i, acks=1))
    network.pump(1.0)
    s = DELETE_RECORDS.structs
    waiting = network.brokers[1].send(ApiKey.DELETE_RECORDS, 2, DELETE_RECORDS(
        timeout_ms=5000, topics=[s["DeleteRecordsTopic"](name="t", partitions=[
            s["DeleteRecordsPartition"](partition_index=0, offset=3)])]))
    assert pending(waiting)  # the followers still start at 0
    network.pump(2.0)
    answer = settled(waiting).topics[0].partitions[0]
    assert (answer.error_code, answer.low_watermark) == (0, 3)
    for broker_id in (1, 2, 3):
        assert network.log(broker_id).log_start_offset == 3, broker_id


def test_a_leader_with_a_new_endpoint_gets_a_new_fetcher_that_keeps_every_partition(
        network: Network) -> None:
    tps = [TopicPartition("t", p) for p in range(2)]
    for tp in tps:
        network.leader_and_isr((1, 2), leader=1, leader_epoch=0, replicas=(1, 2), tp=tp)
    settled(network.produce(1, b"a", tp=tps[1]))
    network.pump(0.5)
    old = network.fetchers(2).fetchers[(1, 0)]
    old_connection = network.connections[-1]
    network.cache.ports[1] = 9101  # broker 1 registered again elsewhere
    network.leader_and_isr((2,), leader=1, leader_epoch=1, replicas=(1, 2), tp=tps[0])
    new = network.fetchers(2).fetchers[(1, 0)]
    assert new is not old and new.source.port == 9101 and old_connection.closed
    assert set(new.partition_states) == set(tps)
    assert new.partition_states[tps[1]].fetch_offset == 1  # carried where it was
    settled(network.produce(1, b"b", tp=tps[1]))
    network.pump(0.5)
    assert network.log(2, tps[1]).log_end_offset == 2
