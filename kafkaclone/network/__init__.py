"""Kafka connections on Twisted: the broker's socket server (KafkaServerProtocol,
RequestChannel) and the client connection brokers use to talk to each other."""
