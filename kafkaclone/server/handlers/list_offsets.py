"""ListOffsets (key 2): offsets by time (Kafka 2.8's ``KafkaApis.handleListOffsetRequest``).

- v0: per partition up to ``max_num_offsets`` segment base offsets last modified before the
  timestamp, newest first (the legacy format, ``old_style_offsets``);
- v1+: one offset per partition: -2 the log start offset, -1 the latest offset a consumer
  may read (the high watermark; for read_committed the last stable offset, the same until
  transactions exist; for a replica the log end offset), otherwise the first record whose
  timestamp is at or after the one asked for (through the time index), with its timestamp
  and (v4+) leader epoch; no such record answers offset -1 and timestamp -1;
- a partition named twice (v1+): INVALID_REQUEST for it;
- errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
  UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE (a new leader whose high watermark is behind its
  epoch's start), KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ListOffsetsRequest, ListOffsetsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_Partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
_TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
_PartitionResponse = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse

CONSUMER_REPLICA_ID: Final = -1
DEBUGGING_REPLICA_ID: Final = -2


def _v0(broker: BrokerServices, request: ListOffsetsRequest, tp: TopicPartition,
        partition: _Partition) -> _PartitionResponse:
    try:
        offsets = broker.replica_manager.legacy_fetch_offsets_for_timestamp(
            tp, partition.timestamp, partition.max_num_offsets,
            request.replica_id == CONSUMER_REPLICA_ID,
            request.replica_id != DEBUGGING_REPLICA_ID)
    except KafkaError as exc:
        return _PartitionResponse(partition_index=tp.partition, error_code=exc.code,
                                  old_style_offsets=[])
    return _PartitionResponse(partition_index=tp.partition, error_code=NONE,
                              old_style_offsets=offsets)


def _v1_and_above(broker: BrokerServices, request: ListOffsetsRequest, tp: TopicPartition,
                  partition: _Partition) -> _PartitionResponse:
    isolation = request.isolation_level if request.replica_id == CONSUMER_REPLICA_ID else None
    try:
        found = broker.replica_manager.fetch_offset_for_timestamp(
            tp, partition.timestamp, isolation, partition.current_leader_epoch,
            request.replica_id != DEBUGGING_REPLICA_ID)
    except KafkaError as exc:
        return _PartitionResponse(partition_index=tp.partition, error_code=exc.code,
                                  timestamp=-1, offset=-1, leader_epoch=-1)
    if found is None:
        return _PartitionResponse(partition_index=tp.partition, error_code=NONE,
                                  timestamp=-1, offset=-1, leader_epoch=-1)
    return _PartitionResponse(
        partition_index=tp.partition, error_code=NONE, timestamp=found.timestamp,
        offset=found.offset, leader_epoch=-1 if found.leader_epoch is None else found.leader_epoch)


@handler(ApiKey.LIST_OFFSETS, versions=(0, 6))
async def handle_list_offsets(
        ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    duplicates = Counter(TopicPartition(t.name, p.partition_index)
                         for t in request.topics for p in t.partitions)
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (topic.name for topic in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if topic.name in denied:
                partitions.append(_PartitionResponse(
                    partition_index=tp.partition, error_code=TopicAuthorizationFailedError.code,
                    timestamp=-1, offset=-1, leader_epoch=-1))
            elif version >= 1 and duplicates[tp] > 1:
                partitions.append(_PartitionResponse(
                    partition_index=tp.partition, error_code=InvalidRequestError.code,
                    timestamp=-1, offset=-1, leader_epoch=-1))
            elif version == 0:
                partitions.append(_v0(broker, request, tp, partition))
            else:
                partitions.append(_v1_and_above(broker, request, tp, partition))
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
