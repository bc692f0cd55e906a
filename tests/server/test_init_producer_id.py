"""InitProducerId through the dispatcher at every version it serves, and the
ProducerIdManager's blocks (in memory, and against a real ZooKeeper with two brokers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from twisted.internet import task
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    NONE,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidRequestError,
    ProducerFencedError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.coordinator import TransactionCoordinator
from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkaclone.network.socket_server import ConnectionInfo
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.handlers.registry import HANDLERS, load_handlers
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.testing.reactor import run
from kafkaclone.zk.znodes import ProducerIdBlock
from tests.conftest import ClientFactory
from tests.coordinator.txn_helpers import make_harness

pytestmark = pytest.mark.timeout(60)

CONNECTION = ConnectionInfo("c-1", "10.1.2.3", 50000)
VERSIONS = list(range(0, 5))


class MemoryBlocks:
    """/latest_producer_id_block in memory; ``hold`` makes the next claim wait."""

    def __init__(self) -> None:
        self.latest: ProducerIdBlock | None = None
        self.claims = 0
        self.hold: Deferred[None] | None = None

    async def allocate_producer_id_block(self, broker_id: int, block_size: int = 1000
                                         ) -> ProducerIdBlock:
        self.claims += 1
        if self.hold is not None:
            await self.hold
        start = 0 if self.latest is None else self.latest.block_end + 1
        self.latest = ProducerIdBlock(broker_id, start, start + block_size - 1)
        return self.latest


@dataclass
class FakeBroker:
    clock: task.Clock = field(default_factory=task.Clock)
    blocks: MemoryBlocks = field(default_factory=MemoryBlocks)
    producer_id_manager: ProducerIdManager | None = None
    transaction_coordinator: TransactionCoordinator = field(
        default_factory=lambda: make_harness().coordinator)
    authorizer: None = None

    def __post_init__(self) -> None:
        self.producer_id_manager = ProducerIdManager(1, self.blocks, block_size=3)


def call(broker: FakeBroker, version: int, **fields: Any) -> Any:
    load_handlers()
    key = ApiKey.INIT_PRODUCER_ID
    fields.setdefault("transactional_id", None)
    fields.setdefault("transaction_timeout_ms", 60000)
    frame = api.encode_request(key, version, 11, "client-x", api.APIS[key].request(**fields))
    d = RequestHandler(broker=broker, handlers=HANDLERS).dispatch(CONNECTION, frame)
    box: list[Any] = []
    d.addBoth(box.append)
    assert box and isinstance(box[0], bytes), box
    correlation_id, response = api.decode_response(key, version, box[0])
    assert correlation_id == 11
    return response


def answer(response: Any) -> tuple[int, int, int]:
    return response.error_code, response.producer_id, response.producer_epoch


def test_advertised_at_kafkas_versions() -> None:
    load_handlers()
    registered = HANDLERS[ApiKey.INIT_PRODUCER_ID]
    assert (registered.min_version, registered.max_version) == (0, 4)


@pytest.mark.parametrize("version", VERSIONS)
def test_new_producers_get_new_ids_epoch_0(version: int) -> None:
    broker = FakeBroker()
    ids = [answer(call(broker, version)) for _ in range(7)]
    assert ids == [(NONE, pid, 0) for pid in range(7)]
    assert broker.blocks.claims == 3  # blocks of 3 here: 0-2, 3-5, 6-8


@pytest.mark.parametrize("version", [3, 4])
def test_kip_360_epoch_bump(version: int) -> None:
    broker = FakeBroker()
    assert answer(call(broker, version)) == (NONE, 0, 0)
    assert answer(call(broker, version, producer_id=0, producer_epoch=0)) == (NONE, 0, 1)
    assert answer(call(broker, version, producer_id=0, producer_epoch=32766)) == (NONE, 1, 0)
    assert answer(call(broker, version, producer_id=5, producer_epoch=-1)) == (
        InvalidRequestError.code, -1, -1)
    assert answer(call(broker, version, producer_id=-1, producer_epoch=3)) == (
        InvalidRequestError.code, -1, -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_transactional_ids_go_to_the_transaction_coordinator(version: int) -> None:
    broker = FakeBroker()
    assert answer(call(broker, version, transactional_id="tx")) == (NONE, 1000, 0)
    assert answer(call(broker, version, transactional_id="tx")) == (NONE, 1000, 1)
    assert answer(call(broker, version, transactional_id="")) == (
        InvalidRequestError.code, -1, -1)
    assert broker.blocks.claims == 0  # the coordinator's own ids (the fake counts from 1000)


@pytest.mark.parametrize("version", [3, 4])
def test_a_fenced_producer_is_told_in_its_version(version: int) -> None:
    broker = FakeBroker()
    call(broker, version, transactional_id="tx")
    call(broker, version, transactional_id="tx")
    fenced = call(broker, version, transactional_id="tx", producer_id=999, producer_epoch=0)
    assert fenced.error_code == (ProducerFencedError.code if version >= 4
                                 else InvalidProducerEpochError.code)


def test_an_ongoing_transaction_is_aborted_before_a_new_epoch() -> None:
    broker = FakeBroker()
    call(broker, 4, transactional_id="tx")
    coordinator = broker.transaction_coordinator
    d = Deferred.fromCoroutine(coordinator.handle_add_partitions_to_transaction(
        "tx", 1000, 0, [TopicPartition("t", 0)]))
    assert d.result == NONE
    assert call(broker, 4, transactional_id="tx").error_code == \
        ConcurrentTransactionsError.code


def test_concurrent_callers_share_one_claim() -> None:
    blocks = MemoryBlocks()
    blocks.hold = Deferred()
    manager = ProducerIdManager(1, blocks, block_size=2)
    waiting = [Deferred.fromCoroutine(manager.generate_producer_id()) for _ in range(3)]
    got: list[int] = []
    for d in waiting:
        d.addCallback(got.append)
    assert got == [] and blocks.claims == 1
    blocks.hold, hold = None, blocks.hold
    hold.callback(None)
    assert sorted(got) == [0, 1, 2]
    assert blocks.claims == 2


def test_brokers_never_share_an_id(make_client: ClientFactory) -> None:
    first = ProducerIdManager(1, make_client(), block_size=5)
    second = ProducerIdManager(2, make_client(), block_size=5)
    ids = [run(manager.generate_producer_id()) for _ in range(8)
           for manager in (first, second)]
    assert len(set(ids)) == len(ids) == 16
    restarted = ProducerIdManager(1, make_client(), block_size=5)
    assert run(restarted.generate_producer_id()) > max(ids)
