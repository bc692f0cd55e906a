"""Issue 5's kcat acceptance run: prints a verdict per codec.

    .venv/bin/python benchmarks/acceptance_codecs.py [--messages 200000] [--replication-factor 3]
        [--codecs none,gzip,snappy,lz4,zstd]

On a local cluster of three broker processes, for each codec: kcat produces ``--messages``
messages (acks=all) to a new 6-partition topic with the given replication factor, then
consumes them all back with kcat. Each message is ``<key>:<value>`` with a key per message
slot and a value carrying its sequence number and variable padding; kcat's partitioner puts
a key always on one partition, so every partition must hold exactly the produced lines for
its keys, in production order, byte for byte. tests/server/test_data_path_clients.py runs
the same check with a few thousand messages.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 6


def run_codec(cluster: LocalCluster, codec: str, messages: int, replication_factor: int) -> bool:
    topic = f"acceptance-{codec}"
    subprocess.run([str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server",
                    cluster.bootstrap_servers, "--create", "--topic", topic, "--partitions",
                    str(PARTITIONS), "--replication-factor", str(replication_factor),
                    "--config", f"min.insync.replicas={min(2, replication_factor)}"],
                   check=True, capture_output=True, timeout=60)
    time.sleep(2)  # leaders elected and known to every broker
    lines = [f"k{i % 1009}:{codec}-{i:08d}-" + "p" * (i % 61) for i in range(messages)]
    started = time.perf_counter()
    produced = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-P", "-t", topic, "-K", ":", "-z", codec,
         "-X", "acks=all", "-X", "linger.ms=5"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=900)
    produce_seconds = time.perf_counter() - started
    if produced.returncode != 0:
        print(f"{codec}: kcat -P failed: {produced.stderr[-2000:]}")
        return False
    started = time.perf_counter()
    consumed = subprocess.run(
        ["kcat", "-b", cluster.bootstrap_servers, "-C", "-t", topic, "-e", "-o", "beginning",
         "-f", "%p %o %k:%s\n"], capture_output=True, text=True, timeout=900)
    consume_seconds = time.perf_counter() - started
    if consumed.returncode != 0:
        print(f"{codec}: kcat -C failed: {consumed.stderr[-2000:]}")
        return False
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for line in consumed.stdout.splitlines():
        partition, offset, payload = line.split(" ", 2)
        by_partition.setdefault(int(partition), []).append((int(offset), payload))
    total = sum(len(v) for v in by_partition.values())
    ok = total == messages
    for entries in by_partition.values():
        offsets = [o for o, _ in entries]
        payloads = [p for _, p in entries]
        keys = {p.split(":", 1)[0] for p in payloads}
        expected = [line for line in lines if line.split(":", 1)[0] in keys]
        ok = ok and offsets == list(range(len(entries))) and payloads == expected
    print(f"{codec:<7} {'OK' if ok else 'FAILED'}  {total:,}/{messages:,} messages back  "
          f"produce {produce_seconds:6.1f} s ({messages / produce_seconds:,.0f} msg/s)  "
          f"consume {consume_seconds:6.1f} s ({total / consume_seconds:,.0f} msg/s)  "
          f"partitions {sorted((p, len(v)) for p, v in by_partition.items())}", flush=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    args = parser.parse_args()
    results = []
    with LocalCluster(3) as cluster:
        for codec in args.codecs.split(","):
            results.append(run_codec(cluster, codec, args.messages, args.replication_factor))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
