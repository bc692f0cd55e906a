"""The "kafkaclone" Spark source and sink on a real SparkSession (local[2]) and a real
three-broker LocalCluster; data produced and checked with confluent-kafka (librdkafka)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafkaclone.spark import spark_session
from kafkaclone.testing.cluster import LocalCluster

Row = tuple[int, int, bytes | None, bytes | None]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as local:
        yield local


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("kafkaclone-tests", master="local[2]")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def create_topic(cluster: LocalCluster, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication)],
        operation_timeout=30,
    )
    futures[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition has a leader
        meta = admin.list_topics(name, timeout=10).topics[name]
        if meta.error is None and len(meta.partitions) == partitions and all(
            p.leader >= 0 and len(p.isrs) == replication for p in meta.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name}: not every partition has a leader and a full ISR")


def produce(
    cluster: LocalCluster, topic: str, rows: list[tuple[int, bytes | None, bytes | None]],
    headers: bool = False, **conf: Any,
) -> None:
    """Produce ``(partition, key, value)`` rows with librdkafka, every one acknowledged by
    the leader exactly once (no retries: a retried produce can be written twice), then wait
    until the followers have them all (the high watermarks count every row)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = topic_partitions(admin, topic)
    before = high_watermarks(cluster, topic, len(partitions))
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "retries": 0,
         "linger.ms": 5, "log_level": 0, **conf}
    )
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i, (partition, key, value) in enumerate(rows):
        producer.produce(
            topic, value=value, key=key, partition=partition, on_delivery=on_delivery,
            headers=[("n", b"%d" % i), ("empty", b"")] if headers and i % 2 == 0 else None,
        )
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors
    deadline = time.monotonic() + 60
    while sum(now := high_watermarks(cluster, topic, len(partitions))) < sum(before) + len(rows):
        assert time.monotonic() < deadline, (
            f"the followers did not catch up: high watermarks {now} (before the produce "
            f"{before}, {len(rows)} rows produced), last stable offsets "
            f"{high_watermarks(cluster, topic, len(partitions), 'read_committed')}")
        time.sleep(0.2)


def topic_partitions(client: AdminClient | confluent_kafka.Consumer, topic: str) -> list[int]:
    """The topic's partition ids as a broker's metadata has them, asked until one answers
    with the topic: each broker learns of a new topic from the controller's UpdateMetadata
    on its own time, so the broker asked may not know a topic another broker just showed."""
    deadline = time.monotonic() + 30
    while True:
        meta = client.list_topics(topic, timeout=10).topics[topic]
        if meta.error is None and meta.partitions:
            return sorted(meta.partitions)
        assert time.monotonic() < deadline, f"no broker's metadata has {topic}: {meta.error}"
        time.sleep(0.2)


def high_watermarks(cluster: LocalCluster, topic: str, partitions: int,
                    isolation: str = "read_uncommitted") -> list[int]:
    """The partitions' high watermarks (their last stable offsets for read_committed;
    librdkafka's own default is read_committed)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "watermarks",
         "isolation.level": isolation, "log_level": 0}
    )
    try:
        return [
            consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=10
            )[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def topic_contents(cluster: LocalCluster, topic: str) -> list[Row]:
    """Every ``(partition, offset, key, value)`` of ``topic``, read to the high watermark by
    a librdkafka consumer: the reference the Spark reads are compared with."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"check-{topic}",
         "enable.auto.commit": False, "log_level": 0}
    )
    try:
        partitions = topic_partitions(consumer, topic)
        ends = {}
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=10
            )
            ends[p] = high
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in partitions])
        rows: list[Row] = []
        deadline = time.monotonic() + 120
        while len(rows) < sum(ends.values()) and time.monotonic() < deadline:
            for message in consumer.consume(10000, timeout=1.0):
                if message.error() is None and message.offset() < ends[message.partition()]:
                    rows.append(
                        (message.partition(), message.offset(), message.key(), message.value())
                    )
        assert len(rows) == sum(ends.values())
        return sorted(rows)
    finally:
        consumer.close()


def read(spark: SparkSession, cluster: LocalCluster, **options: str) -> Any:
    reader = spark.read.format("kafkaclone").option(
        "kafka.bootstrap.servers", cluster.bootstrap_servers
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows_of(df: Any) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return sorted(
        (r.partition, r.offset, None if r.key is None else bytes(r.key),
         None if r.value is None else bytes(r.value))
        for r in df.select("partition", "offset", "key", "value").collect()
    )


@pytest.fixture(scope="module")
def four(cluster: LocalCluster) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Topic "four": 4 partitions, 300 records each (every other one with headers)."""
    create_topic(cluster, "four", 4)
    rows = [
        (i % 4, None if i % 9 == 0 else b"k%d" % i, b"value-%d" % i * (i % 5 + 1))
        for i in range(1200)
    ]
    produce(cluster, "four", rows, headers=True)
    contents = topic_contents(cluster, "four")
    assert {(k, v) for _p, _o, k, v in contents} == {(k, v) for _p, k, v in rows}
    return contents


def test_batch_read_runs_one_task_per_partition_and_returns_exactly_the_data(
    spark: SparkSession, cluster: LocalCluster, four: list[Row]
) -> None:
    df = read(spark, cluster, subscribe="four", includeHeaders="true")
    assert df.rdd.getNumPartitions() == 4
    assert rows_of(df) == four
    tasks = df.select(F.spark_partition_id().alias("task"), "partition").distinct().collect()
    by_task: dict[int, set[int]] = {}
    for row in tasks:
        by_task.setdefault(row.task, set()).add(row.partition)
    assert sorted(by_task) == [0, 1, 2, 3]
    assert sorted(p for parts in by_task.values() for p in parts) == [0, 1, 2, 3]
    assert all(len(parts) == 1 for parts in by_task.values())

    sample = df.where("partition = 0 and offset < 4").orderBy("offset").collect()
    assert [r.topic for r in sample] == ["four"] * 4
    assert [r.timestampType for r in sample] == [0] * 4
    assert all(abs(time.time() - r.timestamp.timestamp()) < 3600 for r in sample)
    with_headers = [r for r in sample if r.headers]
    assert with_headers and all(
        [h.key for h in r.headers] == ["n", "empty"] and r.headers[1].value == b""
        for r in with_headers
    )
    assert "headers" not in read(spark, cluster, subscribe="four").columns


def test_offset_ranges_are_exact(
    spark: SparkSession, cluster: LocalCluster, four: list[Row]
) -> None:
    df = read(
        spark, cluster, subscribe="four",
        startingOffsets='{"four": {"0": 10, "1": -2, "2": 250, "3": 0}}',
        endingOffsets='{"four": {"0": 20, "1": 5, "2": -1, "3": 1}}',
    )
    wanted = {0: (10, 20), 1: (0, 5), 2: (250, 300), 3: (0, 1)}
    expected = [r for r in four if wanted[r[0]][0] <= r[1] < wanted[r[0]][1]]
    assert rows_of(df) == expected
    assigned = read(spark, cluster, assign='{"four": [2]}', endingOffsets='{"four": {"2": 7}}')
    assert rows_of(assigned) == [r for r in four if r[0] == 2 and r[1] < 7]
    pattern = read(spark, cluster, subscribePattern="fo.r")
    assert len(rows_of(pattern)) == len(four)


def test_min_partitions_splits_ranges(
    spark: SparkSession, cluster: LocalCluster, four: list[Row]
) -> None:
    df = read(spark, cluster, subscribe="four", minPartitions="10")
    # 4 ranges of 300 and an ideal size of 120: 2.5 parts each, rounded half up to 3
    assert df.rdd.getNumPartitions() == 12
    assert rows_of(df) == four
    spans = (
        df.groupBy(F.spark_partition_id().alias("task"))
        .agg(F.countDistinct("partition").alias("n"), F.count("*").alias("rows"))
        .collect()
    )
    assert all(s.n == 1 for s in spans)
    assert sorted(s.rows for s in spans) == [100] * 12


def no_jobs_run(spark: SparkSession, action: Any) -> str:
    """Run ``action``, which must fail; return the error text after checking that Spark
    started no job for it."""
    group = f"bad-options-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, "bad options")
    try:
        with pytest.raises(Exception) as info:
            action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
    return str(info.value)


def test_bad_options_fail_before_any_task(spark: SparkSession, cluster: LocalCluster) -> None:
    text = no_jobs_run(spark, lambda: read(spark, cluster).collect())
    assert "Exactly one of the options 'assign', 'subscribe' or 'subscribePattern'" in text
    text = no_jobs_run(
        spark, lambda: read(spark, cluster, subscribe="four", startingOffsets='{"four": ').collect()
    )
    assert "'startingOffsets' is not valid JSON" in text
    text = no_jobs_run(spark, lambda: read(spark, cluster, subscribe="nope").collect())
    assert "Subscribed topics do not exist in the cluster: nope" in text
    assert read(spark, cluster, subscribe="nope", failOnDataLoss="false").count() == 0
    text = no_jobs_run(
        spark,
        lambda: spark.createDataFrame([(1,)], "v int")
        .write.format("kafkaclone")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", "x")
        .mode("append")
        .save(),
    )
    assert "Required attribute 'value' not found" in text


def test_streaming_available_now_resumes_from_the_checkpoint(
    spark: SparkSession, cluster: LocalCluster, tmp_path: Path
) -> None:
    create_topic(cluster, "stream", 2)
    produce(cluster, "stream", [(i % 2, None, b"a%d" % i) for i in range(900)])
    first = topic_contents(cluster, "stream")
    seen: list[tuple[int, int, int]] = []

    def collect(batch: Any, batch_id: int) -> None:
        seen.extend((batch_id, r.partition, r.offset) for r in batch.collect())

    def run() -> Any:
        query = (
            spark.readStream.format("kafkaclone")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", "stream")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "200")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(300)
        assert query.exception() is None
        return query

    query = run()
    batches = {b for b, _p, _o in seen}
    assert len(batches) >= 5  # 900 records, at most 200 per micro-batch
    assert sorted((p, o) for _b, p, o in seen) == [(p, o) for p, o, _k, _v in first]
    assert all(p["numInputRows"] <= 200 for p in query.recentProgress)

    produce(cluster, "stream", [(i % 2, None, b"b%d" % i) for i in range(300)])
    second = [r for r in topic_contents(cluster, "stream") if r not in first]
    seen.clear()
    run()
    assert sorted((p, o) for _b, p, o in seen) == [(p, o) for p, o, _k, _v in second]
    assert min(b for b, _p, _o in seen) > max(batches)


def test_sink_writes_exactly_the_rows(spark: SparkSession, cluster: LocalCluster) -> None:
    create_topic(cluster, "sink", 3)
    data = [
        (None if i % 7 == 0 else f"key-{i}", f"value-{i}".encode(), i % 3,
         [("i", str(i).encode())] if i % 2 else [])
        for i in range(600)
    ]
    df = spark.createDataFrame(
        data, "key string, value binary, partition int, "
        "headers array<struct<key: string, value: binary>>",
    ).repartition(3)
    (
        df.write.format("kafkaclone")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", "sink")
        .option("includeHeaders", "true")
        .mode("append")
        .save()
    )
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "sink-check",
         "enable.auto.commit": False, "log_level": 0}
    )
    got = []
    try:
        consumer.assign([confluent_kafka.TopicPartition("sink", p, 0) for p in range(3)])
        deadline = time.monotonic() + 90
        while len(got) < len(data) and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                if message.error() is None:
                    got.append(
                        (None if message.key() is None else message.key().decode(),
                         message.value(), message.partition(), message.headers() or [])
                    )
    finally:
        consumer.close()
    assert sorted(got, key=repr) == sorted(
        [(k, v, p, [tuple(h) for h in hs]) for k, v, p, hs in data], key=repr
    )


def test_sink_columnar_path_writes_exactly_the_rows(
    spark: SparkSession, cluster: LocalCluster
) -> None:
    """Rows without headers go to the producer as Arrow columns (send_batch): with a
    partition column (string keys, nulls among them), and with neither key nor partition;
    each row written once."""
    rows = spark.range(30_000, numPartitions=3).selectExpr(
        "id",
        "CAST(id % 3 AS INT) AS partition",
        "IF(id % 11 = 0, NULL, CONCAT('key-', CAST(id AS STRING))) AS key",
        "CAST(REPEAT(CAST(id AS STRING), CAST(id % 4 AS INT)) AS BINARY) AS value")
    expected = [(i % 3, None if i % 11 == 0 else b"key-%d" % i, str(i).encode() * (i % 4))
                for i in range(30_000)]
    for topic, frame in (("sink-partitioned", rows.drop("id")),
                         ("sink-keyless", rows.select("value"))):
        create_topic(cluster, topic, 3)
        (frame.write.format("kafkaclone")
         .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
         .option("topic", topic).mode("append").save())
    partitioned = rows_of(read(spark, cluster, subscribe="sink-partitioned"))
    assert sorted(((p, k, v) for p, _o, k, v in partitioned), key=repr) == \
        sorted(expected, key=repr)
    for partition in range(3):
        offsets = [o for p, o, _k, _v in partitioned if p == partition]
        assert offsets == list(range(10_000))
    keyless = rows_of(read(spark, cluster, subscribe="sink-keyless"))
    assert sorted(v for _p, _o, _k, v in keyless) == sorted(v for _p, _k, v in expected)
    assert all(k is None for _p, _o, k, _v in keyless)


def test_a_broker_killed_during_a_batch_read(spark: SparkSession, cluster: LocalCluster) -> None:
    create_topic(cluster, "failover", 2, replication=3)
    produce(cluster, "failover", [(i % 2, None, b"%08d" % i + bytes(92)) for i in range(60000)])
    expected = topic_contents(cluster, "failover")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    leader = admin.list_topics("failover", timeout=10).topics["failover"].partitions[0].leader
    df = read(
        spark, cluster, subscribe="failover",
        **{"kafka.max.partition.fetch.bytes": "16384", "kafka.fetch.max.bytes": "16384"},
    )
    result: dict[str, Any] = {}

    def job() -> None:
        try:
            result["rows"] = rows_of(df)
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=job)
    thread.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 60
    while not tracker.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    cluster.broker(leader).kill()
    thread.join(240)
    try:
        assert not thread.is_alive()
        assert "error" not in result, result.get("error")
        assert result["rows"] == expected
    finally:
        # The killed broker's registration lives until its ZooKeeper session expires; a
        # broker started before that refuses to start (broker.id already registered).
        gone = time.monotonic() + 30
        while leader in cluster.registered_broker_ids() and time.monotonic() < gone:
            time.sleep(0.2)
        cluster.restart_broker(leader)


@pytest.mark.timeout(300)
def test_read_committed_skips_aborted_and_open_transactions(
    spark: SparkSession, cluster: LocalCluster, tmp_path: Path
) -> None:
    """``kafka.isolation.level=read_committed``, as Spark's Kafka source: batch and stream
    reads end at the last stable offset and drop aborted transactions' rows."""
    create_topic(cluster, "txn", 2)
    tx = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                   "transactional.id": "spark-txn", "linger.ms": 5,
                                   # open through both reads, however slow the machine
                                   "transaction.timeout.ms": 600_000})
    tx.init_transactions(60)
    for tag, count, commit in (("c1", 10, True), ("ab", 6, False), ("c2", 4, True)):
        tx.begin_transaction()
        for i in range(count):
            tx.produce("txn", value=f"{tag}-{i}".encode(), partition=i % 2)
        tx.flush(30)
        if commit:
            tx.commit_transaction(60)
        else:
            tx.abort_transaction(60)
    tx.begin_transaction()  # left open while Spark reads
    for i in range(3):
        tx.produce("txn", value=f"open-{i}".encode(), partition=i % 2)
    tx.flush(30)
    try:
        committed = sorted([f"c1-{i}".encode() for i in range(10)]
                           + [f"c2-{i}".encode() for i in range(4)])
        df = read(spark, cluster, subscribe="txn", **{"kafka.isolation.level": "read_committed"})
        assert sorted(v for _p, _o, _k, v in rows_of(df)) == committed
        everything = sorted(v for _p, _o, _k, v in rows_of(read(spark, cluster, subscribe="txn")))
        assert len(everything) == 23 and b"ab-0" in everything and b"open-0" in everything

        seen: list[bytes] = []

        def collect(batch: Any, _batch_id: int) -> None:
            seen.extend(bytes(r.value) for r in batch.select("value").collect())

        query = (
            spark.readStream.format("kafkaclone")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", "txn")
            .option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed")
            .option("maxOffsetsPerTrigger", "8")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(300)
        assert query.exception() is None
        assert sorted(seen) == committed
    finally:
        tx.abort_transaction(60)
