"""Kafka Connect (2.8) on the project's own clients: the connector API
(:mod:`kafkaclone.connect.api`), converters, single message transforms, the FileStream
connectors, the standalone worker and its REST API. See docs/connect.md."""
