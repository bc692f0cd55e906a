"""KafkaZkClient, the znode classes and AdminZkClient (not built yet)."""
