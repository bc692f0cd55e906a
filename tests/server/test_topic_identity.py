"""Topic identity on a local cluster: a topic deleted and created again under the same name
is a new topic (a new topic id in Metadata v10+, none of the old records), and a
confluent-kafka consumer group subscribed by name goes on with the new topic's partitions
without a restart, and closes without hanging.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.wait import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
METADATA = APIS[ApiKey.METADATA].request
TOPIC = "reborn"


def kafka_topics(cluster: LocalCluster, *args: str) -> None:
    done = subprocess.run([str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server",
                           cluster.bootstrap_servers, *args], capture_output=True, text=True,
                          timeout=60, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr


def topic_metadata(cluster: LocalCluster) -> Any:
    """The topic in a Metadata v10 answer of broker 1 (error code, topic id, partitions)."""
    Topic = METADATA.structs["MetadataRequestTopic"]
    body = METADATA(topics=[Topic(name=TOPIC)], allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
    with BrokerConnection("127.0.0.1", cluster.broker(1).port,
                          request_timeout_ms=10_000) as conn:
        _, response = conn.request(ApiKey.METADATA, body, max_version=10)
    (topic,) = response.topics
    return topic


def live_topic(cluster: LocalCluster, partitions: int) -> Any:
    topic = topic_metadata(cluster)
    if topic.error_code == 0 and len(topic.partitions) == partitions and all(
            p.leader_id >= 0 for p in topic.partitions):
        return topic
    return None


def committed(zk: KazooClient, path: str) -> dict[int, int]:
    if zk.exists(path) is None:
        return {}
    return {int(p): int(zk.get(f"{path}/{p}")[0]) for p in zk.get_children(path)}


def produce(cluster: LocalCluster, values: list[bytes], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % partitions)
    assert producer.flush(60) == 0


class GroupConsumer:
    """A subscribed confluent-kafka consumer polling in a thread."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.values: list[bytes] = []
        self.errors: list[Any] = []
        self._stop = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": "reborn-group",
            "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000,
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000,
            "auto.commit.interval.ms": 200})
        self._assigned: list[Any] = []
        self._consumer.subscribe([TOPIC], on_assign=self._on_assign,
                                 on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self._assigned = list(partitions)

    def _on_revoke(self, _consumer: Any, _partitions: list[Any]) -> None:
        self._assigned = []

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                self.errors.append(message.error())
            else:
                self.values.append(message.value())

    def assignment(self) -> list[Any]:
        """The partitions as the rebalance callbacks last left them (asking librdkafka from
        this thread while the other polls can block)."""
        return list(self._assigned)

    def close(self, timeout: float = 30) -> float:
        """Stop polling and close; how long close() took."""
        self._stop.set()
        self._thread.join(timeout)
        started = time.monotonic()
        closing = threading.Thread(target=self._consumer.close, daemon=True)
        closing.start()
        closing.join(timeout)
        assert not closing.is_alive(), f"close() still running after {timeout}s"
        return time.monotonic() - started


def test_a_recreated_topic_is_a_new_topic_and_the_group_follows_it() -> None:
    with LocalCluster(3, overrides={"delete.topic.enable": "true"}) as cluster:
        kafka_topics(cluster, "--create", "--topic", TOPIC, "--partitions", "4",
                     "--replication-factor", "2")
        first = wait_until(lambda: live_topic(cluster, 4), 30, "the first topic")
        old = [b"old-%d" % i for i in range(400)]
        produce(cluster, old, 4)
        consumer = GroupConsumer(cluster)
        try:
            wait_until(lambda: len(consumer.values) >= len(old), 60, "the old records")
            assert sorted(consumer.values) == sorted(old)
            zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
            zk.start(timeout=10)
            offsets = f"/consumers/reborn-group/offsets/{TOPIC}"
            wait_until(lambda: committed(zk, offsets) == {p: 100 for p in range(4)}, 30,
                       "the group's commits")

            kafka_topics(cluster, "--delete", "--topic", TOPIC)
            wait_until(lambda: topic_metadata(cluster).error_code == 3, 60,
                       "UNKNOWN_TOPIC_OR_PARTITION for the deleted topic")
            # Kafka 2.8 drops the deleted partitions' committed offsets from every group
            # (GroupCoordinator.handleDeletedPartitions on UpdateMetadata).
            wait_until(lambda: not committed(zk, offsets), 30, "the old offsets dropped")
            # The group has seen the deletion (its partitions revoked) before the name is
            # used again. Were the topic re-created first, librdkafka would only see a
            # partition count change and keep its positions in the old partitions 0 and 1
            # (100), committing them into the new ones on the revoke, with Kafka as here.
            wait_until(lambda: not consumer.assignment(), 30, "the deleted topic's revoke")
            zk.stop()
            zk.close()
            kafka_topics(cluster, "--create", "--topic", TOPIC, "--partitions", "2",
                         "--replication-factor", "2")
            second = wait_until(lambda: live_topic(cluster, 2), 30, "the new topic")
            assert second.topic_id != first.topic_id
            assert uuid.UUID(int=0) not in (first.topic_id, second.topic_id)

            # More records than the old commits: the group reads the new topic from its start.
            new = [b"new-%d" % i for i in range(400)]
            produce(cluster, new, 2)
            wait_until(lambda: set(new) <= set(consumer.values), 90,
                       "the new topic's records")
            assert not set(consumer.values) - set(old) - set(new)
        finally:
            took = consumer.close()
        assert took < 15
