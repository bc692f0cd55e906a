"""TxnOffsetCommit (key 28), v0-3: a transactional producer commits a group's offsets inside
its transaction (Kafka 2.8's KafkaApis.handleTxnOffsetCommitRequest and
GroupCoordinator.handleTxnCommitOffsets).

The group's coordinator keeps them pending until the transaction's marker reaches the
group's ``__consumer_offsets`` partition (coordinator/group/pending_offsets.py). Errors as
Kafka's: a topic the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; the group's
status (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE); from v3
an unknown member id (when one is given) UNKNOWN_MEMBER_ID, a generation other than the
group's (when one is given) ILLEGAL_GENERATION, a fenced static member FENCED_INSTANCE_ID;
metadata over offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE.
"""

from __future__ import annotations

from kafkaclone.common.clock import now_ms
from kafkaclone.common.errors import UnknownTopicOrPartitionError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition


@handler(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 3))
async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest
                                   ) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    now = now_ms(broker.reactor)
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        known = broker.metadata_cache.contains(topic.name)
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
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
            request.group_instance_id, request.generation_id, offsets))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=errors[TopicPartition(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
