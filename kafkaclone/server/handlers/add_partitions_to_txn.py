"""AddPartitionsToTxn (key 24), v0-3: the partitions a transaction will write to (Kafka 2.8's
KafkaApis.handleAddPartitionToTxnRequest and TransactionCoordinator
.handleAddPartitionsToTransaction).

Without Write on the transactional id every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
A partition of a topic without Write (or of an internal topic) is TOPIC_AUTHORIZATION_FAILED
and one the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION; then nothing is added: the
other partitions answer OPERATION_NOT_ATTEMPTED. Otherwise every partition gets
the coordinator's answer (below v2 PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH).
"""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    InvalidProducerEpochError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import is_internal
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler

_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult


def _response(errors: dict[TopicPartition, int]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[_PartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_index=tp.partition, error_code=code))
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results=[_TopicResult(name=name, results=results) for name, results in by_topic.items()])


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 3))
async def handle_add_partitions_to_txn(
        ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    partitions = [TopicPartition(topic.name, p) for topic in request.topics
                  for p in topic.partitions]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return _response(dict.fromkeys(partitions,
                                       TransactionalIdAuthorizationFailedError.code))
    denied = ctx.unauthorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    {tp.topic for tp in partitions})
    cache = ctx.broker.metadata_cache
    errors: dict[TopicPartition, int] = {}
    for tp in partitions:
        if tp.topic in denied or is_internal(tp.topic):
            errors[tp] = TopicAuthorizationFailedError.code
        elif cache.partition_state(tp.topic, tp.partition) is None:
            errors[tp] = UnknownTopicOrPartitionError.code
    if errors:
        return _response({tp: errors.get(tp, OperationNotAttemptedError.code)
                          for tp in partitions})
    code = await ctx.broker.transaction_coordinator.handle_add_partitions_to_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, partitions)
    if code == ProducerFencedError.code and ctx.api_version < 2:
        code = InvalidProducerEpochError.code
    return _response(dict.fromkeys(partitions, code))
