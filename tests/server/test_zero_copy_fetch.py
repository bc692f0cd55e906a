"""Zero-copy fetch through the real dispatcher: Fetch v4+ answers carry the records as
ranges of the segment files, byte-identical to the answers built from bytes (every codec,
byte limits cutting between batches, the first batch whole above the limit, the high
watermark, read_committed), sent over TCP with sendfile; v0-3 answers and the in-memory
paths keep bytes."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import reactor

from kafkaclone.common.file_region import FileRegion
from kafkaclone.network.socket_server import KafkaServerFactory, response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, build_record_batch
from kafkaclone.server.handlers import fetch as fetch_handler
from tests.server.data_path_helpers import (
    CONNECTION,
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    make_broker,
    produce_request,
    settled,
)

pytestmark = pytest.mark.timeout(120)

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    yield b
    close_broker(b)


def _fill(broker: DataPathBroker, codec: Codec) -> int:
    """Batches of several sizes on t-0 and t-1 (records compressible and not); the size of
    the largest."""
    broker.host("t", [0, 1], replicas=(1, 2), isr=(1,))
    largest = 0
    for i in range(12):
        values = [os.urandom(50 + 37 * i) if i % 2 else b"v%d" % j * (i + 1)
                  for j in range(1 + i * 3)]
        for partition in (0, 1):
            records = batch(*values, codec=codec)
            largest = max(largest, len(records))
            response = broker.call(ApiKey.PRODUCE, 8,
                                   produce_request({("t", partition): records}))
            assert response.responses[0].partition_responses[0].error_code == 0
    return largest


def _dispatch(broker: DataPathBroker, version: int, body: Any) -> Any:
    frame = api.encode_request(ApiKey.FETCH, version, 11, "zero-copy", body)
    return settled(broker.dispatcher.dispatch(CONNECTION, bytearray(frame)))


def _copied(broker: DataPathBroker, version: int, body: Any,
            monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The same Fetch answered from bytes (the log read without file regions)."""
    original = fetch_handler.fetch_params
    with monkeypatch.context() as patch:
        patch.setattr(fetch_handler, "fetch_params",
                      lambda ctx, request: original(ctx, request)._replace(file_regions=False))
        answer = _dispatch(broker, version, body)
    assert isinstance(answer, bytes)
    return answer


def _requests(largest: int) -> list[tuple[str, Any]]:
    both = {("t", 0): 0, ("t", 1): 0}
    return [
        ("everything", fetch_request(both)),
        ("from the middle", fetch_request({("t", 0): 7, ("t", 1): 13})),
        ("partition limit cuts between batches",
         fetch_request(both, partition_max_bytes=largest + largest // 2)),
        ("first batch whole above the limits",
         fetch_request({("t", 0): 11, ("t", 1): 11}, partition_max_bytes=10, max_bytes=10)),
        ("request limit", fetch_request(both, max_bytes=2 * largest)),
        ("read_committed", fetch_request(both, isolation_level=1)),
        ("follower to the log end", fetch_request(both, replica_id=2)),
    ]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_file_region_answers_are_byte_identical_to_copied_ones(
        broker: DataPathBroker, codec: Codec, monkeypatch: pytest.MonkeyPatch) -> None:
    largest = _fill(broker, codec)
    for version in (4, 11, 12):
        for name, body in _requests(largest):
            parts = _dispatch(broker, version, body)
            assert isinstance(parts, list), name
            assert any(isinstance(part, FileRegion) for part in parts), name
            assert response_bytes(parts) == _copied(broker, version, body, monkeypatch), name


def test_a_short_read_at_the_high_watermark_stays_exact(
        broker: DataPathBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer stops at the high watermark inside the active segment, a follower reads
    on: both cut at whole batches, with exact lengths."""
    broker.host("t", [0], replicas=(1, 2), isr=(1, 2))
    for i in range(5):
        broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"r%d" % i)}))
    broker.call(ApiKey.FETCH, 12, fetch_request({("t", 0): 2}, replica_id=2))  # HW -> 2
    for replica_id in (-1, 2):
        body = fetch_request({("t", 0): 0}, replica_id=replica_id)
        parts = _dispatch(broker, 12, body)
        assert response_bytes(parts) == _copied(broker, 12, body, monkeypatch)
        _, response = api.decode_response(ApiKey.FETCH, 12, response_bytes(parts))
        records = response.responses[0].partitions[0].records
        expected = 2 * len(batch(b"r0")) if replica_id < 0 else 5 * len(batch(b"r0"))
        assert len(records) == expected


def test_down_converted_answers_keep_bytes(broker: DataPathBroker) -> None:
    broker.host("t", [0])
    broker.call(ApiKey.PRODUCE, 8, produce_request({("t", 0): batch(b"a", b"b")}))
    answer = _dispatch(broker, 3, fetch_request({("t", 0): 0}))
    assert isinstance(answer, bytes)
    _, response = api.decode_response(ApiKey.FETCH, 3, answer)
    assert response.responses[0].partitions[0].records[16:17] == b"\x01"  # magic 1


def test_read_committed_aborted_transactions_from_file_regions(
        broker: DataPathBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafkaclone.log.common import AppendOrigin
    from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
    from kafkaclone.protocol.records.record import ControlRecordType

    broker.host("t", [0])
    log = broker.log("t")
    log.append(build_record_batch([(None, b"plain")]), leader_epoch=0)
    log.append(build_record_batch([(None, b"aborted")], producer_id=7, producer_epoch=0,
                                  base_sequence=0, is_transactional=True), leader_epoch=0)
    log.append(build_end_transaction_marker_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
        timestamp=0), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.append(build_record_batch([(None, b"after")]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    body = fetch_request({("t", 0): 0}, isolation_level=1)
    parts = _dispatch(broker, 11, body)
    assert response_bytes(parts) == _copied(broker, 11, body, monkeypatch)
    _, response = api.decode_response(ApiKey.FETCH, 11, response_bytes(parts))
    aborted = response.responses[0].partitions[0].aborted_transactions
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(7, 1)]


@pytest.mark.parametrize("sendfile", [True, False], ids=["sendfile", "copied"])
def test_over_tcp_the_frames_are_the_copied_ones(
        broker: DataPathBroker, sendfile: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    largest = _fill(broker, Codec.LZ4)
    requests = [body for _, body in _requests(largest)]
    expected = [_copied(broker, 12, body, monkeypatch) for body in requests]
    factory = KafkaServerFactory(broker.dispatcher, sendfile=sendfile, sendfile_min_bytes=0)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    client = socket.create_connection(("127.0.0.1", port.getHost().port), timeout=5)
    try:
        client.sendall(b"".join(
            struct.pack(">i", len(f)) + f for f in
            (api.encode_request(ApiKey.FETCH, 12, 11, "zero-copy", body) for body in requests)))
        client.setblocking(False)
        received = bytearray()
        deadline = time.monotonic() + 30
        while len(received) < sum(4 + len(e) for e in expected):
            assert time.monotonic() < deadline, "the answers did not arrive in time"
            reactor.iterate(0.002)
            try:
                chunk = client.recv(1 << 20)
            except BlockingIOError:
                continue
            assert chunk, "connection closed"
            received += chunk
        assert bytes(received) == b"".join(struct.pack(">i", len(e)) + e for e in expected)
        (conn,) = factory.connections
        assert conn._sendfile is sendfile
    finally:
        client.close()
        stopping = port.stopListening()
        for conn in list(factory.connections):
            conn.transport.abortConnection()
        deadline = time.monotonic() + 10
        while not (stopping.called and not factory.connections):
            assert time.monotonic() < deadline
            reactor.iterate(0.002)
