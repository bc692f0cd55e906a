"""KafkaBroker, KafkaConfig, ReplicaManager and the API handlers (not built yet)."""
