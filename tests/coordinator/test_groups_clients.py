"""Consumer groups end to end with clients nobody here wrote (confluent-kafka/librdkafka and
kafka-python) on a local cluster of three broker processes: partition assignment and
rebalances (a member joins, leaves, is killed), exactly-once consumption with commits after
processing, auto commit, the legacy ZooKeeper offset path (OffsetCommit v0), queue and
publish/subscribe semantics, and the error codes of bad input.

One cluster serves the whole module; every wait is bounded in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import (
    NONE,
    IllegalGenerationError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PARTITIONS = 6
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, overrides={"offsets.topic.num.partitions": "10"}) as local:
        yield local


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def create_topic(cluster: LocalCluster, name: str, partitions: int = PARTITIONS) -> None:
    """kafka-topics.sh --create, then wait until every partition has a leader. (Not
    confluent-kafka's AdminClient: its futures stop resolving once kafka-python 3.0 has been
    imported into the same process.)"""
    done = subprocess.run(
        [str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server", cluster.bootstrap_servers,
         "--create", "--topic", name, "--partitions", str(partitions),
         "--replication-factor", "1"], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = producer.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} has no leaders")


def produce(cluster: LocalCluster, topic: str, count: int, partitions: int = PARTITIONS) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=str(i).encode(), partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def consumer(cluster: LocalCluster, group: str, **extra: Any) -> Consumer:
    config = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_TIMEOUT_MS,
              "heartbeat.interval.ms": 500, "enable.partition.eof": False}
    config.update(extra)
    return Consumer(config)


def poll_until(consumers: list[Consumer], condition: Callable[[], bool],
               timeout: float = 60.0, on_message: Callable[[Consumer, Any], None] | None = None
               ) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        for c in consumers:
            message = c.poll(0.05)
            if message is not None and message.error() is None and on_message is not None:
                on_message(c, message)


def partition_counts(consumers: list[Consumer]) -> list[int]:
    return sorted(len(c.assignment()) for c in consumers)


def assigned(consumers: list[Consumer]) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for c in consumers for tp in c.assignment())


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_members_share_partitions_and_rebalance(cluster: LocalCluster, zk: KazooClient,
                                                strategy: str) -> None:
    topic, group = f"share-{strategy}", f"share-{strategy}"
    create_topic(cluster, topic)
    members = [consumer(cluster, group, **{"partition.assignment.strategy": strategy})
               for _ in range(3)]
    try:
        for c in members:
            c.subscribe([topic])
        everything = [(topic, p) for p in range(PARTITIONS)]
        poll_until(members, lambda: partition_counts(members) == [2, 2, 2]
                   and assigned(members) == everything)
        # The mirror for monitoring tools: one ids znode per member, one owner per partition.
        poll_until(members, lambda: len(zk.get_children(f"/consumers/{group}/ids")) == 3
                   and len(zk.get_children(f"/consumers/{group}/owners/{topic}")) == 6)
        # A fourth member joins: everyone rebalances.
        fourth = consumer(cluster, group, **{"partition.assignment.strategy": strategy})
        members.append(fourth)
        fourth.subscribe([topic])
        poll_until(members, lambda: partition_counts(members) == [1, 1, 2, 2]
                   and assigned(members) == everything)
        # One leaves (LeaveGroup on close): its partitions move to the others.
        members.pop(0).close()
        poll_until(members, lambda: partition_counts(members) == [2, 2, 2]
                   and assigned(members) == everything)
    finally:
        for c in members:
            c.close()


KILLED_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_killed_member_partitions_move_within_session_timeout(cluster: LocalCluster) -> None:
    topic = group = "killed"
    create_topic(cluster, topic)
    survivors = [consumer(cluster, group) for _ in range(2)]
    victim = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONSUMER, cluster.bootstrap_servers, group, topic,
         str(SESSION_TIMEOUT_MS)], stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "assigned"
        for c in survivors:
            c.subscribe([topic])
        poll_until(survivors, lambda: partition_counts(survivors) == [2, 2])
        os.kill(victim.pid, signal.SIGKILL)  # no LeaveGroup: only the session can tell
        victim.wait(10)
        killed_at = time.monotonic()
        poll_until(survivors, lambda: partition_counts(survivors) == [3, 3],
                   timeout=SESSION_TIMEOUT_MS / 1000 + 20)
        # The session expires after 6 s, then the survivors rejoin (within their
        # heartbeat interval and the rebalance): well within session timeout + a few seconds.
        assert time.monotonic() - killed_at < SESSION_TIMEOUT_MS / 1000 + 10
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        if victim.stdout is not None:
            victim.stdout.close()
        for c in survivors:
            c.close()


def test_exactly_once_with_commits_after_processing(cluster: LocalCluster) -> None:
    topic = group = "exactly-once"
    # The acceptance run is 100k: KAFKACLONE_EXACTLY_ONCE_MESSAGES=100000.
    total = int(os.environ.get("KAFKACLONE_EXACTLY_ONCE_MESSAGES", "20000"))
    create_topic(cluster, topic)
    produce(cluster, topic, total)
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    processed: dict[int, dict[int, int]] = {}  # consumer id -> partition -> next offset

    def commit(c: Consumer) -> None:
        positions = processed.get(id(c), {})
        if positions:
            c.commit(offsets=[CkTopicPartition(topic, p, o) for p, o in positions.items()],
                     asynchronous=False)
            positions.clear()

    def on_revoke(c: Consumer, partitions: list[CkTopicPartition]) -> None:
        commit(c)  # commit what was processed before the partitions move

    def make() -> Consumer:
        c = consumer(cluster, group, **{"enable.auto.commit": False})
        c.subscribe([topic], on_revoke=on_revoke)
        return c

    def process(c: Consumer, message: Any) -> None:
        seen[message.partition()].append(int(message.value()))
        processed.setdefault(id(c), {})[message.partition()] = message.offset() + 1

    members = [make() for _ in range(3)]
    count = lambda: sum(len(v) for v in seen.values())  # noqa: E731
    try:
        poll_until(members, lambda: count() >= total // 3, timeout=120, on_message=process)
        for c in members:
            commit(c)
        # Membership changes mid-stream: one closes (after committing), one joins.
        leaving = members.pop(0)
        commit(leaving)
        leaving.close()
        members.append(make())
        deadline = time.monotonic() + 180
        while count() < total and time.monotonic() < deadline:
            for c in members:
                for message in c.consume(500, 0.05):
                    if message.error() is None:
                        process(c, message)
                commit(c)
        # Nothing more arrives: every message was consumed exactly once, in order.
        poll_until(members, lambda: False if count() > total else True, timeout=5,
                   on_message=process)
        assert count() == total
        for p, values in seen.items():
            assert values == list(range(p, total, PARTITIONS)), f"partition {p}"
    finally:
        for c in members:
            c.close()


def test_two_groups_each_get_everything_members_of_one_share(cluster: LocalCluster) -> None:
    topic = "pubsub"
    create_topic(cluster, topic)
    got: dict[str, list[int]] = {"queue": [], "subscriber": []}
    per_member: dict[int, int] = {}
    queue = [consumer(cluster, "pubsub-queue") for _ in range(2)]
    subscriber = [consumer(cluster, "pubsub-subscriber")]
    for c in queue + subscriber:
        c.subscribe([topic])
    poll_until(queue + subscriber, lambda: partition_counts(queue) == [3, 3]
               and partition_counts(subscriber) == [6])
    produce(cluster, topic, 600)

    def on_message(c: Consumer, message: Any) -> None:
        got["subscriber" if c in subscriber else "queue"].append(int(message.value()))
        per_member[id(c)] = per_member.get(id(c), 0) + 1

    try:
        poll_until(queue + subscriber,
                   lambda: len(got["queue"]) >= 600 and len(got["subscriber"]) >= 600,
                   timeout=90, on_message=on_message)
        assert sorted(got["queue"]) == sorted(got["subscriber"]) == list(range(600))
        # The two members of the queue group shared the messages (2 x 3 partitions).
        assert sorted(per_member[id(c)] for c in queue) == [300, 300]
    finally:
        for c in queue + subscriber:
            c.close()


def test_kafka_python_group_with_auto_commit(cluster: LocalCluster, zk: KazooClient) -> None:
    from kafka import KafkaConsumer

    topic = group = "kafka-python-auto"
    create_topic(cluster, topic)
    produce(cluster, topic, 300)
    kp = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                       auto_offset_reset="earliest", enable_auto_commit=True,
                       auto_commit_interval_ms=200, consumer_timeout_ms=20_000)
    values = []
    try:
        for message in kp:
            values.append(int(message.value))
            if len(values) == 300:
                break
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # let an auto commit run
            kp.poll(200)
            committed = [kp.committed(tp) for tp in kp.assignment()]
            if len(committed) == PARTITIONS and sum(c or 0 for c in committed) == 300:
                break
    finally:
        kp.close()
    assert sorted(values) == list(range(300))
    offsets = {p: int(zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0])
               for p in range(PARTITIONS)}
    assert offsets == dict.fromkeys(range(PARTITIONS), 50)


def test_kafka_python_0_8_1_commits_to_zookeeper(cluster: LocalCluster,
                                                 zk: KazooClient) -> None:
    """kafka-python speaking Kafka 0.8.1 commits with OffsetCommit v0 and reads back with
    OffsetFetch v0: Kafka's legacy ZooKeeper path, on whichever broker it asks. (Its
    consuming through Fetch v0 is tested in tests/server/test_legacy_versions.py.)"""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = "legacy-commit", "legacy-group"
    create_topic(cluster, topic, partitions=2)
    kp = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                       api_version=(0, 8, 1), enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        kp.assign(partitions)
        assert kp.committed(partitions[0]) is None  # nothing there yet
        kp.commit({partitions[0]: OffsetAndMetadata(25, "", -1),
                   partitions[1]: OffsetAndMetadata(7, "meta", -1)})
        assert zk.get(f"/consumers/{group}/offsets/{topic}/0")[0] == b"25"
        assert zk.get(f"/consumers/{group}/offsets/{topic}/1")[0] == b"7"
        assert kp.committed(partitions[0]) == 25
        assert kp.committed(partitions[1]) == 7
    finally:
        kp.close()
    # The group coordinator sees the same offsets (OffsetFetch v1+).
    c = consumer(cluster, group)
    try:
        committed = c.committed([CkTopicPartition(topic, 0), CkTopicPartition(topic, 1)],
                                timeout=20)
        assert [tp.offset for tp in committed] == [25, 7]
    finally:
        c.close()


# -- bad input, on the wire -------------------------------------------------------------------


def _connect(cluster: LocalCluster, broker_id: int) -> BrokerConnection:
    broker = cluster.broker(broker_id)
    return BrokerConnection("127.0.0.1", broker.port, client_id="bad-input")


def _coordinator(cluster: LocalCluster, group: str) -> tuple[BrokerConnection, int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with _connect(cluster, 1) as connection:
            _, found = connection.request(ApiKey.FIND_COORDINATOR,
                                          api.APIS[ApiKey.FIND_COORDINATOR].request(
                                              key=group, key_type=0), version=2)
        if found.error_code == NONE:
            return _connect(cluster, found.node_id), found.node_id
        time.sleep(0.2)
    raise AssertionError(f"no coordinator for {group}")


def _join(connection: BrokerConnection, group: str, member_id: str = "", *,
          session_timeout_ms: int = SESSION_TIMEOUT_MS) -> Any:
    body = api.APIS[ApiKey.JOIN_GROUP].request(
        group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=[api.APIS[ApiKey.JOIN_GROUP].request.structs["JoinGroupRequestProtocol"](
            name="range", metadata=b"")])
    return connection.request(ApiKey.JOIN_GROUP, body, version=5)[1]


def test_bad_input_error_codes(cluster: LocalCluster, zk: KazooClient) -> None:
    group = "bad-input"
    create_topic(cluster, "bad-input-topic", partitions=1)
    connection, coordinator_id = _coordinator(cluster, group)
    with connection:
        assert _join(connection, group, session_timeout_ms=100).error_code == (
            InvalidSessionTimeoutError.code)
        assert _join(connection, group, session_timeout_ms=3_600_000).error_code == (
            InvalidSessionTimeoutError.code)
        assert _join(connection, group, "nobody").error_code == UnknownMemberIdError.code
        first = _join(connection, group)
        assert first.error_code == MemberIdRequiredError.code  # v4+: KIP-394
        joined = _join(connection, group, first.member_id)
        assert joined.error_code == NONE and joined.generation_id == 1
        heartbeat = api.APIS[ApiKey.HEARTBEAT].request
        _, answer = connection.request(ApiKey.HEARTBEAT, heartbeat(
            group_id=group, generation_id=0, member_id=joined.member_id,
            group_instance_id=None), version=3)
        assert answer.error_code == IllegalGenerationError.code
        _, answer = connection.request(ApiKey.HEARTBEAT, heartbeat(
            group_id=group, generation_id=1, member_id="stranger", group_instance_id=None),
            version=3)
        assert answer.error_code == UnknownMemberIdError.code
        commit = api.APIS[ApiKey.OFFSET_COMMIT].request
        topic_struct = commit.structs["OffsetCommitRequestTopic"]
        partition_struct = commit.structs["OffsetCommitRequestPartition"]

        def commit_to(topic: str, generation: int) -> int:
            _, answer = connection.request(ApiKey.OFFSET_COMMIT, commit(
                group_id=group, generation_id=generation, member_id=joined.member_id,
                group_instance_id=None, topics=[topic_struct(name=topic, partitions=[
                    partition_struct(partition_index=0, committed_offset=5,
                                     committed_leader_epoch=-1,
                                     committed_metadata=None)])]), version=7)
            return int(answer.topics[0].partitions[0].error_code)

        assert commit_to("no-such-topic", 1) == UnknownTopicOrPartitionError.code
        assert commit_to("bad-input-topic", 0) == IllegalGenerationError.code
        # Until the leader's SyncGroup the generation is not complete.
        assert commit_to("bad-input-topic", 1) == RebalanceInProgressError.code
        _, synced = connection.request(ApiKey.SYNC_GROUP, api.APIS[ApiKey.SYNC_GROUP].request(
            group_id=group, generation_id=1, member_id=joined.member_id,
            group_instance_id=None, assignments=[]), version=3)
        assert synced.error_code == NONE
        assert commit_to("bad-input-topic", 1) == NONE
        assert zk.get(f"/consumers/{group}/offsets/bad-input-topic/0")[0] == b"5"
    # Any other broker is not this group's coordinator.
    other = next(b for b in (1, 2, 3) if b != coordinator_id)
    with _connect(cluster, other) as connection:
        assert _join(connection, group).error_code == NotCoordinatorError.code


def test_group_ids_that_are_not_znode_names(cluster: LocalCluster, zk: KazooClient) -> None:
    topic = "odd-groups"
    create_topic(cluster, topic, partitions=1)
    for group, znode in (("a/b", "a%2Fb"), ("..", "%2E%2E")):
        c = consumer(cluster, group, **{"enable.auto.commit": False})
        try:
            c.commit(offsets=[CkTopicPartition(topic, 0, 3)], asynchronous=False)
            assert c.committed([CkTopicPartition(topic, 0)], timeout=10)[0].offset == 3
        finally:
            c.close()
        assert zk.get(f"/consumers/{znode}/offsets/{topic}/0")[0] == b"3"


def test_kcat_balanced_consumer_commits(cluster: LocalCluster, zk: KazooClient) -> None:
    topic = group = "kcat-group"
    create_topic(cluster, topic, partitions=3)
    produce(cluster, topic, 150, partitions=3)  # 50 per partition
    done = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-G", group, "-o", "beginning",
         "-c", "150", "-f", "%p %o\n", "-X", "enable.auto.commit=true",
         "-X", "auto.commit.interval.ms=200", topic],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    seen = sorted(tuple(map(int, line.split())) for line in done.stdout.splitlines() if line)
    assert seen == sorted((p, o) for p in range(3) for o in range(50))
    # kcat commits on close: each partition's next offset is in ZooKeeper.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = {p: zk.exists(f"/consumers/{group}/offsets/{topic}/{p}") for p in range(3)}
        if all(found.values()) and all(
                zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0] == b"50" for p in range(3)):
            break
        time.sleep(0.2)
    assert {p: zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0] for p in range(3)} == \
        dict.fromkeys(range(3), b"50")


def test_aiokafka_group_consumer(cluster: LocalCluster, zk: KazooClient) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    topic = group = "aiokafka-group"
    create_topic(cluster, topic, partitions=2)
    produce(cluster, topic, 100, partitions=2)

    async def consume() -> list[int]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                                    group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        values: list[int] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    values.append(int(message.value))
                    if len(values) == 100:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    values = asyncio.run(consume())
    assert sorted(values) == list(range(100))
    assert [zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0] for p in range(2)] == [
        b"50", b"50"]


def test_static_member_restart_keeps_its_partitions_without_rebalance(
        cluster: LocalCluster) -> None:
    """KIP-345 with librdkafka: a static member (group.instance.id) that restarts within its
    session takes its old place; the other member is not rebalanced."""
    topic = group = "static-members"
    create_topic(cluster, topic)
    revoked: list[int] = []
    other = consumer(cluster, group, **{"group.instance.id": "instance-b",
                                        "session.timeout.ms": 10_000})
    other.subscribe([topic], on_revoke=lambda c, parts: revoked.append(len(parts)))
    first = consumer(cluster, group, **{"group.instance.id": "instance-a",
                                        "session.timeout.ms": 10_000})
    first.subscribe([topic])
    members = [other, first]
    try:
        poll_until(members, lambda: partition_counts(members) == [3, 3])
        before = assigned([first])
        revoked.clear()
        first.close()  # a static member sends no LeaveGroup
        members = [other]
        restarted = consumer(cluster, group, **{"group.instance.id": "instance-a",
                                                "session.timeout.ms": 10_000})
        restarted.subscribe([topic])
        members = [other, restarted]
        poll_until(members, lambda: len(restarted.assignment()) == 3, timeout=30)
        assert assigned([restarted]) == before
        for _ in range(20):  # a while longer: still no rebalance for the other member
            for c in members:
                c.poll(0.05)
        assert revoked == []
        assert partition_counts(members) == [3, 3]
    finally:
        for c in members:
            c.close()
