"""AddPartitionsToTxn, AddOffsetsToTxn and EndTxn through the dispatcher at every version
they serve, on a transaction coordinator with an in-memory __transaction_state: Kafka's
error codes for bad input, and nothing changed by it."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet.defer import Deferred

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import (
    NONE,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    OperationNotAttemptedError,
    ProducerFencedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.coordinator import TransactionCoordinator
from kafkaclone.coordinator.transaction.metadata import TransactionState
from kafkaclone.network.socket_server import ConnectionInfo
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.handlers.registry import HANDLERS, load_handlers
from kafkaclone.server.request_handler import RequestHandler
from tests.coordinator.txn_helpers import make_harness

pytestmark = pytest.mark.timeout(60)

CONNECTION = ConnectionInfo("c-1", "10.1.2.3", 50000)
TX = "tx"


class FakeCache:
    def partition_state(self, topic: str, partition: int) -> object | None:
        return object() if topic in ("t", "__consumer_offsets") and partition < 3 else None


class FakeGroupCoordinator:
    def partition_for(self, group_id: str) -> int:
        return 2


@dataclass
class FakeBroker:
    metadata_cache: FakeCache = field(default_factory=FakeCache)
    group_coordinator: FakeGroupCoordinator = field(default_factory=FakeGroupCoordinator)
    transaction_coordinator: TransactionCoordinator = field(
        default_factory=lambda: make_harness().coordinator)
    authorizer: None = None

    def __post_init__(self) -> None:
        d = Deferred.fromCoroutine(
            self.transaction_coordinator.handle_init_producer_id(TX, 60_000, None))
        assert d.result.error_code == NONE  # producer id 1000, epoch 0

    def txn_state(self) -> Any:
        entry = self.transaction_coordinator.state_manager.get_transaction_state(TX)
        assert entry is not None
        return entry.metadata


def versions(key: ApiKey) -> list[int]:
    load_handlers()
    registered = HANDLERS[key]
    return list(range(registered.min_version, registered.max_version + 1))


def call(broker: Any, api_key: ApiKey, version: int, **fields: Any) -> Any:
    load_handlers()
    key = api_key
    frame = api.encode_request(key, version, 11, "client-x", api.APIS[key].request(**fields))
    d = RequestHandler(broker=broker, handlers=HANDLERS).dispatch(CONNECTION, frame)
    box: list[Any] = []
    d.addBoth(box.append)
    assert box and isinstance(box[0], bytes), box
    correlation_id, response = api.decode_response(key, version, box[0])
    assert correlation_id == 11
    return response


def add_partitions(broker: FakeBroker, version: int, epoch: int,
                   topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    topic_struct = api.APIS[ApiKey.ADD_PARTITIONS_TO_TXN].request.structs[
        "AddPartitionsToTxnTopic"]
    answer = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, transactional_id=TX,
                  producer_id=1000, producer_epoch=epoch,
                  topics=[topic_struct(name=n, partitions=ps) for n, ps in topics.items()])
    return {(t.name, p.partition_index): p.error_code for t in answer.results
            for p in t.results}


@pytest.mark.parametrize("version", versions(ApiKey.ADD_PARTITIONS_TO_TXN))
def test_add_partitions_to_txn(version: int) -> None:
    broker = FakeBroker()
    fenced = ProducerFencedError.code if version >= 2 else InvalidProducerEpochError.code
    assert add_partitions(broker, version, 1, {"t": [0, 1]}) == {
        ("t", 0): fenced, ("t", 1): fenced}
    assert add_partitions(broker, version, 0, {"t": [0], "nope": [0]}) == {
        ("t", 0): OperationNotAttemptedError.code,
        ("nope", 0): UnknownTopicOrPartitionError.code}
    assert broker.txn_state().state is TransactionState.EMPTY  # nothing changed
    assert add_partitions(broker, version, 0, {"t": [0, 1]}) == {("t", 0): NONE, ("t", 1): NONE}
    assert broker.txn_state().topic_partitions == {TopicPartition("t", 0),
                                                   TopicPartition("t", 1)}


@pytest.mark.parametrize("version", versions(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_to_txn_adds_the_groups_partition(version: int) -> None:
    broker = FakeBroker()
    answer = call(broker, ApiKey.ADD_OFFSETS_TO_TXN, version, transactional_id=TX,
                  producer_id=1000, producer_epoch=0, group_id="g")
    assert answer.error_code == NONE
    assert broker.txn_state().topic_partitions == {TopicPartition("__consumer_offsets", 2)}


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
def test_end_txn(version: int) -> None:
    broker = FakeBroker()

    def end(producer_id: int, epoch: int, committed: bool) -> int:
        return int(call(broker, ApiKey.END_TXN, version, transactional_id=TX,
                        producer_id=producer_id, producer_epoch=epoch,
                        committed=committed).error_code)

    assert end(1000, 0, True) == InvalidTxnStateError.code  # no transaction
    assert end(1001, 0, True) == InvalidProducerIdMappingError.code
    add_partitions(broker, version if version <= 3 else 3, 0, {"t": [0]})
    assert end(1000, 1, True) == (ProducerFencedError.code if version >= 2
                                  else InvalidProducerEpochError.code)
    assert broker.txn_state().state is TransactionState.ONGOING
    assert end(1000, 0, True) == NONE
    assert broker.txn_state().state is TransactionState.PREPARE_COMMIT


class TxnStateCache:
    """__transaction_state with 50 partitions, partition p led by broker p."""

    def contains(self, topic: str) -> bool:
        return topic == "__transaction_state"

    def partition_state(self, topic: str, partition: int) -> Any:
        return SimpleNamespace(leader=partition) if self.contains(topic) else None

    def leader_endpoint(self, topic: str, partition: int, listener: str) -> EndPoint | None:
        return EndPoint(listener, SecurityProtocol.PLAINTEXT, f"b{partition}", 9092)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_find_coordinator_answers_the_leader_of_the_ids_partition(version: int) -> None:
    broker = SimpleNamespace(metadata_cache=TxnStateCache(), authorizer=None,
                             config=SimpleNamespace(transaction_state_log_num_partitions=50))
    # abs(javaStringHashCode("my-transactional-id")) % 50, as Kafka computes it.
    hash_code = 0
    for char in "my-transactional-id":
        hash_code = (31 * hash_code + ord(char)) & 0xFFFFFFFF
    expected = abs(hash_code - (1 << 32) if hash_code >= 1 << 31 else hash_code) % 50
    assert expected == 46
    answer = call(broker, ApiKey.FIND_COORDINATOR, version, key="my-transactional-id",
                  key_type=1)
    assert (answer.error_code, answer.node_id, answer.host) == (NONE, expected,
                                                                f"b{expected}")
