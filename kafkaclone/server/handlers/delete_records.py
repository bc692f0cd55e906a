"""DeleteRecords (key 21): move partitions' log start offsets up (Kafka 2.8's
``KafkaApis.handleDeleteRecordsRequest``).

Per partition the leader moves its log start offset to ``offset`` (-1: the high
watermark), then the answer waits until every live replica's log start offset reached it
(the low watermark), or ``timeout_ms`` (REQUEST_TIMED_OUT). Errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (past the high
watermark, or negative), POLICY_VIOLATION (a compacted topic), INVALID_TOPIC_EXCEPTION (an
internal topic).
"""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DeleteRecordsRequest, DeleteRecordsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
_PartitionResult = DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult


@handler(ApiKey.DELETE_RECORDS, versions=(0, 2))
async def handle_delete_records(
        ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker: BrokerServices = ctx.broker
    cache = broker.metadata_cache
    offsets: dict[TopicPartition, int] = {}
    unknown: set[TopicPartition] = set()
    denied = ctx.unauthorized_names(AclOperation.DELETE, ResourceType.TOPIC,
                                    (topic.name for topic in request.topics))
    for topic in request.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if topic.name in denied or cache.partition_state(tp.topic, tp.partition) is None:
                unknown.add(tp)
            else:
                offsets[tp] = partition.offset
    statuses = (await broker.replica_manager.delete_records(request.timeout_ms, offsets)
                if offsets else {})
    topics = []
    for topic in request.topics:
        results = []
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if tp in unknown:
                code = (TopicAuthorizationFailedError.code if topic.name in denied
                        else UnknownTopicOrPartitionError.code)
                results.append(_PartitionResult(partition_index=tp.partition, low_watermark=-1,
                                                error_code=code))
            else:
                status = statuses[tp]
                results.append(_PartitionResult(partition_index=tp.partition,
                                                low_watermark=status.low_watermark,
                                                error_code=status.error_code))
        topics.append(_TopicResult(name=topic.name, partitions=results))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
