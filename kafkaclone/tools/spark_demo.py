"""The Spark demo pipeline (after seed 003's monitoring ETL), on a running kafkaclone cluster.

JSON monitoring events in a topic -> keep the warnings and errors -> count them per host
and one-minute window -> write the counts as JSON to another topic. Run as a batch job and
as a streaming query (Trigger.AvailableNow, several micro-batches through
maxOffsetsPerTrigger, a checkpoint), then print the result table and the read rate.

    .venv/bin/python -m kafkaclone.tools.spark_demo --bootstrap-server 127.0.0.1:9092 \\
        --produce 200000

Needs the ``spark`` extra (pyspark, pyarrow, pandas) and Java 17; PYSPARK_PYTHON and
SPARK_LOCAL_IP are set for you (kafkaclone.spark.configure_environment).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HOSTS = [f"web-{i}" for i in range(8)]
LEVELS = ["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"]
EVENT_SCHEMA = "host string, level string, latency_ms int, ts long"


def produce_events(bootstrap: str, topic: str, count: int, seed: int = 3) -> float:
    """``count`` JSON events over the last ten minutes, keyed by host; returns seconds."""
    from kafkaclone.clients import Producer

    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "20",
                         "compression.type": "lz4"})
    started = time.perf_counter()
    try:
        for i in range(count):
            host = rng.choice(HOSTS)
            event = {
                "host": host,
                "level": rng.choice(LEVELS),
                "latency_ms": rng.randint(1, 2000),
                "ts": now_ms - 600_000 + i * 600_000 // max(count, 1),
            }
            producer.send(topic, json.dumps(event).encode(), key=host.encode())
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - started


def monitoring_counts(events: Any, watermark: str | None = None) -> Any:
    """The ETL: parse, filter warnings and errors, count per host and minute (a streaming
    query gives a ``watermark`` delay, after which a window's count is final)."""
    from pyspark.sql import functions as F

    parsed = (
        events.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", (F.col("ts") / 1000).cast("timestamp"))
    )
    if watermark is not None:
        parsed = parsed.withWatermark("event_time", watermark)
    return (
        parsed.filter(F.col("level").isin("WARN", "ERROR"))
        .groupBy(F.col("host"), F.window("event_time", "1 minute"))
        .agg(
            F.count("*").alias("problems"),
            F.round(F.avg("latency_ms"), 1).alias("avg_latency_ms"),
        )
    )


def as_kafka_rows(counts: Any) -> Any:
    from pyspark.sql import functions as F

    return counts.select(
        F.col("host").alias("key"),
        F.to_json(
            F.struct(
                "host",
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "problems",
                "avg_latency_ms",
            )
        ).alias("value"),
    )


def end_offsets(bootstrap: str, topic: str) -> str:
    """Where ``topic`` ends now, as a startingOffsets JSON: reading back from there shows
    only what this run wrote (a rerun of the demo appends to the same topics)."""
    from kafkaclone.clients import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = metadata.topics[topic].partitions if topic in metadata.topics else {}
        ends = {
            str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in sorted(partitions)
        }
    finally:
        consumer.close()
    return json.dumps({topic: ends}) if ends else "earliest"


def read_back(spark: Any, bootstrap: str, topic: str, starting: str = "earliest") -> Any:
    from pyspark.sql import functions as F

    result_schema = (
        "host string, window_start string, window_end string, problems long, "
        "avg_latency_ms double"
    )
    return (
        spark.read.format("kafkaclone")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting)
        .load()
        .select(F.from_json(F.col("value").cast("string"), result_schema).alias("r"), "offset")
        .select("r.*", "offset")
    )


def run_batch(spark: Any, bootstrap: str, source: str, sink: str) -> dict[str, float]:
    reader = (
        spark.read.format("kafkaclone")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
    )
    # The first job of a session also starts Spark's Python workers (seconds); the second
    # read of the same range shows the source's own rate.
    started = time.perf_counter()
    rows = reader.load().count()
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    reader.load().count()
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    counts = monitoring_counts(reader.load())
    (
        as_kafka_rows(counts)
        .write.format("kafkaclone")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .mode("append")
        .save()
    )
    etl_seconds = time.perf_counter() - started
    return {"rows": rows, "first_seconds": first_seconds, "read_seconds": read_seconds,
            "etl_seconds": etl_seconds}


def run_streaming(
    spark: Any, bootstrap: str, source: str, sink: str, max_per_trigger: int, checkpoint: str
) -> dict[str, float]:
    events = (
        spark.readStream.format("kafkaclone")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
    )
    counts = monitoring_counts(events, watermark="2 minutes")
    started = time.perf_counter()
    query = (
        as_kafka_rows(counts)
        .writeStream.format("kafkaclone")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    seconds = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    return {"rows": rows, "seconds": seconds, "micro_batches": len(progress)}


@contextmanager
def progress(what: str, every: float = 5.0) -> Iterator[None]:
    """Say what is happening, a line every ``every`` seconds while it lasts, then how long
    it took (Spark's start-up is silent and takes from a few seconds to a minute)."""
    print(f"{what} ...", flush=True)
    started = time.monotonic()
    done = threading.Event()

    def report() -> None:
        while not done.wait(every):
            print(f"  ... {time.monotonic() - started:.0f} s", flush=True)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        yield
    finally:
        done.set()
        reporter.join()
    print(f"  ready in {time.monotonic() - started:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--input-topic", default="demo-events")
    parser.add_argument("--output-topic", default="demo-problem-counts")
    parser.add_argument("--produce", type=int, default=0,
                        help="produce this many demo events to the input topic first")
    parser.add_argument("--mode", choices=["batch", "streaming", "both"], default="both")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=50_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from kafkaclone.spark import spark_session, warm_up

    bootstrap = args.bootstrap_server
    if args.produce:
        seconds = produce_events(bootstrap, args.input_topic, args.produce)
        print(f"produced {args.produce} events to {args.input_topic} in {seconds:.1f} s")

    topic = args.output_topic if args.mode != "streaming" else args.output_topic + "-streaming"
    starting = end_offsets(bootstrap, topic)
    with progress(f"starting Spark ({args.master}): the JVM, then its Python workers"):
        spark = spark_session("kafkaclone-spark-demo", master=args.master)
        spark.sparkContext.setLogLevel("ERROR")
        warm_up(spark)
    try:
        if args.mode in ("batch", "both"):
            stats = run_batch(spark, bootstrap, args.input_topic, args.output_topic)
            rate = stats["rows"] / stats["read_seconds"] if stats["read_seconds"] else 0.0
            print(
                f"\n== batch: read {stats['rows']:.0f} records from {args.input_topic} in "
                f"{stats['first_seconds']:.2f} s the first time (Spark starts its Python "
                f"workers), {stats['read_seconds']:.2f} s the second ({rate:,.0f} records/s); "
                f"filter, group and write took {stats['etl_seconds']:.2f} s"
            )
        if args.mode in ("streaming", "both"):
            with tempfile.TemporaryDirectory(prefix="kafkaclone-demo-checkpoint-") as checkpoint:
                stats = run_streaming(
                    spark, bootstrap, args.input_topic, args.output_topic + "-streaming",
                    args.max_offsets_per_trigger, checkpoint,
                )
            rate = stats["rows"] / stats["seconds"] if stats["seconds"] else 0.0
            print(
                f"\n== streaming (availableNow, maxOffsetsPerTrigger="
                f"{args.max_offsets_per_trigger}): {stats['rows']:.0f} records in "
                f"{stats['micro_batches']:.0f} micro-batches, {stats['seconds']:.2f} s "
                f"({rate:,.0f} records/s)"
            )
        print(f"\n== result table (topic {topic}): warnings and errors per host and minute")
        result = read_back(spark, bootstrap, topic, starting).orderBy("window_start", "host")
        result.show(24, truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
