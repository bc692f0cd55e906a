"""Replication throttle benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_reassign.py [--throttle 200000] [--megabytes 12]

A 2-broker LocalCluster; a 1-partition topic on broker 1 filled with ``--megabytes`` of
incompressible records; then kafka-reassign-partitions.sh --execute --throttle moves it to
{1, 2}. While broker 2 copies the partition, its log size is sampled every 0.25 s. Printed:
the unthrottled copy time for comparison (the same move without --throttle, on a second
topic), the throttled copy time, the mean rate over the whole copy, and the steady rate (the
slope after the first ``replication.quota.window.num`` windows, once the quota's samples
cover its whole span; and the slope over whole quota periods of 11 s, which does not
depend on where the samples fall in a period), each as measured/setting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
BURST_WINDOWS_S = 10.0
"""The steady rate is taken from this many seconds (+ 2) on: by then the quota's 11 samples
of 1 s cover its whole span."""
QUOTA_PERIOD_S = 11.0
"""replication.quota.window.num x replication.quota.window.size.seconds: a window's bytes
count against the quota for this long."""


def script(name: str, *args: str) -> str:
    run = subprocess.run([str(REPO / "scripts" / name), *args], capture_output=True,
                         text=True, timeout=120, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{name} {args}: {run.stdout}{run.stderr}")
    return run.stdout


def fill(cluster: LocalCluster, topic: str, megabytes: int) -> None:
    script("kafka-topics.sh", "--bootstrap-server", cluster.bootstrap_servers, "--create",
           "--topic", topic, "--replica-assignment", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20,
                         "compression.type": "none", "acks": "1"})
    for _ in range(megabytes * 64):
        producer.produce(topic, value=os.urandom(16 * 1024), partition=0)
        producer.poll(0)
    producer.flush(120)


def partition_bytes(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    found = list((cluster.base_dir / f"broker-{broker_id}").rglob(f"{topic}-0"))
    if not found:
        return 0
    return sum(f.stat().st_size for f in found[0].glob("*.log"))


def move(cluster: LocalCluster, topic: str, throttle: int | None
         ) -> list[tuple[float, int]]:
    """Move ``topic``-0 from {1} to {1, 2}; (seconds since start, bytes on broker 2)."""
    target = partition_bytes(cluster, 1, topic)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as plan:
        json.dump({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 2]}]}, plan)
    args = ["--bootstrap-server", cluster.bootstrap_servers, "--reassignment-json-file",
            plan.name]
    extra = [] if throttle is None else ["--throttle", str(throttle)]
    start = time.monotonic()
    script("kafka-reassign-partitions.sh", *args, "--execute", *extra)
    samples = [(0.0, 0)]
    deadline = start + 600
    while samples[-1][1] < target and time.monotonic() < deadline:
        time.sleep(0.25)
        samples.append((time.monotonic() - start, partition_bytes(cluster, 2, topic)))
    while "still in progress" in script("kafka-reassign-partitions.sh", *args, "--verify"):
        time.sleep(0.5)
    os.unlink(plan.name)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throttle", type=int, default=200_000, help="bytes/s")
    parser.add_argument("--megabytes", type=int, default=12)
    opts = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    with LocalCluster(2) as cluster:
        fill(cluster, "unthrottled", opts.megabytes)
        fill(cluster, "throttled", opts.megabytes)
        free = move(cluster, "unthrottled", None)
        print(f"unthrottled: {free[-1][1]} bytes in {free[-1][0]:.1f} s")
        samples = move(cluster, "throttled", opts.throttle)
        total_s, total_b = samples[-1]
        print(f"throttled at {opts.throttle} B/s: {total_b} bytes in {total_s:.1f} s, "
              f"mean {total_b / total_s:.0f} B/s, measured/setting "
              f"{total_b / total_s / opts.throttle:.2f}")
        steady = [(t, b) for t, b in samples if t >= BURST_WINDOWS_S + 2]
        if len(steady) >= 2:
            (t0, b0), (t1, b1) = steady[0], steady[-1]
            rate = (b1 - b0) / (t1 - t0)
            print(f"steady rate from {t0:.1f} s to {t1:.1f} s: {rate:.0f} B/s, "
                  f"measured/setting {rate / opts.throttle:.2f}")
            # What a quota window held goes again once it expires, so a slope over whole
            # periods of QUOTA_PERIOD_S does not depend on where the samples fall in one.
            periods = int((t1 - t0) // QUOTA_PERIOD_S)
            if periods >= 1:
                end = t0 + periods * QUOTA_PERIOD_S
                tp, bp = min(steady, key=lambda sample: abs(sample[0] - end))
                whole = (bp - b0) / (tp - t0)
                print(f"steady rate over {periods} whole quota period(s) of "
                      f"{QUOTA_PERIOD_S:.0f} s ({t0:.1f} s to {tp:.1f} s): {whole:.0f} B/s, "
                      f"measured/setting {whole / opts.throttle:.2f}")
        else:
            print("the copy ended within the burst allowance: use more --megabytes")
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
