"""CreatePartitions (key 37), v0-3: Kafka 2.8's KafkaApis.handleCreatePartitionsRequest and
ZkAdminManager.createPartitions in ZooKeeper mode.

Only the controller accepts (NOT_CONTROLLER otherwise). A topic named twice is
INVALID_REQUEST; a decrease or the same count INVALID_PARTITIONS; assignments naming
unknown brokers or of the wrong number INVALID_REPLICA_ASSIGNMENT; a topic queued for
deletion INVALID_TOPIC_EXCEPTION. The new assignment is written to
``/brokers/topics/<t>`` (not with validate_only) and the answer waits in the topic
purgatory (DelayedCreatePartitions), at most ``timeout_ms``, until every partition has a
leader in the metadata cache; REQUEST_TIMED_OUT otherwise.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    InvalidRequestError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import CreatePartitionsRequest, CreatePartitionsResponse
from kafkaclone.server.handlers.admin_support import (
    NOT_CONTROLLER,
    error_of,
    is_active_controller,
    wait_for_leaders,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


@handler(ApiKey.CREATE_PARTITIONS, versions=(0, 3))
async def handle_create_partitions(
        ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker: BrokerServices = ctx.broker
    results = [_Result(name=t.name, error_code=NONE, error_message=None) for t in request.topics]
    if not is_active_controller(broker):
        for result in results:
            result.error_code = NOT_CONTROLLER
        return CreatePartitionsResponse(results=results)

    counts = Counter(t.name for t in request.topics)
    denied = ctx.unauthorized_names(AclOperation.ALTER, ResourceType.TOPIC, counts)
    created: dict[str, set[int]] = {}
    by_name: dict[str, Any] = {}
    for topic, result in zip(request.topics, results, strict=True):
        if counts[topic.name] > 1:
            result.error_code = InvalidRequestError.code
            result.error_message = "Duplicate topic in request."
            continue
        if topic.name in denied:
            result.error_code = TopicAuthorizationFailedError.code
            result.error_message = "Authorization failed."
            continue
        assignments = (None if topic.assignments is None
                       else [list(a.broker_ids) for a in topic.assignments])
        try:
            assignment = await broker.admin_zk.add_partitions(
                topic.name, topic.count, assignments, validate_only=bool(request.validate_only))
        except Exception as exc:
            log.info("Error processing create partitions request for %s: %s", topic.name, exc)
            result.error_code, result.error_message = error_of(exc)
            continue
        created[topic.name] = set(assignment)
        by_name[topic.name] = result

    if created and not request.validate_only:
        for name in await wait_for_leaders(broker, created, request.timeout_ms):
            by_name[name].error_code = RequestTimedOutError.code
            by_name[name].error_message = None
    return CreatePartitionsResponse(results=results)
