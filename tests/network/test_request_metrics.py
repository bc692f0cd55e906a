"""Request timing per API under Kafka's RequestChannel metric names, and the DEBUG request
log in Kafka's format."""

import logging
import struct
import time

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.testing import StringTransport

from kafkaclone.network.request_metrics import (
    LOCAL_TIME,
    REMOTE_TIME,
    REQUEST_QUEUE_TIME,
    RESPONSE_QUEUE_TIME,
    TOTAL_TIME,
    Histogram,
    RequestMetrics,
    request_description,
)
from kafkaclone.network.socket_server import KafkaServerFactory

pytestmark = pytest.mark.timeout(30)


def request(api_key: int, correlation_id: int, client_id: bytes = b"probe") -> bytes:
    body = struct.pack(">hhih", api_key, 7, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


class ManualDispatcher:
    def __init__(self) -> None:
        self.pending: list[Deferred] = []

    def dispatch(self, connection, frame):
        d: Deferred = Deferred()
        self.pending.append(d)
        return d


def test_remote_and_response_queue_times_per_api(caplog):
    metrics = RequestMetrics()
    dispatcher = ManualDispatcher()
    factory = KafkaServerFactory(dispatcher, request_metrics=metrics)
    conn = factory.buildProtocol(None)
    conn.makeConnection(StringTransport())
    with caplog.at_level(logging.DEBUG, logger="kafkaclone.network.request_logger"):
        conn.dataReceived(request(0, 1) + request(3, 2))  # Produce, then Metadata
        time.sleep(0.02)
        dispatcher.pending[1].callback(b"metadata")  # done first, waits for the produce
        time.sleep(0.02)
        dispatcher.pending[0].callback(b"produce")
    snapshot = metrics.snapshot()
    assert set(snapshot) == {"Produce", "Metadata"}
    produce, metadata = snapshot["Produce"], snapshot["Metadata"]
    assert produce[REMOTE_TIME]["count"] == 1
    assert produce[REMOTE_TIME]["max"] >= 35
    assert produce[RESPONSE_QUEUE_TIME]["max"] < 5
    assert 15 <= metadata[REMOTE_TIME]["max"] < produce[REMOTE_TIME]["max"]
    assert metadata[RESPONSE_QUEUE_TIME]["max"] >= 15
    assert produce[LOCAL_TIME]["max"] < 5 and produce[REQUEST_QUEUE_TIME]["max"] < 5
    assert metadata[TOTAL_TIME]["max"] >= 35
    assert ("Completed request:RequestHeader(apiKey=PRODUCE, apiVersion=7, clientId=probe, "
            "correlationId=1) from connection PLAINTEXT-1;totalTime:") in caplog.text
    assert "securityProtocol:PLAINTEXT,principal:User:ANONYMOUS,listener:PLAINTEXT" in caplog.text


def test_a_muted_connections_frames_count_queue_time():
    metrics = RequestMetrics()
    dispatcher = ManualDispatcher()
    conn = KafkaServerFactory(dispatcher, request_metrics=metrics).buildProtocol(None)
    conn.makeConnection(StringTransport())
    conn.pauseProducing()  # the peer reads slowly
    conn.dataReceived(request(1, 1))
    time.sleep(0.02)
    conn.resumeProducing()
    dispatcher.pending[0].callback(b"fetch")
    assert metrics.snapshot()["Fetch"][REQUEST_QUEUE_TIME]["max"] >= 15


def test_histogram_percentiles_are_bucket_bounds():
    histogram = Histogram()
    for value in [0.3] * 98 + [40.0, 70.0]:
        histogram.record(value)
    assert histogram.percentile(0.5) == 0.5
    assert histogram.percentile(0.99) == 50.0
    assert histogram.percentile(1.0) == 100.0
    assert histogram.max_ms == 70.0 and histogram.count == 100


def test_request_description_reads_the_header():
    frame = request(18, 42, b"rdkafka")[4:]
    assert request_description(frame) == ("RequestHeader(apiKey=API_VERSIONS, apiVersion=7, "
                                          "clientId=rdkafka, correlationId=42)")


def test_summary_names_each_api_with_its_totals():
    metrics = RequestMetrics()
    metrics.record("Produce", 0.01, 0.2, 1.5, 0.0, 0.01)
    summary = metrics.summary()
    assert summary.startswith("Produce count:1 TotalTimeMs p50:<=2.5 p99:<=2.5 max:1.720")
    assert "RemoteTime:1.500" in summary
