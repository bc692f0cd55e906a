"""The idempotent producer against the plain one (issue 14): prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_idempotence.py [--records 500000] [--rounds 2]

confluent-kafka (librdkafka) sends ``--records`` 100-byte records with acks=all, once with
``enable.idempotence=false`` and once with ``true``, alternating for ``--rounds`` rounds in
the same run (so both see the same machine load), on two clusters: 1 broker, and 3 brokers
with a 6-partition RF 3 topic and min.insync.replicas=2. The ratio is the best idempotent
rate over the best plain rate; the goal is >= 0.95.
"""

from __future__ import annotations

import argparse
import os
import sys

from bench_broker import create_topic, produce

from kafkaclone.testing.cluster import LocalCluster

NO_FLUSH = {"log.flush.interval.messages": "9223372036854775807"}


def compare(cluster: LocalCluster, topic: str, records: int, rounds: int, label: str) -> None:
    bootstrap = {"bootstrap.servers": cluster.bootstrap_servers}
    plain: list[float] = []
    idempotent: list[float] = []
    for _ in range(rounds):
        plain.append(produce(bootstrap, topic, records, "all", {"enable.idempotence": False}))
        idempotent.append(produce(bootstrap, topic, records, "all",
                                  {"enable.idempotence": True}))
    print(f"{label:<34} plain {max(plain):>10,.0f} rec/s   idempotent "
          f"{max(idempotent):>10,.0f} rec/s   ratio {max(idempotent) / max(plain):5.2f}   "
          f"goal >= 0.95   (all rounds: plain {', '.join(f'{r:,.0f}' for r in plain)}; "
          f"idempotent {', '.join(f'{r:,.0f}' for r in idempotent)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}, records {args.records:,} x {args.rounds} rounds",
          flush=True)
    with LocalCluster(1, overrides=NO_FLUSH) as cluster:
        create_topic(cluster, "idem1", 1)
        compare(cluster, "idem1", args.records, args.rounds, "1 broker, acks=all")
    with LocalCluster(3, overrides=NO_FLUSH) as cluster:
        create_topic(cluster, "idem3", 3, {"min.insync.replicas": "2"})
        compare(cluster, "idem3", args.records, args.rounds, "3 brokers, RF 3, acks=all")


if __name__ == "__main__":
    main()
