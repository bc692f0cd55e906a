"""Smoke: ZooKeeper and three brokers in containers, reached from the host through the
brokers' EXTERNAL listeners; everything confluent-kafka produces (RF 3, acks=all,
idempotent) is read back once, and the three replicas of each partition end
byte-identical."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafkaclone.testing.history import History

from .cluster import ContainerCluster, progress
from .workload import IDEMPOTENT, Writer, create_topic, drain

TOPIC = "smoke"
PARTITIONS = 6
VALUES = 20_000


@pytest.mark.timeout(300)
def test_produce_and_consume_through_the_external_listeners(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3)
    assert cluster.registered_brokers() == [1, 2, 3]
    # Every broker advertises its EXTERNAL listener on a host port, and INTERNAL by alias.
    for broker in cluster.brokers.values():
        endpoints = cluster.broker_registration(broker.broker_id)["endpoints"]
        assert endpoints == [f"INTERNAL://broker-{broker.broker_id}:9092",
                             f"EXTERNAL://{broker.bootstrap}"]

    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    leaders = {cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    assert leaders == {1, 2, 3}, "the partitions are spread over the three brokers"

    # Idempotent: the check at the end holds each partition to the order the values were sent.
    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=VALUES, seconds=120,
                    config=IDEMPOTENT).start()
    writer.join(timeout=180)
    assert writer.sent == VALUES
    assert writer.acked() == VALUES, f"produce errors: {sorted(set(writer.errors))}"

    read = drain(cluster, TOPIC, PARTITIONS, history)
    result = history.check()
    progress(result.summary())
    assert result.valid, result.summary()
    assert read == VALUES
    assert result.read_positions == VALUES
    # acks=all: every replica holds the same bytes once the followers caught up.
    for partition in range(PARTITIONS):
        cluster.wait_for_identical_replicas(TOPIC, partition)
