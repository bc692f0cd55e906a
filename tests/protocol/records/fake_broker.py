"""A loopback listener that real Kafka clients can produce to, capturing their batches.

A :class:`tests.protocol.loopback.LoopbackBroker` that answers ApiVersions, Metadata (every
requested topic has one partition led by this listener, node 0) and Produce v0-v7, which it
never answers (the clients are run with acks=0). By default it advertises Produce v3-v7,
Fetch up to v10 and FindCoordinator, so librdkafka enables magic 2, lz4 and zstd and
kafka-python infers a 2.1 broker; advertising Produce v2 at most makes librdkafka fall back
to magic 1.

For consumers it answers Fetch v4-v10 for partition 0 of any topic with ``fetch_records``
(given at construction, served whole to a fetch at offset 0 and as an empty set after),
and FindCoordinator with COORDINATOR_NOT_AVAILABLE.

A test owns it through ``with FakeBroker() as b``, which stops the accept loop and closes
every connection even when the test fails.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Any

from kafkaclone.common.errors import CoordinatorNotAvailableError
from kafkaclone.protocol.api import RequestFrame
from kafkaclone.protocol.api_keys import ApiKey
from tests.protocol.loopback import (
    LoopbackBroker,
    api_versions_response,
    metadata_response,
    requested_topics,
    response,
)


def advertised_versions(produce: tuple[int, int]) -> dict[int, tuple[int, int]]:
    return {
        ApiKey.PRODUCE: produce,
        ApiKey.FETCH: (0, 10),
        ApiKey.METADATA: (0, 2),
        ApiKey.FIND_COORDINATOR: (0, 2),
        ApiKey.API_VERSIONS: (0, 3),
    }


@dataclass
class ProducedPartition:
    topic: str
    partition: int
    records: bytes
    produce_version: int


class FakeBroker(LoopbackBroker):
    """``with FakeBroker() as broker``: ``broker.port``, then ``broker.wait_for_records()``."""

    def __init__(
        self,
        default_topic: str = "test",
        produce_versions: tuple[int, int] = (3, 7),
        fetch_records: bytes = b"",
        high_watermark: int = 0,
    ) -> None:
        super().__init__("fake")
        self.default_topic = default_topic
        self.fetch_records = fetch_records
        self.high_watermark = high_watermark
        self.advertised = advertised_versions(produce_versions)
        self.fetches = 0
        self.produced: queue.Queue[ProducedPartition] = queue.Queue()
        self.responders = {
            ApiKey.API_VERSIONS: lambda req: api_versions_response(req, self.advertised),
            ApiKey.METADATA: self._metadata,
            ApiKey.PRODUCE: self._produce,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.FETCH: self._fetch,
        }

    @property
    def errors(self) -> list[str]:
        """What went wrong while serving; a test asserts there is nothing."""
        return self.problems

    def wait_for_records(self, count: int = 1, timeout: float = 20.0) -> list[ProducedPartition]:
        """The first ``count`` produced partitions (raises queue.Empty after ``timeout``)."""
        return [self.produced.get(timeout=timeout) for _ in range(count)]

    def _metadata(self, req: RequestFrame) -> Any:
        topics = requested_topics(req)
        partitions = {topic: 1 for topic in topics or [self.default_topic]}
        return metadata_response(req, self.host, self.port, partitions, "fake-cluster")

    def _produce(self, req: RequestFrame) -> None:
        for topic in req.body.topic_data:
            for partition in topic.partition_data:
                self.produced.put(ProducedPartition(
                    topic.name, partition.index, bytes(partition.records or b""),
                    req.api_version))
        # acks=0: no response

    def _find_coordinator(self, req: RequestFrame) -> Any:
        return response(req, throttle_time_ms=0, error_code=CoordinatorNotAvailableError.code,
                        error_message=None, node_id=-1, host="", port=-1)

    def _fetch(self, req: RequestFrame) -> Any:
        if req.api_version < 4:
            raise ValueError(f"unexpected request: Fetch v{req.api_version}")
        responses = []
        any_records = False
        for topic in req.body.topics:
            partitions = []
            for partition in topic.partitions:
                records = b""
                if partition.fetch_offset == 0 and partition.partition == 0:
                    records = self.fetch_records
                any_records = any_records or bool(records)
                partitions.append({
                    "partition_index": partition.partition, "error_code": 0,
                    "high_watermark": self.high_watermark,
                    "last_stable_offset": self.high_watermark, "log_start_offset": 0,
                    "aborted_transactions": [], "records": records,
                })
            responses.append({"topic": topic.topic, "partitions": partitions})
        self.fetches += 1
        if not any_records:
            self.stopping.wait(0.05)  # a short long-poll, so that consumers do not spin
        return response(req, throttle_time_ms=0, error_code=0, session_id=0,
                        responses=responses)
