"""ElectLeaders (key 43), v0-2: an admin asks for preferred or unclean leader elections.

As Kafka 2.8 (``KafkaApis.handleElectReplicaLeader`` and ``ReplicaManager.electLeaders``):
null partitions mean every partition in the metadata cache; the controller answers each
partition (not the controller: NOT_CONTROLLER for every partition; an unknown partition
UNKNOWN_TOPIC_OR_PARTITION; a topic being deleted INVALID_TOPIC_EXCEPTION; a leader already
valid ELECTION_NOT_NEEDED; no eligible replica PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE); partitions that got a new leader wait in the
ElectLeader purgatory (DelayedElectLeader) until this broker's metadata cache shows it, or
are REQUEST_TIMED_OUT after ``timeout_ms``. The top-level error (v1+) is NONE: errors are
per partition.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from twisted.internet.defer import Deferred

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    RequestTimedOutError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ElectLeadersRequest, ElectLeadersResponse
from kafkaclone.server.delayed.admin import DelayedElectLeader
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)
_TopicResult = ElectLeadersResponse.ReplicaElectionResult
_PartitionResult = ElectLeadersResponse.ReplicaElectionResult.PartitionResult

ELECTION_TYPES = (0, 1)
"""ElectionType.PREFERRED, ElectionType.UNCLEAN (v0 always elects the preferred replica)."""


@handler(ApiKey.ELECT_LEADERS, versions=(0, 2))
async def handle_elect_leaders(
        ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    broker: BrokerServices = ctx.broker
    cache = broker.metadata_cache
    if request.topic_partitions is None:
        partitions = {TopicPartition(topic, p) for topic in cache.all_topics()
                      for p in range(cache.partition_count(topic) or 0)}
    else:
        partitions = {TopicPartition(t.topic, p) for t in request.topic_partitions
                      for p in t.partitions}
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ClusterAuthorizationFailedError()
        response = _response({tp: denied for tp in partitions})
        response.error_code = denied.code
        return response
    election_type = request.election_type if ctx.api_version >= 1 else 0
    if election_type not in ELECTION_TYPES:
        failure: KafkaError = InvalidRequestError(f"Unknown election type {election_type}")
        return _response({tp: failure for tp in partitions})

    controller = broker.controller
    if controller is None or not controller.is_active:
        not_controller = NotControllerError("This is not the correct controller for this "
                                            "cluster.")
        return _response({tp: not_controller for tp in partitions})
    try:
        outcome = await controller.elect_leaders(
            None if request.topic_partitions is None else partitions, election_type)
    except KafkaError as exc:
        return _response({tp: exc for tp in partitions})

    results: dict[TopicPartition, KafkaError | None] = {
        tp: (None if isinstance(value, int) else value) for tp, value in outcome.items()}
    expected = {tp: leader for tp, leader in outcome.items() if isinstance(leader, int)}
    if expected:
        answered: Deferred[set[TopicPartition]] = Deferred()
        broker.elect_leader_purgatory.try_complete_else_watch(
            DelayedElectLeader(request.timeout_ms, expected, cache, answered.callback),
            expected)
        for tp in await answered:
            results[tp] = RequestTimedOutError(
                "Timed out waiting for the new leader to reach the metadata")
    return _response(results)


def _response(results: dict[TopicPartition, Any]) -> ElectLeadersResponse:
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for tp in sorted(results):
        error = results[tp]
        by_topic[tp.topic].append(_PartitionResult(
            partition_id=tp.partition,
            error_code=NONE if error is None else error.code,
            error_message=None if error is None else (error.message or None)))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=NONE, replica_election_results=[
        _TopicResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()])
