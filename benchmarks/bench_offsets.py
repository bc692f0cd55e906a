"""Committed offsets in ZooKeeper: the sustained commit rate. Prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_offsets.py [--seconds 10] [--partitions 1,6,50]
        [--clients 1,4,16] [--only store,broker]

Two measurements, each bounded by ``--seconds`` per run:

1. ``store``: ``KafkaZkClient.commit_consumer_offsets`` straight against a local ZooKeeper
   (one multi-op per commit: offset + metadata znode per partition), with 1 and 8 commits
   in flight, for each partition count: what the ZooKeeper store itself sustains;
2. ``broker``: OffsetCommit v8 requests to the group coordinator of a 1-broker
   LocalCluster (generation -1: a group that only stores offsets), from ``--clients``
   synchronous clients (threads, one group each), for each partition count: what a client
   sees end to end (the broker's handler, the coordinator, the ZooKeeper multi-op).

ZooKeeper runs with the project's test settings (``kafkaclone.testing.zookeeper``: its
transaction log fsyncs on every write, ``forceSync`` left at ZooKeeper's default), on the
same shared 2-core machine as everything else.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred, DeferredList

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.reactor import run
from kafkaclone.testing.zookeeper import ZooKeeperServer
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import OffsetCommitMetadata

reactor: Any = global_reactor


def bench_store(seconds: float, partition_counts: list[int]) -> None:
    print("== store: KafkaZkClient.commit_consumer_offsets against a local ZooKeeper")
    print(f"{'partitions':>10} {'in flight':>9} {'commits/s':>10} {'offsets/s':>10} "
          f"{'p50 ms':>7} {'p99 ms':>7}")
    with ZooKeeperServer() as server:
        zk = KafkaZkClient.from_connect_string(server.connect_string, reactor)
        run(zk.start(connection_timeout=30))
        try:
            for partitions in partition_counts:
                for in_flight in (1, 8):
                    _store_run(zk, partitions, in_flight, seconds)
        finally:
            run(zk.close())


def _store_run(zk: KafkaZkClient, partitions: int, in_flight: int, seconds: float) -> None:
    group = f"bench-{partitions}-{in_flight}"
    tps = [TopicPartition("bench-topic", p) for p in range(partitions)]
    metadata = OffsetCommitMetadata("", -1, int(time.time() * 1000))
    run(zk.commit_consumer_offsets(group, {tp: (0, metadata) for tp in tps}))  # create
    latencies: list[float] = []
    state = {"offset": 0, "commits": 0}
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < deadline:
            state["offset"] += 1
            offset = state["offset"]
            started = time.perf_counter()
            await zk.commit_consumer_offsets(group, {tp: (offset, metadata) for tp in tps})
            latencies.append(time.perf_counter() - started)
            state["commits"] += 1

    started = time.monotonic()
    run(DeferredList([Deferred.fromCoroutine(worker()) for _ in range(in_flight)]),
        timeout=seconds + 60)
    elapsed = time.monotonic() - started
    rate = state["commits"] / elapsed
    latencies.sort()
    print(f"{partitions:>10} {in_flight:>9} {rate:>10,.0f} {rate * partitions:>10,.0f} "
          f"{statistics.median(latencies) * 1000:>7.2f} "
          f"{latencies[int(len(latencies) * 0.99)] * 1000:>7.2f}")


def bench_broker(seconds: float, partition_counts: list[int], client_counts: list[int]
                 ) -> None:
    print("== broker: OffsetCommit v8 to the coordinator of a 1-broker LocalCluster")
    print(f"{'partitions':>10} {'clients':>7} {'commits/s':>10} {'offsets/s':>10} "
          f"{'p50 ms':>7} {'p99 ms':>7}")
    with LocalCluster(1, overrides={"offsets.topic.num.partitions": "8"}) as cluster:
        port = cluster.broker(1).port
        topic = "bench-offsets"
        max_partitions = max(partition_counts)
        _create_topic(port, topic, max_partitions)
        for partitions in partition_counts:
            for clients in client_counts:
                _broker_run(port, topic, partitions, clients, seconds)


def _create_topic(port: int, topic: str, partitions: int) -> None:
    from kafkaclone.clients.admin import AdminClient, NewTopic

    with AdminClient(f"127.0.0.1:{port}") as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = admin.describe_topics([topic]).get(topic)
            if described is not None and not isinstance(described, Exception) and all(
                    p.leader >= 0 for p in described.partitions):
                return
            time.sleep(0.2)
    raise RuntimeError(f"{topic} has no leaders")


def _commit_body(group: str, topic: str, partitions: int, offset: int) -> Any:
    request = APIS[ApiKey.OFFSET_COMMIT].request
    s = request.structs
    return request(group_id=group, generation_id=-1, member_id="", group_instance_id=None,
                   topics=[s["OffsetCommitRequestTopic"](name=topic, partitions=[
                       s["OffsetCommitRequestPartition"](
                           partition_index=p, committed_offset=offset,
                           committed_leader_epoch=-1, committed_metadata="")
                       for p in range(partitions)])])


def _coordinator_port(port: int, group: str) -> int:
    request = APIS[ApiKey.FIND_COORDINATOR].request
    deadline = time.monotonic() + 60
    with BrokerConnection("127.0.0.1", port) as connection:
        while time.monotonic() < deadline:
            _, found = connection.request(ApiKey.FIND_COORDINATOR,
                                          request(key=group, key_type=0))
            if found.error_code == 0:
                return int(found.port)
            time.sleep(0.2)
    raise RuntimeError(f"no coordinator for {group}")


def _broker_run(port: int, topic: str, partitions: int, clients: int, seconds: float) -> None:
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    barrier = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(index: int) -> None:
        group = f"bench-{partitions}-{clients}-{index}"
        connection = BrokerConnection("127.0.0.1", _coordinator_port(port, group))
        try:
            # Warm up until the coordinator serves the group (it may still be loading).
            for _ in range(100):
                _, answer = connection.request(ApiKey.OFFSET_COMMIT,
                                               _commit_body(group, topic, partitions, 0), 8)
                if answer.topics[0].partitions[0].error_code == 0:
                    break
                time.sleep(0.1)
            barrier.wait()
            offset = 0
            while not stop.is_set():
                offset += 1
                started = time.perf_counter()
                _, answer = connection.request(
                    ApiKey.OFFSET_COMMIT, _commit_body(group, topic, partitions, offset), 8)
                latencies[index].append(time.perf_counter() - started)
                code = answer.topics[0].partitions[0].error_code
                if code != 0:
                    errors.append(f"error {code}")
                    return
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=120)
    started = time.monotonic()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    elapsed = time.monotonic() - started
    merged = sorted(x for per_client in latencies for x in per_client)
    rate = len(merged) / elapsed
    print(f"{partitions:>10} {clients:>7} {rate:>10,.0f} {rate * partitions:>10,.0f} "
          f"{statistics.median(merged) * 1000:>7.2f} "
          f"{merged[int(len(merged) * 0.99)] * 1000:>7.2f}"
          + (f"  ({len(errors)} clients stopped on errors: {errors[:3]})" if errors else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--partitions", default="1,6,50")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--only", default="store,broker")
    args = parser.parse_args()
    partition_counts = [int(x) for x in args.partitions.split(",")]
    client_counts = [int(x) for x in args.clients.split(",")]
    only = set(args.only.split(","))
    if "store" in only:
        bench_store(args.seconds, partition_counts)
    if "broker" in only:
        bench_broker(args.seconds, partition_counts, client_counts)


if __name__ == "__main__":
    main()
