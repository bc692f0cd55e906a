"""A loopback listener that real Kafka clients can produce to, capturing their batches.

It speaks just enough of the protocol, hand-encoded with ``struct``: ApiVersions (v0-v3
bodies, v3 also for higher requests), Metadata v0-v2 (every requested topic has one
partition led by this listener, node 0) and Produce v0-v7, which it never answers (the
clients are run with acks=0). By default it advertises Produce v3-v7, Fetch up to v10
and FindCoordinator, so librdkafka enables magic 2, lz4 and zstd and kafka-python infers
a 2.1 broker; advertising Produce v2 at most makes librdkafka fall back to magic 1.

For consumers it answers Fetch v4-v10 for partition 0 of any topic with ``fetch_records``
(given at construction, served whole to a fetch at offset 0 and as an empty set after),
and FindCoordinator with COORDINATOR_NOT_AVAILABLE.

Plain sockets and threads, no Twisted: a test owns it through ``with FakeBroker() as b``,
which stops the accept loop and closes every connection even when the test fails.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
from dataclasses import dataclass
from types import TracebackType

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_FIND_COORDINATOR = 10
API_API_VERSIONS = 18


def advertised_versions(produce: tuple[int, int]) -> dict[int, tuple[int, int]]:
    return {
        API_PRODUCE: produce,
        API_FETCH: (0, 10),
        API_METADATA: (0, 2),
        API_FIND_COORDINATOR: (0, 2),
        API_API_VERSIONS: (0, 3),
    }


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id


@dataclass
class ProducedPartition:
    topic: str
    partition: int
    records: bytes
    produce_version: int


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("short request")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.take(n).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.take(n)


def api_versions_body(version: int, advertised: dict[int, tuple[int, int]]) -> bytes:
    if version >= 3:  # flexible: compact array, tagged fields
        out = bytearray(_I16.pack(0))
        out += _uvarint(len(advertised) + 1)
        for key, (low, high) in advertised.items():
            out += struct.pack(">hhh", key, low, high) + _uvarint(0)
        out += _I32.pack(0) + _uvarint(0)
        return bytes(out)
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(advertised))
    for key, (low, high) in advertised.items():
        out += struct.pack(">hhh", key, low, high)
    if version >= 1:
        out += _I32.pack(0)  # throttle_time_ms
    return bytes(out)


def metadata_body(version: int, port: int, topics: list[str]) -> bytes:
    out = bytearray(_I32.pack(1))  # brokers
    out += _I32.pack(0) + _string("127.0.0.1") + _I32.pack(port)
    if version >= 1:
        out += _I16.pack(-1)  # rack: null
    if version >= 2:
        out += _string("fake-cluster")  # cluster_id
    if version >= 1:
        out += _I32.pack(0)  # controller_id
    out += _I32.pack(len(topics))
    for topic in topics:
        out += _I16.pack(0) + _string(topic)  # error, name
        if version >= 1:
            out += b"\x00"  # is_internal
        out += _I32.pack(1)  # one partition
        out += _I16.pack(0) + _I32.pack(0) + _I32.pack(0)  # error, index, leader
        out += _I32.pack(1) + _I32.pack(0)  # replicas [0]
        out += _I32.pack(1) + _I32.pack(0)  # isr [0]
    return bytes(out)


def find_coordinator_body(version: int) -> bytes:
    out = bytearray()
    if version >= 1:
        out += _I32.pack(0)  # throttle_time_ms
    out += _I16.pack(15)  # COORDINATOR_NOT_AVAILABLE
    if version >= 1:
        out += _I16.pack(-1)  # error_message: null
    out += _I32.pack(-1) + _string("") + _I32.pack(-1)
    return bytes(out)


def parse_fetch(version: int, body: bytes) -> list[tuple[str, int, int]]:
    """(topic, partition, fetch_offset) of a Fetch v4-v10 request."""
    reader = _Reader(body)
    reader.take(4 * 4 + 1)  # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level
    if version >= 7:
        reader.take(8)  # session_id, session_epoch
    wanted = []
    for _ in range(reader.int32()):
        topic = reader.nullable_string() or ""
        for _ in range(reader.int32()):
            partition = reader.int32()
            if version >= 9:
                reader.take(4)  # current_leader_epoch
            (fetch_offset,) = struct.unpack(">q", reader.take(8))
            if version >= 5:
                reader.take(8)  # log_start_offset
            reader.take(4)  # partition_max_bytes
            wanted.append((topic, partition, fetch_offset))
    return wanted


def fetch_body(
    version: int, partitions: list[tuple[str, int, bytes]], high_watermark: int
) -> bytes:
    out = bytearray(_I32.pack(0))  # throttle_time_ms
    if version >= 7:
        out += _I16.pack(0) + _I32.pack(0)  # error_code, session_id
    out += _I32.pack(len(partitions))
    for topic, partition, records in partitions:
        out += _string(topic) + _I32.pack(1)
        out += _I32.pack(partition) + _I16.pack(0)
        out += struct.pack(">qq", high_watermark, high_watermark)  # high watermark, LSO
        if version >= 5:
            out += struct.pack(">q", 0)  # log_start_offset
        out += _I32.pack(0)  # aborted_transactions: none
        out += _I32.pack(len(records)) + records
    return bytes(out)


def parse_produce(version: int, body: bytes) -> list[ProducedPartition]:
    reader = _Reader(body)
    if version >= 3:
        reader.nullable_string()  # transactional_id
    reader.int16()  # acks
    reader.int32()  # timeout
    produced = []
    for _ in range(reader.int32()):
        topic = reader.nullable_string() or ""
        for _ in range(reader.int32()):
            partition = reader.int32()
            records = reader.nullable_bytes() or b""
            produced.append(ProducedPartition(topic, partition, records, version))
    return produced


class FakeBroker:
    """``with FakeBroker() as broker``: ``broker.port``, then ``broker.wait_for_records()``."""

    def __init__(
        self,
        default_topic: str = "test",
        produce_versions: tuple[int, int] = (3, 7),
        fetch_records: bytes = b"",
        high_watermark: int = 0,
    ) -> None:
        self.default_topic = default_topic
        self.fetch_records = fetch_records
        self.high_watermark = high_watermark
        self.advertised = advertised_versions(produce_versions)
        self.fetches = 0
        self.produced: queue.Queue[ProducedPartition] = queue.Queue()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> FakeBroker:
        self._start(self._accept_loop)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()
        for thread in threads:
            thread.join(timeout=5)
        self._listener.close()

    def wait_for_records(self, count: int = 1, timeout: float = 20.0) -> list[ProducedPartition]:
        """The first ``count`` produced partitions (raises queue.Empty after ``timeout``)."""
        return [self.produced.get(timeout=timeout) for _ in range(count)]

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(0.2)
            with self._lock:
                self._connections.append(connection)
            self._start(self._serve, connection)

    def _recv_exact(self, connection: socket.socket, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            if self._stop.is_set():
                return None
            try:
                chunk = connection.recv(n - len(chunks))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def _serve(self, connection: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                size_bytes = self._recv_exact(connection, 4)
                if size_bytes is None:
                    return
                (size,) = _I32.unpack(size_bytes)
                if not 0 < size < 64 * 1024 * 1024:
                    return
                frame = self._recv_exact(connection, size)
                if frame is None:
                    return
                response = self._handle(frame)
                if response is not None:
                    connection.sendall(_I32.pack(len(response)) + response)
        except Exception as e:  # recorded for the test to report
            self.errors.append(e)
        finally:
            connection.close()

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, version, correlation_id = _HEADER.unpack_from(frame)
        reader = _Reader(frame)
        reader.pos = _HEADER.size
        reader.nullable_string()  # client_id
        flexible_header = api_key == API_API_VERSIONS and version >= 3
        if flexible_header:
            reader.take(1)  # tagged fields: clients send none here
        body = frame[reader.pos :]
        header = _I32.pack(correlation_id)  # response header v0
        if api_key == API_API_VERSIONS:
            return header + api_versions_body(version, self.advertised)
        if api_key == API_METADATA:
            topics = self._metadata_topics(version, body)
            return header + metadata_body(version, self.port, topics)
        if api_key == API_PRODUCE:
            for produced in parse_produce(version, body):
                self.produced.put(produced)
            return None  # acks=0: no response
        if api_key == API_FIND_COORDINATOR:
            return header + find_coordinator_body(version)
        if api_key == API_FETCH and version >= 4:
            served = []
            for topic, partition, fetch_offset in parse_fetch(version, body):
                records = self.fetch_records if fetch_offset == 0 and partition == 0 else b""
                served.append((topic, partition, records))
            self.fetches += 1
            if not any(records for _, _, records in served):
                self._stop.wait(0.05)  # a short long-poll, so that consumers do not spin
            return header + fetch_body(version, served, self.high_watermark)
        raise ValueError(f"unexpected request: api key {api_key} v{version}")

    def _metadata_topics(self, version: int, body: bytes) -> list[str]:
        reader = _Reader(body)
        count = reader.int32()
        if count < 0 or (count == 0 and version == 0):
            return [self.default_topic]
        return [reader.nullable_string() or "" for _ in range(count)]
