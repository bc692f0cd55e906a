"""ControlledShutdown (key 7): a broker asks the controller to move its leaders away.

As Kafka 2.8 (``KafkaApis.handleControlledShutdownRequest``): the controller broker answers
with the partitions the shutting-down broker still leads (NONE and an empty list: it may
stop now); any other broker answers NOT_CONTROLLER; a stale broker epoch is
STALE_BROKER_EPOCH (the controller checks it).
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    KafkaError,
    NotControllerError,
    UnknownServerError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ControlledShutdownRequest, ControlledShutdownResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

log = logging.getLogger(__name__)
_Remaining = ControlledShutdownResponse.RemainingPartition


@handler(ApiKey.CONTROLLED_SHUTDOWN, versions=(0, 3))
async def handle_controlled_shutdown(
        ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(error_code=ClusterAuthorizationFailedError.code)
    controller = ctx.broker.controller
    if controller is None or not controller.is_active:
        return ControlledShutdownResponse(error_code=NotControllerError.code)
    log.info("Shutting down broker %d (broker epoch %d)", request.broker_id,
             request.broker_epoch)
    try:
        remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    except KafkaError as exc:
        log.info("ControlledShutdown of broker %d failed: %s", request.broker_id, exc)
        return ControlledShutdownResponse(
            error_code=exc.code if exc.code != NONE else UnknownServerError.code)
    return ControlledShutdownResponse(error_code=NONE, remaining_partitions=[
        _Remaining(topic_name=tp.topic, partition_index=tp.partition)
        for tp in sorted(remaining)])
