"""The project's Producer and Consumer against confluent-kafka (librdkafka), same broker,
same run: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_clients.py [--records 500000] [--rounds 2]
        [--codec none] [--produce-only]

On a 1-broker LocalCluster, a 6-partition topic, 100-byte values without keys:

- ``produce``: records/s from the first send to the end of ``flush`` (linger.ms 5,
  batch.size 1 MiB, acks=1) for confluent-kafka's Producer and ours, record by record
  (``send``) and as columns (``send_batch``: 10,000 values a call, one partition after the
  other, as the Spark writer hands them over);
- ``consume``: records/s reading every record of the topic by assignment from offset 0,
  with confluent-kafka's ``consume(1000)``, our ``poll()`` (a Python object per record) and
  our ``poll_columns()`` (the columnar path the Spark source uses).

Each client runs ``--rounds`` times, alternating; the best round counts (the machine is
shared). The ratio is ours / confluent-kafka's.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import confluent_kafka
import numpy as np

from kafkaclone.clients import Consumer, Producer, TopicPartition
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.protocol.records.columnar_builder import BinaryColumn
from kafkaclone.testing.cluster import LocalCluster

PARTITIONS = 6
VALUE = b"x" * 100
FETCH = {"fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
         "fetch.min.bytes": 1}
"""The same fetch sizes for both consumers (the Spark reader's); both wait 500 ms at most."""


def create_topic(servers: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with AdminClient(servers) as admin:
        assert admin.create_topics([NewTopic(name, PARTITIONS, 1)]) == {name: None}
    probe = Consumer({"bootstrap.servers": servers})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = probe.list_topics(name, timeout=10).topics[name]
        if meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            break
        time.sleep(0.1)
    probe.close()
    return name


def produce_confluent(servers: str, topic: str, records: int, codec: str) -> float:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": servers, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
        "compression.type": codec, "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_000_000, "enable.idempotence": False})
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return records / (time.perf_counter() - start)


def produce_ours(servers: str, topic: str, records: int, codec: str) -> float:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "batch.size": 1 << 20,
                         "acks": 1, "compression.type": codec,
                         "buffer.memory": 256 * 1024 * 1024})
    producer.partitions_for(topic)
    start = time.perf_counter()
    send = producer.send
    for _ in range(records):
        send(topic, VALUE)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    producer.close()
    return records / elapsed


def produce_ours_columns(servers: str, topic: str, records: int, codec: str) -> float:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "batch.size": 1 << 20,
                         "acks": 1, "compression.type": codec,
                         "buffer.memory": 256 * 1024 * 1024})
    producer.partitions_for(topic)
    chunk = 10_000
    values = BinaryColumn(np.arange(chunk + 1, dtype=np.int64) * len(VALUE),
                          np.frombuffer(VALUE * chunk, dtype=np.uint8))
    start = time.perf_counter()
    for n, first in enumerate(range(0, records, chunk)):
        count = min(chunk, records - first)
        column = values if count == chunk else BinaryColumn(
            values.offsets[:count + 1], values.data)
        producer.send_batch(topic, n % PARTITIONS, column)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    producer.close()
    return records / elapsed


def consume_confluent(servers: str, topic: str, records: int) -> float:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": "bench",
                                         "enable.auto.commit": False, **FETCH})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return got / elapsed


def consume_ours(servers: str, topic: str, records: int, columnar: bool) -> float:
    consumer = Consumer({"bootstrap.servers": servers, "max.poll.records": 10000, **FETCH})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        if columnar:
            got += sum(columns.count for _, columns in consumer.poll_columns(1.0))
        else:
            got += len(consumer.poll(1.0))
    elapsed = time.perf_counter() - start
    consumer.close()
    return got / elapsed


def best(runs: list[float]) -> float:
    return max(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--produce-only", action="store_true",
                        help="run only the produce case (both producers)")
    args = parser.parse_args()
    with LocalCluster(1) as cluster:
        servers = cluster.bootstrap_servers
        results: dict[str, list[float]] = {"produce confluent-kafka": [],
                                           "produce kafkaclone": [],
                                           "produce kafkaclone send_batch": [],
                                           "consume confluent-kafka": [],
                                           "consume kafkaclone poll()": [],
                                           "consume kafkaclone poll_columns()": []}
        for _ in range(args.rounds):
            topic = create_topic(servers)
            results["produce confluent-kafka"].append(
                produce_confluent(servers, topic, args.records, args.codec))
            topic = create_topic(servers)
            results["produce kafkaclone"].append(
                produce_ours(servers, topic, args.records, args.codec))
            topic = create_topic(servers)
            results["produce kafkaclone send_batch"].append(
                produce_ours_columns(servers, topic, args.records, args.codec))
        if args.produce_only:
            for name in [n for n in results if n.startswith("consume")]:
                del results[name]
        else:
            consume_topic = create_topic(servers)
            produce_confluent(servers, consume_topic, args.records, args.codec)
        for _ in range(0 if args.produce_only else args.rounds):
            results["consume confluent-kafka"].append(
                consume_confluent(servers, consume_topic, args.records))
            results["consume kafkaclone poll()"].append(
                consume_ours(servers, consume_topic, args.records, columnar=False))
            results["consume kafkaclone poll_columns()"].append(
                consume_ours(servers, consume_topic, args.records, columnar=True))
    print(f"{args.records} records of 100 bytes, codec {args.codec}, best of {args.rounds}")
    report: dict[str, Any] = {name: best(runs) for name, runs in results.items()}
    for name, rate in report.items():
        print(f"{name:36s} {rate:12,.0f} records/s   runs: "
              + ", ".join(f"{r:,.0f}" for r in results[name]))
    print(f"produce ratio ours/confluent-kafka: send() "
          f"{report['produce kafkaclone'] / report['produce confluent-kafka']:.2f}, "
          f"send_batch() "
          f"{report['produce kafkaclone send_batch'] / report['produce confluent-kafka']:.2f}")
    if args.produce_only:
        return
    print(f"consume ratio ours/confluent-kafka: poll() "
          f"{report['consume kafkaclone poll()'] / report['consume confluent-kafka']:.2f}, "
          f"poll_columns() "
          f"{report['consume kafkaclone poll_columns()'] / report['consume confluent-kafka']:.2f}")


if __name__ == "__main__":
    main()
