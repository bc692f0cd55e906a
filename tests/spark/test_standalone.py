"""The "kafkaclone" source and sink on a Spark standalone cluster: a master and two workers
started with Spark's own daemon script from the pyspark package (separate JVMs, each worker
launching its own executor JVM), reading and writing a real three-broker LocalCluster.

pip's pyspark ships ``sbin/spark-daemon.sh`` but not the ``start-master.sh`` /
``start-worker.sh`` wrappers of a Spark distribution; those only call
``spark-daemon.sh start org.apache.spark.deploy.master.Master 1 ...`` and
``spark-daemon.sh start org.apache.spark.deploy.worker.Worker <n> ... spark://host:port``,
which is what :class:`StandaloneCluster` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pyspark
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from kafkaclone.spark import spark_session
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.zookeeper import free_port

pytestmark = pytest.mark.timeout(600)

SPARK_HOME = Path(pyspark.__file__).parent
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
ROWS = 100_000


class StandaloneCluster:
    """A Spark master and ``workers`` workers on 127.0.0.1, logs, pids and work dirs under
    ``base``; every daemon is stopped by :meth:`stop` (Spark's stop command, then SIGKILL
    to whatever is left, executors included)."""

    def __init__(self, base: Path, workers: int = 2) -> None:
        self.base = base
        self.workers = workers
        self.port = free_port()
        self.ui_port = free_port()
        self.ident = f"kafkaclone-{self.port}"
        self.env = dict(os.environ)
        self.env.update(
            SPARK_HOME=str(SPARK_HOME), SPARK_LOG_DIR=str(base / "logs"),
            SPARK_PID_DIR=str(base / "pids"), SPARK_WORKER_DIR=str(base / "work"),
            SPARK_IDENT_STRING=self.ident, SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable, SPARK_DAEMON_MEMORY="256m",
        )

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        subprocess.run(
            [str(SPARK_HOME / "sbin" / "spark-daemon.sh"), action, cls, str(instance), *args],
            env=self.env, check=True, timeout=120, stdout=subprocess.DEVNULL,
        )

    def pid_of(self, cls: str, instance: int) -> int:
        path = self.base / "pids" / f"spark-{self.ident}-{cls}-{instance}.pid"
        return int(path.read_text())

    def start(self) -> None:
        self._daemon("start", MASTER, 1, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.ui_port))
        for n in range(1, self.workers + 1):
            self._daemon("start", WORKER, n, "--host", "127.0.0.1",
                         "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                         self.url)
        self.wait_for_workers(self.workers)

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return int(json.load(r)["aliveworkers"])

    def wait_for_workers(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.alive_workers() >= count:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} Spark workers did not register:\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(
            f"== {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-20:])
            for p in sorted((self.base / "logs").glob("*.out"))
        )

    def kill_worker(self, instance: int) -> None:
        """SIGKILL a worker and everything it started (its executor and Python workers)."""
        for pid in [*descendants(self.pid_of(WORKER, instance)),
                    self.pid_of(WORKER, instance)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        pids: list[int] = []
        for cls, n in [*((WORKER, n) for n in range(1, self.workers + 1)), (MASTER, 1)]:
            try:
                pid = self.pid_of(cls, n)
            except (OSError, ValueError):
                continue
            pids += [pid, *descendants(pid)]
            try:
                self._daemon("stop", cls, n)
            except (subprocess.SubprocessError, OSError):
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found through /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3) as local:
        yield local


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        spark_cluster.start()
        yield spark_cluster
    finally:
        spark_cluster.stop()


@pytest.fixture(scope="module")
def spark(standalone: StandaloneCluster) -> Iterator[SparkSession]:
    session = spark_session(
        "kafkaclone-standalone", master=standalone.url,
        **{"spark.executor.memory": "512m", "spark.executor.cores": "1",
           "spark.cores.max": "2", "spark.task.maxFailures": "4",
           "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=2)],
                        operation_timeout=30)[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics[name]
        if meta.error is None and len(meta.partitions) == partitions and all(
            p.leader >= 0 for p in meta.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} has no leaders")


def end_offsets(cluster: LocalCluster, topic: str, partitions: int) -> list[int]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "ends", "log_level": 0}
    )
    try:
        return [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                               timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def key_values(df: object) -> list[tuple[int, int]]:
    rows = df.selectExpr(  # type: ignore[attr-defined]
        "CAST(CAST(key AS STRING) AS BIGINT) AS k", "CAST(CAST(value AS STRING) AS BIGINT) AS v"
    ).collect()
    return sorted((r.k, r.v) for r in rows)


EXPECTED = [(i, 3 * i) for i in range(ROWS)]


@pytest.fixture(scope="module")
def written(spark: SparkSession, cluster: LocalCluster) -> str:
    """The writer on the executors: ROWS rows into a 4-partition topic."""
    create_topic(cluster, "standalone-in", 4)
    (spark.range(ROWS, numPartitions=4)
     .selectExpr("CAST(id AS STRING) AS key", "CAST(id * 3 AS STRING) AS value")
     .write.format("kafkaclone")
     .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
     .option("topic", "standalone-in").mode("append").save())
    assert sum(end_offsets(cluster, "standalone-in", 4)) == ROWS
    return "standalone-in"


def test_writer_and_batch_read_are_exact(
    spark: SparkSession, cluster: LocalCluster, written: str
) -> None:
    df = (spark.read.format("kafkaclone")
          .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
          .option("subscribe", written).option("minPartitions", "8").load())
    assert df.rdd.getNumPartitions() == 8
    assert key_values(df) == EXPECTED
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()  # type: ignore[union-attr]
    assert executors == 3  # the driver and one executor per worker


def test_available_now_streaming_query_is_exact(
    spark: SparkSession, cluster: LocalCluster, written: str, tmp_path: Path
) -> None:
    create_topic(cluster, "standalone-out", 2)
    query = (spark.readStream.format("kafkaclone")
             .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("subscribe", written).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "30000").load()
             .selectExpr("key", "value")
             .writeStream.format("kafkaclone")
             .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("topic", "standalone-out")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300)
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) >= 4
    out = (spark.read.format("kafkaclone")
           .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
           .option("subscribe", "standalone-out").load())
    assert key_values(out) == EXPECTED


def test_a_worker_killed_mid_batch_the_tasks_are_retried_and_the_result_is_exact(
    spark: SparkSession, cluster: LocalCluster, standalone: StandaloneCluster, written: str,
    tmp_path: Path,
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    marker_dir = str(markers)

    def slow(batches: Iterator[object]) -> Iterator[object]:
        import os as _os
        import time as _time

        _os.close(_os.open(_os.path.join(marker_dir, str(_os.getpid())), _os.O_CREAT))
        _time.sleep(4)
        yield from batches

    df = (spark.read.format("kafkaclone")
          .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
          .option("subscribe", written).option("minPartitions", "8").load())
    slowed = df.mapInArrow(slow, df.schema)
    result: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.extend(key_values(slowed))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    job = threading.Thread(target=run)
    job.start()
    deadline = time.monotonic() + 120
    while len(list(markers.iterdir())) < 2:  # both executors are running tasks
        assert time.monotonic() < deadline, "no task started"
        time.sleep(0.1)
    standalone.kill_worker(1)
    job.join(300)
    assert not job.is_alive()
    assert not errors, errors
    assert result == EXPECTED
