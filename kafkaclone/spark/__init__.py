"""A pure-Python PySpark data source and sink for kafkaclone clusters: format "kafkaclone".

    from kafkaclone.spark import register, spark_session
    spark = spark_session("my-job")          # or your own SparkSession
    register(spark)                          # once per session
    df = (spark.read.format("kafkaclone")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

The options and the schema are those of Spark's Kafka connector (kafkaclone.spark.options);
see docs/spark.md. The package also installs a ``pyspark_kafkaclone`` module, which
PySpark's data source lookup registers by itself in new sessions.

Spark settings: executors must run the Python that has kafkaclone installed
(``PYSPARK_PYTHON``), Spark should bind to the loopback address on a single machine
(``SPARK_LOCAL_IP=127.0.0.1``), and pyarrow, numpy and pandas must be installed (the
``spark`` extra). ``configure_environment()`` sets the first two if unset.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["configure_environment", "data_source", "register", "spark_session", "warm_up"]


def configure_environment() -> None:
    """Point PYSPARK_PYTHON (and PYSPARK_DRIVER_PYTHON) at this interpreter and
    SPARK_LOCAL_IP at 127.0.0.1, unless already set."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def data_source() -> type:
    from kafkaclone.spark.source import KafkaCloneDataSource

    return KafkaCloneDataSource


def register(spark: SparkSession) -> None:
    """Register the "kafkaclone" format with ``spark`` (the one call a job needs)."""
    spark.dataSource.register(data_source())


def spark_session(
    app_name: str = "kafkaclone", master: str = "local[2]", **conf: Any
) -> SparkSession:
    """A SparkSession for local jobs and tests, with the environment set, the source
    registered, the UI off and few shuffle partitions; ``conf`` adds Spark settings
    (dots as underscores are not translated: pass ``**{"spark.x": "y"}``)."""
    configure_environment()
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        # Keep each executor's Python workers between tasks (Spark's default, stated): a
        # worker costs seconds to start on a busy machine and is paid once per core.
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def warm_up(spark: SparkSession) -> None:
    """Run one tiny Python task per core, so that Spark starts its Python workers now
    (the slow part of a session's first Python job) rather than in the first real query;
    with ``spark.python.worker.reuse`` the queries then find them running."""
    cores = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(cores), cores).map(lambda x: x).count()
