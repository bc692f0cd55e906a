"""EndTxn (key 26), v0-3: commit or abort the producer's transaction (Kafka 2.8's
KafkaApis.handleEndTxnRequest and TransactionCoordinator.handleEndTransaction). Answered
once PrepareCommit / PrepareAbort is written; the markers follow. Below v2 PRODUCER_FENCED
is answered as INVALID_PRODUCER_EPOCH. Without Write on the transactional id:
TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import EndTxnRequest, EndTxnResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.END_TXN, versions=(0, 3))
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0,
                              error_code=TransactionalIdAuthorizationFailedError.code)
    code = await ctx.broker.transaction_coordinator.handle_end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed)
    if code == ProducerFencedError.code and ctx.api_version < 2:
        code = InvalidProducerEpochError.code
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
