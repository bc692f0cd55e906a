"""Re-capture the golden request frames from real Kafka clients.

Run ``.venv/bin/python -m tests.protocol.golden.capture`` from the repository root. A
loopback listener on 127.0.0.1 (:mod:`tests.protocol.loopback`) pretends to be a one-broker
Kafka 2.8 cluster, just enough to draw the next request out of each client: it answers
with kafkaclone's own compiled messages, and it records every request frame it receives
(the bytes after the 4-byte length). Then librdkafka (confluent-kafka), kafka-python and
kcat are driven through produce (each compression codec), a group consumer, simple
consumers and admin calls, and one frame per (API, version, client) is saved here as
``<api>_v<version>_<client>.bin`` (Produce frames also carry their codec:
``produce_v9_librdkafka_gzip.bin``).

The listener only advertises the APIs that kafkaclone declares (``APIS``), with their
version ranges, so a client only ever sends what kafkaclone can decode. The module is also
imported by ``tests/protocol/test_golden_frames.py``, which runs the capture live into a
temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import shutil
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import crc32c

from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol import types as t
from kafkaclone.protocol.api import (
    APIS,
    MESSAGES,
    RequestFrame,
    decode_request,
    peek_request_header,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.messages.consumer_protocol import decode_assignment, encode_assignment
from tests.protocol import loopback
from tests.protocol.loopback import (
    BROKER_ID,
    UNKNOWN_AUTHORIZED_OPERATIONS,
    LoopbackBroker,
    api_label,
    make,
    response,
)

log = logging.getLogger(__name__)

GOLDEN_DIR = Path(__file__).resolve().parent

TOPIC = "golden"
CREATED_TOPIC = "golden-created"
GROUP = "golden-group"
CLUSTER_ID = "goldenCluster000000000"
CLIENT_IDS = {
    "librdkafka": "golden-librdkafka",
    "kafka_python": "golden-kafka-python",
    "kcat": "golden-kcat",
}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: i for i, name in enumerate(CODECS)}
VALUE = b"golden frame " * 16  # compressible, so every codec really compresses it

# What the issue asks of each client: the APIs each one can send, Produce once per codec.
REQUIRED_APIS = (
    ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.CREATE_TOPICS,
)
REQUIRED: dict[str, set[str]] = {
    "librdkafka": {*(f"produce_{c}" for c in CODECS), *(k.name.lower() for k in REQUIRED_APIS)},
    "kafka_python": {*(f"produce_{c}" for c in CODECS),
                     *(k.name.lower() for k in REQUIRED_APIS)},
    # kcat cannot create topics.
    "kcat": {*(f"produce_{c}" for c in CODECS),
             *(k.name.lower() for k in REQUIRED_APIS if k != ApiKey.CREATE_TOPICS)},
}


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kafkaclone-golden:{name}")


# --- record batches ------------------------------------------------------------------------

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2, up to the records count


def record_batch(base_offset: int, values: list[bytes], timestamp_ms: int = 1_600_000_000_000
                 ) -> bytes:
    """An uncompressed RecordBatch v2 holding ``values`` (no keys, no headers)."""
    records = bytearray()
    for delta, value in enumerate(values):
        body = bytearray()
        body.append(0)  # attributes
        t.write_varlong(body, 0)  # timestamp delta
        t.write_varint(body, delta)  # offset delta
        t.write_varint(body, -1)  # null key
        t.write_varint(body, len(value))
        body += value
        t.write_varint(body, 0)  # no headers
        t.write_varint(records, len(body))
        records += body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, timestamp_ms, timestamp_ms,
                            -1, -1, -1, len(values)) + bytes(records)
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, 0, 2, crc) + after_crc


@dataclasses.dataclass(frozen=True)
class BatchInfo:
    magic: int
    codec: int
    record_count: int


def batches(records: bytes | memoryview | None) -> list[BatchInfo]:
    """The batches (or legacy messages) of a RECORDS field, as far as they are well formed."""
    out: list[BatchInfo] = []
    if records is None:
        return out
    data = bytes(records)
    pos = 0
    while pos + 17 <= len(data) and len(out) < 10_000:
        (length,) = struct.unpack_from(">i", data, pos + 8)
        magic = data[pos + 16]
        if length < 0 or pos + 12 + length > len(data):
            break
        if magic >= 2 and pos + _BATCH_HEADER.size <= len(data):
            fields = _BATCH_HEADER.unpack_from(data, pos)
            out.append(BatchInfo(magic, fields[5] & 0x07, fields[12]))
        elif magic < 2 and pos + 18 <= len(data):
            # offset, size, crc, magic, attributes
            out.append(BatchInfo(magic, data[pos + 17] & 0x07, 1))
        pos += 12 + length
    return out


def produce_codec(frame: RequestFrame) -> str | None:
    """The codec name of the first batch of a decoded Produce request."""
    for topic in frame.body.topic_data:
        for partition in topic.partition_data:
            for info in batches(partition.records):
                return CODECS[info.codec] if info.codec < len(CODECS) else f"codec{info.codec}"
    return None


# --- the fake broker -----------------------------------------------------------------------


@dataclasses.dataclass
class Captured:
    """One request frame as received, with the client that sent it."""

    client: str
    scenario: str
    frame: bytes
    at: float = 0.0  # seconds since the broker started


class ClusterState:
    """What the responders know of the pretend cluster: its one broker, topics and offsets."""

    def __init__(self, host: str, port: int, stopping: threading.Event | None = None) -> None:
        self.host = host
        self.port = port
        self.topics: dict[str, int] = {TOPIC: 1}
        self.log_end: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, str, int], int] = {}
        self.lock = threading.Lock()
        self.stopping = stopping or threading.Event()
        self._member_seq = 0

    def topic_partitions(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Partition counts of ``names`` (auto-created), or of every topic."""
        with self.lock:
            if names is None:
                return dict(sorted(self.topics.items()))
            return {name: self.topics.setdefault(name, 1) for name in names}

    def create_topic(self, name: str, partitions: int) -> None:
        with self.lock:
            self.topics.setdefault(name, max(1, partitions))

    def append(self, topic: str, partition: int, count: int) -> int:
        """Advance a partition's log end offset by ``count``; returns the base offset."""
        with self.lock:
            base = self.log_end.get((topic, partition), 0)
            self.log_end[(topic, partition)] = base + count
            return base

    def end_offset(self, topic: str, partition: int) -> int:
        # Every partition holds at least the one canned record Fetch serves at offset 0.
        with self.lock:
            return max(1, self.log_end.get((topic, partition), 0))

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        with self.lock:
            self.committed[(group, topic, partition)] = offset

    def committed_offset(self, group: str, topic: str, partition: int) -> int:
        with self.lock:
            return self.committed.get((group, topic, partition), -1)

    def new_member_id(self, client_id: str | None) -> str:
        with self.lock:
            self._member_seq += 1
            return f"{client_id or 'member'}-{self._member_seq:04d}"

    def wait(self, seconds: float) -> None:
        """Sleep like a long poll, but not past the broker's stop."""
        self.stopping.wait(seconds)


def respond(state: ClusterState, frame: bytes) -> bytes | None:
    """The response frame (without its length) to a request frame; None if there is none.

    Raises Unanswerable for a request a broker would close the connection on.
    """
    return loopback.respond(bound_responders(state), frame)


class GoldenBroker(LoopbackBroker):
    """A one-broker Kafka 2.8 lookalike on 127.0.0.1 that records every request frame.

    ``stop()`` closes every socket and joins every thread; use it as a context manager.
    """

    def __init__(self, client: str = "?", scenario: str = "?") -> None:
        super().__init__("golden")
        self.label = f"golden broker ({client}/{scenario})"
        self.client = client
        self.scenario = scenario
        self.captured: list[Captured] = []
        self.state = ClusterState(self.host, self.port, self.stopping)
        self.responders = bound_responders(self.state)
        self._started = time.monotonic()

    def start(self) -> GoldenBroker:
        self._started = time.monotonic()
        super().start()
        return self

    def handle(self, frame: bytes) -> bytes | None:
        at = time.monotonic() - self._started
        with self._lock:
            self.captured.append(Captured(self.client, self.scenario, frame, at))
        return super().handle(frame)

    def request_log(self) -> str:
        """What was asked, and when: ``METADATA v11 @0.012s, ...``."""
        with self._lock:
            captured = list(self.captured)
        return ", ".join(
            f"{api_label(peek_request_header(c.frame)[0])} "
            f"v{peek_request_header(c.frame)[1]} @{c.at:.3f}s" for c in captured)


# --- responders: (cluster state, decoded request) -> response body -------------------------

Responder = Callable[[ClusterState, RequestFrame], Any]
RESPONDERS: dict[ApiKey, Responder] = {}


def responder(key: ApiKey) -> Callable[[Responder], Responder]:
    def register(fn: Responder) -> Responder:
        RESPONDERS[key] = fn
        return fn
    return register


def bound_responders(state: ClusterState) -> dict[ApiKey, loopback.Responder]:
    return {key: functools.partial(fn, state) for key, fn in RESPONDERS.items()}


@responder(ApiKey.API_VERSIONS)
def _api_versions(state: ClusterState, req: RequestFrame) -> Any:
    return loopback.api_versions_response(req)


@responder(ApiKey.METADATA)
def _metadata(state: ClusterState, req: RequestFrame) -> Any:
    # The topics asked for are auto-created.
    counts = state.topic_partitions(loopback.requested_topics(req))
    return loopback.metadata_response(req, state.host, state.port, counts, CLUSTER_ID,
                                      topic_id)


@responder(ApiKey.PRODUCE)
def _produce(state: ClusterState, req: RequestFrame) -> Any:
    responses = []
    for topic in req.body.topic_data:
        partitions = []
        for partition in topic.partition_data:
            count = sum(info.record_count for info in batches(partition.records))
            base = state.append(topic.name, partition.index, count)
            partitions.append({"index": partition.index, "error_code": 0, "base_offset": base,
                               "log_append_time_ms": -1, "log_start_offset": 0,
                               "record_errors": [], "error_message": None})
        responses.append({"name": topic.name, "partition_responses": partitions})
    if req.body.acks == 0:
        return None
    return response(req, responses=responses, throttle_time_ms=0)


@responder(ApiKey.FETCH)
def _fetch(state: ClusterState, req: RequestFrame) -> Any:
    responses = []
    any_records = False
    for topic in req.body.topics:
        partitions = []
        for partition in topic.partitions:
            end = state.end_offset(topic.topic, partition.partition)
            records = b""
            if partition.fetch_offset == 0:
                records = record_batch(0, [VALUE])
                any_records = True
            partitions.append({
                "partition_index": partition.partition, "error_code": 0,
                "high_watermark": end, "last_stable_offset": end, "log_start_offset": 0,
                "aborted_transactions": [], "preferred_read_replica": -1,
                "records": records,
            })
        responses.append({"topic": topic.topic, "partitions": partitions})
    if not any_records:
        state.wait(min(max(req.body.max_wait_ms, 0), 200) / 1000)
    return response(req, throttle_time_ms=0, error_code=0, session_id=0,
                     responses=responses)


@responder(ApiKey.LIST_OFFSETS)
def _list_offsets(state: ClusterState, req: RequestFrame) -> Any:
    topics = []
    for topic in req.body.topics:
        partitions = []
        for partition in topic.partitions:
            end = state.end_offset(topic.name, partition.partition_index)
            offset = 0 if partition.timestamp == -2 else end
            partitions.append({"partition_index": partition.partition_index, "error_code": 0,
                               "old_style_offsets": [offset], "timestamp": -1,
                               "offset": offset, "leader_epoch": 0})
        topics.append({"name": topic.name, "partitions": partitions})
    return response(req, throttle_time_ms=0, topics=topics)


@responder(ApiKey.FIND_COORDINATOR)
def _find_coordinator(state: ClusterState, req: RequestFrame) -> Any:
    return response(req, throttle_time_ms=0, error_code=0, error_message=None,
                     node_id=BROKER_ID, host=state.host, port=state.port)


@responder(ApiKey.JOIN_GROUP)
def _join_group(state: ClusterState, req: RequestFrame) -> Any:
    body = req.body
    member_id = body.member_id or state.new_member_id(req.header.client_id)
    protocol = body.protocols[0]
    return response(
        req, throttle_time_ms=0, error_code=0, generation_id=1,
        protocol_type=body.protocol_type, protocol_name=protocol.name,
        leader=member_id, member_id=member_id,
        members=[{"member_id": member_id, "group_instance_id": body.group_instance_id,
                  "metadata": protocol.metadata}],
    )


def consumer_assignment(topics: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 of these partitions."""
    assignment = make(MESSAGES["ConsumerProtocolAssignment"], assigned_partitions=[
        {"topic": name, "partitions": partitions} for name, partitions in topics.items()
    ])
    return encode_assignment(assignment, 0)


@responder(ApiKey.SYNC_GROUP)
def _sync_group(state: ClusterState, req: RequestFrame) -> Any:
    body = req.body
    assignment = None
    for item in body.assignments:
        if item.member_id == body.member_id:
            assignment = bytes(item.assignment)
    if assignment is None:
        assignment = consumer_assignment({TOPIC: [0]})
    return response(req, throttle_time_ms=0, error_code=0, protocol_type=body.protocol_type,
                     protocol_name=body.protocol_name, assignment=assignment)


@responder(ApiKey.HEARTBEAT)
def _heartbeat(state: ClusterState, req: RequestFrame) -> Any:
    return response(req, throttle_time_ms=0, error_code=0)


@responder(ApiKey.LEAVE_GROUP)
def _leave_group(state: ClusterState, req: RequestFrame) -> Any:
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "error_code": 0} for m in req.body.members]
    return response(req, throttle_time_ms=0, error_code=0, members=members)


@responder(ApiKey.OFFSET_COMMIT)
def _offset_commit(state: ClusterState, req: RequestFrame) -> Any:
    topics = []
    for topic in req.body.topics:
        partitions = []
        for partition in topic.partitions:
            state.commit(req.body.group_id, topic.name, partition.partition_index,
                         partition.committed_offset)
            partitions.append({"partition_index": partition.partition_index, "error_code": 0})
        topics.append({"name": topic.name, "partitions": partitions})
    return response(req, throttle_time_ms=0, topics=topics)


@responder(ApiKey.OFFSET_FETCH)
def _offset_fetch(state: ClusterState, req: RequestFrame) -> Any:
    topics = []
    for topic in req.body.topics or []:
        partitions = []
        for index in topic.partition_indexes:
            offset = state.committed_offset(req.body.group_id, topic.name, index)
            partitions.append({"partition_index": index, "committed_offset": offset,
                               "committed_leader_epoch": -1, "metadata": "",
                               "error_code": 0})
        topics.append({"name": topic.name, "partitions": partitions})
    return response(req, throttle_time_ms=0, error_code=0, topics=topics)


@responder(ApiKey.CREATE_TOPICS)
def _create_topics(state: ClusterState, req: RequestFrame) -> Any:
    topics = []
    for topic in req.body.topics:
        partitions = topic.num_partitions if topic.num_partitions > 0 else 1
        replication = topic.replication_factor if topic.replication_factor > 0 else 1
        state.create_topic(topic.name, partitions)
        topics.append({"name": topic.name, "topic_id": topic_id(topic.name), "error_code": 0,
                       "error_message": None, "num_partitions": partitions,
                       "replication_factor": replication, "configs": []})
    return response(req, throttle_time_ms=0, topics=topics)


@responder(ApiKey.DELETE_TOPICS)
def _delete_topics(state: ClusterState, req: RequestFrame) -> Any:
    # Versions 0-5 name the topics; version 6 lists them by name or id.
    names = [*req.body.topic_names, *(topic.name for topic in req.body.topics if topic.name)]
    return response(req, throttle_time_ms=0, responses=[
        {"name": name, "topic_id": topic_id(name), "error_code": 0, "error_message": None}
        for name in names
    ])


@responder(ApiKey.INIT_PRODUCER_ID)
def _init_producer_id(state: ClusterState, req: RequestFrame) -> Any:
    return response(req, throttle_time_ms=0, error_code=0, producer_id=1000, producer_epoch=0)


@responder(ApiKey.LIST_GROUPS)
def _list_groups(state: ClusterState, req: RequestFrame) -> Any:
    return response(req, throttle_time_ms=0, error_code=0, groups=[
        {"group_id": GROUP, "protocol_type": "consumer", "group_state": "Empty"},
    ])


@responder(ApiKey.DESCRIBE_GROUPS)
def _describe_groups(state: ClusterState, req: RequestFrame) -> Any:
    return response(req, throttle_time_ms=0, groups=[
        {"error_code": 0, "group_id": group, "group_state": "Empty",
         "protocol_type": "consumer", "protocol_data": "", "members": [],
         "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
        for group in req.body.groups
    ])


# --- fixtures ------------------------------------------------------------------------------


def is_kip511_probe(frame: bytes) -> bool:
    """An ApiVersions request newer than kafkaclone knows: it is answered, not decoded."""
    key, version, _ = peek_request_header(frame)
    return key == ApiKey.API_VERSIONS and key in APIS and version > APIS[key].max_version


def fixture_name(frame: bytes, client: str) -> str:
    """``<api>_v<version>_<client>[_<codec>].bin`` for a request frame kafkaclone decodes.

    An ApiVersions request of a version newer than kafkaclone's is kept too: it is the
    KIP-511 probe that a broker must answer with UNSUPPORTED_VERSION.
    """
    if is_kip511_probe(frame):
        _key, version, _ = peek_request_header(frame)
        return f"api_versions_v{version}_{client}.bin"
    request = decode_request(frame)
    name = f"{request.api.key.name.lower()}_v{request.api_version}_{client}"
    if request.api.key == ApiKey.PRODUCE:
        name += f"_{produce_codec(request) or 'empty'}"
    return name + ".bin"


def fixture_label(name: str) -> str:
    """What a fixture proves for the REQUIRED table: ``fetch``, ``produce_gzip``..."""
    stem = name.removesuffix(".bin")
    api = stem.rsplit("_v", 1)[0]
    if api == "produce":
        return f"produce_{stem.rsplit('_', 1)[1]}"
    return api


@dataclasses.dataclass
class CaptureResult:
    fixtures: dict[str, bytes] = dataclasses.field(default_factory=dict)
    seen: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)
    retried: list[str] = dataclasses.field(default_factory=list)
    frames: list[Captured] = dataclasses.field(default_factory=list)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def add(self, broker: GoldenBroker) -> None:
        self.problems += [f"{broker.client}/{broker.scenario}: {p}" for p in broker.problems]
        for captured in broker.captured:
            self.frames.append(captured)
            try:
                name = fixture_name(captured.frame, captured.client)
            except KafkaError as exc:
                key, version, _ = peek_request_header(captured.frame)
                self.problems.append(
                    f"{captured.client}/{captured.scenario}: {api_label(key)} v{version} "
                    f"not decodable: {exc!r}")
                continue
            if name not in self.fixtures or (
                    _informative(captured.frame) > _informative(self.fixtures[name])):
                self.fixtures[name] = captured.frame
            self.seen.setdefault(captured.client, set()).add(fixture_label(name))


def _informative(frame: bytes) -> int:
    """Ranks frames of one (API, version, client): the first frame of the best rank is kept.

    A group leader may sync before it has the topic's metadata (an empty assignment, then a
    rebalance), and kafka-python's first Metadata names no topic; the later frames say more.
    """
    if is_kip511_probe(frame):
        return 0
    request = decode_request(frame)
    if request.api.key == ApiKey.METADATA:
        return int(bool(request.body.topics))
    if request.api.key == ApiKey.SYNC_GROUP:
        for item in request.body.assignments:
            with contextlib.suppress(KafkaError):
                _version, assignment = decode_assignment(item.assignment)
                if any(tp.partitions for tp in assignment.assigned_partitions):
                    return 1
    return 0


# --- client scenarios ----------------------------------------------------------------------

Scenario = Callable[[GoldenBroker, float], None]


def _registered(*keys: ApiKey) -> bool:
    return all(key in APIS for key in keys)


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def __bool__(self) -> bool:
        return time.monotonic() < self.end


def _librdkafka_config(broker: GoldenBroker, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "client.id": CLIENT_IDS["librdkafka"],
        "broker.address.family": "v4",
        "socket.timeout.ms": 3000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
        "topic.metadata.refresh.interval.ms": 1000,
        "logger": logging.getLogger("golden.librdkafka"),
    }
    config.update(extra)
    return config


def librdkafka_producer(codec: str) -> Scenario:
    def run(broker: GoldenBroker, seconds: float) -> None:
        from confluent_kafka import Producer

        producer = Producer(_librdkafka_config(
            broker, **{"compression.type": codec, "linger.ms": 0,
                       "message.timeout.ms": int(seconds * 1000)}))
        delivered: list[Any] = []
        producer.produce(TOPIC, value=VALUE, key=b"golden",
                         on_delivery=lambda err, msg: delivered.append(err))
        remaining = producer.flush(seconds)
        if remaining or delivered != [None]:
            raise RuntimeError(f"produce not acknowledged: {delivered!r}")
    return run


def librdkafka_consumer(broker: GoldenBroker, seconds: float) -> None:
    from confluent_kafka import Consumer, TopicPartition

    deadline = _Deadline(seconds)
    consumer = Consumer(_librdkafka_config(
        broker, **{"group.id": GROUP, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False, "session.timeout.ms": 6000,
                   "heartbeat.interval.ms": 100, "fetch.wait.max.ms": 100}))
    try:
        consumer.subscribe([TOPIC])
        message = None
        while deadline and message is None:
            message = consumer.poll(min(0.2, deadline.left()))
            if message is not None and message.error():
                message = None
        if message is None:
            raise RuntimeError("no message consumed")
        consumer.commit(message=message, asynchronous=False)
        consumer.committed([TopicPartition(message.topic(), message.partition())],
                           timeout=max(0.1, deadline.left()))
        settle = _Deadline(min(0.5, deadline.left()))  # long enough for a Heartbeat
        while settle:
            consumer.poll(0.1)
    finally:
        consumer.close()


def librdkafka_admin(broker: GoldenBroker, seconds: float) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    deadline = _Deadline(seconds)
    admin = AdminClient(_librdkafka_config(broker))
    timeout = max(0.5, deadline.left() / 4)
    if _registered(ApiKey.CREATE_TOPICS):
        futures = admin.create_topics([NewTopic(CREATED_TOPIC, 1, 1)],
                                      request_timeout=timeout, operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout=timeout)
    if _registered(ApiKey.LIST_OFFSETS):
        futures = admin.list_offsets({TopicPartition(TOPIC, 0): OffsetSpec.latest()},
                                     request_timeout=timeout)
        for future in futures.values():
            future.result(timeout=timeout)
    if _registered(ApiKey.LIST_GROUPS):
        admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    if _registered(ApiKey.DESCRIBE_GROUPS, ApiKey.FIND_COORDINATOR):
        for future in admin.describe_consumer_groups([GROUP], request_timeout=timeout).values():
            future.result(timeout=timeout)
    if _registered(ApiKey.DELETE_TOPICS):
        futures = admin.delete_topics([CREATED_TOPIC], request_timeout=timeout,
                                      operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout=timeout)


def _kafka_python_config(broker: GoldenBroker, seconds: float) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.bootstrap,
        "client_id": CLIENT_IDS["kafka_python"],
        "request_timeout_ms": int(seconds * 1000),
        "retry_backoff_ms": 50,
        "reconnect_backoff_ms": 50,
        "reconnect_backoff_max_ms": 200,
        "metadata_max_age_ms": 1000,
    }


def kafka_python_producer(codec: str) -> Scenario:
    def run(broker: GoldenBroker, seconds: float) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            **_kafka_python_config(broker, seconds),
            compression_type=None if codec == "none" else codec,
            linger_ms=0, max_block_ms=int(seconds * 1000),
            bootstrap_timeout_ms=int(seconds * 1000),
            enable_idempotence=_registered(ApiKey.INIT_PRODUCER_ID),
        )
        try:
            producer.send(TOPIC, key=b"golden", value=VALUE).get(timeout=seconds)
            producer.flush(timeout=seconds)
        finally:
            producer.close(timeout=2)
    return run


def kafka_python_consumer(broker: GoldenBroker, seconds: float) -> None:
    from kafka import KafkaConsumer

    deadline = _Deadline(seconds)
    consumer = KafkaConsumer(
        TOPIC, **_kafka_python_config(broker, seconds), group_id=GROUP,
        auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=6000, heartbeat_interval_ms=100, fetch_max_wait_ms=100,
        bootstrap_timeout_ms=int(seconds * 1000),
    )
    try:
        records: dict[Any, Any] = {}
        while deadline and not records:
            records = consumer.poll(timeout_ms=200)
        if not records:
            raise RuntimeError("no message consumed")
        consumer.commit()
        settle = _Deadline(min(0.5, deadline.left()))
        while settle:
            consumer.poll(timeout_ms=100)
    finally:
        consumer.close(autocommit=False, timeout_ms=2000)


def kafka_python_admin(broker: GoldenBroker, seconds: float) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic, OffsetSpec

    admin = KafkaAdminClient(**_kafka_python_config(broker, seconds),
                             bootstrap_timeout_ms=int(seconds * 1000))
    try:
        if _registered(ApiKey.CREATE_TOPICS):
            admin.create_topics([NewTopic(CREATED_TOPIC, 1, 1)],
                                timeout_ms=int(seconds * 1000))
        if _registered(ApiKey.LIST_OFFSETS):
            admin.list_partition_offsets({TopicPartition(TOPIC, 0): OffsetSpec.LATEST})
        if _registered(ApiKey.LIST_GROUPS):
            admin.list_groups()
        if _registered(ApiKey.DESCRIBE_GROUPS, ApiKey.FIND_COORDINATOR):
            admin.describe_groups([GROUP])
        if _registered(ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR):
            admin.list_group_offsets({GROUP: None})
        if _registered(ApiKey.DELETE_TOPICS):
            admin.delete_topics([CREATED_TOPIC], timeout_ms=int(seconds * 1000))
    finally:
        admin.close()


def _kcat(broker: GoldenBroker, seconds: float, args: list[str], stdin: bytes = b"") -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise FileNotFoundError("kcat is not installed")
    command = [kcat, "-b", broker.bootstrap, "-X", f"client.id={CLIENT_IDS['kcat']}",
               "-X", "broker.address.family=v4", "-X", "socket.timeout.ms=3000", *args]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        try:
            _out, err = process.communicate(stdin, timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            _out, err = process.communicate()
            raise RuntimeError(f"kcat {' '.join(args)} timed out: {err.decode()[-500:]}"
                               ) from None
    if process.returncode != 0:
        raise RuntimeError(f"kcat {' '.join(args)} exited {process.returncode}: "
                           f"{err.decode()[-500:]}")


def kcat_producer(codec: str) -> Scenario:
    def run(broker: GoldenBroker, seconds: float) -> None:
        _kcat(broker, seconds, ["-P", "-t", TOPIC, "-z", codec], stdin=VALUE + b"\n")
    return run


def kcat_consumer(broker: GoldenBroker, seconds: float) -> None:
    _kcat(broker, seconds, ["-C", "-t", TOPIC, "-o", "beginning", "-c", "1", "-e"])


def kcat_group_consumer(broker: GoldenBroker, seconds: float) -> None:
    _kcat(broker, seconds, ["-G", GROUP, "-X", "auto.offset.reset=earliest",
                            "-X", "heartbeat.interval.ms=100", "-c", "1", TOPIC])


def kcat_metadata(broker: GoldenBroker, seconds: float) -> None:
    _kcat(broker, seconds, ["-L"])


@dataclasses.dataclass(frozen=True)
class ScenarioSpec:
    client: str
    name: str
    run: Scenario
    needs: tuple[ApiKey, ...]


def scenarios() -> list[ScenarioSpec]:
    produce = (ApiKey.METADATA, ApiKey.PRODUCE)
    group = (ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
             ApiKey.OFFSET_FETCH, ApiKey.FETCH, ApiKey.OFFSET_COMMIT)
    out = [ScenarioSpec("librdkafka", f"producer_{c}", librdkafka_producer(c), produce)
           for c in CODECS]
    out += [
        ScenarioSpec("librdkafka", "consumer", librdkafka_consumer, group),
        ScenarioSpec("librdkafka", "admin", librdkafka_admin, (ApiKey.METADATA,)),
    ]
    out += [ScenarioSpec("kafka_python", f"producer_{c}", kafka_python_producer(c), produce)
            for c in CODECS]
    out += [
        ScenarioSpec("kafka_python", "consumer", kafka_python_consumer, group),
        ScenarioSpec("kafka_python", "admin", kafka_python_admin, (ApiKey.METADATA,)),
    ]
    out += [ScenarioSpec("kcat", f"producer_{c}", kcat_producer(c), produce) for c in CODECS]
    out += [
        ScenarioSpec("kcat", "consumer", kcat_consumer,
                     (ApiKey.METADATA, ApiKey.LIST_OFFSETS, ApiKey.FETCH)),
        ScenarioSpec("kcat", "group_consumer", kcat_group_consumer, group),
        ScenarioSpec("kcat", "metadata", kcat_metadata, (ApiKey.METADATA,)),
    ]
    return out


def capture(clients: Iterable[str] = tuple(CLIENT_IDS), seconds: float = 8.0,
            budget: float = 120.0, attempts: int = 2) -> CaptureResult:
    """Drive every client scenario against a fresh GoldenBroker; collect the frames.

    Each scenario gets ``seconds`` at most, and another try (``attempts`` in all) when the
    client did not finish, since clients have timing races of their own; a frame the broker
    could not decode or answer is a problem whatever the try. Once ``budget`` seconds have
    gone by, the scenarios left are skipped.
    """
    wanted = set(clients)
    result = CaptureResult()
    overall = _Deadline(budget)
    for spec in scenarios():
        if spec.client not in wanted:
            continue
        label = f"{spec.client}/{spec.name}"
        missing = [key.name for key in spec.needs if key not in APIS]
        if missing:
            result.skipped.append(f"{label}: kafkaclone does not declare {', '.join(missing)}")
            continue
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            if overall.left() < 1:
                result.skipped.append(f"{label}: the {budget:.0f} s budget is spent")
                break
            failure = _run_scenario(spec, min(seconds, overall.left()), result)
            if failure is None:
                break
            if attempt < attempts:
                result.retried.append(f"{label}: {failure}")
            else:
                result.problems.append(f"{label}: {failure}")
        result.seconds[label] = time.monotonic() - started
    return result


def _run_scenario(spec: ScenarioSpec, seconds: float, result: CaptureResult) -> str | None:
    """One try of a scenario; what went wrong, or None."""
    broker = GoldenBroker(spec.client, spec.name).start()
    failure = None
    try:
        spec.run(broker, seconds)
    except Exception as exc:
        failure = f"{exc!r}; requests: {broker.request_log()}"
    finally:
        broker.stop()
        result.add(broker)
    return failure


def write_fixtures(result: CaptureResult, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in sorted(result.fixtures.items()):
        path = directory / name
        path.write_bytes(frame)
        written.append(path)
    return written


def fixture_paths(directory: Path = GOLDEN_DIR) -> list[Path]:
    return sorted(directory.glob("*.bin"))


def client_of(path: Path) -> str:
    """The client a committed fixture came from."""
    for client in CLIENT_IDS:
        if f"_{client}" in path.stem:
            return client
    raise ValueError(f"{path.name} names no known client")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR, help="fixture directory")
    parser.add_argument("--client", action="append", choices=sorted(CLIENT_IDS),
                        help="only this client (repeatable)")
    parser.add_argument("--seconds", type=float, default=8.0, help="time per scenario")
    parser.add_argument("--prune", action="store_true",
                        help="delete fixtures in --out that this run did not capture")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    clients = args.client or list(CLIENT_IDS)
    result = capture(clients, args.seconds)
    for path in write_fixtures(result, args.out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    for path in fixture_paths(args.out):
        if path.name in result.fixtures:
            continue
        if args.prune:
            path.unlink()
            print(f"pruned {path.name}")
        else:
            print(f"not re-captured: {path.name}")
    for line in result.skipped:
        print(f"skipped {line}")
    for line in result.retried:
        print(f"retried {line}")
    for line in result.problems:
        print(f"problem {line}")
    for client in clients:
        lacking = sorted(REQUIRED[client] - result.seen.get(client, set()))
        if lacking:
            print(f"missing from {client}: {', '.join(lacking)}")
    for label, seconds in result.seconds.items():
        print(f"{seconds:5.1f}s {label}")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
