"""AlterPartitionReassignments (key 45), v0: start or cancel partition reassignments.

As Kafka 2.8 (``KafkaApis.handleAlterPartitionReassignmentsRequest``): needs ALTER on the
cluster (else CLUSTER_AUTHORIZATION_FAILED at the top and for every partition); null replicas
cancel a partition's reassignment. The controller answers each partition (empty, duplicate,
negative or not-live replicas INVALID_REPLICA_ASSIGNMENT; a cancel with nothing in progress
NO_REASSIGNMENT_IN_PROGRESS; an unknown partition or a topic being deleted
UNKNOWN_TOPIC_OR_PARTITION); a broker that is not the controller answers NOT_CONTROLLER at
the top. The response comes once the reassignment started, not when it completed.
"""

from __future__ import annotations

from collections import defaultdict

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    KafkaError,
    NotControllerError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler

_TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_PartitionResponse = _TopicResponse.ReassignablePartitionResponse


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 0))
async def handle_alter_partition_reassignments(
        ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    reassignments: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(topic.name, p.partition_index):
            None if p.replicas is None else tuple(p.replicas)
        for topic in request.topics for p in topic.partitions}
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ClusterAuthorizationFailedError()
        response = _response(dict.fromkeys(reassignments, denied))
        response.error_code = denied.code
        return response
    controller = ctx.broker.controller
    try:
        if controller is None or not controller.is_active:
            raise NotControllerError("This is not the correct controller for this cluster.")
        results = await controller.alter_partition_reassignments(reassignments)
    except KafkaError as exc:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=exc.code, error_message=exc.message or None,
            responses=[])
    return _response(results)


def _response(results: dict[TopicPartition, KafkaError | None]
              ) -> AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[_PartitionResponse]] = defaultdict(list)
    for tp in sorted(results):
        error = results[tp]
        by_topic[tp.topic].append(_PartitionResponse(
            partition_index=tp.partition,
            error_code=NONE if error is None else error.code,
            error_message=None if error is None else (error.message or None)))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=NONE, error_message=None,
        responses=[_TopicResponse(name=topic, partitions=partitions)
                   for topic, partitions in by_topic.items()])
