"""ListPartitionReassignments (key 46), v0: the partition reassignments in progress.

As Kafka 2.8 (``KafkaApis.handleListPartitionReassignmentsRequest``): needs DESCRIBE on the
cluster (else CLUSTER_AUTHORIZATION_FAILED); null topics list every reassignment in
progress, otherwise the named partitions that are being reassigned (others are left out);
a broker that is not the controller answers NOT_CONTROLLER.
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
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler

_TopicReassignment = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_PartitionReassignment = _TopicReassignment.OngoingPartitionReassignment


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0))
async def handle_list_partition_reassignments(
        ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    try:
        if not ctx.authorize_cluster(AclOperation.DESCRIBE):
            raise ClusterAuthorizationFailedError()
        controller = ctx.broker.controller
        if controller is None or not controller.is_active:
            raise NotControllerError("This is not the correct controller for this cluster.")
        partitions = None if request.topics is None else {
            TopicPartition(topic.name, p) for topic in request.topics
            for p in topic.partition_indexes}
        ongoing = await controller.list_partition_reassignments(partitions)
    except KafkaError as exc:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=exc.code, error_message=exc.message or None,
            topics=[])
    by_topic: dict[str, list[_PartitionReassignment]] = defaultdict(list)
    for tp, assignment in sorted(ongoing.items()):
        by_topic[tp.topic].append(_PartitionReassignment(
            partition_index=tp.partition, replicas=list(assignment.replicas),
            adding_replicas=list(assignment.adding_replicas),
            removing_replicas=list(assignment.removing_replicas)))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=NONE, error_message=None,
        topics=[_TopicReassignment(name=topic, partitions=partitions)
                for topic, partitions in by_topic.items()])
