"""Brokers talking to each other over SASL_SSL (SCRAM-SHA-512, credentials in ZooKeeper):
three brokers whose inter-broker listener is SASL_SSL replicate an RF 3 topic (acks=all
round trip with confluent-kafka over the same listener), and survive the leader's kill."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkaclone.testing.certificates import Pki, make_test_pki
from kafkaclone.testing.cluster import LocalCluster
from tests.server.test_security import add_scram_user, sasl_ssl_scram

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[LocalCluster]:
    overrides = {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
    }
    local = LocalCluster(3, overrides=overrides, extra_listeners=["SASL_SSL"])
    try:
        local.zookeeper.start()
        # As Kafka's docs: the brokers' own SCRAM user exists before they start.
        add_scram_user(local, "broker", "broker-secret")
        add_scram_user(local, "alice", "alice-secret")
        local.start()
        yield local
    finally:
        local.close()


def test_inter_broker_sasl_ssl_replicates_acks_all(cluster: LocalCluster, pki: Pki) -> None:
    bootstrap = cluster.bootstrap_servers_for("SASL_SSL")
    conf = sasl_ssl_scram(pki)
    topic = f"secure-rf3-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    for i in range(300):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(60) == 0

    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    for partition in metadata.partitions.values():
        assert sorted(partition.isrs) == [1, 2, 3]  # every follower fetched over SASL_SSL

    leader = metadata.partitions[0].leader
    cluster.broker(leader).kill()
    for i in range(300, 400):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(90) == 0

    # assigned, not subscribed: with one broker of three down the RF 3 __consumer_offsets
    # cannot be created (as in Kafka), and this test is about the data
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False, **conf})
    consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 400 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.add(message.value())
    consumer.close()
    assert seen == {f"v{i}".encode() for i in range(400)}
