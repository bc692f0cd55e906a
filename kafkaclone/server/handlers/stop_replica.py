"""StopReplica (key 5): the controller stops replicas on this broker, deleting their logs
when asked.

As Kafka 2.8 (``KafkaApis.handleStopReplicaRequest``): a stale broker epoch is refused with
STALE_BROKER_EPOCH; otherwise the ReplicaManager stops the partitions. v0-2 carry one
request-wide delete flag and no leader epoch (-1: not checked); v3 a leader epoch and a
delete flag per partition.
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import ClusterAuthorizationFailedError, StaleBrokerEpochError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import StopReplicaRequest, StopReplicaResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.handlers.update_metadata import is_broker_epoch_stale
from kafkaclone.server.replica_manager import NO_EPOCH, StopReplicaState
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)
_PartitionError = StopReplicaResponse.StopReplicaPartitionError


def stop_replica_states(request: StopReplicaRequest,
                        version: int) -> dict[TopicPartition, StopReplicaState]:
    """Each partition of the request with its leader epoch and delete flag."""
    states: dict[TopicPartition, StopReplicaState] = {}
    if version == 0:
        state = StopReplicaState(NO_EPOCH, bool(request.delete_partitions))
        for p in request.ungrouped_partitions:
            states[TopicPartition(p.topic_name, p.partition_index)] = state
    elif version <= 2:
        state = StopReplicaState(NO_EPOCH, bool(request.delete_partitions))
        for topic in request.topics:
            for index in topic.partition_indexes:
                states[TopicPartition(topic.name, index)] = state
    else:
        for topic_state in request.topic_states:
            for partition_state in topic_state.partition_states:
                tp = TopicPartition(topic_state.topic_name, partition_state.partition_index)
                states[tp] = StopReplicaState(partition_state.leader_epoch,
                                              bool(partition_state.delete_partition))
    return states


@handler(ApiKey.STOP_REPLICA, versions=(0, 3))
async def handle_stop_replica(
        ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    broker: BrokerServices = ctx.broker
    states = stop_replica_states(request, ctx.api_version)
    refused = not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    if refused or is_broker_epoch_stale(broker, request.broker_epoch):
        if refused:
            code = ClusterAuthorizationFailedError.code
        else:
            log.info("Received StopReplica request with broker epoch %d smaller than the "
                     "current broker epoch %d", request.broker_epoch, broker.broker_epoch)
            code = StaleBrokerEpochError.code
        return StopReplicaResponse(error_code=code, partition_errors=[
            _PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
            for tp in states])
    result = await broker.replica_manager.stop_replicas(
        request.controller_id, request.controller_epoch, states)
    return StopReplicaResponse(error_code=result.error_code, partition_errors=[
        _PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
        for tp, code in result.partition_errors.items()])
