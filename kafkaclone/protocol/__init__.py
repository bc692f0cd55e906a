"""The Kafka wire protocol: bytes only, no I/O."""
