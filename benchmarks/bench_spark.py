"""Spark data source benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_spark.py [--records 5000000] [--partitions 4]
        [--rounds 3] [--brokers 1] [--only decode,phases,ceiling,batch,streaming,write]
        [--py-spy DIR]

1. ``decode``: kafkaclone.protocol.records.columnar alone, no Spark, no network: 100-byte
   records in 16 KiB and 1 MiB batches, uncompressed and lz4, to pyarrow arrays;
2. ``phases``: the stream reader's driver-side calls (initialOffset, latestOffset,
   partitions, reportLatestOffset, commit, as Spark's Python streaming runner makes them)
   and one executor's read of a whole partition, timed one by one in this process;
3. ``batch``: ``spark.read.format("kafkaclone")...load()`` of ``--records`` 100-byte
   records (produced first with confluent-kafka, acks=1, no compression) from a
   ``--partitions``-partition topic on a local cluster, SparkSession local[2], both with
   ``count()`` and into the ``noop`` sink; the goal is 2,000,000 rows/s;
4. ``streaming``: the same topic read by a streaming query with Trigger.AvailableNow and
   maxOffsetsPerTrigger unset (one micro-batch) into the ``noop`` sink, rows/s from the
   query's start to its end, with Spark's own timing of the micro-batch's phases
   (``durationMs``: what is not in ``triggerExecution`` is the query's start); the goal is
   2,000,000 rows/s;
5. ``write``: ``spark.range(n).selectExpr(<100-byte value>).write.format("kafkaclone")`` of
   ``--records`` rows into a ``--partitions``-partition topic, local[2], rows/s from the
   job's start to every row acknowledged (the idempotent producer, acks=all, the writer's
   columnar path); the goal is 1,000,000 rows/s. The rows are cached first, so the time is
   the write's.

Each of 3-5 is printed beside Spark's own ceiling in the same round (``ceiling``, also run
alone): a source that yields the same ready-made Arrow batch over and over (no fetch, no
decode), read the same way (``count()``, ``noop``, the same availableNow query), and a
sink that receives the writer's Arrow batches and drops them.

``--py-spy DIR`` records every write round after the first with py-spy (the venv's, 100 Hz,
collapsed stacks, ``--subprocesses``): the Spark Python workers, the brokers and this
driver, each stack under its process (``DIR/write-round<N>.txt``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VALUE = bytes(100)
PY_SPY = os.path.join(os.path.dirname(sys.executable), "py-spy")


class Profiler:
    """py-spy on this process and every process under it (Spark's Python workers, the
    brokers) for one phase, or nothing without a directory."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.spy: subprocess.Popen[bytes] | None = None

    def start(self, name: str) -> None:
        if self.directory is None:
            return
        os.makedirs(self.directory, exist_ok=True)
        self.spy = subprocess.Popen(
            [PY_SPY, "record", "--subprocesses", "-p", str(os.getpid()), "-f", "raw",
             "-r", "100", "--nonblocking", "-o", os.path.join(self.directory, f"{name}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # py-spy attaches to the running processes before the phase starts

    def stop(self) -> None:
        spy, self.spy = self.spy, None
        if spy is None:
            return
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


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


def register_ceilings(spark: Any, records: int, partitions: int) -> None:
    """Spark's ceiling on this machine: sources that yield the same ready-made Arrow batch
    (10,000 rows of the source's schema) over and over, batch and streaming, and a sink
    that receives the writer's Arrow batches and drops them."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )

    from kafkaclone.spark.source import SCHEMA

    def ready_batches(partition: InputPartition) -> Any:
        from kafkaclone.protocol.records import build_record_batch
        from kafkaclone.protocol.records.columnar import decode_columns
        from kafkaclone.spark.kafka import arrow_schema, to_record_batch

        columns = decode_columns(build_record_batch([(None, VALUE)] * 10_000))
        ready = to_record_batch(columns, "bench", partition.value, arrow_schema(False))
        for _ in range(records // partitions // 10_000):
            yield ready

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Any:
            return ready_batches(partition)

    class StreamReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"round": 0}

        def latestOffset(self) -> dict[str, int]:
            return {"round": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            if start["round"] >= end["round"]:
                return []
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Any:
            return ready_batches(partition)

    class Drop(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            for _batch in iterator:
                pass
            return WriterCommitMessage()

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkaclone_bench_ceiling"

        def schema(self) -> str:
            return SCHEMA

        def reader(self, schema: Any) -> Reader:
            return Reader()

        def streamReader(self, schema: Any) -> StreamReader:
            return StreamReader()

        def writer(self, schema: Any, overwrite: bool) -> Drop:
            return Drop()

    spark.dataSource.register(Ceiling)


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_stream(spark: Any, source: str, options: dict[str, str]) -> tuple[float, Any]:
    """An availableNow query from ``source`` into the ``noop`` sink: seconds, the query."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            spark.readStream.format(source).options(**options).load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        return time.perf_counter() - started, query


def source_phases(bootstrap: str) -> None:
    """The driver-side calls Spark's Python streaming runner makes on our stream reader for
    an availableNow query of one micro-batch, timed one by one in this process (no Spark),
    and one executor's read of a whole partition."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from kafkaclone.spark.kafka import read_range
    from kafkaclone.spark.options import parse_reader_options
    from kafkaclone.spark.source import KafkaCloneStreamReader

    options = parse_reader_options({"kafka.bootstrap.servers": bootstrap, "subscribe": "bench",
                                    "startingOffsets": "earliest"}, streaming=True)
    reader = KafkaCloneStreamReader(options)
    times: list[tuple[str, float]] = []

    def call(name: str, fn: Any) -> Any:
        started = time.perf_counter()
        out = fn()
        times.append((name, time.perf_counter() - started))
        return out

    start = call("initialOffset", reader.initialOffset)
    call("prepareForTriggerAvailableNow", reader.prepareForTriggerAvailableNow)
    end = call("latestOffset", lambda: reader.latestOffset(start, ReadAllAvailable()))
    parts = call("partitions", lambda: reader.partitions(start, end))
    call("reportLatestOffset", reader.reportLatestOffset)
    call("commit", lambda: reader.commit(end))
    call("latestOffset (again: no new data)", lambda: reader.latestOffset(end, ReadAllAvailable()))
    reader.stop()
    rows = call("read_range of one partition (one executor)",
                lambda: sum(b.num_rows for b in read_range(options, parts[0].value)))
    print("\n== the stream reader's driver calls (no Spark), ms")
    for name, seconds in times:
        print(f"{name:<44}{seconds * 1000:10.1f}")
    print(f"(the partition read was {rows:,} rows)")


def phases(query: Any) -> str:
    """Spark's own timing of each micro-batch's phases (ms), as StreamingQueryProgress
    reports them."""
    out = []
    for progress in query.recentProgress:
        durations = progress["durationMs"]
        out.append(", ".join(f"{k} {v}" for k, v in sorted(durations.items()) if v))
    return "; ".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--only", default="decode,batch,streaming,write")
    parser.add_argument("--py-spy", dest="py_spy", metavar="DIR",
                        help="record every write round after the first with py-spy into DIR")
    args = parser.parse_args()
    profiler = Profiler(args.py_spy)
    only = set(args.only.split(","))

    if "decode" in only:
        bench_decode(1_000_000)
    if not only & {"phases", "ceiling", "batch", "streaming", "write"}:
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

        if "phases" in only:
            source_phases(bootstrap)
        if not only & {"ceiling", "batch", "streaming", "write"}:
            return 0
        spark = spark_session("kafkaclone-bench", master="local[2]")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            register_ceilings(spark, args.records, args.partitions)
            kafka_options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "bench"}
            n = args.records

            def show(label: str, seconds: float, rows: int = n, extra: str = "") -> None:
                print(f"{label:<44}{rows:>11,} rows {seconds:6.2f} s {rows / seconds:>12,.0f}"
                      f" rows/s{extra}")

            def read_ceiling() -> Any:
                return spark.read.format("kafkaclone_bench_ceiling").load()

            def read_kafka() -> Any:
                return spark.read.format("kafkaclone").options(**kafka_options).load()

            def noop(df: Any) -> None:
                df.write.format("noop").mode("overwrite").save()

            if only & {"batch", "ceiling"}:
                print(f"\n== batch read, local[2], {args.partitions} partitions")
                for round_number in range(args.rounds):
                    show(f"round {round_number + 1} ceiling count()",
                         timed(lambda: read_ceiling().count()))
                    show(f"round {round_number + 1} ceiling -> noop",
                         timed(lambda: noop(read_ceiling())))
                    if "batch" in only:
                        rows = 0

                        def count() -> None:
                            nonlocal rows
                            rows = read_kafka().count()

                        show(f"round {round_number + 1} kafkaclone count()", timed(count))
                        assert rows == n, rows
                        show(f"round {round_number + 1} kafkaclone -> noop",
                             timed(lambda: noop(read_kafka())))
            if "streaming" in only:
                print("\n== streaming read (availableNow, maxOffsetsPerTrigger unset) -> noop, "
                      "local[2]")
                for round_number in range(args.rounds):
                    seconds, query = run_stream(spark, "kafkaclone_bench_ceiling", {})
                    rows = sum(p["numInputRows"] for p in query.recentProgress)
                    show(f"round {round_number + 1} ceiling", seconds, rows,
                         f"  [{phases(query)}]")
                    seconds, query = run_stream(
                        spark, "kafkaclone", {**kafka_options, "startingOffsets": "earliest"})
                    rows = sum(p["numInputRows"] for p in query.recentProgress)
                    assert rows == n, rows
                    show(f"round {round_number + 1} kafkaclone", seconds, rows,
                         f"  [{phases(query)}]")
            if "write" in only:
                print(f"\n== write, local[2], {args.partitions} partitions")
                admin.create_topics(
                    [NewTopic("bench-write", num_partitions=args.partitions,
                              replication_factor=1)]
                )["bench-write"].result(60)
                rows_df = spark.range(n, numPartitions=2).selectExpr(
                    "CAST(id % 4 AS INT) AS partition",
                    "CAST(lpad(CAST(id AS STRING), 100, 'x') AS BINARY) AS value").cache()
                rows_df.count()
                for round_number in range(args.rounds):
                    show(f"round {round_number + 1} ceiling (Arrow batches dropped)",
                         timed(lambda: rows_df.write.format("kafkaclone_bench_ceiling")
                               .mode("append").save()))
                    if round_number:
                        profiler.start(f"write-round{round_number + 1}")
                    try:
                        show(f"round {round_number + 1} kafkaclone",
                             timed(lambda: rows_df.write.format("kafkaclone")
                                   .option("kafka.bootstrap.servers", bootstrap)
                                   .option("topic", "bench-write").mode("append").save()))
                    finally:
                        profiler.stop()
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
