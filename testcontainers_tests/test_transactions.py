"""Transactions under faults (issue 15): two confluent-kafka transactional producers commit
transactions of 20 values each (every 4th aborted on purpose) into one topic while a
read_committed consumer reads along, and the cluster is broken twice:

1. the transaction coordinator of the first producer (the leader of its
   ``__transaction_state`` partition), which on the fresh topic also leads one of its
   partitions, killed (SIGKILL), then restarted;
2. the coordinator of the second producer cut off from its peers by iptables past its
   ZooKeeper session (the test process still reaches it: a zombie coordinator): some
   transaction commits meanwhile; then healed, and both producers commit again.

Afterwards a fresh read_committed consumer drains every partition to its end, once no
transaction is open (last stable offset = high watermark), and the transactional checker
(``checks.TransactionHistory``) must find no aborted read, no committed value lost, no value
twice, no read past a transaction still open, and nothing nobody sent.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafkaclone.common.jvm import java_string_hash, kafka_abs

from .checks import TransactionHistory, check_transactions
from .cluster import ContainerCluster, progress, wait_until
from .workload import ReadCommittedReader, TransactionalWriter, create_topic, stable_ends

SESSION_TIMEOUT_MS = 6000
TOPIC = "txn"
PARTITIONS = 3
TXN_STATE_PARTITIONS = 5
PRODUCERS = ("txn-a", "txn-b")
# While the zombie is cut off, a client that asks it (FindCoordinator, Metadata) is told it
# still coordinates and leads, as a cut-off Kafka broker would: its requests there wait out
# the broker's 30 s append timeout (COORDINATOR_NOT_AVAILABLE, then a new coordinator lookup
# that may land on the zombie again) or its own 45 s message timeout (an abort the zombie may
# refuse with INVALID_TXN_STATE, fatal: a new producer). So a writer the zombie coordinates
# may make no progress until the heal (one run: 3 minutes); what must go on meanwhile is the
# cluster: some writer commits, through a live coordinator, within this bound.
ZOMBIE_COMMIT_TIMEOUT_S = 180


def coordinator_of(cluster: ContainerCluster, transactional_id: str,
                   exclude: tuple[int, ...] = ()) -> int:
    """The leader of the transactional id's ``__transaction_state`` partition (Kafka's
    placement: abs(String.hashCode) modulo the partition count), once it is none of
    ``exclude``: a broker's registration goes from ZooKeeper before the controller has
    moved the leadership of what it led, so right after a kill or a deregistration the
    partition's state still names it for a moment."""
    partition = kafka_abs(java_string_hash(transactional_id)) % TXN_STATE_PARTITIONS
    return cluster.wait_for_leader("__transaction_state", partition, exclude=exclude)


def wait_for_full_isr(cluster: ContainerCluster) -> None:
    cluster.wait_for_brokers(list(cluster.brokers), timeout=60)
    for partition in range(PARTITIONS):
        cluster.wait_for_isr(TOPIC, partition, 3, timeout=90)
    for partition in range(TXN_STATE_PARTITIONS):
        cluster.wait_for_isr("__transaction_state", partition, 3, timeout=90)


@pytest.mark.timeout(540)
def test_transactions_survive_leader_and_coordinator_kills_and_a_partition(
        start_cluster: Callable[..., ContainerCluster]) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS, overrides={
        "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
    })
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    history = TransactionHistory(TOPIC)
    writers = [TransactionalWriter(cluster, TOPIC, PARTITIONS, history, name=name).start()
               for name in PRODUCERS]
    reader = ReadCommittedReader(cluster, TOPIC, PARTITIONS, history, name="along").start()
    try:
        def more_commits(timeout: float = 90) -> None:
            for writer in writers:
                writer.wait_for_commits(writer.committed() + 1, timeout)

        more_commits()
        wait_until(lambda: reader.read > 0, 60, "the read_committed reader to read")
        wait_for_full_isr(cluster)

        # 1. The first producer's transaction coordinator killed; on a fresh topic every
        # broker leads one of its partitions, so a partition leader goes with it.
        coordinator = coordinator_of(cluster, PRODUCERS[0])
        led = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == coordinator]
        progress(f"broker {coordinator} coordinates {PRODUCERS[0]} and leads {TOPIC} {led}")
        assert led, "the coordinator leads a partition of the topic"
        cluster.brokers[coordinator].kill()
        for partition in led:
            cluster.wait_for_leader(TOPIC, partition, exclude=(coordinator,))
        coordinator_of(cluster, PRODUCERS[0], exclude=(coordinator,))
        more_commits()
        cluster.brokers[coordinator].restart()
        wait_for_full_isr(cluster)
        progress(f"after the coordinator and leader kill: {history.outcomes()}")

        # 2. The second producer's coordinator cut off from its peers (the test process
        # still reaches it: a zombie) past its ZooKeeper session, then healed.
        victim = cluster.brokers[coordinator_of(cluster, PRODUCERS[1])]
        peers = cluster.peer_addresses(victim)
        victim.isolate_from(peers)
        try:
            cluster.wait_for_deregistration(victim.broker_id)
            coordinator_of(cluster, PRODUCERS[1], exclude=(victim.broker_id,))
            before = [writer.committed() for writer in writers]
            wait_until(lambda: any(writer.committed() > count
                                   for writer, count in zip(writers, before, strict=True)),
                       ZOMBIE_COMMIT_TIMEOUT_S, "a transaction committed beside the zombie")
            progress(f"beside the zombie: {history.outcomes()}")
        finally:
            victim.heal(peers)
        wait_for_full_isr(cluster)
        more_commits()
        progress(f"after the partition: {history.outcomes()}")
    finally:
        for writer in writers:
            writer.stop()
        try:
            for writer in writers:
                writer.join()
        finally:
            try:
                reader.stop()
            finally:
                reader.close()
    for writer in writers:
        progress(f"{writer.name}: {writer.producers} producer(s), fatal errors "
                 f"{writer.fatal_errors[:5]}, retried {sorted(set(writer.retried))}")
    progress(f"read along: {reader.read} records (errors {sorted(set(reader.errors))})")

    ends = stable_ends(cluster, TOPIC, PARTITIONS)
    drainer = ReadCommittedReader(cluster, TOPIC, PARTITIONS, history, name="drain")
    try:
        drainer.drain_to(ends)
    finally:
        drainer.close()
    progress(f"drained {drainer.read} committed records up to {ends}")
    result = check_transactions(history, min_committed=30, min_aborted=5)
    committed_values = sum(len(t.values) for t in history.transactions
                           if t.outcome == "committed")
    assert drainer.read >= committed_values, result.summary()
