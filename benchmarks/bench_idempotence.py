"""The idempotent producer against the plain one (issue 14): prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_idempotence.py [--records 300000] [--rounds 16]
        [--profile DIR] [--stats] [--load batches,librdkafka] [--batch-records 500]

First, on each cluster, what idempotence costs the brokers alone: ``batch_load.py``'s
producer (pre-encoded batches of ``--batch-records`` records, 5 requests in flight per
connection in both modes, acks=all) in alternating plain and idempotent rounds of
``--records``. Its own cost is nearly nothing and the same in both modes, so the ratio of
its rates, and the brokers' CPU per record printed beside it, are the brokers'. Then the
same comparison with librdkafka, as below (``--load`` picks either).

confluent-kafka (librdkafka) sends ``--records`` 100-byte records with acks=all, once with
``enable.idempotence=false`` and once with ``true``, alternating for ``--rounds`` rounds in
the same run (so both see the same machine load), on two clusters: 1 broker, and 3 brokers
with a 6-partition RF 3 topic and min.insync.replicas=2; the goal is an idempotent rate >=
0.95 of the plain one. Rounds alternate which mode goes first. Single rounds of one mode
vary by 30 % and more on this 2-core machine (the producer and the brokers share it), so
three estimates are printed: the best idempotent rate over the best plain one, the ratio
of the medians, and the paired estimate, which is the one to read: each round's
idempotent rate over its plain rate (the two ran back to back, under the same load),
their geometric mean, with a 90 % bootstrap interval over the rounds. The interval says
whether the run can tell the ratio from the goal at all; ``--rounds 16`` or more narrows
it.

In the same run the same two producers (same settings, same record count, alternating the
same way) write to librdkafka's mock cluster with as many brokers (``test.mock.num.brokers``;
it auto-creates the topic with 4 partitions, RF = its broker count). The mock has no broker
cost, so its ratio is what the client itself loses with idempotence on (librdkafka then
allows at most 5 requests in flight per broker and needs a producer id first): the floor
our broker's ratio can reach. A third set of rounds runs the mock with each answer held
back (``test.mock.broker.rtt``) by the mean Produce round trip the idempotent producer
measured against our brokers (librdkafka's statistics): the client's own ratio at our
round trip. Measured 2026-11-28, the idempotent producer spends some 25-30 % more CPU per
record once the round trip passes librdkafka's ``linger.ms`` (5 ms here, its default),
against the mock as against our brokers; below 3 ms it spends the same as the plain one.

Each cluster also prints the CPU time per record of each mode over its rounds, the
producer's (this process: the produce() calls, the delivery callbacks and librdkafka's
threads) and the brokers' (``/proc``). Rates on this 2-core machine are set by the CPU the
producer and the brokers share, so equal CPU per record in both modes is what a ratio of 1
needs; unlike the rates, CPU per record hardly moves with the machine's load.

``--pin`` puts the producer (this process) on CPU 0 and the brokers and ZooKeeper on the
other CPUs, so that the client's CPU and the brokers' do not take from each other, as on
separate machines; the mock rounds run with the producer on CPU 0 too.

``--profile DIR`` runs py-spy on broker 1 during the first plain and the first idempotent
round of each cluster (raw stacks and a summary in DIR, as bench_broker.py's). ``--stats``
prints, per round, librdkafka's statistics of the broker connections: Produce requests,
its broker threads' wakeups, bytes per request, mean round trip, and the mean batch (bytes,
records). (The wakeups are where the idempotent producer's extra CPU goes, measured
2026-11-27: per million records, some 400,000 against the RF 3 cluster (acks=all round
trip ~10 ms), 10,000 against the mock (0.2 ms), 2,000-3,000 with idempotence off, with
max.in.flight 5 too. Read from librdkafka's source, not verified: with idempotence a
partition waiting on its requests in flight is served and skipped without moving its next
wakeup, so each message enqueued meanwhile wakes the broker thread again.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import batch_load
from bench_broker import create_topic, produce, profiled
from proc_stat import cpu_seconds

from kafkaclone.testing.cluster import LocalCluster

BROKER_OVERRIDES = {"log.flush.interval.messages": "9223372036854775807",
                    # Old segments go within a second of leaving the retention (below):
                    # the page cache drops their pages unwritten.
                    "log.retention.check.interval.ms": "1000",
                    "log.segment.delete.delay.ms": "0"}
RETENTION = {"segment.bytes": str(32 << 20), "retention.bytes": str(64 << 20)}
"""Each partition keeps 64-96 MiB: the brokers' logs stay under the kernel's dirty page
limit (10 % of memory starts the writeback), so the disk's writeback does not set the
rates; without it, rounds of millions of records slowed to a third after a few gigabytes
(2026-11-28)."""
MODES = {"plain": {"enable.idempotence": False}, "idempotent": {"enable.idempotence": True}}


class Statistics:
    """librdkafka's last statistics of one producer (``--stats``)."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}
        # Round trips and batches are per statistics window: summed over the windows.
        self.rtt_us = self.rtt_count = self.batches = self.batch_bytes = self.batch_records = 0

    def config(self, interval_ms: int = 100) -> dict[str, Any]:
        return {"statistics.interval.ms": interval_ms, "stats_cb": self.receive}

    @property
    def mean_rtt_ms(self) -> float:
        return self.rtt_us / max(self.rtt_count, 1) / 1000

    def receive(self, text: str) -> None:
        self.last = json.loads(text)
        for broker in self.last["brokers"].values():
            if broker["nodeid"] >= 0:
                self.rtt_us += broker["rtt"]["sum"]
                self.rtt_count += broker["rtt"]["cnt"]
        for topic in self.last["topics"].values():
            self.batches += topic["batchsize"]["cnt"]
            self.batch_bytes += topic["batchsize"]["sum"]
            self.batch_records += topic["batchcnt"]["sum"]

    def summary(self) -> str:
        brokers = [b for b in self.last.get("brokers", {}).values() if b["nodeid"] >= 0]
        requests = sum(b["tx"] for b in brokers)
        sent = sum(b["txbytes"] for b in brokers)
        wakeups = sum(b["wakeups"] for b in brokers)
        batches = max(self.batches, 1)
        return (f"{requests} requests, {wakeups:,} broker thread wakeups, "
                f"{sent // max(requests, 1):,} bytes/request, mean rtt "
                f"{self.mean_rtt_ms:.2f} ms, mean batch "
                f"{self.batch_bytes // batches:,} bytes {self.batch_records // batches:,} "
                f"records")


STATISTICS_INTERVAL_MS = 250
"""How often librdkafka hands over its statistics (for the round trip) without --stats."""


@dataclass
class Rounds:
    rates: dict[str, list[float]]
    """records/s of each round, per mode"""
    rtt_ms: dict[str, float]
    """the mean Produce round trip librdkafka measured over all rounds, per mode"""


def rounds(bootstrap: Callable[[], dict[str, Any]], topic: str, records: int, count: int,
           cluster: LocalCluster | None, label: str, profile: Path | None, stats: bool
           ) -> Rounds:
    """Alternating plain and idempotent rounds: the rates and round trips per mode; printed,
    the CPU per record per mode, the producer's, and with a cluster its brokers'."""
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    rtt = {mode: Statistics() for mode in MODES}
    cpu = dict.fromkeys(MODES, 0.0)
    client_cpu = dict.fromkeys(MODES, 0.0)
    pids = [] if cluster is None else [b.pid for b in cluster.brokers.values()
                                       if b.pid is not None]
    for number in range(count):
        # Plain first in odd rounds, idempotent first in even ones: neither always runs on
        # the other's warm page cache and fresh segment.
        order = list(MODES) if number % 2 == 0 else list(reversed(MODES))
        for mode in order:
            settings = MODES[mode]
            librdkafka = Statistics()
            extra = {**settings, **librdkafka.config(100 if stats else STATISTICS_INTERVAL_MS)}
            name = f"{label}-{mode}"
            watch = (profiled(cluster, name, profile) if cluster is not None and number == 0
                     else nullcontext())
            before, client_before = cpu_seconds(pids), time.process_time()
            with watch:
                rates[mode].append(produce(bootstrap(), topic, records, "all", extra))
            cpu[mode] += cpu_seconds(pids) - before
            client_cpu[mode] += time.process_time() - client_before
            rtt[mode].rtt_us += librdkafka.rtt_us
            rtt[mode].rtt_count += librdkafka.rtt_count
            if stats:
                print(f"    {name} round {number + 1}: {rates[mode][-1]:,.0f} rec/s, "
                      f"{librdkafka.summary()}", flush=True)
    per_record = 1e6 / (records * count)
    print(f"    ({label}, CPU per record over {count} rounds each: this process (the "
          f"producer{', with the mock brokers in it' if cluster is None else ''}) "
          f"{client_cpu['plain'] * per_record:.2f} µs plain, "
          f"{client_cpu['idempotent'] * per_record:.2f} µs idempotent"
          + ("" if cluster is None else
             f"; the brokers {cpu['plain'] * per_record:.2f} µs plain, "
             f"{cpu['idempotent'] * per_record:.2f} µs idempotent") + f"; mean Produce round "
          f"trip {rtt['plain'].mean_rtt_ms:.2f} ms plain, {rtt['idempotent'].mean_rtt_ms:.2f}"
          f" ms idempotent)", flush=True)
    return Rounds(rates, {mode: rtt[mode].mean_rtt_ms for mode in MODES})


BOOTSTRAP_SAMPLES = 10_000
MIN_ROUNDS_FOR_INTERVAL = 8
"""A bootstrap over fewer rounds gives an interval far narrower than the truth."""


def paired_ratio(plain: list[float], idempotent: list[float]) -> tuple[float, float, float]:
    """The geometric mean of the rounds' idempotent / plain ratios, and its 90 % percentile
    bootstrap interval (rounds resampled with replacement; a fixed seed, so a run's
    interval does not move when it is printed again)."""
    logs = [math.log(i / p) for p, i in zip(plain, idempotent, strict=True)]
    draw = random.Random(14)
    means = sorted(statistics.fmean(draw.choices(logs, k=len(logs)))
                   for _ in range(BOOTSTRAP_SAMPLES))
    tail = BOOTSTRAP_SAMPLES // 20
    low, high = means[tail], means[BOOTSTRAP_SAMPLES - 1 - tail]
    return math.exp(statistics.fmean(logs)), math.exp(low), math.exp(high)


def report(title: str, rates: dict[str, list[float]], goal: str) -> None:
    plain, idempotent = rates["plain"], rates["idempotent"]
    median_ratio = statistics.median(idempotent) / statistics.median(plain)
    paired, low, high = paired_ratio(plain, idempotent)
    interval = (f"90 % interval {low:.2f}-{high:.2f}" if len(plain) >= MIN_ROUNDS_FOR_INTERVAL
                else f"no interval under {MIN_ROUNDS_FOR_INTERVAL} rounds")
    print(f"{title:<34} paired ratio {paired:5.2f} ({interval}, {len(plain)} rounds)   "
          f"{goal}   (best: plain {max(plain):,.0f} rec/s, "
          f"idempotent {max(idempotent):,.0f} rec/s, ratio {max(idempotent) / max(plain):.2f};"
          f" medians: ratio {median_ratio:.2f}; all rounds: plain "
          f"{', '.join(f'{r:,.0f}' for r in plain)}; idempotent "
          f"{', '.join(f'{r:,.0f}' for r in idempotent)})", flush=True)


def batch_rounds(cluster: LocalCluster, topic: str, records: int, count: int,
                 batch_records: int, label: str) -> dict[str, list[float]]:
    """Alternating plain and idempotent rounds of :mod:`batch_load` (a producer that costs
    the same in both modes, nearly nothing): the rates per mode; printed, the brokers' CPU
    per record per mode."""
    found = batch_load.leaders(cluster.bootstrap_servers, topic)
    records_of_a_batch = batch_load.template_records(batch_records)
    pids = [b.pid for b in cluster.brokers.values() if b.pid is not None]
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu = dict.fromkeys(MODES, 0.0)
    sent = dict.fromkeys(MODES, 0)
    for number in range(count):
        for mode in list(MODES) if number % 2 == 0 else list(reversed(MODES)):
            before = cpu_seconds(pids)
            acknowledged, seconds = batch_load.produce_round(
                found, topic, records_of_a_batch, records, mode == "idempotent")
            cpu[mode] += cpu_seconds(pids) - before
            sent[mode] += acknowledged
            rates[mode].append(acknowledged / seconds)
    print(f"    ({label}, {batch_records} records per batch, "
          f"{batch_load.IN_FLIGHT} requests in flight per connection in both modes; the "
          f"brokers' CPU per record {cpu['plain'] / sent['plain'] * 1e6:.2f} µs plain, "
          f"{cpu['idempotent'] / sent['idempotent'] * 1e6:.2f} µs idempotent)", flush=True)
    return rates


def compare(cluster: LocalCluster, topic: str, args: argparse.Namespace, label: str,
            brokers: int) -> None:
    loads = set(args.load.split(","))
    if "batches" in loads:
        report(f"{label}, the brokers alone",
               batch_rounds(cluster, topic, args.records, args.rounds, args.batch_records,
                            f"{topic}-batches"), "goal >= 0.95")
    if "librdkafka" not in loads:
        return
    ours = rounds(lambda: {"bootstrap.servers": cluster.bootstrap_servers}, topic,
                  args.records, args.rounds, cluster, topic, args.profile, args.stats)
    # A new mock cluster per producer (it lives as long as the client that made it).
    mock = rounds(lambda: {"test.mock.num.brokers": brokers}, topic, args.records,
                  args.rounds, None, f"{topic}-mock", None, args.stats)
    # The mock again, each of its answers held back by the round trip the idempotent
    # producer measured against our brokers: the client's own ratio at our round trip.
    delay = max(1, round(ours.rtt_ms["idempotent"]))
    slowed = rounds(lambda: {"test.mock.num.brokers": brokers, "test.mock.broker.rtt": delay},
                    topic, args.records, args.rounds, None, f"{topic}-mock-rtt{delay}", None,
                    args.stats)
    many = f"{brokers} broker{'s' if brokers > 1 else ''}"
    report(f"{label}, librdkafka", ours.rates, "goal >= 0.95")
    report(f"  librdkafka mock, {many}", mock.rates, "(the client's own ratio)")
    report(f"  mock, {many}, rtt {delay} ms", slowed.rates, "(the client's, at our rtt)")


CLIENT_CPUS = {0}
"""``--pin``: the producer's CPU (this process; librdkafka's threads, made later, inherit
it). Everything else of the run gets the other CPUs: on this 2-core machine a client with
a core of its own, as a client on a machine of its own has."""


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` onto ``cpus`` (sched_setaffinity is per thread;
    threads made afterwards inherit their maker's)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


def pin_cluster(cluster: LocalCluster) -> None:
    others = set(range(os.cpu_count() or 1)) - CLIENT_CPUS
    if not others:
        raise SystemExit("--pin needs at least two CPUs")
    for pid in cluster.pids():
        pin(pid, others)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--stats", action="store_true")
    parser.add_argument("--load", default="batches,librdkafka",
                        help="producers to run: batches (batch_load.py), librdkafka, or both")
    parser.add_argument("--batch-records", type=int, default=500,
                        help="records per batch of the batch_load rounds")
    parser.add_argument("--only", default="1,3", help="clusters to run: 1, 3 or 1,3")
    parser.add_argument("--pin", action="store_true",
                        help="the producer on CPU 0, the brokers and ZooKeeper on the others")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load "
          f"{os.getloadavg()[0]:.1f}, records {args.records:,} x {args.rounds} rounds"
          f"{', pinned' if args.pin else ''}", flush=True)
    if args.pin:
        pin(os.getpid(), CLIENT_CPUS)
    if "1" in only:
        with LocalCluster(1, overrides=BROKER_OVERRIDES) as cluster:
            if args.pin:
                pin_cluster(cluster)
            create_topic(cluster, "idem1", 1, RETENTION)
            compare(cluster, "idem1", args, "1 broker, acks=all", 1)
    if "3" in only:
        with LocalCluster(3, overrides=BROKER_OVERRIDES) as cluster:
            if args.pin:
                pin_cluster(cluster)
            create_topic(cluster, "idem3", 3, {"min.insync.replicas": "2", **RETENTION})
            compare(cluster, "idem3", args, "3 brokers, RF 3, acks=all", 3)
    print(f"load at the end {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
