"""InitProducerId (key 22), v0-4: a producer id and epoch for an idempotent producer (Kafka
2.8's KafkaApis.handleInitProducerIdRequest and TransactionCoordinator.handleInitProducerId,
for producers without a transactional id).

- No transactional id: a new id from the ProducerIdManager, epoch 0. From v3 (KIP-360) a
  producer that gives its current id and epoch gets the same id with epoch + 1, and a new
  id with epoch 0 once the epoch is exhausted (the transaction coordinator's rule). Kafka
  2.8 hands such a producer a new id instead; the bump keeps the producer id stable and
  means the same to the partitions (a new epoch starts again at sequence 0). Only one of
  id and epoch given: INVALID_REQUEST.
- A transactional id: the transaction coordinator answers
  (kafkaclone.coordinator.transaction.coordinator.TransactionCoordinator
  .handle_init_producer_id: a new id, or an epoch bump that fences the previous producer);
  an empty one is INVALID_REQUEST, as Kafka answers. Below v4 PRODUCER_FENCED is answered
  as INVALID_PRODUCER_EPOCH, which older clients know (KIP-588).
- ZooKeeper failing to give a block: COORDINATOR_NOT_AVAILABLE, which clients retry.
"""

from __future__ import annotations

import logging
from typing import Final

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidRequestError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import InitProducerIdRequest, InitProducerIdResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

logger = logging.getLogger(__name__)

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
SHORT_MAX: Final = 2**15 - 1


def _error(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code,
                                  producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


async def init_producer_id(manager: ProducerIdManager, producer_id: int, producer_epoch: int
                           ) -> tuple[int, int]:
    """(id, epoch) for a producer without a transactional id that gave ``producer_id`` and
    ``producer_epoch`` (both -1: a new producer)."""
    if producer_id == NO_PRODUCER_ID or producer_epoch >= SHORT_MAX - 1:
        return await manager.generate_producer_id(), 0
    return producer_id, producer_epoch + 1


@handler(ApiKey.INIT_PRODUCER_ID, versions=(0, 4))
async def handle_init_producer_id(
        ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    producer_id, producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    if ctx.api_version >= 3:
        producer_id, producer_epoch = request.producer_id, request.producer_epoch
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _error(InvalidRequestError.code)
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                             transactional_id):
            return _error(TransactionalIdAuthorizationFailedError.code)
        if transactional_id == "":
            return _error(InvalidRequestError.code)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        result = await ctx.broker.transaction_coordinator.handle_init_producer_id(
            transactional_id, request.transaction_timeout_ms, expected)
        code = result.error_code
        if code == ProducerFencedError.code and ctx.api_version < 4:
            code = InvalidProducerEpochError.code
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code,
                                      producer_id=result.producer_id,
                                      producer_epoch=result.producer_epoch)
    if not (ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE)
            or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
        return _error(ClusterAuthorizationFailedError.code)
    try:
        producer_id, producer_epoch = await init_producer_id(
            ctx.broker.producer_id_manager, producer_id, producer_epoch)
    except KafkaError as exc:
        return _error(exc.code)
    except Exception:
        logger.exception("Could not allocate a producer id")
        return _error(CoordinatorNotAvailableError.code)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=NONE, producer_id=producer_id,
                                  producer_epoch=producer_epoch)
