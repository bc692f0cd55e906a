"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch (Kafka 2.8's
``KafkaApis.handleOffsetForLeaderEpochRequest``), as followers use it to find where their log
diverges from the leader's (KIP-101, KIP-279) and consumers to detect truncation (KIP-320).

Per partition: the largest epoch <= the one asked for and the start offset of the next
epoch (the log end offset for the latest epoch); -1/-1 for an epoch the log has no
record of. Errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (only the leader
answers), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against ``current_leader_epoch``
(v2+), KAFKA_STORAGE_ERROR. A debugging client (replica id -2, v3+) may ask a follower.
"""

from __future__ import annotations

from typing import Final

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import NONE, KafkaError, TopicAuthorizationFailedError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochEndOffset = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset

DEBUGGING_REPLICA_ID: Final = -2


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(0, 4))
async def handle_offset_for_leader_epoch(
        ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    broker: BrokerServices = ctx.broker
    fetch_only_from_leader = request.replica_id != DEBUGGING_REPLICA_ID
    # Followers have ClusterAction; consumers (KIP-320) need Describe on the topic.
    denied = (frozenset() if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else
              ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     (topic.topic for topic in request.topics)))
    topics = []
    for topic in request.topics:
        results = []
        for partition in topic.partitions:
            tp = TopicPartition(topic.topic, partition.partition)
            if topic.topic in denied:
                epoch, end_offset, error = -1, -1, TopicAuthorizationFailedError.code
            else:
                try:
                    epoch, end_offset = broker.replica_manager.last_offset_for_leader_epoch(
                        tp, partition.current_leader_epoch, partition.leader_epoch,
                        fetch_only_from_leader)
                    error = NONE
                except KafkaError as exc:
                    epoch, end_offset, error = -1, -1, exc.code
            results.append(_EpochEndOffset(error_code=error, partition=tp.partition,
                                           leader_epoch=epoch, end_offset=end_offset))
        topics.append(_TopicResult(topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
