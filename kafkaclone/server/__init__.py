"""The broker: KafkaBroker (the root service), KafkaConfig, ReplicaManager, MetadataCache,
the replica fetchers, the request dispatcher and the API handlers (``handlers/``), delayed
operations (``delayed/``), fetch sessions and dynamic config."""
