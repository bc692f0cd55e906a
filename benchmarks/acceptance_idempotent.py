"""Issue 14's failover acceptance run and rate comparison for idempotent producers.

    .venv/bin/python benchmarks/acceptance_idempotent.py [--messages 200000]
        [--fault kill|stop|none]

On a local cluster of three broker processes, confluent-kafka (librdkafka) with
``enable.idempotence=true`` and acks=all produces ``--messages`` messages to a new RF 3
topic (min.insync.replicas=2, 3 partitions). Each value carries its partition and its
send order. Halfway through, the leader of partition 0 is killed with SIGKILL (``kill``)
or frozen with SIGSTOP past the ZooKeeper session timeout (``stop``); it comes back a
little later. Everything is then read back: every acknowledged message must be there
exactly once, and each partition's values in send order (no duplicate, no reordering).

The rates of the idempotent producer against the plain one: benchmarks/bench_idempotence.py.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 3
SESSION_TIMEOUT_MS = 6000
MAX_UNACKED = 20_000


def create_topic(cluster: LocalCluster, topic: str, replication_factor: int) -> None:
    subprocess.run([str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server",
                    cluster.bootstrap_servers, "--create", "--topic", topic, "--partitions",
                    str(PARTITIONS), "--replication-factor", str(replication_factor),
                    "--config", f"min.insync.replicas={min(2, replication_factor)}"],
                   check=True, capture_output=True, timeout=60)
    time.sleep(2)


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    metadata = admin.list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[partition].leader)


def produce(cluster: LocalCluster, topic: str, messages: int, *, idempotent: bool,
            fault: str = "none") -> tuple[dict[int, list[int]], int, float]:
    """Per partition the acknowledged send numbers, the number of failed deliveries, and
    the seconds taken."""
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    failed = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            return
        acked[msg.partition()].append(int(msg.value().split(b":")[1]))

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": idempotent, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    victim = leader_of(cluster, topic, 0) if fault != "none" else -1
    faulted_at = messages // 2
    restored = False
    started = time.perf_counter()
    fault_started = 0.0
    for i in range(messages):
        partition = i % PARTITIONS
        # At most MAX_UNACKED in flight, so that the fault comes in the middle of the run
        # rather than after everything was queued.
        while i - failed - sum(map(len, acked.values())) > MAX_UNACKED:
            producer.poll(0.01)
        while True:
            try:
                producer.produce(topic, value=b"%d:%d:" % (partition, i) + b"x" * (i % 97),
                                 partition=partition, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if i == faulted_at and fault != "none":
            print(f"  {fault} broker {victim} (leader of partition 0) at message {i}")
            if fault == "kill":
                cluster.broker(victim).kill()
            else:
                cluster.broker(victim).suspend()
            fault_started = time.monotonic()
        if (fault != "none" and not restored and fault_started
                and time.monotonic() - fault_started > SESSION_TIMEOUT_MS / 1000 * 2):
            if fault == "kill":
                cluster.restart_broker(victim)
            else:
                cluster.broker(victim).resume()
            restored = True
            print(f"  broker {victim} back at message {i}")
    if fault != "none" and not restored:
        while time.monotonic() - fault_started < SESSION_TIMEOUT_MS / 1000 * 2:
            producer.poll(0.1)
        if fault == "kill":
            cluster.restart_broker(victim)
        else:
            cluster.broker(victim).resume()
    remaining = producer.flush(600)
    seconds = time.perf_counter() - started
    if remaining:
        print(f"  {remaining} messages still unsent after flush")
    return acked, failed + remaining, seconds


def consume(cluster: LocalCluster, topic: str) -> dict[int, list[int]]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 300
    while len(at_end) < PARTITIONS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error, partition, value = message.error(), message.partition(), message.value()
        assert partition is not None
        if error is not None:
            if error.code() == -191:  # _PARTITION_EOF
                at_end.add(partition)
                continue
            raise RuntimeError(error)
        assert value is not None
        at_end.discard(partition)
        got[partition].append(int(value.split(b":")[1]))
    consumer.close()
    return got


def check(acked: dict[int, list[int]], got: dict[int, list[int]]) -> bool:
    ok = True
    for p in range(PARTITIONS):
        values = got[p]
        duplicates = len(values) - len(set(values))
        reordered = sum(1 for a, b in itertools.pairwise(values) if b <= a)
        missing = len(set(acked[p]) - set(values))
        print(f"  partition {p}: {len(acked[p])} acked, {len(values)} in the log, "
              f"{duplicates} duplicates, {reordered} out of order, {missing} acked but missing")
        ok = ok and duplicates == 0 and reordered == 0 and missing == 0
    return ok


def failover(messages: int, fault: str) -> bool:
    overrides = {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                 "replica.lag.time.max.ms": "4000"}
    with LocalCluster(3, overrides=overrides) as cluster:
        topic = f"idempotent-{fault}"
        create_topic(cluster, topic, 3)
        acked, failed, seconds = produce(cluster, topic, messages, idempotent=True,
                                         fault=fault)
        print(f"{fault}: {sum(map(len, acked.values()))} acked, {failed} failed in "
              f"{seconds:.1f}s")
        ok = check(acked, consume(cluster, topic))
    print(f"{fault}: {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--fault", choices=["kill", "stop", "none"], default="kill")
    args = parser.parse_args()
    return 0 if failover(args.messages, args.fault) else 1


if __name__ == "__main__":
    sys.exit(main())
