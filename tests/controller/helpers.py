"""Test support for the controller: a channel that records what it would send, brokers
registered through their own ZooKeeper sessions, controllers with the fake channel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.channel_manager import ResponseCallback
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import BrokerId, BrokerInfo

SR_RESPONSE = APIS[ApiKey.STOP_REPLICA].response
LAI_RESPONSE = APIS[ApiKey.LEADER_AND_ISR].response
KAFKA_STORAGE_ERROR = 56


@dataclass
class Sent:
    broker_id: int
    api_key: int
    version: int
    body: Any


@dataclass
class FakeChannel:
    """Records requests to live brokers; answers StopReplica with success, as a broker
    that deleted its replicas would, and LeaderAndIsr with success except for the replicas
    in ``storage_errors`` (KAFKA_STORAGE_ERROR: a failed log directory)."""

    sent: list[Sent]
    brokers: set[int] = field(default_factory=set)
    listener_name: str = "PLAINTEXT"
    closed: bool = False
    storage_errors: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def add_broker(self, broker: BrokerInfo) -> None:
        self.brokers.add(broker.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.discard(broker_id)

    def send_request(self, broker_id: int, api_key: int, api_version: int, body: Any,
                     callback: ResponseCallback | None = None) -> None:
        if broker_id not in self.brokers:
            return
        self.sent.append(Sent(broker_id, api_key, api_version, body))
        if callback is not None and api_key == ApiKey.STOP_REPLICA:
            errors = [SR_RESPONSE.structs["StopReplicaPartitionError"](
                topic_name=t.topic_name, partition_index=p.partition_index, error_code=0)
                for t in body.topic_states for p in t.partition_states]
            callback(SR_RESPONSE(error_code=0, partition_errors=errors))
        if callback is not None and api_key == ApiKey.LEADER_AND_ISR:
            offline = self.storage_errors.get(broker_id, set())
            s = LAI_RESPONSE.structs
            callback(LAI_RESPONSE(error_code=0, partition_errors=[], topics=[
                s["LeaderAndIsrTopicError"](topic_id=t.topic_id, partition_errors=[
                    s["LeaderAndIsrPartitionError"](
                        partition_index=p.partition_index,
                        error_code=(KAFKA_STORAGE_ERROR
                                    if TopicPartition(t.topic_name, p.partition_index) in offline
                                    else 0))
                    for p in t.partition_states])
                for t in body.topic_states]))

    def shutdown(self) -> None:
        self.closed = True
        self.brokers.clear()


def broker_info(broker_id: int) -> BrokerInfo:
    endpoint = EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9090 + broker_id)
    return BrokerInfo(BrokerId(broker_id), (endpoint,))


def register(make_client: Callable[..., KafkaZkClient], broker_id: int) -> KafkaZkClient:
    client = make_client()
    run(client.register_broker(broker_info(broker_id)))
    return client


def of_kind(sent: list[Sent], api_key: int, broker_id: int | None = None) -> list[Sent]:
    return [s for s in sent if s.api_key == api_key
            and (broker_id is None or s.broker_id == broker_id)]


def partition_states(sent: Sent) -> list[tuple[str, Any]]:
    """(topic, partition state) pairs of a LeaderAndIsr or UpdateMetadata request."""
    return [(t.topic_name, p) for t in sent.body.topic_states for p in t.partition_states]
