"""The project's own synchronous Kafka clients: Producer, Consumer, AdminClient.

No reactor: blocking sockets with selectors, every blocking call bounded by a timeout.
Configuration is a dict of Kafka's dotted config keys, as with confluent-kafka::

    from kafkaclone.clients import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    producer.send("events", b"value", key=b"key").result(timeout=10)
    producer.close()

    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092"})
    consumer.assign([TopicPartition("events", 0, 0)])
    records = consumer.poll(1.0)
"""

from kafkaclone.clients.common import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    ConsumerGroupMetadata,
    ConsumerRecord,
    TopicPartition,
)
from kafkaclone.clients.config import ConfigException
from kafkaclone.clients.consumer import Consumer, RawFetch
from kafkaclone.clients.producer import FutureRecordMetadata, Producer, RecordMetadata
from kafkaclone.clients.transaction_manager import (
    TransactionAbortableError,
    TransactionAbortedError,
)
from kafkaclone.common.errors import KafkaError

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "OFFSET_STORED",
    "ConfigException",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "KafkaError",
    "Producer",
    "RawFetch",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionAbortedError",
]
