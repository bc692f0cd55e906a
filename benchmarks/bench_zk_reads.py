"""Reading many znodes: ``ZooKeeperClient.get_data_many`` of N partition state znodes, with
multiRead (ZooKeeper 3.6+, ``kafkaclone.zk.multi_read``) and with one getData request per
znode (the fallback for older servers), in alternation. Prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_zk_reads.py [--znodes 10000] [--rounds 3]

This is the new controller's initial read of every partition state in a failover
(``KafkaZkClient.get_topic_partition_states``), against a local ZooKeeper started with the
project's test settings, on the same shared machine as everything else.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient
from twisted.internet import reactor

from kafkaclone.testing.reactor import run
from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.zk.zookeeper_client import ZooKeeperClient

STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--znodes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(args.znodes)]
    with ZooKeeperServer() as server:
        writer = KazooClient(hosts=server.connect_string, timeout=10.0)
        writer.start(timeout=10)
        try:
            writer.ensure_path("/brokers/topics/t/partitions")
            for start in range(0, len(paths), 500):
                transaction = writer.transaction()
                for path in paths[start : start + 500]:
                    transaction.create(path.rsplit("/", 1)[0])
                    transaction.create(path, STATE)
                transaction.commit()
        finally:
            writer.stop()
            writer.close()
        client = ZooKeeperClient.from_connect_string(server.connect_string, reactor)
        run(client.start(connection_timeout=10))
        try:
            print(f"{args.znodes} state znodes, load {os.getloadavg()[0]:.1f}")
            for _ in range(args.rounds):
                for mode in ("multiRead", "one getData each"):
                    client._multi_read_supported = None if mode == "multiRead" else False
                    cpu, wall = time.process_time(), time.perf_counter()
                    found = run(client.get_data_many(paths), timeout=300)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    assert all(f is not None for f in found)
                    print(f"  {mode:17s} {wall:6.2f} s wall, {cpu:6.2f} s CPU of this "
                          f"process, load {os.getloadavg()[0]:.1f}")
        finally:
            run(client.close())


if __name__ == "__main__":
    main()
