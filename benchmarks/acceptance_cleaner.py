"""Issue 16's compaction acceptance run: 1M updates over 1,000 keys, plus deletes.

    .venv/bin/python benchmarks/acceptance_cleaner.py [--updates 1000000] [--keys 1000]
        [--deletes 100]

One broker process (LocalCluster). A topic with ``cleanup.policy=compact``, 256 KiB segments,
``min.cleanable.dirty.ratio=0.01`` and ``delete.retention.ms=2000``; confluent-kafka writes
``--updates`` updates spread over ``--keys`` keys, then tombstones for ``--deletes`` of them,
then a trickle of filler updates (5 more keys) so that segments roll and the tombstones age
past delete.retention.ms. Once a read from offset 0 with confluent-kafka shows every live
key with its latest value and no deleted key, the same read is made with kafka-python. It
prints how many records each read returned (the live keys plus the active segment), the
log's size on disk, and the times.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkaclone.testing.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
TOPIC = "acceptance-compacted"
FILLER_KEYS = 5


def create_topic(cluster: LocalCluster) -> None:
    subprocess.run([str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server",
                    cluster.bootstrap_servers, "--create", "--topic", TOPIC, "--partitions",
                    "1", "--replication-factor", "1",
                    "--config", "cleanup.policy=compact",
                    "--config", f"segment.bytes={256 * 1024}",
                    "--config", "min.cleanable.dirty.ratio=0.01",
                    "--config", "delete.retention.ms=2000"],
                   check=True, capture_output=True, timeout=60)
    time.sleep(2)


def produce(producer: Producer, records: list[tuple[bytes, bytes | None]]) -> None:
    failed: list[object] = []
    for key, value in records:
        while True:
            try:
                producer.produce(TOPIC, key=key, value=value, partition=0,
                                 on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[:3]}")


def read_confluent(cluster: LocalCluster) -> tuple[dict[bytes, bytes | None], int, int]:
    """The table read from offset 0, the records read, and how many were fillers."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": "acceptance-confluent", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=20)
        consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
        table: dict[bytes, bytes | None] = {}
        count = filler_count = 0
        deadline = time.monotonic() + 300
        last = -1
        while last < high - 1 and time.monotonic() < deadline:
            messages = consumer.consume(10_000, 1.0)
            for msg in messages:
                if msg.error():
                        continue
                table[msg.key()] = msg.value()
                last = msg.offset()
                count += 1
                filler_count += msg.key().startswith(b"filler-")
            if not messages and consumer.position(
                    [CkTopicPartition(TOPIC, 0)])[0].offset >= high:
                break
        return table, count, filler_count
    finally:
        consumer.close()


def read_kafka_python(cluster: LocalCluster) -> tuple[dict[bytes, bytes | None], int]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                             enable_auto_commit=False, group_id=None)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        high = consumer.end_offsets([tp])[tp]
        table: dict[bytes, bytes | None] = {}
        count = 0
        deadline = time.monotonic() + 300
        while consumer.position(tp) < high and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    table[record.key] = record.value
                    count += 1
        return table, count
    finally:
        consumer.close()


def live(table: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {k: v for k, v in table.items() if v is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--deletes", type=int, default=100)
    args = parser.parse_args()
    with LocalCluster(1, overrides={"log.cleaner.backoff.ms": "1000"}) as cluster:
        create_topic(cluster)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                             "linger.ms": 20, "batch.size": 128 * 1024,
                             "compression.type": "lz4",
                             "queue.buffering.max.messages": 500_000})
        expected: dict[bytes, bytes] = {}
        started = time.monotonic()
        chunk = 100_000
        for first in range(0, args.updates, chunk):
            records = []
            for i in range(first, min(first + chunk, args.updates)):
                key = b"key-%d" % (i % args.keys)
                value = b"value-%d-" % i + b"x" * 40
                records.append((key, value))
                expected[key] = value
            produce(producer, records)
        deleted = [b"key-%d" % k for k in range(args.deletes)]
        produce(producer, [(key, None) for key in deleted])
        for key in deleted:
            del expected[key]
        produced_s = time.monotonic() - started
        print(f"produced {args.updates:,} updates + {args.deletes} tombstones in "
              f"{produced_s:.1f} s ({args.updates / produced_s:,.0f} records/s)")

        compacted_at = None
        n = 0
        table: dict[bytes, bytes | None] = {}
        count = filler_count = 0
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            filler = [(b"filler-%d" % (j % FILLER_KEYS), b"f-%d-%d" % (n, j) + b"y" * 60)
                      for j in range(5000)]
            n += 1
            produce(producer, filler)
            expected.update(filler)
            time.sleep(2)
            table, count, filler_count = read_confluent(cluster)
            # compacted: no deleted key left, and every other key read once, but for the
            # fillers (the records of the active segment)
            if (not set(deleted) & set(table)
                    and count - filler_count <= len(live(table)) - FILLER_KEYS):
                compacted_at = time.monotonic() - started
                break
        assert compacted_at is not None, f"not compacted: {count} records"
        assert live(table) == expected, "confluent-kafka read differs"
        print(f"compacted {compacted_at - produced_s:.1f} s after the last update; "
              f"confluent-kafka read {count:,} records: {len(live(table))} live keys, "
              f"latest values, no deleted key")
        kp_started = time.monotonic()
        kp_table, kp_count = read_kafka_python(cluster)
        assert live(kp_table) == expected, "kafka-python read differs"
        assert not set(deleted) & set(kp_table)
        print(f"kafka-python 3 read {kp_count:,} records in "
              f"{time.monotonic() - kp_started:.1f} s: the same table")
        data = cluster.base_dir / "broker-1" / "data" / f"{TOPIC}-0"
        segments = sorted(data.glob("*.log"))
        size = sum(s.stat().st_size for s in segments)
        print(f"log on disk: {len(segments)} segments, {size / 1024:,.0f} KiB "
              f"(active {segments[-1].stat().st_size / 1024:,.0f} KiB)")


if __name__ == "__main__":
    main()
