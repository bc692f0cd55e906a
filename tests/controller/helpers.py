"""Test support for the controller: a channel that records what it would send, brokers
registered through their own ZooKeeper sessions, controllers with the fake channel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.controller.channel_manager import ResponseCallback
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import BrokerId, BrokerInfo

SR_RESPONSE = APIS[ApiKey.STOP_REPLICA].response


@dataclass
class Sent:
    broker_id: int
    api_key: int
    version: int
    body: Any


@dataclass
class FakeChannel:
    """Records requests to live brokers; answers StopReplica with success, as a broker
    that deleted its replicas would."""

    sent: list[Sent]
    brokers: set[int] = field(default_factory=set)
    listener_name: str = "PLAINTEXT"
    closed: bool = False

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
