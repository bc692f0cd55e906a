"""kafkaclone: a Kafka-compatible broker cluster coordinated by Apache ZooKeeper."""

__version__ = "0.1.0"
