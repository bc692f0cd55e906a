"""OffsetDelete (key 47), v0 (KIP-496): delete committed offsets of a group. Partitions of
topics an active consumer group subscribes to answer GROUP_SUBSCRIBED_TO_TOPIC; a
non-empty group that is no consumer group NON_EMPTY_GROUP; an unknown group
GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION (Kafka 2.8's
GroupCoordinator.handleDeleteOffsets)."""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import OffsetDeleteRequest, OffsetDeleteResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Partition = OffsetDeleteResponse.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition


@handler(ApiKey.OFFSET_DELETE, versions=(0, 0))
async def handle_offset_delete(
        ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker: BrokerServices = ctx.broker
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=GroupAuthorizationFailedError.code,
                                    throttle_time_ms=0, topics=[])
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    (topic.name for topic in request.topics))
    errors: dict[TopicPartition, int] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name in denied:
                errors[tp] = TopicAuthorizationFailedError.code
            elif broker.metadata_cache.partition_state(tp.topic, tp.partition) is None:
                errors[tp] = UnknownTopicOrPartitionError.code
            else:
                known.append(tp)
    error, deleted = await ctx.broker.group_coordinator.handle_delete_offsets(request.group_id,
                                                                              known)
    if error != NONE:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    errors.update(deleted)
    return OffsetDeleteResponse(error_code=NONE, throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=errors[TopicPartition(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])
