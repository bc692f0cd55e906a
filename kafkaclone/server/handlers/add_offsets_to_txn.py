"""AddOffsetsToTxn (key 25), v0-3: the transaction will commit offsets of a group, so the
group's ``__consumer_offsets`` partition joins it (Kafka 2.8's
KafkaApis.handleAddOffsetsToTxnRequest); below v2 PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH. Write on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Read on the group (else GROUP_AUTHORIZATION_FAILED)
come first."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    GroupAuthorizationFailedError,
    InvalidProducerEpochError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kafkaclone.server.handlers.registry import RequestContext, handler


@handler(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 3))
async def handle_add_offsets_to_txn(
        ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=TransactionalIdAuthorizationFailedError.code)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=GroupAuthorizationFailedError.code)
    partition = TopicPartition(GROUP_METADATA_TOPIC_NAME,
                               ctx.broker.group_coordinator.partition_for(request.group_id))
    code = await ctx.broker.transaction_coordinator.handle_add_partitions_to_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition])
    if code == ProducerFencedError.code and ctx.api_version < 2:
        code = InvalidProducerEpochError.code
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
