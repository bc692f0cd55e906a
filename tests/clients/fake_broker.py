"""A one-broker stand-in for the idempotent producer's tests: a real socket served from a
thread, answering ApiVersions, Metadata, InitProducerId and Produce. Produce keeps Kafka
2.8's producer-state rules in small (per partition and producer id: the epoch, the last
sequence and the last five batches; a repeat of one of those is answered with its first
offset, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch INVALID_PRODUCER_EPOCH, a new
epoch must start at sequence 0, a producer the partition does not know must start at 0 or
gets UNKNOWN_PRODUCER_ID). Tests inject faults per partition and read what was appended.

For the transactional producer it is also its own transaction and group coordinator:
FindCoordinator, InitProducerId with a transactional id (a new epoch each time),
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn are recorded in
``txn_requests`` (API key, request body) and answered with success or with the codes a test
queued in ``txn_errors[key]``.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kafkaclone.common.errors import (
    NONE,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records.batch import RecordBatch, iter_batches

NODE_ID = 1
_TXN_APIS = (ApiKey.FIND_COORDINATOR, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
             ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN)
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class SeenBatch:
    """A batch as the broker received it (whatever it answered)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    values: tuple[bytes | None, ...]
    transactional: bool = False
    transactional_id: str | None = None
    """The Produce request's."""


@dataclass
class ProducerEntry:
    epoch: int
    last_sequence: int
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=5))
    """(first sequence, last sequence, base offset) of the last five batches."""


@dataclass
class PartitionLog:
    values: list[bytes | None] = field(default_factory=list)
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    errors: deque[int] = field(default_factory=deque)
    """Codes to answer the next Produce batches with, appending nothing."""
    lose_answers: int = 0
    """Append the next batches, then drop the connection instead of answering."""


class FakeBroker:
    """Serves ``topics`` (name -> partition count) on 127.0.0.1 (see the module docstring)."""

    def __init__(self, topics: dict[str, int], *, init_producer_id: bool = True) -> None:
        self.topics = topics
        self.supports_init_producer_id = init_producer_id
        self.logs = {(t, p): PartitionLog() for t, n in topics.items() for p in range(n)}
        self.seen: list[SeenBatch] = []
        self.init_producer_id_errors: deque[int] = deque()
        self.init_producer_id_requests = 0
        self.next_producer_id = 1000
        self.txn_requests: list[tuple[ApiKey, Any]] = []
        self.txn_errors: dict[ApiKey, deque[int]] = {
            k: deque() for k in (*_TXN_APIS, ApiKey.INIT_PRODUCER_ID)}
        self.transactional_epochs: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._holding = False
        self._held: list[tuple[socket.socket, bytes]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.setblocking(False)
        self.port: int = self._server.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        self._buffers: dict[socket.socket, bytearray] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-broker", daemon=True)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join(5)
        for sock in list(self._buffers):
            sock.close()
        self._server.close()
        self._selector.close()

    # --- what tests use ------------------------------------------------------------------

    def values(self, topic: str, partition: int) -> list[bytes | None]:
        with self._lock:
            return list(self.logs[(topic, partition)].values)

    def seen_for(self, topic: str, partition: int) -> list[SeenBatch]:
        with self._lock:
            return [b for b in self.seen if (b.topic, b.partition) == (topic, partition)]

    def fail_next(self, topic: str, partition: int, *codes: int) -> None:
        with self._lock:
            self.logs[(topic, partition)].errors.extend(codes)

    def lose_next_answer(self, topic: str, partition: int) -> None:
        with self._lock:
            self.logs[(topic, partition)].lose_answers += 1

    def forget_producers(self, topic: str, partition: int) -> None:
        """Lose the partition's producer state (as after retention removed its batches)."""
        with self._lock:
            self.logs[(topic, partition)].producers.clear()

    @contextmanager
    def hold_produce(self) -> Iterator[None]:
        """Park Produce requests while inside; the serving thread processes them in
        arrival order after the exit, so several batches of one partition are in flight
        together."""
        with self._lock:
            self._holding = True
        try:
            yield
        finally:
            with self._lock:
                self._holding = False

    def held_count(self) -> int:
        with self._lock:
            return len(self._held)

    # --- serving ---------------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                held = [] if self._holding else self._held
                if held:
                    self._held = []
            for sock, frame in held:
                if sock in self._buffers:
                    self._handle(sock, frame)
            for key, _ in self._selector.select(0.02):
                if key.data is None:
                    try:
                        conn, _addr = self._server.accept()
                    except BlockingIOError:
                        continue
                    conn.setblocking(True)
                    self._buffers[conn] = bytearray()
                    self._selector.register(conn, selectors.EVENT_READ, "conn")
                    continue
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                self._read(sock)

    def _read(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        buf = self._buffers[sock]
        buf += data
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf)
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[4:4 + size])
            del buf[:4 + size]
            key = int.from_bytes(frame[:2], "big")
            with self._lock:
                if key == ApiKey.PRODUCE and (self._holding or self._held):
                    self._held.append((sock, frame))
                    continue
            self._handle(sock, frame)

    def _drop(self, sock: socket.socket) -> None:
        if sock in self._buffers:
            self._selector.unregister(sock)
            del self._buffers[sock]
        sock.close()

    def _handle(self, sock: socket.socket, frame: bytes) -> None:
        request = api.decode_request(frame)
        key = request.api.key
        version = request.api_version
        if key == ApiKey.API_VERSIONS:
            body = self._api_versions()
        elif key == ApiKey.METADATA:
            body = self._metadata()
        elif key == ApiKey.INIT_PRODUCER_ID and request.body.transactional_id is not None:
            body = self._transactional(key, request.body)
        elif key == ApiKey.INIT_PRODUCER_ID:
            body = self._init_producer_id()
        elif key in _TXN_APIS:
            body = self._transactional(key, request.body)
        elif key == ApiKey.PRODUCE:
            body = self._produce(request.body)
            if body is None:
                self._drop(sock)
                return
        else:
            raise AssertionError(f"the fake broker does not serve {key.name}")
        out = api.encode_response(key, version, request.correlation_id, body)
        try:
            sock.sendall(_SIZE.pack(len(out)) + out)
        except OSError:
            self._drop(sock)

    def _api_versions(self) -> Any:
        cls = api.APIS[ApiKey.API_VERSIONS].response
        served = [ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, *_TXN_APIS]
        if self.supports_init_producer_id:
            served.append(ApiKey.INIT_PRODUCER_ID)
        return cls(error_code=NONE, api_keys=[
            cls.cls.ApiVersion(api_key=k, min_version=api.APIS[k].min_version,
                               max_version=api.APIS[k].max_version) for k in served])

    def _metadata(self) -> Any:
        cls = api.APIS[ApiKey.METADATA].response
        s = cls.structs
        return cls(
            brokers=[s["MetadataResponseBroker"](node_id=NODE_ID, host="127.0.0.1",
                                                 port=self.port)],
            cluster_id="fake-cluster", controller_id=NODE_ID,
            topics=[s["MetadataResponseTopic"](
                error_code=NONE, name=name, partitions=[
                    s["MetadataResponsePartition"](
                        error_code=NONE, partition_index=p, leader_id=NODE_ID, leader_epoch=0,
                        replica_nodes=[NODE_ID], isr_nodes=[NODE_ID], offline_replicas=[])
                    for p in range(count)])
                for name, count in self.topics.items()])

    def _init_producer_id(self) -> Any:
        cls = api.APIS[ApiKey.INIT_PRODUCER_ID].response
        with self._lock:
            self.init_producer_id_requests += 1
            if self.init_producer_id_errors:
                return cls(error_code=self.init_producer_id_errors.popleft(), producer_id=-1,
                           producer_epoch=-1)
            producer_id = self.next_producer_id
            self.next_producer_id += 1
        return cls(error_code=NONE, producer_id=producer_id, producer_epoch=0)

    def txn_request_keys(self) -> list[ApiKey]:
        with self._lock:
            return [k for k, _ in self.txn_requests]

    def _transactional(self, key: ApiKey, body: Any) -> Any:
        cls = api.APIS[key].response
        s = cls.structs
        with self._lock:
            self.txn_requests.append((key, body))
            errors = self.txn_errors[key]
            code = errors.popleft() if errors else NONE
            if key == ApiKey.INIT_PRODUCER_ID and code == NONE:
                tid = body.transactional_id
                pid, epoch = self.transactional_epochs.get(tid, (self.next_producer_id, -1))
                if tid not in self.transactional_epochs:
                    self.next_producer_id += 1
                self.transactional_epochs[tid] = (pid, epoch + 1)
        if key == ApiKey.FIND_COORDINATOR:
            return cls(error_code=code, error_message=None, node_id=NODE_ID,
                       host="127.0.0.1", port=self.port)
        if key == ApiKey.INIT_PRODUCER_ID:
            pid, epoch = self.transactional_epochs.get(body.transactional_id, (-1, -1))
            return cls(error_code=code, producer_id=pid if code == NONE else -1,
                       producer_epoch=epoch if code == NONE else -1)
        if key == ApiKey.ADD_PARTITIONS_TO_TXN:
            return cls(results=[s["AddPartitionsToTxnTopicResult"](
                name=t.name, results=[s["AddPartitionsToTxnPartitionResult"](
                    partition_index=p, error_code=code) for p in t.partitions])
                for t in body.topics])
        if key == ApiKey.TXN_OFFSET_COMMIT:
            return cls(topics=[s["TxnOffsetCommitResponseTopic"](
                name=t.name, partitions=[s["TxnOffsetCommitResponsePartition"](
                    partition_index=p.partition_index, error_code=code)
                    for p in t.partitions]) for t in body.topics])
        return cls(error_code=code)  # AddOffsetsToTxn, EndTxn

    def _produce(self, request: Any) -> Any | None:
        cls = api.APIS[ApiKey.PRODUCE].response
        s = cls.structs
        lose = False
        topics = []
        with self._lock:
            for topic in request.topic_data:
                partitions = []
                for data in topic.partition_data:
                    log = self.logs[(topic.name, data.index)]
                    code, offset = self._append(topic.name, data.index, log, data.records,
                                                request.transactional_id)
                    if code == NONE and log.lose_answers:
                        log.lose_answers -= 1
                        lose = True
                    partitions.append(s["PartitionProduceResponse"](
                        index=data.index, error_code=code, base_offset=offset,
                        log_append_time_ms=-1, log_start_offset=0, record_errors=[],
                        error_message=None))
                topics.append(s["TopicProduceResponse"](name=topic.name,
                                                        partition_responses=partitions))
        if lose:
            return None
        return cls(responses=topics, throttle_time_ms=0)

    def _append(self, topic: str, partition: int, log: PartitionLog,
                records: bytes, transactional_id: str | None = None) -> tuple[int, int]:
        (batch,) = list(iter_batches(records, allow_partial_tail=False))
        assert isinstance(batch, RecordBatch)
        batch.ensure_valid()
        values = tuple(r.value for r in batch.records())
        pid, epoch, first = batch.producer_id, batch.producer_epoch, batch.base_sequence
        count = batch.records_count
        self.seen.append(SeenBatch(topic, partition, pid, epoch, first, count, values,
                                   batch.is_transactional, transactional_id))
        if log.errors:
            return log.errors.popleft(), -1
        last = batch.last_sequence
        if pid >= 0:
            entry = log.producers.get(pid)
            if entry is None:
                if first != 0:
                    return UnknownProducerIdError.code, -1
            elif epoch < entry.epoch:
                return InvalidProducerEpochError.code, -1
            elif epoch > entry.epoch:
                if first != 0:
                    return OutOfOrderSequenceNumberError.code, -1
            else:
                for cached_first, cached_last, offset in entry.batches:
                    if (cached_first, cached_last) == (first, last):
                        return NONE, offset
                if first != entry.last_sequence + 1:
                    return OutOfOrderSequenceNumberError.code, -1
            if entry is None or epoch != entry.epoch:
                entry = log.producers[pid] = ProducerEntry(epoch, -1)
            entry.last_sequence = last
            entry.batches.append((first, last, len(log.values)))
        base_offset = len(log.values)
        log.values.extend(values)
        return NONE, base_offset
