"""OffsetFetch (key 9), v0-7: a group's committed offsets.

As Kafka 2.8's ``KafkaApis.handleOffsetFetchRequest``:

- v0 is the legacy ZooKeeper path: any broker reads ``/consumers/<g>/offsets/<t>/<p>``; a
  partition the cluster does not have, or without an offset, is UNKNOWN_TOPIC_OR_PARTITION
  with offset -1;
- v1+ ask the group's coordinator (errors per partition in v1, in the top-level error from
  v2); a partition without an offset answers -1 and empty metadata; from v2 a null topic
  list asks for every committed offset of the group; v5+ report the committed leader epoch;
  v7's require_stable answers UNSTABLE_OFFSET_COMMIT (offset -1) for a requested
  partition that a transaction has an offset pending for (Kafka's getOffsets).
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import OffsetFetchRequest, OffsetFetchResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

logger = logging.getLogger(__name__)

_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition

INVALID_OFFSET = -1


def _topics(results: dict[TopicPartition, tuple[int, int, str, int]]) -> list[_Topic]:
    """(offset, leader epoch, metadata, error) per partition, grouped by topic."""
    by_topic: dict[str, list[_Partition]] = {}
    for tp, (offset, epoch, metadata, error) in results.items():
        by_topic.setdefault(tp.topic, []).append(_Partition(
            partition_index=tp.partition, committed_offset=offset,
            committed_leader_epoch=epoch, metadata=metadata, error_code=error))
    return [_Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()]


def _requested(request: OffsetFetchRequest) -> list[TopicPartition] | None:
    if request.topics is None:
        return None
    return [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]


@handler(ApiKey.OFFSET_FETCH, versions=(0, 7))
async def handle_offset_fetch(
        ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    requested = _requested(request)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        error = GroupAuthorizationFailedError.code
        if version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])
        return OffsetFetchResponse(throttle_time_ms=0, topics=_topics({
            tp: (INVALID_OFFSET, -1, "", error) for tp in requested or []}))
    # Offsets of topics the principal may not Describe: TOPIC_AUTHORIZATION_FAILED when
    # named, left out when every partition is asked for.
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (tp.topic for tp in requested or ()))
    unauthorized = {tp: (INVALID_OFFSET, -1, "", TopicAuthorizationFailedError.code)
                    for tp in requested or () if tp.topic in denied}
    if requested is not None and denied:
        requested = [tp for tp in requested if tp.topic not in denied]
    if version == 0:
        assert requested is not None
        return OffsetFetchResponse(throttle_time_ms=0, error_code=NONE, topics=_topics(
            {**await _legacy_fetch(broker, request.group_id, requested), **unauthorized}))
    coordinator = ctx.broker.group_coordinator
    # Pending transactional offsets are looked at before the store is read: offsets that
    # stop being pending during the read are already in the store.
    unstable = ({tp for tp in requested
                 if coordinator.has_pending_txn_offsets(request.group_id, tp)}
                if version >= 7 and request.require_stable and requested is not None
                else set())
    error, found = await coordinator.handle_fetch_offsets(request.group_id, requested)
    hidden = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (tp.topic for tp in found)) if requested is None else ()
    if hidden:
        found = {tp: value for tp, value in found.items() if tp.topic not in hidden}
    if error != NONE:
        if version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=error, topics=[])
        return OffsetFetchResponse(throttle_time_ms=0, topics=_topics({
            tp: (INVALID_OFFSET, -1, "", error) for tp in requested or []}))
    results = dict(unauthorized)
    for tp, value in found.items():
        if tp in unstable:
            results[tp] = (INVALID_OFFSET, -1, "", UnstableOffsetCommitError.code)
        elif value is None:
            results[tp] = (INVALID_OFFSET, -1, "", NONE)
        else:
            results[tp] = (value.offset, value.leader_epoch, value.metadata, NONE)
    return OffsetFetchResponse(throttle_time_ms=0, error_code=NONE, topics=_topics(results))


async def _legacy_fetch(broker: BrokerServices, group_id: str,
                        requested: list[TopicPartition]
                        ) -> dict[TopicPartition, tuple[int, int, str, int]]:
    """OffsetFetch v0: straight from ZooKeeper."""
    unknown = (INVALID_OFFSET, -1, "", UnknownTopicOrPartitionError.code)
    known = [tp for tp in requested
             if broker.metadata_cache.partition_state(tp.topic, tp.partition) is not None]
    try:
        found = await broker.zk_client.get_consumer_offsets_with_metadata(group_id, known)
    except Exception as exc:
        logger.error("Reading offsets of group %s from ZooKeeper failed: %s", group_id, exc)
        return {tp: (INVALID_OFFSET, -1, "", UnknownServerError.code) for tp in requested}
    return {tp: ((found[tp][0], -1, "", NONE) if tp in found else unknown) for tp in requested}
