"""Kafka Connect benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_connect.py [--records 200000]

Against a local 1-broker cluster (kafkaclone.testing.LocalCluster), in one run:

1. ``producer``: the project's Producer sending ``--records`` 100-byte values to a
   1-partition topic (linger.ms 5, acks=all, as the source task's producer);
2. ``consumer``: the project's Consumer reading them back;
3. ``file source``: a FileStreamSource connector (StringConverter) streaming a file of
   ``--records`` 100-byte lines into a topic: lines/s from start until the task has sent and
   committed them all;
4. ``file sink``: a FileStreamSink connector writing that topic to a file: lines/s until the
   file holds every line;
5. ``jdbc sink``: a JdbcSinkConnector (JsonConverter with schemas, upsert by the record
   key, auto.create) writing ``--jdbc-records`` records of a 4-column struct into a table
   of a real PostgreSQL (kafkaclone.testing.PostgresServer, fsync off): rows/s from the
   connector's creation until the table holds every row.

The connectors run in this process through the standalone herder (the worker minus its
REST server), with offset.flush.interval.ms=1000.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from kafkaclone.clients import Consumer, Producer, TopicPartition
from kafkaclone.connect.herder import StandaloneHerder
from kafkaclone.connect.offsets import FileOffsetBackingStore
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.worker import WorkerSettings, WorkerSinkTask, WorkerSourceTask
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.postgres import PostgresServer

STRING = "org.apache.kafka.connect.storage.StringConverter"


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f} records/s ({count:,} in {seconds:.2f} s)"


def bench_clients(bootstrap: str, records: int) -> None:
    value = b"x" * 100
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    start = time.perf_counter()
    for _ in range(records):
        producer.send("bench-clients", value)
    producer.flush()
    print(f"producer     {rate(records, time.perf_counter() - start)}")
    producer.close()
    consumer = Consumer({"bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition("bench-clients", 0, 0)])
    start = time.perf_counter()
    seen = 0
    while seen < records:
        seen += len(consumer.poll(1.0))
    print(f"consumer     {rate(records, time.perf_counter() - start)}")
    consumer.close()


def bench_connect(bootstrap: str, records: int, tmp: Path) -> None:
    source_file = tmp / "in.txt"
    sink_file = tmp / "out.txt"
    line = "y" * 99 + "\n"
    source_file.write_text(line * records)
    settings = WorkerSettings(worker_id="bench:0", bootstrap_servers=bootstrap,
                              offset_flush_interval_s=1.0, offset_flush_timeout_s=30.0,
                              key_converter=STRING, value_converter=STRING, worker_props={})
    herder = StandaloneHerder(settings, Plugins(), FileOffsetBackingStore(tmp / "offsets"))
    try:
        start = time.perf_counter()
        herder.put_connector_config("source", {
            "connector.class": "FileStreamSource", "file": str(source_file),
            "topic": "bench-connect"}, allow_replace=False)
        (task,) = herder.workers("source")
        assert isinstance(task, WorkerSourceTask)
        while task.sent < records or task.pending or task.in_flight:
            time.sleep(0.01)
        print(f"file source  {rate(records, time.perf_counter() - start)}")
        start = time.perf_counter()
        herder.put_connector_config("sink", {
            "connector.class": "FileStreamSink", "file": str(sink_file),
            "topics": "bench-connect"}, allow_replace=False)
        (sink,) = herder.workers("sink")
        assert isinstance(sink, WorkerSinkTask)
        while sink.consumed < records:
            time.sleep(0.01)
        herder.delete_connector("sink")  # flushes the file
        elapsed = time.perf_counter() - start
        assert sink_file.read_text().count("\n") >= records
        print(f"file sink    {rate(records, elapsed)}")
    finally:
        herder.stop()


JSON = "org.apache.kafka.connect.json.JsonConverter"
KEY_SCHEMA = {"type": "struct", "optional": False,
              "fields": [{"field": "id", "type": "int64", "optional": False}]}
VALUE_SCHEMA = {"type": "struct", "optional": False, "name": "orders", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "customer", "type": "string", "optional": False},
    {"field": "amount", "type": "double", "optional": True},
    {"field": "created_at", "type": "int64", "optional": False,
     "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}]}


def bench_jdbc_sink(bootstrap: str, records: int, tmp: Path, postgres: PostgresServer) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(records):
        key = {"schema": KEY_SCHEMA, "payload": {"id": i}}
        value = {"schema": VALUE_SCHEMA, "payload": {
            "id": i, "customer": f"customer-{i % 1000}", "amount": i * 0.25,
            "created_at": 1704067200000 + i}}
        producer.send("bench-orders", json.dumps(value).encode(), key=json.dumps(key).encode())
    producer.flush()
    producer.close()
    postgres.create_database("bench")
    settings = WorkerSettings(worker_id="bench:0", bootstrap_servers=bootstrap,
                              offset_flush_interval_s=1.0, offset_flush_timeout_s=30.0,
                              key_converter=JSON, value_converter=JSON, worker_props={})
    herder = StandaloneHerder(settings, Plugins(), FileOffsetBackingStore(tmp / "jdbc-offsets"))
    try:
        start = time.perf_counter()
        herder.put_connector_config("jdbc-sink", {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": postgres.jdbc_url("bench"), "topics": "bench-orders",
            "insert.mode": "upsert", "pk.mode": "record_key", "auto.create": "true"},
            allow_replace=False)
        (sink,) = herder.workers("jdbc-sink")
        assert isinstance(sink, WorkerSinkTask)
        while sink.consumed < records:
            time.sleep(0.01)
        herder.delete_connector("jdbc-sink")
        elapsed = time.perf_counter() - start
        [(count,)] = postgres.execute("bench", "SELECT count(*) FROM \"bench-orders\"")
        assert count == records, count
        print(f"jdbc sink    {rate(records, elapsed).replace('records/s', 'rows/s   ')}"
              " (PostgreSQL, upsert)")
    finally:
        herder.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--jdbc-records", type=int, default=50_000)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with LocalCluster(1) as cluster, tempfile.TemporaryDirectory() as tmp, \
            PostgresServer() as postgres:
        bench_clients(cluster.bootstrap_servers, args.records)
        bench_connect(cluster.bootstrap_servers, args.records, Path(tmp))
        bench_jdbc_sink(cluster.bootstrap_servers, args.jdbc_records, Path(tmp), postgres)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
