"""TxnOffsetCommit (key 28), v0-3: a transactional producer commits a group's offsets inside
its transaction (Kafka 2.8's KafkaApis.handleTxnOffsetCommitRequest and
GroupCoordinator.handleTxnCommitOffsets).

The group's coordinator keeps them pending until the transaction's marker reaches the
group's ``__consumer_offsets`` partition (coordinator/group/pending_offsets.py); they are
appended to that partition first, in the producer's transaction, with acks=-1, as Kafka's
GroupMetadataManager.storeOffsets does (its errors mapped as Kafka maps them). Errors as
Kafka's: without Write on the transactional id every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, without Read on the group
GROUP_AUTHORIZATION_FAILED; a topic without Read is TOPIC_AUTHORIZATION_FAILED; a topic
the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; the group's
status (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE); from v3
an unknown member id (when one is given) UNKNOWN_MEMBER_ID, a generation other than the
group's (when one is given) ILLEGAL_GENERATION, a fenced static member FENCED_INSTANCE_ID;
metadata over offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.clock import now_ms
from kafkaclone.common.errors import (
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    KafkaStorageError,
    MessageTooLargeError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.pending_offsets import txn_offset_commit_batch
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.log.common import AppendOrigin
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition


_APPEND_ERRORS = {
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: InvalidCommitOffsetSizeError.code,
    RecordListTooLargeError.code: InvalidCommitOffsetSizeError.code,
    InvalidFetchSizeError.code: InvalidCommitOffsetSizeError.code,
}
"""Kafka's GroupMetadataManager.storeOffsets: an append error as the client is told it."""


async def append_txn_offsets(broker: BrokerServices, request: TxnOffsetCommitRequest,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> int:
    """Append the offsets to the group's __consumer_offsets partition in the producer's
    transaction; the error code."""
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME,
                        broker.group_coordinator.partition_for(request.group_id))
    batch = txn_offset_commit_batch(request.group_id, request.producer_id,
                                    request.producer_epoch, offsets, now_ms(broker.reactor))
    results = await broker.replica_manager.append_records(
        broker.config.offsets_commit_timeout_ms, -1, {tp: batch},
        origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True)
    code = results[tp].error_code
    return _APPEND_ERRORS.get(code, code)


def _all_failed(request: TxnOffsetCommitRequest, code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index, error_code=code)
            for p in topic.partitions])
        for topic in request.topics])


@handler(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 3))
async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest
                                   ) -> TxnOffsetCommitResponse:
    broker: BrokerServices = ctx.broker
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return _all_failed(request, TransactionalIdAuthorizationFailedError.code)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _all_failed(request, GroupAuthorizationFailedError.code)
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    (topic.name for topic in request.topics))
    now = now_ms(broker.reactor)
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        known = broker.metadata_cache.contains(topic.name)
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if topic.name in denied:
                errors[tp] = TopicAuthorizationFailedError.code
                continue
            if not known:
                errors[tp] = UnknownTopicOrPartitionError.code
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=partition.committed_offset,
                metadata=partition.committed_metadata or "",
                leader_epoch=partition.committed_leader_epoch,
                commit_timestamp_ms=now)
    if offsets:
        errors.update(await broker.group_coordinator.handle_txn_commit_offsets(
            request.group_id, request.producer_id, request.member_id,
            request.group_instance_id, request.generation_id, offsets,
            lambda valid: append_txn_offsets(broker, request, valid)))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=errors[TopicPartition(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
