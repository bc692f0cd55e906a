"""The producer writes a Produce request as parts (the header bytes and each record batch
as it is, ``sendmsg``), without joining them: the broker must receive exactly the
request, also when it has more parts than one ``sendmsg`` call takes and when the socket
takes a request in pieces."""

from __future__ import annotations

import numpy as np
import pytest

from kafkaclone.clients import Producer
from kafkaclone.clients.connection import SEND_PARTS
from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from tests.clients.fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(90)


def column(values: list[bytes]) -> BinaryColumn:
    return BinaryColumn.of(values)


def test_a_request_of_more_batches_than_one_sendmsg_takes_arrives_whole() -> None:
    partitions = SEND_PARTS  # two parts per batch (its header, its records) and more
    with FakeBroker({"t": partitions}) as broker, Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 60_000}) as producer:
        futures = []
        for partition in range(partitions):
            futures += producer.send_batch(
                "t", partition, column([b"v%d-%d" % (partition, i) for i in range(3)]))
        assert producer.flush(60) == 0
        assert all(f.exception(0) is None for f in futures)
        for partition in range(partitions):
            assert broker.values("t", partition) == [b"v%d-%d" % (partition, i)
                                                     for i in range(3)]
        assert producer.metrics()["request-total"] < partitions // 4


def test_requests_larger_than_the_socket_buffer_arrive_whole_and_in_order() -> None:
    values = [bytes([i % 251]) * 1000 + b"%d" % i for i in range(6000)]
    with FakeBroker({"t": 2}) as broker, Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "batch.size": 256 * 1024,
             "max.request.size": 4 * 1024 * 1024}) as producer:
        futures = producer.send_batch("t", 1, column(values),
                                      timestamps=np.arange(len(values), dtype=np.int64))
        assert producer.flush(60) == 0
        assert all(f.exception(0) is None for f in futures)
    assert broker.values("t", 1) == values
