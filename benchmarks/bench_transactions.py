"""Transactions against their non-transactional twins (issue 15): prints numbers and
ratios, asserts nothing.

    .venv/bin/python benchmarks/bench_transactions.py [--records 200000] [--rounds 2]

On one cluster of three broker processes (6-partition RF 3 topics, min.insync.replicas=2,
``__transaction_state`` RF 3), in the same run, alternating for ``--rounds`` rounds
(which goes first alternates too) so that both see the same machine load:

- producers: confluent-kafka (librdkafka) sends ``--records`` 100-byte records with
  acks=all, once with ``enable.idempotence=true`` and once transactional, committing the
  running transaction every 100 ms (``commit_transaction`` then ``begin_transaction``);
  the transactional rate counts until its last commit returned. Goal: >= 0.8 of the
  idempotent rate.
- consumers: a confluent-kafka consumer reads everything the transactional producer wrote
  (records, one commit marker per partition per transaction) with
  ``isolation.level=read_committed`` and with ``read_uncommitted``. Goal: >= 0.9.

The ratios use the best round of each side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from bench_broker import PRODUCER_CONFIG, VALUE, consume, create_topic, produce
from confluent_kafka import Producer

from kafkaclone.testing.cluster import LocalCluster

PARTITIONS = 6
COMMIT_INTERVAL_S = 0.1
CLUSTER_OVERRIDES = {"log.flush.interval.messages": "9223372036854775807",
                     "transaction.state.log.replication.factor": "3",
                     "transaction.state.log.min.isr": "2",
                     "transaction.state.log.num.partitions": "5",
                     "offsets.topic.replication.factor": "3"}


def produce_transactional(bootstrap: dict[str, Any], topic: str, records: int,
                          transactional_id: str) -> tuple[float, int]:
    """records/s, committing every COMMIT_INTERVAL_S, and the number of transactions."""
    producer = Producer({**bootstrap, **PRODUCER_CONFIG, "acks": "all",
                         "transactional.id": transactional_id, "enable.idempotence": True})
    producer.init_transactions(60)
    failures = 0

    def delivered(err: Any, _msg: Any) -> None:  # as bench_broker.produce does
        nonlocal failures
        if err is not None:
            failures += 1

    # Warm up: metadata, connections, the partitions' first AddPartitionsToTxn.
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, VALUE, partition=p)
    producer.commit_transaction(60)
    transactions = 0
    start = time.perf_counter()
    producer.begin_transaction()
    next_commit = time.monotonic() + COMMIT_INTERVAL_S
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
        if i & 0x3FF == 0:
            producer.poll(0)
            if time.monotonic() >= next_commit:
                producer.commit_transaction(60)
                transactions += 1
                producer.begin_transaction()
                next_commit = time.monotonic() + COMMIT_INTERVAL_S
    producer.commit_transaction(60)
    transactions += 1
    elapsed = time.perf_counter() - start
    if failures:
        print(f"    ({failures} delivery failures)")
    return records / elapsed, transactions


def rates(values: list[float]) -> str:
    return ", ".join(f"{r:,.0f}" for r in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}, records {args.records:,} x {args.rounds} rounds",
          flush=True)
    with LocalCluster(3, overrides=CLUSTER_OVERRIDES) as cluster:
        bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
        create_topic(cluster, "idem", 3, {"min.insync.replicas": "2"})
        idempotent: list[float] = []
        transactional: list[float] = []
        transactions: list[int] = []
        for round_ in range(args.rounds):
            topic = f"txn-{round_}"
            create_topic(cluster, topic, 3, {"min.insync.replicas": "2"})
            # Which one goes first alternates, so that neither always meets a busier log.
            for kind in ("idempotent", "transactional")[::1 if round_ % 2 == 0 else -1]:
                if kind == "idempotent":
                    idempotent.append(produce(bootstrap, "idem", args.records, "all",
                                              {"enable.idempotence": True}))
                else:
                    rate, count = produce_transactional(bootstrap, topic, args.records,
                                                        f"bench-{round_}")
                    transactional.append(rate)
                    transactions.append(count)
        print(f"3 brokers, RF 3, acks=all: idempotent {max(idempotent):>10,.0f} rec/s   "
              f"transactional (commit every 100 ms) {max(transactional):>10,.0f} rec/s   "
              f"ratio {max(transactional) / max(idempotent):5.2f}   goal >= 0.8   "
              f"(all rounds: idempotent {rates(idempotent)}; transactional "
              f"{rates(transactional)}, {', '.join(map(str, transactions))} transactions)",
              flush=True)
        committed: list[float] = []
        uncommitted: list[float] = []
        total = args.records + PARTITIONS  # the warm-up transaction's records too
        for _ in range(args.rounds):
            uncommitted.append(consume(bootstrap, "txn-0", total,
                                        {"isolation.level": "read_uncommitted"}, 300))
            committed.append(consume(bootstrap, "txn-0", total,
                                      {"isolation.level": "read_committed"}, 300))
        print(f"consumer of the transactional topic: read_uncommitted "
              f"{max(uncommitted):>10,.0f} rec/s   read_committed {max(committed):>10,.0f} "
              f"rec/s   ratio {max(committed) / max(uncommitted):5.2f}   goal >= 0.9   "
              f"(all rounds: read_uncommitted {rates(uncommitted)}; read_committed "
              f"{rates(committed)})", flush=True)
        print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
