"""Kafka's ``KafkaBasedLog``: a compacted topic read from the beginning by a thread of its
own, every record handed to a callback, written with an acks=all producer. The distributed
worker keeps its connector configs, source offsets and statuses in three of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from kafkaclone.clients import Consumer, ConsumerRecord, KafkaError, Producer, TopicPartition
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.common.errors import TopicAlreadyExistsError

logger = logging.getLogger(__name__)


def ensure_topic(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    """Create ``name`` compacted, as Kafka's ``TopicAdmin.createTopics`` for the internal
    topics (an existing topic is left as it is)."""
    with AdminClient(bootstrap) as admin:
        errors = admin.create_topics([NewTopic(name, partitions, replication_factor,
                                               configs={"cleanup.policy": "compact"})])
    error = errors.get(name)
    if error is not None and not isinstance(error, TopicAlreadyExistsError):
        raise error


class KafkaBasedLog:
    def __init__(self, bootstrap: str, topic: str, client_id: str,
                 callback: Callable[[ConsumerRecord], None],
                 extra: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self.callback = callback
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "client.id": f"{client_id}-producer", "linger.ms": 0,
                                  "max.in.flight.requests.per.connection": 1})
        self.consumer = Consumer({"bootstrap.servers": bootstrap,
                                  "client.id": f"{client_id}-consumer",
                                  "enable.auto.commit": False, **(extra or {})})
        self._positions: dict[int, int] = {}
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self._read_requests = 0
        self._reads_done = 0
        self._thread = threading.Thread(target=self._run, name=f"KafkaBasedLog-{topic}",
                                        daemon=True)

    def start(self, timeout: float = 60.0) -> None:
        partitions = self.consumer.list_topics(self.topic).topics[self.topic].partitions
        self.consumer.assign([TopicPartition(self.topic, p, -2) for p in sorted(partitions)])
        self._thread.start()
        self.read_to_end(timeout)

    def send(self, key: bytes, value: bytes | None) -> None:
        """Write one record and wait for its acknowledgement."""
        self.producer.send(self.topic, value, key=key).result(timeout=30)

    def read_to_end(self, timeout: float = 30.0) -> None:
        """Return once every record written before this call has been handed over."""
        with self._cond:
            self._read_requests += 1
            wanted = self._read_requests
            if not self._cond.wait_for(lambda: self._reads_done >= wanted or
                                       self._stopping.is_set(), timeout):
                raise TimeoutError(f"reading {self.topic} to its end took over {timeout} s")

    def _run(self) -> None:
        target: dict[int, int] | None = None
        serving = 0
        while not self._stopping.is_set():
            try:
                with self._cond:
                    pending = self._read_requests
                if target is None and pending > self._reads_done:
                    serving = pending
                    target = {tp.partition: self.consumer.get_watermark_offsets(tp)[1]
                              for tp in self.consumer.assignment()}
                for record in self.consumer.poll(0.1):
                    self._positions[record.partition] = record.offset + 1
                    try:
                        self.callback(record)
                    except Exception:
                        logger.exception("Failed to apply a record of %s", self.topic)
                if target is not None and all(self._positions.get(p, 0) >= end
                                              for p, end in target.items() if end > 0):
                    target = None
                    with self._cond:
                        self._reads_done = serving
                        self._cond.notify_all()
            except KafkaError as exc:
                logger.warning("Reading %s failed, retrying: %s", self.topic, exc)
                time.sleep(0.5)

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(10)
        self.consumer.close(autocommit=False)
        self.producer.close(10)
