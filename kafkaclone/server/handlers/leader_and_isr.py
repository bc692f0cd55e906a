"""LeaderAndIsr (key 4): the controller makes this broker a leader or follower of partitions.

As Kafka 2.8 (``KafkaApis.handleLeaderAndIsrRequest``): a request for an earlier
registration of this broker (a stale broker epoch) is refused with STALE_BROKER_EPOCH;
otherwise the ReplicaManager applies it (kafkaclone.server.replica_manager) and the
response carries its request-wide error and one error per partition (grouped by topic id
from v5).
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState, partition_state_of
from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import ClusterAuthorizationFailedError, StaleBrokerEpochError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import LeaderAndIsrRequest, LeaderAndIsrResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.handlers.update_metadata import is_broker_epoch_stale
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)
_PartitionError = LeaderAndIsrResponse.LeaderAndIsrPartitionError
_TopicError = LeaderAndIsrResponse.LeaderAndIsrTopicError


def partition_states(
        request: LeaderAndIsrRequest,
        version: int) -> tuple[list[LeaderAndIsrPartitionState], dict[str, uuid.UUID]]:
    """The request's partition states in request order, and the topic ids (v5)."""
    if version <= 1:
        return [partition_state_of(s.topic_name, s) for s in request.ungrouped_partition_states], {}
    states: list[LeaderAndIsrPartitionState] = []
    topic_ids: dict[str, uuid.UUID] = {}
    for topic in request.topic_states:
        if version >= 5:
            topic_ids[topic.topic_name] = topic.topic_id
        states.extend(partition_state_of(topic.topic_name, s) for s in topic.partition_states)
    return states, topic_ids


def _response(version: int, error_code: int, states: list[LeaderAndIsrPartitionState],
              errors: dict[TopicPartition, int],
              topic_ids: dict[str, uuid.UUID]) -> LeaderAndIsrResponse:
    if version < 5:
        return LeaderAndIsrResponse(error_code=error_code, partition_errors=[
            _PartitionError(topic_name=s.topic, partition_index=s.partition,
                            error_code=errors.get(s.topic_partition, error_code))
            for s in states])
    by_topic: dict[str, list[_PartitionError]] = defaultdict(list)
    for s in states:
        by_topic[s.topic].append(_PartitionError(
            partition_index=s.partition, error_code=errors.get(s.topic_partition, error_code)))
    return LeaderAndIsrResponse(error_code=error_code, topics=[
        _TopicError(topic_id=topic_ids.get(topic, uuid.UUID(int=0)), partition_errors=errs)
        for topic, errs in by_topic.items()])


@handler(ApiKey.LEADER_AND_ISR, versions=(0, 5))
async def handle_leader_and_isr(
        ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    states, topic_ids = partition_states(request, version)
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return _response(version, ClusterAuthorizationFailedError.code, states, {}, topic_ids)
    if is_broker_epoch_stale(broker, request.broker_epoch):
        log.info("Received LeaderAndIsr request with broker epoch %d smaller than the "
                 "current broker epoch %d", request.broker_epoch, broker.broker_epoch)
        code = StaleBrokerEpochError.code
        return _response(version, code, states, {}, topic_ids)
    result = await broker.replica_manager.become_leader_or_follower(
        request.controller_id, request.controller_epoch, states, topic_ids)
    return _response(version, result.error_code, states, result.partition_errors, topic_ids)
