"""Scenario 1: Kafka's replication matrix (its system test replication_test.py, ZooKeeper
mode): 3 brokers, RF 3, ``min.insync.replicas=2``, acks=all; for each of {the leader of
partition 0, the controller} x {clean bounce (SIGTERM, start), hard bounce (SIGKILL, start)},
five bounces while one producer sends at least 50,000 values.

Each bounce waits, as Kafka's test does, for the cluster to notice (a hard-killed broker's
registration goes with its session) and, after the restart, for every ISR to be full again.
Afterwards every acknowledged value is read, in the order it was acknowledged.

The matrix runs twice. With a plain producer (no retries, one request in flight) a
reordering would be the cluster's, and duplicates are allowed as against Kafka 2.8 (see
checks.py; the run reports how many it saw). With an idempotent producer (librdkafka's
``enable.idempotence=true``: retries, up to 5 requests in flight) nothing may be written
twice and each partition keeps send order: every anomaly the checker knows is an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kafkaclone.testing.history import CheckResult, History

from .checks import check_controller_history, check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import IDEMPOTENT, Writer, create_topic, drain

SESSION_TIMEOUT_MS = 6000
TOPIC = "bounces"
PARTITIONS = 3
BOUNCES = 5
MIN_VALUES = 50_000


def bounce(cluster: ContainerCluster, victim: int, hard: bool) -> None:
    broker = cluster.brokers[victim]
    if hard:
        broker.kill()
        cluster.wait_for_deregistration(victim)
    else:
        broker.stop()
    broker.restart()
    cluster.wait_for_brokers([victim], timeout=60)
    for partition in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, partition, 3, timeout=90)


PLAIN = {"retries": 0}


@pytest.mark.timeout(420)
@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("hard", [False, True], ids=["clean", "hard"])
@pytest.mark.parametrize("role", ["leader", "controller"])
def test_bounces_lose_nothing_acknowledged(role: str, hard: bool, idempotent: bool,
                                           start_cluster: Callable[..., ContainerCluster],
                                           history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=400_000, seconds=300,
                    rate=1000, config=IDEMPOTENT if idempotent else PLAIN).start()
    writer.wait_for_acks(2000, 60)

    started = time.monotonic()
    victims = []
    for number in range(1, BOUNCES + 1):
        victim = (wait_until(cluster.controller, 30, "a controller") if role == "controller"
                  else cluster.wait_for_leader(TOPIC, 0))
        victims.append(victim)
        progress(f"bounce {number}/{BOUNCES} ({'hard' if hard else 'clean'}) of the {role}, "
                 f"broker {victim}; {writer.sent} values sent so far")
        bounce(cluster, victim, hard)
        writer.wait_for_acks(writer.acked() + 500, 60)  # traffic flows between bounces
    progress(f"{BOUNCES} bounces in {time.monotonic() - started:.0f}s")

    writer.wait_for_sent(MIN_VALUES, 120)
    writer.stop()
    writer.join()
    check_controller_history(cluster)
    drain(cluster, TOPIC, PARTITIONS, history)
    if idempotent:
        result = check_history(history, min_acked=MIN_VALUES // 2,
                               anomalies=CheckResult.ANOMALIES)
    else:
        result = check_history(history, min_acked=MIN_VALUES // 2)
        progress(f"values written twice by the plain producer: {len(result.duplicates)}")
    assert result.sends >= MIN_VALUES
    for partition in range(PARTITIONS):
        cluster.wait_for_identical_replicas(TOPIC, partition)
    progress(f"bounced brokers {victims}; produce errors: {sorted(set(writer.errors))}")
