"""KafkaController and its state machines (not built yet)."""
