"""Found by PySpark's data source lookup (top-level modules named ``pyspark_*`` that define
``DefaultSource``): the "kafkaclone" format is available in every new SparkSession of an
environment where kafkaclone is installed, without calling kafkaclone.spark.register."""

from kafkaclone.spark.source import KafkaCloneDataSource as DefaultSource

__all__ = ["DefaultSource"]
