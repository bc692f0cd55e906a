"""Twisted socket server: KafkaServerProtocol and RequestChannel (not built yet)."""
