"""Spark data source benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_spark.py [--records 5000000] [--partitions 4]
        [--rounds 3] [--brokers 1] [--only decode,batch,streaming,write]

1. ``decode``: kafkaclone.protocol.records.columnar alone, no Spark, no network: 100-byte
   records in 16 KiB and 1 MiB batches, uncompressed and lz4, to pyarrow arrays;
2. ``batch``: ``spark.read.format("kafkaclone")...load().count()`` of ``--records``
   100-byte records (produced first with confluent-kafka, acks=1, no compression) from a
   ``--partitions``-partition topic on a local cluster, SparkSession local[2]; the goal is
   2,000,000 rows/s for 5M records from 4 partitions;
3. ``streaming``: the same topic read by a streaming query with Trigger.AvailableNow and
   maxOffsetsPerTrigger unset (one micro-batch per partition's data), rows/s from the
   query's start to its end; the goal is 2,000,000 rows/s;
4. ``write``: ``spark.range(n).selectExpr(<100-byte value>).write.format("kafkaclone")`` of
   ``--records`` rows into a ``--partitions``-partition topic, local[2], rows/s from the
   job's start to every row acknowledged (the idempotent producer, acks=all, the writer's
   columnar path); the goal is 1,000,000 rows/s. The rows are cached first, so the time is
   the write's.

Also reported, for scale: Spark's own ceiling on this machine, a source that yields the same
ready-made Arrow batch over and over (no fetch, no decode).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VALUE = bytes(100)


def bench_decode(records: int) -> None:
    from kafkaclone.protocol.records import Codec, build_record_batch
    from kafkaclone.protocol.records.columnar import decode_columns

    print("\n== decode (columnar.decode_columns + to_arrow, one core)")
    print(f"{'batches':<28}{'records/s':>14}{'MB/s':>10}")
    for codec in (Codec.NONE, Codec.LZ4):
        for per_batch in (150, 10_000):
            batch_count = max(records // per_batch, 1)
            batches = [
                build_record_batch(
                    [(None, VALUE)] * per_batch, base_offset=i * per_batch,
                    base_timestamp=1_700_000_000_000 + i, codec=codec,
                )
                for i in range(min(batch_count, 200))
            ]
            buf = b"".join(batches)
            count = per_batch * len(batches)
            best = float("inf")
            for _ in range(5):
                started = time.perf_counter()
                columns = decode_columns(buf)
                columns.to_arrow(include_headers=False)
                best = min(best, time.perf_counter() - started)
            assert columns.count == count
            label = f"{codec.name.lower()}, {per_batch} records/batch"
            print(f"{label:<28}{count / best:>14,.0f}{count * 100 / best / 1e6:>10,.0f}")


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "batch.size": 1 << 20,
         "queue.buffering.max.messages": 1_000_000, "log_level": 0}
    )
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50_000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    return time.perf_counter() - started


def spark_ceiling(spark: Any, records: int, partitions: int) -> float:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafkaclone.spark.source import SCHEMA

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Any:
            from kafkaclone.protocol.records import build_record_batch
            from kafkaclone.protocol.records.columnar import decode_columns
            from kafkaclone.spark.kafka import arrow_schema, to_record_batch

            columns = decode_columns(build_record_batch([(None, VALUE)] * 10_000))
            ready = to_record_batch(columns, "bench", partition.value, arrow_schema(False))
            for _ in range(records // partitions // 10_000):
                yield ready

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkaclone_bench_ceiling"

        def schema(self) -> str:
            return SCHEMA

        def reader(self, schema: Any) -> Reader:
            return Reader()

    spark.dataSource.register(Ceiling)
    started = time.perf_counter()
    spark.read.format("kafkaclone_bench_ceiling").load().count()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--only", default="decode,batch,streaming,write")
    args = parser.parse_args()
    only = set(args.only.split(","))

    if "decode" in only:
        bench_decode(1_000_000)
    if not only & {"batch", "streaming", "write"}:
        return 0

    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkaclone.spark import spark_session
    from kafkaclone.testing.cluster import LocalCluster

    with LocalCluster(args.brokers) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics(
            [NewTopic("bench", num_partitions=args.partitions, replication_factor=1)]
        )["bench"].result(60)
        time.sleep(2)
        seconds = produce(bootstrap, "bench", args.records, args.partitions)
        print(f"\nproduced {args.records:,} records of 100 bytes to {args.partitions} "
              f"partitions in {seconds:.1f} s ({args.records / seconds:,.0f}/s, confluent-kafka)")

        spark = spark_session("kafkaclone-bench", master="local[2]")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            ceiling = min(spark_ceiling(spark, args.records, args.partitions)
                          for _ in range(args.rounds))
            print(f"Spark's ceiling (ready Arrow batches, local[2]): "
                  f"{args.records / ceiling:,.0f} rows/s")
            if "batch" in only:
                print(f"\n== batch read, local[2], {args.partitions} partitions")
                for round_number in range(args.rounds):
                    started = time.perf_counter()
                    rows = (
                        spark.read.format("kafkaclone")
                        .option("kafka.bootstrap.servers", bootstrap)
                        .option("subscribe", "bench")
                        .load()
                        .count()
                    )
                    elapsed = time.perf_counter() - started
                    assert rows == args.records, rows
                    print(f"round {round_number + 1}: {rows:,} rows in {elapsed:.2f} s = "
                          f"{rows / elapsed:,.0f} rows/s")
            if "streaming" in only:
                print("\n== streaming read (availableNow, maxOffsetsPerTrigger unset), local[2]")
                for round_number in range(args.rounds):
                    with tempfile.TemporaryDirectory() as checkpoint:
                        started = time.perf_counter()
                        query = (
                            spark.readStream.format("kafkaclone")
                            .option("kafka.bootstrap.servers", bootstrap)
                            .option("subscribe", "bench")
                            .option("startingOffsets", "earliest")
                            .load()
                            .writeStream.format("noop")
                            .option("checkpointLocation", checkpoint)
                            .trigger(availableNow=True)
                            .start()
                        )
                        query.awaitTermination(600)
                        elapsed = time.perf_counter() - started
                        rows = sum(p["numInputRows"] for p in query.recentProgress)
                    print(f"round {round_number + 1}: {rows:,} rows in {elapsed:.2f} s = "
                          f"{rows / elapsed:,.0f} rows/s ({len(query.recentProgress)} "
                          "micro-batches)")
            if "write" in only:
                print(f"\n== write, local[2], {args.partitions} partitions")
                admin.create_topics(
                    [NewTopic("bench-write", num_partitions=args.partitions,
                              replication_factor=1)]
                )["bench-write"].result(60)
                rows_df = spark.range(args.records, numPartitions=2).selectExpr(
                    "CAST(id % 4 AS INT) AS partition",
                    "CAST(lpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value").cache()
                rows_df.count()
                for round_number in range(args.rounds):
                    started = time.perf_counter()
                    (rows_df.write.format("kafkaclone")
                     .option("kafka.bootstrap.servers", bootstrap)
                     .option("topic", "bench-write").mode("append").save())
                    elapsed = time.perf_counter() - started
                    print(f"round {round_number + 1}: {args.records:,} rows in {elapsed:.2f} s"
                          f" = {args.records / elapsed:,.0f} rows/s")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
