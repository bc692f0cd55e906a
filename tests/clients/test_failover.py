"""The project's clients through broker failures on a three-broker cluster: a partition
leader killed mid-produce (acks=all, retries, idempotence: nothing acknowledged is lost,
nothing is written twice or out of order), and the group coordinator killed mid-consume
(the group carries on, commits land on the new one)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkaclone.clients import Consumer, Producer, TopicPartition
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import (
    IllegalGenerationError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]
BROKERS = [1, 2, 3]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"replica.lag.time.max.ms": "5000",
                                    "offsets.topic.replication.factor": "3",
                                    "auto.create.topics.enable": "false"}) as local:
        yield local


def restart(cluster: LocalCluster, broker: int) -> None:
    """Start a killed broker again once its old registration has gone with its ZooKeeper
    session (before that a broker refuses to start: broker.id already registered)."""
    deadline = time.monotonic() + 30
    while broker in cluster.registered_broker_ids() and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.restart_broker(broker)


def controller(cluster: LocalCluster) -> int:
    deadline = time.monotonic() + 30
    with AdminClient(cluster.bootstrap_servers) as admin:
        while time.monotonic() < deadline:
            node = admin.describe_cluster().controller
            if node is not None:
                return node.id
            time.sleep(0.1)
    raise AssertionError("no controller")


def create_topic(cluster: LocalCluster, assignment: dict[int, list[int]]) -> str:
    name = f"fo-{uuid.uuid4().hex[:8]}"
    with AdminClient(cluster.bootstrap_servers) as admin:
        assert admin.create_topics([NewTopic(name, replica_assignment=assignment,
                                             configs={"min.insync.replicas": "2"})]) == \
            {name: None}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            description = admin.describe_topics([name])[name]
            if not isinstance(description, Exception) and all(
                    p.leader == assignment[p.partition][0] and len(p.isr) == 3
                    for p in description.partitions):
                return name
            time.sleep(0.1)
    raise AssertionError("the topic's replicas did not all join the ISR")


def read_all(cluster: LocalCluster, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "auto.offset.reset": "earliest"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5)]
            positions = consumer.position(tps)
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return values
        raise AssertionError("could not read the topic to its end")
    finally:
        consumer.close()


def test_a_leader_killed_mid_produce_loses_nothing_acknowledged(cluster: LocalCluster) -> None:
    victim = next(b for b in BROKERS if b != controller(cluster))
    others = [b for b in BROKERS if b != victim]
    topic = create_topic(cluster, {0: [victim, *others], 1: [others[0], victim, others[1]],
                                   2: [victim, others[1], others[0]]})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 2, "request.timeout.ms": 10000,
                         "delivery.timeout.ms": 60000, "retry.backoff.ms": 100})
    acked: list[bytes] = []
    failed: list[str] = []
    acked_after_kill: set[int] = set()
    lock = threading.Lock()
    killed_at: list[float] = []

    def delivered(error: Any, metadata: Any) -> None:
        with lock:
            if error is None:
                acked.append(metadata.value)
                if killed_at and time.monotonic() > killed_at[0] + 0.5:
                    acked_after_kill.add(metadata.partition)
            else:
                failed.append(str(error))

    start = time.monotonic()
    sent = 0
    try:
        while time.monotonic() - start < 9 and sent < 100_000:
            if not killed_at and time.monotonic() - start > 3:
                cluster.broker(victim).kill()
                killed_at.append(time.monotonic())
            producer.send(topic, b"m-%d" % sent, partition=sent % 3, on_delivery=delivered)
            sent += 1
            if sent % 50 == 0:
                time.sleep(0.005)
        assert producer.flush(90) == 0
    finally:
        producer.close(5)
        restart(cluster, victim)
    assert killed_at and not failed, failed[:5]
    assert len(acked) == sent > 1000
    # The partitions the dead broker led took records again once they had new leaders.
    assert {0, 2} <= acked_after_kill
    # The producer is idempotent (the default): each partition holds every value once, in
    # the order sent, whatever was retried across the leader change.
    by_partition: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for value in read_all(cluster, topic, 3):
        number = int(value.removeprefix(b"m-"))
        by_partition[number % 3].append(number)
    assert by_partition == {p: list(range(p, sent, 3)) for p in range(3)}


def stable_coordinator(cluster: LocalCluster, group: str) -> int:
    """The group's coordinator once the same broker has answered for a second (just
    after __consumer_offsets is created its leaders may still move)."""
    deadline = time.monotonic() + 30
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = find_coordinator(cluster, group)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 1.0:
            return now
        time.sleep(0.1)
    raise AssertionError("the coordinator kept moving")


def commit_through_rebalances(consumer: Consumer, got: list[bytes],
                              ends: dict[TopicPartition, int]) -> list[TopicPartition]:
    """Read to ``ends`` and commit synchronously; when the coordinator does not know the
    member any more (Kafka's CommitFailedException case) poll to rejoin, which restarts
    from the committed offsets, and read to the ends again."""
    deadline = time.monotonic() + 60
    while True:
        while time.monotonic() < deadline:
            assigned = consumer.assignment()
            if sorted(assigned) == sorted(ends) and all(
                    tp.offset >= ends[tp] for tp in consumer.position(assigned)):
                break
            got += [r.value for r in consumer.poll(0.3)]
        try:
            committed = consumer.commit(asynchronous=False)
            assert committed is not None
            return committed
        except (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError):
            if time.monotonic() > deadline:
                raise
            got += [r.value for r in consumer.poll(0.3)]


def find_coordinator(cluster: LocalCluster, group: str) -> int:
    request = api.APIS[ApiKey.FIND_COORDINATOR].request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for broker in BROKERS:
            if not cluster.broker(broker).running:
                continue
            host, port = cluster.broker(broker).bootstrap_server.split(":")
            with BrokerConnection(host, int(port)) as conn:
                _, answer = conn.request(ApiKey.FIND_COORDINATOR,
                                         request(key=group, key_type=0))
            if answer.error_code == 0:
                return int(answer.node_id)
        time.sleep(0.2)
    raise AssertionError("no coordinator")


def test_a_coordinator_killed_mid_consume(cluster: LocalCluster) -> None:
    group = f"fo-group-{uuid.uuid4().hex[:6]}"
    # Every partition led by a broker that stays up; the coordinator is the one to die.
    coordinator = stable_coordinator(cluster, group)
    survivors = [b for b in BROKERS if b != coordinator]
    topic = create_topic(cluster, {0: [survivors[0], survivors[1], coordinator],
                                   1: [survivors[1], survivors[0], coordinator]})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.send(topic, b"before-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "heartbeat.interval.ms": 300,
                         "session.timeout.ms": 6000, "auto.commit.interval.ms": 500})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        got += [r.value for r in consumer.poll(0.3)]
    assert sorted(got) == sorted(b"before-%d" % i for i in range(100))
    commit_through_rebalances(consumer, got, {TopicPartition(topic, 0): 50,
                                              TopicPartition(topic, 1): 50})

    cluster.broker(coordinator).kill()
    try:
        for i in range(100):
            producer.send(topic, b"after-%d" % i, partition=i % 2)
        assert producer.flush(60) == 0
        producer.close()
        expected = {b"before-%d" % i for i in range(100)} | {b"after-%d" % i for i in range(100)}
        deadline = time.monotonic() + 60
        while set(got) != expected and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(0.3)]
        # Everything arrives (a rejoin may deliver some records again: at least once).
        assert set(got) == expected
        # Commits go to the new coordinator, which answers for the group.
        committed = commit_through_rebalances(consumer, got, {TopicPartition(topic, 0): 100,
                                                              TopicPartition(topic, 1): 100})
        assert sum(tp.offset for tp in committed) == 200
        assert find_coordinator(cluster, group) != coordinator
        consumer.close()
    finally:
        restart(cluster, coordinator)
    checker = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    assert sum(tp.offset for tp in checker.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)) == 200
    checker.close()


def test_a_frozen_leader_fails_sends_by_delivery_timeout_and_polls_return(
        cluster: LocalCluster) -> None:
    victim = next(b for b in BROKERS if b != controller(cluster))
    others = [b for b in BROKERS if b != victim]
    topic = create_topic(cluster, {0: [victim, *others]})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "request.timeout.ms": 2000, "fetch.max.wait.ms": 500,
                         "socket.connection.setup.timeout.ms": 1000})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "request.timeout.ms": 1000, "delivery.timeout.ms": 2500,
                         "socket.connection.setup.timeout.ms": 1000})
    producer.send(topic, b"warm", partition=0).result(10)
    # Connected to the leader, with everything it had read, before it freezes: a fetch in
    # flight when the record was appended may deliver it on any later poll.
    warm: list[bytes | None] = []
    deadline = time.monotonic() + 15
    while not warm and time.monotonic() < deadline:
        warm.extend(record.value for record in consumer.poll(0.5))
    assert warm == [b"warm"]
    cluster.broker(victim).suspend()
    try:
        started = time.monotonic()
        future = producer.send(topic, b"frozen", partition=0)
        with pytest.raises(RequestTimedOutError):
            future.result(15)
        assert time.monotonic() - started < 8
        started = time.monotonic()
        assert consumer.poll(1.0) == []
        assert consumer.poll(1.0) == []
        assert time.monotonic() - started < 8
    finally:
        cluster.broker(victim).resume()
        producer.close(5)
        consumer.close()
