"""UpdateMetadata (key 6): the controller's push of cluster metadata to this broker.

As Kafka 2.8's ``KafkaApis.handleUpdateMetadataRequest``: a request for an earlier
registration of this broker or from an older controller is refused; otherwise the metadata
cache applies it, then the admin requests waiting for it are retried, each under the keys
the request names: CreateTopics, CreatePartitions and DeleteTopics by topic (the topic
purgatory), ElectLeaders by partition (the ElectLeader purgatory). Partitions the request
deletes (a topic deleted) lose their committed offsets in the groups this broker
coordinates (Kafka's GroupCoordinator.handleDeletedPartitions), so a topic created again
under the same name is read from its start.
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import UpdateMetadataRequest, UpdateMetadataResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.metadata_cache import update_metadata_partition_states
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)


def is_broker_epoch_stale(broker: BrokerServices, epoch_in_request: int) -> bool:
    """A request sent for an earlier registration of this broker (Kafka's rule); -1 means
    the controller's version does not send one."""
    return epoch_in_request != -1 and epoch_in_request < broker.broker_epoch


@handler(ApiKey.UPDATE_METADATA, versions=(0, 7))
async def handle_update_metadata(
        ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    broker: BrokerServices = ctx.broker
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=ClusterAuthorizationFailedError.code)
    if is_broker_epoch_stale(broker, request.broker_epoch):
        log.info("ignoring UpdateMetadata with stale broker epoch %d (current %d)",
                 request.broker_epoch, broker.broker_epoch)
        return UpdateMetadataResponse(error_code=StaleBrokerEpochError.code)
    if request.controller_epoch < broker.controller_epoch:
        log.warning("UpdateMetadata with correlation id %d from an old controller %d with "
                    "epoch %d; latest known controller epoch is %d", ctx.correlation_id,
                    request.controller_id, request.controller_epoch, broker.controller_epoch)
        return UpdateMetadataResponse(error_code=StaleControllerEpochError.code)
    deleted = broker.metadata_cache.update_metadata(request, ctx.api_version)
    broker.controller_epoch = request.controller_epoch
    if deleted:
        log.info("UpdateMetadata deleted %d partitions", len(deleted))
        try:
            await broker.group_coordinator.handle_deleted_partitions(
                TopicPartition(topic, partition) for topic, partition in deleted)
        except Exception as exc:  # ZooKeeper trouble: the offsets stay until they expire
            log.warning("Removing the committed offsets of %d deleted partitions failed: %s",
                        len(deleted), exc)
    named = {TopicPartition(topic, state.partition_index) for topic, _, state
             in update_metadata_partition_states(request, ctx.api_version)}
    for topic in {tp.topic for tp in named}:
        broker.topic_purgatory.check_and_complete(topic)
    for tp in named:
        broker.elect_leader_purgatory.check_and_complete(tp)
    return UpdateMetadataResponse(error_code=NONE)
