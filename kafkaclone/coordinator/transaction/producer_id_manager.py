"""ProducerIdManager: hands out producer ids, unique across the cluster (Kafka 2.8's
kafka.coordinator.transaction.ProducerIdManager, ZooKeeper mode).

Ids come in blocks of 1000 claimed from ``/latest_producer_id_block``: the broker reads the
last claimed block and its zkVersion, and writes the next block conditionally on that
version; a broker that loses the race reads again (KafkaZkClient.allocate_producer_id_block).
A block is claimed only once, so no id is handed out twice, even across restarts: ids left
in a block when the broker stops are never used.

Unlike Kafka 2.8, which claims a block when the broker starts, the first block is claimed
by the first InitProducerId, so brokers that never see an idempotent producer write nothing
to ZooKeeper.
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from twisted.internet.defer import DeferredLock

from kafkaclone.zk.znodes import ProducerIdBlock

logger = logging.getLogger(__name__)

PID_BLOCK_SIZE: Final = 1000
"""Kafka's ProducerIdManager.PidBlockSize."""


class ProducerIdBlockAllocator(Protocol):
    """The ZooKeeper call the manager needs (kafkaclone.zk.client.KafkaZkClient)."""

    async def allocate_producer_id_block(self, broker_id: int,
                                         block_size: int = PID_BLOCK_SIZE) -> ProducerIdBlock:
        ...


class ProducerIdManager:
    """The next producer id of this broker's current block; a new block when it runs out.
    Reactor thread only; concurrent callers share one ZooKeeper round trip."""

    def __init__(self, broker_id: int, zk_client: ProducerIdBlockAllocator, *,
                 block_size: int = PID_BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self._zk_client = zk_client
        self._block_size = block_size
        self._current_block: ProducerIdBlock | None = None
        self._next_producer_id = -1
        self._lock = DeferredLock()

    @property
    def current_block(self) -> ProducerIdBlock | None:
        return self._current_block

    async def generate_producer_id(self) -> int:
        """A producer id never handed out before. Raises what ZooKeeper raised if a new
        block could not be claimed (RuntimeError once all ids are exhausted)."""
        block = self._current_block
        if block is not None and self._next_producer_id <= block.block_end:
            return self._take()
        await self._lock.acquire()
        try:
            block = self._current_block
            if block is None or self._next_producer_id > block.block_end:
                await self._claim_block()
            return self._take()
        finally:
            self._lock.release()

    def _take(self) -> int:
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    async def _claim_block(self) -> None:
        block = await self._zk_client.allocate_producer_id_block(self.broker_id,
                                                                 self._block_size)
        logger.info("Acquired new producerId block %s by writing to Zk", block)
        self._current_block = block
        self._next_producer_id = block.block_start
