"""DeleteTopics (key 20), v0-6: Kafka 2.8's KafkaApis.handleDeleteTopicsRequest and
ZkAdminManager.deleteTopics in ZooKeeper mode.

Only the controller accepts (NOT_CONTROLLER otherwise); with ``delete.topic.enable=false``
every topic is INVALID_REQUEST (v0-2) or TOPIC_DELETION_DISABLED (v3+). A topic the
metadata cache does not know is UNKNOWN_TOPIC_OR_PARTITION; v6 may name topics by id
(UNKNOWN_TOPIC_ID when the id is unknown; a name and an id together are INVALID_REQUEST).
A known topic is marked for deletion (``/admin/delete_topics/<t>``; marking it twice is
fine) and the answer waits in the topic purgatory (DelayedDeleteTopics), at most
``timeout_ms``, until the controller's UpdateMetadata has removed it from the cache;
REQUEST_TIMED_OUT otherwise.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from twisted.internet.defer import Deferred

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    InvalidRequestError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DeleteTopicsRequest, DeleteTopicsResponse
from kafkaclone.server.delayed.admin import DelayedDeleteTopics
from kafkaclone.server.handlers.admin_support import (
    NOT_CONTROLLER,
    error_of,
    is_active_controller,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices
from kafkaclone.zk.errors import TopicAlreadyMarkedForDeletionError

log = logging.getLogger(__name__)

_Result = DeleteTopicsResponse.DeletableTopicResult
_ZERO_ID = uuid.UUID(int=0)


def _requested(request: Any, version: int) -> list[tuple[str | None, uuid.UUID]]:
    if version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, _ZERO_ID) for name in request.topic_names]


@handler(ApiKey.DELETE_TOPICS, versions=(0, 6))
async def handle_delete_topics(
        ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    requested = _requested(request, version)

    def answer(results: list[Any]) -> DeleteTopicsResponse:
        return DeleteTopicsResponse(responses=results)

    if not is_active_controller(broker):
        return answer([_Result(name=n, topic_id=i, error_code=NOT_CONTROLLER)
                       for n, i in requested])
    if not broker.config.get_bool("delete.topic.enable"):
        code = InvalidRequestError.code if version < 3 else TopicDeletionDisabledError.code
        return answer([_Result(name=n, topic_id=i, error_code=code) for n, i in requested])

    cache = broker.metadata_cache
    names_by_id = {cache.topic_id(t): t for t in cache.all_topics()}
    results: list[Any] = []
    to_delete: dict[str, Any] = {}
    for name, topic_id in requested:
        if name is not None and topic_id != _ZERO_ID:
            return answer([_Result(name=n, topic_id=i, error_code=InvalidRequestError.code,
                                   error_message="Topic name and topic ID can not both be "
                                                 "specified.")
                           for n, i in requested])
        resolved = name if topic_id == _ZERO_ID else names_by_id.get(topic_id)
        result = _Result(name=resolved, topic_id=topic_id, error_code=NONE, error_message=None)
        results.append(result)
        if resolved is None:
            result.error_code = UnknownTopicIdError.code
        elif not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, resolved):
            result.error_code = TopicAuthorizationFailedError.code
        elif not cache.contains(resolved):
            result.error_code = UnknownTopicOrPartitionError.code
        else:
            to_delete[resolved] = result

    pending: list[str] = []
    for name, result in to_delete.items():
        try:
            await broker.admin_zk.delete_topic(name)
        except TopicAlreadyMarkedForDeletionError:
            pass  # still wait for it: repeated requests all see the deletion finish
        except Exception as exc:
            log.warning("Error processing delete topic request for topic %s: %s", name, exc)
            result.error_code, _ = error_of(exc)
            continue
        pending.append(name)

    if pending:
        still_there = set(pending)
        if request.timeout_ms > 0:
            answered: Deferred[set[str]] = Deferred()
            broker.topic_purgatory.try_complete_else_watch(
                DelayedDeleteTopics(request.timeout_ms, pending, cache, answered.callback),
                pending)
            still_there = await answered
        for name in still_there:
            to_delete[name].error_code = RequestTimedOutError.code
    return answer(results)
