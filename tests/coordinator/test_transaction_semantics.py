"""What transactions look like to clients nobody here wrote (issue 15), on a local cluster of
two broker processes: kafka-python 3.x's and aiokafka's read_committed and read_uncommitted
consumers agree with confluent-kafka's; a transaction left open stops read_committed at its
first offset until it commits, aborts, or times out (the coordinator aborts it); a fenced
confluent-kafka producer's later sends and commit fail and nothing it wrote after the fence
is in the log; bad input over the wire gets Kafka 2.8's codes and changes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.common.topic import TRANSACTION_STATE_TOPIC_NAME
from kafkaclone.coordinator.transaction.state_manager import partition_for
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import (
    _connection_to,
    _produce_body,
    _produce_error,
    ask,
    create_topic,
    wait_for_leaders,
)
from tests.server.test_transactions import read_committed_fetch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

NONE, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 0, 47, 48
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, PRODUCER_FENCED = 53, 90
TXN_PARTITIONS = 2
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "transaction.state.log.replication.factor": "2",
            "offsets.topic.num.partitions": "2",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}) as local:
        yield local


def txn_producer(cluster: LocalCluster, transactional_id: str, timeout_ms: int = 60_000
                 ) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                  "transactional.id": transactional_id, "transaction.timeout.ms": timeout_ms})
    p.init_transactions(60)
    return p


def read(poll: Callable[[], list[bytes]], expected: int, seconds: float = 60.0,
         drain: float = 2.0) -> list[str]:
    """Values from ``poll`` until ``expected`` arrived (or ``seconds``), then ``drain``
    seconds more, so that anything past them shows."""
    values: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(values) < expected:
        values += [v.decode() for v in poll()]
    drain_until = time.monotonic() + drain
    while time.monotonic() < drain_until:
        values += [v.decode() for v in poll()]
    return sorted(values)


def confluent_read(cluster: LocalCluster, topic: str, partitions: int, isolation: str,
                   expected: int, drain: float = 2.0) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "sem",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])

    def poll() -> list[bytes]:
        return [m.value() for m in consumer.consume(100, 0.3) if m.error() is None]

    try:
        return read(poll, expected, drain=drain)
    finally:
        consumer.close()


def kafka_python_read(cluster: LocalCluster, topic: str, partitions: int, isolation: str,
                      expected: int) -> list[str]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                             isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign([KTopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()

    def poll() -> list[bytes]:
        return [r.value for rs in consumer.poll(timeout_ms=300).values() for r in rs]

    try:
        return read(poll, expected)
    finally:
        consumer.close()


def aiokafka_read(cluster: LocalCluster, topic: str, partitions: int, isolation: str,
                  expected: int) -> list[str]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    async def run() -> list[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                    isolation_level=isolation, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATopicPartition(topic, p) for p in range(partitions)])
            await consumer.seek_to_beginning()
            values: list[str] = []
            deadline = time.monotonic() + 60
            drain_until = float("inf")
            while time.monotonic() < min(deadline, drain_until):
                batches = await consumer.getmany(timeout_ms=300)
                values += [r.value.decode() for rs in batches.values() for r in rs]
                if len(values) >= expected and drain_until == float("inf"):
                    drain_until = time.monotonic() + 2.0
            return sorted(values)
        finally:
            await consumer.stop()

    return asyncio.run(run())


def test_kafka_python_and_aiokafka_consumers_agree_with_confluent(
        cluster: LocalCluster) -> None:
    topic = "sem-agree"
    create_topic(cluster, topic, partitions=2, replication_factor=2)
    p = txn_producer(cluster, "sem-agree")
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    committed: list[str] = []
    everything: list[str] = []
    for round_, fate in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        p.begin_transaction()
        values = [f"{fate}-{round_}-{i}" for i in range(6)]
        for i, value in enumerate(values):
            p.produce(topic, value=value.encode(), partition=i % 2)
        p.flush(30)
        # A plain record lands behind the open transaction's records, before its marker.
        plain.produce(topic, value=f"plain-{round_}".encode(), partition=round_ % 2)
        plain.flush(30)
        if fate == "commit":
            p.commit_transaction(60)
            committed += values
        else:
            p.abort_transaction(60)
        committed.append(f"plain-{round_}")
        everything += [*values, f"plain-{round_}"]
    committed.sort()
    everything.sort()
    for isolation, expected in (("read_committed", committed),
                                ("read_uncommitted", everything)):
        for reader in (confluent_read, kafka_python_read, aiokafka_read):
            assert reader(cluster, topic, 2, isolation, len(expected)) == expected, (
                reader.__name__, isolation)


def lso_and_hw(cluster: LocalCluster, leader: int, topic: str) -> tuple[int, int]:
    partition = read_committed_fetch(cluster, leader, topic)
    return int(partition.last_stable_offset), int(partition.high_watermark)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.parametrize("ending", ["commit", "abort", "timeout"])
def test_an_open_transaction_blocks_read_committed_at_its_first_offset(
        cluster: LocalCluster, ending: str) -> None:
    topic = f"sem-open-{ending}"
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for value in (b"before-0", b"before-1"):
        plain.produce(topic, value=value, partition=0)
    plain.flush(30)
    p = txn_producer(cluster, f"sem-open-{ending}",
                     timeout_ms=2000 if ending == "timeout" else 60_000)
    p.begin_transaction()
    for value in (b"open-0", b"open-1"):
        p.produce(topic, value=value, partition=0)
    p.flush(30)
    plain.produce(topic, value=b"after-0", partition=0)
    plain.flush(30)
    before, opened, after = ["before-0", "before-1"], ["open-0", "open-1"], ["after-0"]
    if ending != "timeout":
        # (The timeout case goes on at once: its transaction lasts two seconds.)
        assert lso_and_hw(cluster, leader, topic) == (2, 5)
        assert confluent_read(cluster, topic, 1, "read_committed", 2) == before
        assert confluent_read(cluster, topic, 1, "read_uncommitted", 5) == sorted(
            before + opened + after)
    if ending == "commit":
        p.commit_transaction(60)
        expected = sorted(before + opened + after)
    elif ending == "abort":
        p.abort_transaction(60)
        expected = sorted(before + after)
    else:
        # The coordinator aborts it (transaction.timeout.ms) and fences the producer.
        wait_for(lambda: lso_and_hw(cluster, leader, topic) == (6, 6),
                 "the timed-out transaction was not aborted")
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
        expected = sorted(before + after)
    wait_for(lambda: lso_and_hw(cluster, leader, topic) == (6, 6), "no marker")
    assert confluent_read(cluster, topic, 1, "read_committed", len(expected)) == expected


def test_a_fenced_producer_writes_nothing_after_the_fence(cluster: LocalCluster) -> None:
    topic = "sem-zombie"
    create_topic(cluster, topic, partitions=2, replication_factor=2)
    first = txn_producer(cluster, "sem-zombie")
    first.begin_transaction()
    first.produce(topic, value=b"zombie-before", partition=0)
    first.flush(30)
    second = txn_producer(cluster, "sem-zombie")  # fences first, aborts its transaction
    # One partition already in the transaction (its leader refuses the old epoch), one new
    # (AddPartitionsToTxn is refused): the fatal error shows in produce, flush or commit.
    with pytest.raises(KafkaException) as info:
        for partition in (0, 1):
            first.produce(topic, value=b"zombie-after-%d" % partition, partition=partition)
        first.flush(30)
        first.commit_transaction(30)
    assert info.value.args[0].code() in FENCED, info.value.args[0]
    with pytest.raises(KafkaException) as again:
        first.commit_transaction(30)
    assert again.value.args[0].fatal()
    second.begin_transaction()
    for partition in (0, 1):
        second.produce(topic, value=b"second-%d" % partition, partition=partition)
    second.commit_transaction(60)
    assert confluent_read(cluster, topic, 2, "read_committed", 2) == ["second-0", "second-1"]
    assert confluent_read(cluster, topic, 2, "read_uncommitted", 3) == [
        "second-0", "second-1", "zombie-before"]


# -- bad input over the wire -----------------------------------------------------------------

def request(key: ApiKey, **fields: Any) -> Any:
    return api.APIS[key].request(**fields)


def struct(key: ApiKey, struct_name: str, **fields: Any) -> Any:
    return api.APIS[key].request.structs[struct_name](**fields)


def log_end(cluster: LocalCluster, broker: int, topic: str, partition: int) -> int:
    body = request(ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=0, topics=[
        struct(ApiKey.LIST_OFFSETS, "ListOffsetsTopic", name=topic, partitions=[
            struct(ApiKey.LIST_OFFSETS, "ListOffsetsPartition", partition_index=partition,
                   timestamp=-1)])])
    with _connection_to(cluster, broker) as conn:
        answer = ask(conn, ApiKey.LIST_OFFSETS, body, 5).topics[0].partitions[0]
    assert answer.error_code == NONE
    return int(answer.offset)


def test_bad_input_gets_kafkas_codes_and_changes_nothing(cluster: LocalCluster) -> None:
    topic, tx = "sem-bad", "sem-bad"
    create_topic(cluster, topic, partitions=1, replication_factor=2)
    leader = wait_for_leaders(cluster, topic, 1)[0]
    txn_partition = partition_for(tx, TXN_PARTITIONS)
    coordinator = wait_for_leaders(cluster, TRANSACTION_STATE_TOPIC_NAME,
                                   TXN_PARTITIONS)[txn_partition]
    with _connection_to(cluster, coordinator) as conn:
        def init() -> tuple[int, int]:
            deadline = time.monotonic() + 60
            while True:
                answer = ask(conn, ApiKey.INIT_PRODUCER_ID, request(
                    ApiKey.INIT_PRODUCER_ID, transactional_id=tx,
                    transaction_timeout_ms=60_000), 4)
                if answer.error_code == NONE:
                    return int(answer.producer_id), int(answer.producer_epoch)
                assert time.monotonic() < deadline, answer
                time.sleep(0.3)

        def end_txn(pid: int, epoch: int, commit: bool) -> int:
            return int(ask(conn, ApiKey.END_TXN, request(
                ApiKey.END_TXN, transactional_id=tx, producer_id=pid, producer_epoch=epoch,
                committed=commit), 3).error_code)

        def add_partitions(pid: int, epoch: int, version: int) -> int:
            answer = ask(conn, ApiKey.ADD_PARTITIONS_TO_TXN, request(
                ApiKey.ADD_PARTITIONS_TO_TXN, transactional_id=tx, producer_id=pid,
                producer_epoch=epoch, topics=[struct(
                    ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnTopic", name=topic,
                    partitions=[0])]), version)
            return int(answer.results[0].results[0].error_code)

        pid, _ = init()
        pid, epoch = init()  # epoch 1: epoch 0 is stale
        txn_log = log_end(cluster, coordinator, TRANSACTION_STATE_TOPIC_NAME, txn_partition)
        assert end_txn(pid, epoch, commit=True) == INVALID_TXN_STATE  # no transaction
        assert end_txn(pid, epoch, commit=False) == INVALID_TXN_STATE
        assert add_partitions(pid, epoch - 1, 1) == INVALID_PRODUCER_EPOCH
        assert add_partitions(pid, epoch - 1, 3) == PRODUCER_FENCED
        assert log_end(cluster, coordinator, TRANSACTION_STATE_TOPIC_NAME,
                       txn_partition) == txn_log

        data_log = log_end(cluster, leader, topic, 0)

        def produce(records: bytes, transactional_id: str | None) -> int:
            body = _produce_body(topic, 0, records, acks=-1)
            body.transactional_id = transactional_id
            with _connection_to(cluster, leader) as data_conn:
                return _produce_error(ask(data_conn, ApiKey.PRODUCE, body, 8))[0]

        def batch(value: bytes, seq: int, transactional: bool) -> bytes:
            return build_record_batch([(None, value, None, int(time.time() * 1000))],
                                      producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq, is_transactional=transactional)

        # A transactional batch in a request without a transactional id.
        assert produce(batch(b"x", 0, True), None) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert log_end(cluster, leader, topic, 0) == data_log
        # The same producer in a transaction, then a non-transactional batch from it.
        assert add_partitions(pid, epoch, 3) == NONE
        assert produce(batch(b"in-txn", 0, True), tx) == NONE
        assert produce(batch(b"plain", 1, False), None) == INVALID_TXN_STATE
        assert log_end(cluster, leader, topic, 0) == data_log + 1
        assert end_txn(pid, epoch, commit=True) == NONE
    wait_for(lambda: lso_and_hw(cluster, leader, topic) == (data_log + 2, data_log + 2),
             "the commit marker was not written")
    assert confluent_read(cluster, topic, 1, "read_committed", 1) == ["in-txn"]
