"""The project's transactional producer and read_committed consumer on a local cluster of
three broker processes, checked against confluent-kafka (librdkafka): our commits and aborts
read back by confluent-kafka's and our read_committed consumers; our read_committed
consumer agrees with confluent-kafka's on transactions written by confluent-kafka; fencing
of a zombie producer; exactly-once consume-transform-produce with our clients; an open
transaction holds read_committed at its first offset; and the consumer's ``client.rack``
following the leader's preferred read replica (KIP-392)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.clients import (
    Consumer,
    Producer,
    TopicPartition,
    TransactionAbortedError,
)
from kafkaclone.common.errors import InvalidProducerEpochError, ProducerFencedError
from kafkaclone.server.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_data_path_clients import create_topic

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PARTITIONS = 2
FENCED = (ProducerFencedError, InvalidProducerEpochError)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"transaction.state.log.num.partitions": "3",
                                    "transaction.state.log.replication.factor": "3",
                                    "transaction.state.log.min.isr": "2",
                                    "offsets.topic.num.partitions": "3",
                                    "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR},
                      broker_overrides={b: {"broker.rack": f"rack-{b}"} for b in (1, 2, 3)}
                      ) as local:
        yield local


def topic(cluster: LocalCluster, name: str, partitions: int = PARTITIONS) -> str:
    create_topic(cluster, name, partitions=partitions, replication_factor=3,
                 configs={"min.insync.replicas": "2"})
    return name


def our_producer(cluster: LocalCluster, transactional_id: str, **conf: Any) -> Producer:
    settings = {"bootstrap.servers": cluster.bootstrap_servers,
                "transactional.id": transactional_id, "linger.ms": 5}
    settings.update(conf)
    producer = Producer(settings)
    producer.init_transactions(60)
    return producer


def our_read(cluster: LocalCluster, name: str, isolation: str, *,
             partitions: int = PARTITIONS, settle: float = 1.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record up to the end (the last stable offset
    under read_committed), read by our consumer."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "isolation.level": isolation, "fetch.max.wait.ms": 100})
    tps = [TopicPartition(name, p, 0) for p in range(partitions)]
    try:
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        consumer.assign(tps)
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for record in consumer.poll(0.2):
                out.append((record.partition, record.offset, record.value))
            positions = consumer.position(tps)
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                break
        # Nothing more arrives past the end (read_committed: nothing past the LSO).
        settle_until = time.monotonic() + settle
        while time.monotonic() < settle_until:
            for record in consumer.poll(0.2):
                out.append((record.partition, record.offset, record.value))
        return sorted(out)
    finally:
        consumer.close()


def confluent_read(cluster: LocalCluster, name: str, isolation: str, *,
                   partitions: int = PARTITIONS) -> list[tuple[int, int, bytes]]:
    consumer = CkConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                           "group.id": f"check-{isolation}", "isolation.level": isolation,
                           "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(name, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and len(at_end) < partitions:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == -191:  # _PARTITION_EOF
                    at_end.add(message.partition())
                    continue
                raise KafkaException(error)
            at_end.discard(message.partition())
            out.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert len(at_end) == partitions, "confluent-kafka did not reach the end"
    return sorted(out)


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(r[2] for r in records)


def send(producer: Producer, name: str, tag: str, count: int) -> None:
    for i in range(count):
        producer.send(name, f"{tag}-{i}".encode(), partition=i % PARTITIONS)


def test_our_commits_and_aborts_read_by_confluent_and_by_us(cluster: LocalCluster) -> None:
    name = topic(cluster, "ours-txn")
    producer = our_producer(cluster, "ours-1")
    try:
        producer.begin_transaction()
        send(producer, name, "committed", 10)
        producer.commit_transaction(60)
        producer.begin_transaction()
        send(producer, name, "aborted", 6)
        producer.flush(30)
        producer.abort_transaction(60)
        producer.begin_transaction()
        send(producer, name, "again", 4)
        producer.commit_transaction(60)
        # Queued and never sent when the abort came: failed, written nowhere.
        producer.begin_transaction()
        futures = [producer.send(name, b"dropped", partition=0) for _ in range(3)]
        producer.abort_transaction(60)
        for future in futures:
            error = future.exception(30)
            assert error is None or isinstance(error, TransactionAbortedError)
    finally:
        producer.close()
    committed = sorted([f"committed-{i}".encode() for i in range(10)] +
                       [f"again-{i}".encode() for i in range(4)])
    theirs = confluent_read(cluster, name, "read_committed")
    ours = our_read(cluster, name, "read_committed")
    assert values(theirs) == committed
    assert ours == theirs  # the same records at the same offsets
    uncommitted = values(our_read(cluster, name, "read_uncommitted"))
    assert [v for v in uncommitted if v != b"dropped"] == sorted(
        committed + [f"aborted-{i}".encode() for i in range(6)])
    assert values(confluent_read(cluster, name, "read_uncommitted")) == uncommitted


def test_our_read_committed_agrees_with_confluent_on_its_transactions(
        cluster: LocalCluster) -> None:
    name = topic(cluster, "theirs-txn")
    tx = CkProducer({"bootstrap.servers": cluster.bootstrap_servers,
                     "transactional.id": "theirs-1", "linger.ms": 5})
    tx.init_transactions(60)
    plain = CkProducer({"bootstrap.servers": cluster.bootstrap_servers})
    for round_ in range(6):
        tx.begin_transaction()
        for i in range(5):
            tx.produce(name, value=f"tx{round_}-{i}".encode(), partition=i % PARTITIONS)
            if i == 2:  # a non-transactional record between the transaction's records
                plain.produce(name, value=f"plain{round_}".encode(), partition=round_ % 2)
                plain.flush(30)
        tx.flush(30)
        if round_ % 3 == 1:
            tx.abort_transaction(60)
        else:
            tx.commit_transaction(60)
    theirs = confluent_read(cluster, name, "read_committed")
    ours = our_read(cluster, name, "read_committed")
    assert ours == theirs
    assert {v for v in values(ours) if v.startswith(b"tx")} == {
        f"tx{r}-{i}".encode() for r in (0, 2, 3, 5) for i in range(5)}
    assert len(our_read(cluster, name, "read_uncommitted")) == 6 * 5 + 6


def test_a_second_producer_fences_the_first(cluster: LocalCluster) -> None:
    name = topic(cluster, "fenced-txn")
    first = our_producer(cluster, "zombie")
    second = None
    try:
        first.begin_transaction()
        send(first, name, "before", 2)
        first.flush(30)
        second = our_producer(cluster, "zombie")  # aborts the first's open transaction
        with pytest.raises(FENCED):
            send(first, name, "zombie", 2)
            first.commit_transaction(60)
        with pytest.raises(FENCED):  # fatal: every later call fails too
            first.begin_transaction()
        second.begin_transaction()
        send(second, name, "second", 2)
        second.commit_transaction(60)
    finally:
        first.close(5)
        if second is not None:
            second.close()
    assert values(confluent_read(cluster, name, "read_committed")) == [b"second-0",
                                                                        b"second-1"]


def test_consume_transform_produce_exactly_once(cluster: LocalCluster) -> None:
    source = topic(cluster, "ctp-in")
    sink = topic(cluster, "ctp-out")
    count = 300
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(count):
        plain.send(source, b"%d" % i, partition=i % PARTITIONS)
    plain.close()
    group = "ctp-group"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "max.poll.records": 40})
    producer = our_producer(cluster, "ctp-1")
    consumer.subscribe([source])
    transactions = aborted = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            records = consumer.poll(0.5)
            if not records:
                positions = consumer.position(consumer.assignment())
                if consumer.assignment() and sum(tp.offset for tp in positions) >= count:
                    break
                continue
            producer.begin_transaction()
            for record in records:
                producer.send(sink, b"out-" + record.value, partition=record.partition)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                                 60)
            transactions += 1
            if transactions % 3 == 2:
                # A failed step: abort, and go back to the group's committed offsets.
                producer.abort_transaction(60)
                aborted += 1
                for tp in consumer.committed(consumer.assignment(), timeout=30):
                    consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else 0))
                continue
            producer.commit_transaction(60)
    finally:
        producer.close()
        committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)],
                                       timeout=30)
        consumer.close()
    assert aborted >= 1
    out = our_read(cluster, sink, "read_committed")
    assert sorted(v for v in values(out)) == sorted(b"out-%d" % i for i in range(count))
    assert values(confluent_read(cluster, sink, "read_committed")) == values(out)
    assert {tp.partition: tp.offset for tp in committed} == {0: count // 2, 1: count // 2}


def test_an_open_transaction_holds_read_committed_at_its_first_offset(
        cluster: LocalCluster) -> None:
    name = topic(cluster, "open-txn", partitions=1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(2):
        plain.send(name, b"early-%d" % i, partition=0).get(30)
    producer = our_producer(cluster, "open-1")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "isolation.level": "read_committed", "fetch.max.wait.ms": 100})
    try:
        producer.begin_transaction()
        first = producer.send(name, b"in-txn", partition=0).get(30).offset
        for i in range(3):
            plain.send(name, b"late-%d" % i, partition=0).get(30)
        consumer.assign([TopicPartition(name, 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 3  # the transaction stays open this long at least
        while time.monotonic() < deadline:
            seen += [r.value for r in consumer.poll(0.2)]
        assert seen == [b"early-0", b"early-1"]
        assert consumer.position(TopicPartition(name, 0)) == first
        _low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=30)
        assert high == first  # ListOffsets latest under read_committed: the LSO
        producer.commit_transaction(60)
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            seen += [r.value for r in consumer.poll(0.2)]
        assert seen == [b"early-0", b"early-1", b"in-txn", b"late-0", b"late-1", b"late-2"]
    finally:
        consumer.close()
        producer.close()
        plain.close()


def test_client_rack_fetches_from_the_preferred_read_replica(cluster: LocalCluster) -> None:
    name = topic(cluster, "racks", partitions=1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    leader = plain.send(name, b"first", partition=0).get(30)
    leader_id = plain.metadata.leader(name, 0)
    follower = next(b for b in (1, 2, 3) if b != leader_id)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "client.rack": f"rack-{follower}", "fetch.max.wait.ms": 100})
    fetched_from: list[int] = []
    handle = consumer._handle_fetch

    def recording(node_id: int, *args: Any) -> None:
        fetched_from.append(node_id)
        handle(node_id, *args)

    consumer._handle_fetch = recording  # type: ignore[method-assign]
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        seen = [r.value for r in consumer.poll(10)]
        assert seen == [b"first"] and leader.offset == 0
        state = consumer._subscriptions.assignment[(name, 0)]
        assert state.preferred_read_replica == follower
        for i in range(5):
            plain.send(name, b"more-%d" % i, partition=0).get(30)
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            seen += [r.value for r in consumer.poll(0.2)]
        assert seen == [b"first"] + [b"more-%d" % i for i in range(5)]
        assert follower in fetched_from[1:]  # the follower served fetches
        # The preferred replica goes away: the consumer goes back to the leader.
        cluster.broker(follower).stop()
        try:
            for i in range(3):
                plain.send(name, b"after-%d" % i, partition=0).get(60)
            deadline = time.monotonic() + 60
            while len(seen) < 9 and time.monotonic() < deadline:
                seen += [r.value for r in consumer.poll(0.2)]
            assert seen[6:] == [b"after-%d" % i for i in range(3)]
            assert state.preferred_read_replica != follower
            assert fetched_from[-1] != follower
        finally:
            cluster.restart_broker(follower)
    finally:
        consumer.close()
        plain.close()
