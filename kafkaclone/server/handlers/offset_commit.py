"""OffsetCommit (key 8), v0-8: store a group's consumed positions in ZooKeeper
(``/consumers/<g>/offsets/<t>/<p>``, decimal text, one multi-op per request).

As Kafka 2.8's ``KafkaApis.handleOffsetCommitRequest``:

- v0 is the legacy ZooKeeper path: any broker writes the offsets, no coordinator or group
  membership involved;
- v1+ go through the group coordinator (NOT_COORDINATOR elsewhere), which checks the
  generation and member (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
  FENCED_INSTANCE_ID) unless the group only stores offsets (generation -1, Empty group);
- a topic or partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION, metadata
  longer than ``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE;
- v1 may carry the commit timestamp, v2-v4 a retention time (an explicit expiry), v6+ the
  leader epoch; all are kept next to the offset (its ``metadata`` child znode).
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.clock import now_ms
from kafkaclone.common.errors import (
    NONE,
    GroupAuthorizationFailedError,
    OffsetMetadataTooLargeError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.coordinator import offsets_for_commit
from kafkaclone.coordinator.group.store import OffsetAndMetadata
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import OffsetCommitRequest, OffsetCommitResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

logger = logging.getLogger(__name__)

_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition


def _response(request: OffsetCommitRequest,
              errors: dict[TopicPartition, int]) -> OffsetCommitResponse:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=errors[TopicPartition(topic.name, p.partition_index)])
            for p in topic.partitions])
        for topic in request.topics])


@handler(ApiKey.OFFSET_COMMIT, versions=(0, 8))
async def handle_offset_commit(
        ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    cache = broker.metadata_cache
    group_denied = not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)
    denied = ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                    (topic.name for topic in request.topics))
    errors: dict[TopicPartition, int] = {}
    entries = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if group_denied:
                errors[tp] = GroupAuthorizationFailedError.code
            elif topic.name in denied:
                errors[tp] = TopicAuthorizationFailedError.code
            elif cache.partition_state(topic.name, p.partition_index) is None:
                errors[tp] = UnknownTopicOrPartitionError.code
            else:
                entries.append((tp, p.committed_offset,
                                p.committed_leader_epoch if version >= 6 else -1,
                                p.committed_metadata,
                                p.commit_timestamp if version == 1 else -1))
    now = now_ms(broker.reactor)
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    offsets = offsets_for_commit(entries, now, retention)
    if version == 0:
        errors.update(await _legacy_commit(broker, request.group_id, offsets))
        return _response(request, errors)
    if offsets:
        errors.update(await broker.group_coordinator.handle_commit_offsets(
            request.group_id, request.member_id,
            request.group_instance_id if version >= 7 else None, request.generation_id,
            offsets))
    return _response(request, errors)


async def _legacy_commit(
        broker: BrokerServices, group_id: str,
        offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    """OffsetCommit v0: straight to ZooKeeper, on whichever broker received it."""
    errors: dict[TopicPartition, int] = {}
    valid = {}
    for tp, value in offsets.items():
        if len(value.metadata) > broker.config.offset_metadata_max_bytes:
            errors[tp] = OffsetMetadataTooLargeError.code
        else:
            valid[tp] = value.to_zk()
    if valid:
        try:
            await broker.zk_client.commit_consumer_offsets(group_id, valid)
            errors.update(dict.fromkeys(valid, NONE))
        except Exception as exc:
            logger.error("Committing offsets of group %s to ZooKeeper failed: %s", group_id,
                         exc)
            errors.update(dict.fromkeys(valid, UnknownServerError.code))
    return errors
