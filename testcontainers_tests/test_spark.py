"""Spark executors in containers (issue 21): a Spark standalone master and a worker (two
cores, so two tasks at once), each in its own container on the suite's network (Spark's own
``spark-class`` launcher from the pyspark package in the image's venv, Debian's JRE), and a
batch read of a topic whose
partitions live on three broker containers. The driver runs in the master's container; the
executor runs in the worker's container and reads the brokers by their INTERNAL addresses
(``broker-N:9092``), so no executor shares a host with a broker. The rows Spark returns are
exactly the records confluent-kafka produced (partition, offset, value), and the tasks ran
on the worker. One worker, not two: every Spark JVM (master, worker, executor, driver) costs
a minute or more to start on a loaded 2-core machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from kafkaclone.testing.history import History

from .cluster import ContainerCluster, Node, progress, wait_until
from .workload import Writer, create_topic

TOPIC = "spark-in"
PARTITIONS = 4
VALUES = 20_000
MASTER_URL = "spark://spark-master:7077"
VENV_PYTHON = "/opt/kafkaclone/.venv/bin/python"
# spark-class from the pyspark package, wherever the venv's site-packages are.
SPARK_CLASS = (f'SPARK_HOME=$({VENV_PYTHON} -c "import os, pyspark; '
               'print(os.path.dirname(pyspark.__file__))") && export SPARK_HOME && '
               'exec "$SPARK_HOME/bin/spark-class"')
SPARK_ENV = {"PYSPARK_PYTHON": VENV_PYTHON, "PYSPARK_DRIVER_PYTHON": VENV_PYTHON,
             "SPARK_DAEMON_MEMORY": "256m", "SPARK_WORKER_DIR": "/tmp/spark-work"}
WORKERS = ("spark-worker-1",)

# Run by the driver (in the master's container): every record as (host, partition, offset,
# value), the host being the container whose executor read it.
JOB = f"""
import json, socket
from kafkaclone.spark import spark_session
spark = spark_session("containers", master={MASTER_URL!r}, **{{
    "spark.driver.host": "spark-master", "spark.driver.bindAddress": "0.0.0.0",
    "spark.executor.memory": "512m", "spark.executor.cores": "2", "spark.cores.max": "2"}})
spark.sparkContext.setLogLevel("ERROR")
df = (spark.read.format("kafkaclone")
      .option("kafka.bootstrap.servers", "broker-1:9092,broker-2:9092,broker-3:9092")
      .option("subscribe", {TOPIC!r}).load())
def read(rows):
    host = socket.gethostname()
    return [(host, r.partition, r.offset, bytes(r.value).decode()) for r in rows]
rows = df.rdd.mapPartitions(read).collect()
print("RESULT " + json.dumps({{"partitions": df.rdd.getNumPartitions(), "rows": rows}}))
spark.stop()
"""


def spark_node(cluster: ContainerCluster, alias: str, command: str) -> Node:
    node = Node(cluster.image, alias, cluster.network, ["sh", "-c", f"{SPARK_CLASS} {command}"],
                env=SPARK_ENV, hostname=alias)
    cluster.extra_nodes.append(node)
    return node


@pytest.fixture
def spark_cluster(start_cluster: Callable[..., ContainerCluster]) -> Iterator[
        tuple[ContainerCluster, Node]]:
    """Three brokers, a Spark master and a worker on one network (removed with the
    cluster by ``start_cluster``)."""
    cluster = start_cluster(3)
    master = spark_node(cluster, "spark-master",
                        "org.apache.spark.deploy.master.Master --host spark-master "
                        "--port 7077 --webui-port 8080")
    master.start()
    for alias in WORKERS:
        spark_node(cluster, alias, f"org.apache.spark.deploy.worker.Worker --host {alias} "
                   f"--cores 2 --memory 1g {MASTER_URL}").start()
    wait_until(lambda: master.logs(tail=200).count("Registering worker") >= len(WORKERS),
               300, "the Spark worker to register with the master")
    progress(f"Spark master and {len(WORKERS)} worker(s) up")
    yield cluster, master


@pytest.mark.timeout(600)
def test_executors_in_containers_read_every_record_exactly(
        spark_cluster: tuple[ContainerCluster, Node], history: History) -> None:
    cluster, master = spark_cluster
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=2)
    writer = Writer(cluster, TOPIC, PARTITIONS, history, count=VALUES, seconds=120).start()
    writer.join(timeout=180)
    assert writer.acked() == VALUES, f"produce errors: {sorted(set(writer.errors))}"
    expected = sorted((s.partition, s.offset, s.value) for s in history.sends if s.acked)

    progress("running the batch read on the Spark cluster")
    output = master.exec([VENV_PYTHON, "-c", JOB])
    result = json.loads(next(line for line in output.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    rows = result["rows"]
    assert result["partitions"] == PARTITIONS
    assert len(rows) == VALUES
    assert sorted((p, o, v) for _, p, o, v in rows) == expected
    hosts = {host for host, _, _, _ in rows}
    progress(f"Spark read {len(rows)} rows in {result['partitions']} tasks on {sorted(hosts)}")
    assert hosts <= set(WORKERS) and hosts, hosts
