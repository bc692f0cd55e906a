"""The idempotent Producer against a fake broker (tests/clients/fake_broker.py): the
producer id, the sequences on the wire, retries that keep their sequence and order, the
epoch bump after UNKNOWN_PRODUCER_ID / OUT_OF_ORDER_SEQUENCE_NUMBER, and fatal errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkaclone.clients import Producer
from kafkaclone.common.errors import (
    CoordinatorNotAvailableError,
    DuplicateSequenceNumberError,
    InvalidProducerEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnsupportedVersionError,
)
from tests.clients.fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(60)

TOPIC = "t"


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker({TOPIC: 2}) as fake:
        yield fake


def producer(broker: FakeBroker, **conf: Any) -> Producer:
    settings: dict[str, Any] = {"bootstrap.servers": broker.bootstrap_servers,
                                "retry.backoff.ms": 10, "linger.ms": 0}
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(settings)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def test_default_producer_gets_an_id_and_stamps_sequences_per_partition(
        broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:  # one record per batch
        for value in values(6):
            p.send(TOPIC, value, partition=int(value[1:]) % 2).get(10)
    assert broker.init_producer_id_requests == 1
    for partition in (0, 1):
        seen = broker.seen_for(TOPIC, partition)
        assert {(b.producer_id, b.producer_epoch) for b in seen} == {(1000, 0)}
        assert [b.base_sequence for b in seen] == [0, 1, 2]
        assert broker.values(TOPIC, partition) == values(6)[partition::2]


def test_sequences_advance_by_the_record_count_of_each_batch(broker: FakeBroker) -> None:
    with producer(broker, linger_ms=50) as p:
        for value in values(5):
            p.send(TOPIC, value, partition=0)
        p.flush(10)
        for value in values(3, "w"):
            p.send(TOPIC, value, partition=0)
        p.flush(10)
    seen = broker.seen_for(TOPIC, 0)
    assert [(b.base_sequence, b.count) for b in seen] == [(0, 5), (5, 3)]


def test_a_lost_answer_is_retried_with_its_sequence_and_written_once(
        broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        broker.lose_next_answer(TOPIC, 0)
        metadata = p.send(TOPIC, b"b", partition=0).get(10)
        p.send(TOPIC, b"c", partition=0).get(10)
    assert metadata.offset == 1  # the duplicate is answered with the first offset
    seen = broker.seen_for(TOPIC, 0)
    assert [(b.values, b.base_sequence) for b in seen] == [
        ((b"a",), 0), ((b"b",), 1), ((b"b",), 1), ((b"c",), 2)]
    assert broker.values(TOPIC, 0) == [b"a", b"b", b"c"]


def test_retries_keep_sequences_and_order_with_several_batches_in_flight(
        broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"first", partition=0).get(10)
        broker.fail_next(TOPIC, 0, NotLeaderOrFollowerError.code)
        with broker.hold_produce():
            futures = [p.send(TOPIC, v, partition=0) for v in values(4)]
            wait_for(lambda: broker.held_count() == 4)
        for future in futures:
            future.get(10)
    seen = broker.seen_for(TOPIC, 0)
    # v0 failed (retriable), v1..v3 were then out of order and waited; all were re-sent
    # with the sequences they had, in order, at the same epoch.
    assert [b.base_sequence for b in seen] == [0, 1, 2, 3, 4, 1, 2, 3, 4]
    assert {b.producer_epoch for b in seen} == {0}
    assert broker.values(TOPIC, 0) == [b"first", *values(4)]


def test_a_connection_lost_with_batches_in_flight_writes_each_once_in_order(
        broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"first", partition=0).get(10)
        broker.lose_next_answer(TOPIC, 0)  # v0 is written, then the connection drops
        with broker.hold_produce():
            futures = [p.send(TOPIC, v, partition=0) for v in values(4)]
            wait_for(lambda: broker.held_count() == 4)
        offsets = [future.get(10).offset for future in futures]
    assert offsets == [1, 2, 3, 4]
    assert [b.base_sequence for b in broker.seen_for(TOPIC, 0)] == [0, 1, 1, 2, 3, 4]
    assert broker.values(TOPIC, 0) == [b"first", *values(4)]


def test_unknown_producer_id_bumps_the_epoch_and_resequences(broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        p.send(TOPIC, b"x", partition=1).get(10)
        broker.forget_producers(TOPIC, 0)
        p.send(TOPIC, b"b", partition=0).get(10)
        p.send(TOPIC, b"c", partition=0).get(10)
        p.send(TOPIC, b"y", partition=1).get(10)
    seen = [(b.values, b.producer_epoch, b.base_sequence) for b in broker.seen_for(TOPIC, 0)]
    assert seen == [((b"a",), 0, 0), ((b"b",), 0, 1), ((b"b",), 1, 0), ((b"c",), 1, 1)]
    assert broker.values(TOPIC, 0) == [b"a", b"b", b"c"]
    assert broker.init_producer_id_requests == 1  # the idempotent producer bumps locally
    # Another partition moves to the new epoch at sequence 0 once it has nothing in flight.
    seen_1 = [(b.producer_epoch, b.base_sequence) for b in broker.seen_for(TOPIC, 1)]
    assert seen_1 == [(0, 0), (1, 0)]
    assert broker.values(TOPIC, 1) == [b"x", b"y"]


def test_unknown_producer_id_with_batches_in_flight_resequences_them_all(
        broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        broker.forget_producers(TOPIC, 0)
        with broker.hold_produce():
            futures = [p.send(TOPIC, v, partition=0) for v in values(3)]
            wait_for(lambda: broker.held_count() == 3)
        for future in futures:
            future.get(10)
    seen = [(b.producer_epoch, b.base_sequence) for b in broker.seen_for(TOPIC, 0)]
    assert seen[:4] == [(0, 0), (0, 1), (0, 2), (0, 3)]  # all three: UNKNOWN_PRODUCER_ID
    assert seen[4:] == [(1, 0), (1, 1), (1, 2)]
    assert broker.values(TOPIC, 0) == [b"a", *values(3)]


def test_out_of_order_for_the_next_sequence_bumps_the_epoch(broker: FakeBroker) -> None:
    with producer(broker, batch_size=1) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        broker.fail_next(TOPIC, 0, OutOfOrderSequenceNumberError.code)
        p.send(TOPIC, b"b", partition=0).get(10)
    seen = [(b.producer_epoch, b.base_sequence) for b in broker.seen_for(TOPIC, 0)]
    assert seen == [(0, 0), (0, 1), (1, 0)]
    assert broker.values(TOPIC, 0) == [b"a", b"b"]


def test_duplicate_sequence_number_is_a_success(broker: FakeBroker) -> None:
    with producer(broker) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        broker.fail_next(TOPIC, 0, DuplicateSequenceNumberError.code)
        metadata = p.send(TOPIC, b"b", partition=0).get(10)  # the broker has it already
        assert metadata.offset == -1
    assert [(b.values, b.base_sequence) for b in broker.seen_for(TOPIC, 0)] == [
        ((b"a",), 0), ((b"b",), 1)]  # not re-sent


def test_init_producer_id_is_retried_on_retriable_errors(broker: FakeBroker) -> None:
    broker.init_producer_id_errors.extend([CoordinatorNotAvailableError.code] * 2)
    with producer(broker) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
    assert broker.init_producer_id_requests == 3
    assert broker.values(TOPIC, 0) == [b"a"]


@pytest.mark.parametrize("error", [ProducerFencedError, InvalidProducerEpochError])
def test_a_fenced_producer_fails_for_good(broker: FakeBroker, error: type[KafkaError]) -> None:
    with producer(broker) as p:
        p.send(TOPIC, b"a", partition=0).get(10)
        broker.fail_next(TOPIC, 0, error.code)
        with pytest.raises(error):
            p.send(TOPIC, b"b", partition=0).get(10)
        with pytest.raises(error, match="Cannot perform send"):
            p.send(TOPIC, b"c", partition=1)
    assert broker.values(TOPIC, 0) == [b"a"]
    assert broker.values(TOPIC, 1) == []


def test_a_broker_without_init_producer_id_gets_a_clear_error() -> None:
    with FakeBroker({TOPIC: 1}, init_producer_id=False) as old, producer(old) as p:
        with pytest.raises(UnsupportedVersionError, match=r"set enable\.idempotence=false"):
            p.send(TOPIC, b"a").get(10)
        with pytest.raises(UnsupportedVersionError):
            p.send(TOPIC, b"b")
    with FakeBroker({TOPIC: 1}, init_producer_id=False) as old, \
            producer(old, enable_idempotence=False) as p:
        p.send(TOPIC, b"a").get(10)
        assert [b.producer_id for b in old.seen_for(TOPIC, 0)] == [-1]
