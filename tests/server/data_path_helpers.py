"""A broker's data path without processes: a ReplicaManager on a ``task.Clock`` with real
logs in a temporary directory, driven through the real request dispatcher.

Requests are encoded with the protocol codecs and dispatched as frames; a response that
waits in a purgatory fires when the test moves the clock or makes the awaited change.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState
from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.network.socket_server import ConnectionInfo, Response, response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, build_record_batch
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.metadata_cache import LiveBroker
from kafkaclone.server.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkaclone.server.request_handler import RequestHandler

BROKER_ID = 1
START_MS = 1_700_000_000_000
CONNECTION = ConnectionInfo("test-connection", "127.0.0.1", 50000)

PRODUCE = api.APIS[ApiKey.PRODUCE].request
FETCH = api.APIS[ApiKey.FETCH].request
LIST_OFFSETS = api.APIS[ApiKey.LIST_OFFSETS].request
OFFSET_FOR_LEADER_EPOCH = api.APIS[ApiKey.OFFSET_FOR_LEADER_EPOCH].request
DELETE_RECORDS = api.APIS[ApiKey.DELETE_RECORDS].request


class FakeMetadataCache:
    """The partitions the cluster has (what the controller's UpdateMetadata would say)."""

    def __init__(self) -> None:
        self.partitions: set[TopicPartition] = set()
        self.dead_brokers: set[int] = set()
        self.racks: dict[int, str | None] = {}
        """Live brokers with an endpoint on every listener, and their racks."""

    def partition_state(self, topic: str, partition: int) -> Any:
        return object() if TopicPartition(topic, partition) in self.partitions else None

    def is_alive(self, broker_id: int) -> bool:
        return broker_id not in self.dead_brokers

    def partition_replica_endpoints(self, topic: str, partition: int,
                                    listener: str) -> dict[int, LiveBroker]:
        endpoint = EndPoint(listener, SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
        return {b: LiveBroker(b, rack, {listener: endpoint}) for b, rack in self.racks.items()
                if b not in self.dead_brokers}


class TopicConfigs:
    """/config/topics overrides, as the ReplicaManager reads them."""

    def __init__(self) -> None:
        self.overrides: dict[str, dict[str, str]] = {}

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: self.overrides.get(t, {}) for t in topics}


@dataclass
class DataPathBroker:
    """What the data path handlers use of a broker."""

    replica_manager: ReplicaManager
    metadata_cache: FakeMetadataCache
    clock: Clock
    log_manager: LogManager
    topic_configs: TopicConfigs
    broker_id: int = BROKER_ID
    authorizer: Any = None
    config: KafkaConfig = field(default_factory=lambda: KafkaConfig(
        {"zookeeper.connect": "127.0.0.1:2181"}))

    @property
    def reactor(self) -> Clock:
        return self.clock

    @property
    def dispatcher(self) -> RequestHandler:
        return RequestHandler(broker=self)

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def advance_ms(self, ms: float) -> None:
        self.clock.advance(ms / 1000.0)

    # -- partitions --------------------------------------------------------------------

    def host(self, topic: str, partitions: Iterable[int], *, leader: int = BROKER_ID,
             replicas: tuple[int, ...] = (BROKER_ID,), isr: tuple[int, ...] | None = None,
             leader_epoch: int = 0, configs: Mapping[str, str] | None = None) -> None:
        """LeaderAndIsr for ``partitions`` of ``topic`` (and the metadata that says they
        exist)."""
        if configs is not None:
            self.topic_configs.overrides[topic] = dict(configs)
        states = [
            LeaderAndIsrPartitionState(
                topic, p, controller_epoch=1, leader=leader, leader_epoch=leader_epoch,
                isr=isr if isr is not None else replicas, zk_version=0, replicas=replicas,
                is_new=True)
            for p in partitions
        ]
        self.metadata_cache.partitions.update(s.topic_partition for s in states)
        result = settled(Deferred.fromCoroutine(
            self.replica_manager.become_leader_or_follower(2, 1, states)))
        assert result.error_code == 0 and set(result.partition_errors.values()) == {0}, result

    def log(self, topic: str, partition: int = 0) -> Any:
        log = self.log_manager.get_log(TopicPartition(topic, partition))
        assert log is not None
        return log

    # -- requests ----------------------------------------------------------------------

    def send(self, key: ApiKey, version: int, body: Any) -> Deferred[Any]:
        """Dispatch a request; a Deferred of the decoded response (None: no response)."""
        frame = api.encode_request(key, version, 11, "test-client", body)
        d = self.dispatcher.dispatch(CONNECTION, bytearray(frame))

        def decode(data: Response | None) -> Any:
            if data is None:
                return None
            correlation_id, response = api.decode_response(key, version,
                                                           response_bytes(data))
            assert correlation_id == 11
            return response

        return d.addCallback(decode)

    def call(self, key: ApiKey, version: int, body: Any) -> Any:
        """Dispatch a request that must be answered at once."""
        return settled(self.send(key, version, body))


def settled(d: Deferred[Any]) -> Any:
    """The result of a Deferred that has fired (AssertionError if it has not)."""
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    assert outcome, "the request is still waiting"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def pending(d: Deferred[Any]) -> bool:
    return not d.called


def make_broker(tmp_path: Path, **log_props: str) -> DataPathBroker:
    clock = Clock()
    clock.advance(START_MS / 1000.0)
    props = {"log.dirs": str(tmp_path / "logs"), "broker.id": str(BROKER_ID), **log_props}
    log_manager = LogManager(LogManagerConfig.from_props(props), clock=clock)
    log_manager.startup()
    cache = FakeMetadataCache()
    configs = TopicConfigs()
    manager = ReplicaManager(BROKER_ID, log_manager, configs, clock=clock,
                             config=ReplicaManagerConfig(replica_lag_time_max_ms=10_000),
                             metadata_cache=cache)
    manager.startup()
    return DataPathBroker(manager, cache, clock, log_manager, configs)


def close_broker(broker: DataPathBroker) -> None:
    broker.replica_manager.shutdown()
    broker.log_manager.shutdown()


# -- request bodies ------------------------------------------------------------------------


def batch(*values: bytes, codec: Codec = Codec.NONE, timestamp: int | None = None,
          keys: bool = True) -> bytes:
    ts = timestamp if timestamp is not None else int(time.time() * 1000)
    return build_record_batch(
        [((b"k%d" % i) if keys else None, v, None, ts + i) for i, v in enumerate(values)],
        codec=codec)


def produce_request(entries: Mapping[tuple[str, int], bytes | None], *, acks: int = 1,
                    timeout_ms: int = 5000) -> Any:
    s = PRODUCE.structs
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), records in entries.items():
        by_topic.setdefault(topic, []).append(
            s["PartitionProduceData"](index=partition, records=records))
    return PRODUCE(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        s["TopicProduceData"](name=topic, partition_data=parts)
        for topic, parts in by_topic.items()])


def produce_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.index): p.error_code
            for t in response.responses for p in t.partition_responses}


def produce_partition(response: Any, topic: str, partition: int) -> Any:
    for t in response.responses:
        for p in t.partition_responses:
            if t.name == topic and p.index == partition:
                return p
    raise KeyError((topic, partition))


def fetch_request(offsets: Mapping[tuple[str, int], int], *, replica_id: int = -1,
                  max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 50 << 20,
                  partition_max_bytes: int = 1 << 20, isolation_level: int = 0,
                  current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                  log_start_offset: int = -1, session_id: int = 0,
                  session_epoch: int = -1, rack_id: str = "") -> Any:
    s = FETCH.structs
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(s["FetchPartition"](
            partition=partition, current_leader_epoch=current_leader_epoch,
            fetch_offset=offset, last_fetched_epoch=last_fetched_epoch,
            log_start_offset=log_start_offset, partition_max_bytes=partition_max_bytes))
    return FETCH(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                 max_bytes=max_bytes, isolation_level=isolation_level, session_id=session_id,
                 session_epoch=session_epoch,
                 topics=[s["FetchTopic"](topic=t, partitions=ps) for t, ps in by_topic.items()],
                 forgotten_topics_data=[], rack_id=rack_id)


def fetched(response: Any, topic: str, partition: int) -> Any:
    for t in response.responses:
        for p in t.partitions:
            if t.topic == topic and p.partition_index == partition:
                return p
    raise KeyError((topic, partition))


def records_of(data: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched partition's records."""
    from kafkaclone.protocol.records import RecordBatch

    out: list[tuple[int, bytes | None]] = []
    view = memoryview(bytes(data.records or b""))
    position = 0
    while position + 12 <= len(view):
        size = int.from_bytes(view[position + 8:position + 12], "big") + 12
        batch_view = RecordBatch(view[position:position + size])
        out.extend((batch_view.offset_of(r), r.value) for r in batch_view.records())
        position += size
    return out
