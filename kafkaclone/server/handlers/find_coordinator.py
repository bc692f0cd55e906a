"""FindCoordinator (key 10), v0-3: the broker coordinating a group (Kafka 2.8's
``KafkaApis.handleFindCoordinatorRequest``).

A group's coordinator is the leader of partition ``abs(javaStringHashCode(group)) %
offsets.topic.num.partitions`` of ``__consumer_offsets``, reported on the listener the
request came in on. While that topic does not exist it is created (with
``offsets.topic.num.partitions`` x ``offsets.topic.replication.factor``; fewer live brokers
than the replication factor refuse, as Kafka) and the answer is COORDINATOR_NOT_AVAILABLE,
which clients retry; so is a partition without a live leader. Transactional coordinators
(key type 1) are not served yet: COORDINATOR_NOT_AVAILABLE; other key types INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import Final

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    ERRORS,
    NONE,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.coordinator.group.coordinator import partition_for
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import FindCoordinatorRequest, FindCoordinatorResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

logger = logging.getLogger(__name__)


GROUP_KEY_TYPE: Final = 0
TRANSACTION_KEY_TYPE: Final = 1


def _answer(error_code: int, node_id: int = -1, host: str = "",
            port: int = -1) -> FindCoordinatorResponse:
    message = "NONE" if error_code == NONE else ERRORS[error_code].description
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error_code, error_message=message,
                     node_id=node_id, host=host, port=port)


@handler(ApiKey.FIND_COORDINATOR, versions=(0, 3))
async def handle_find_coordinator(
        ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker: BrokerServices = ctx.broker
    key_type = request.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE
    if key_type == TRANSACTION_KEY_TYPE:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key):
            return _answer(TransactionalIdAuthorizationFailedError.code)
        return _answer(CoordinatorNotAvailableError.code)
    if key_type != GROUP_KEY_TYPE:
        return _answer(InvalidRequestError.code)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.key):
        return _answer(GroupAuthorizationFailedError.code)
    cache = broker.metadata_cache
    if not cache.contains(GROUP_METADATA_TOPIC_NAME):
        await broker.auto_create_topics([GROUP_METADATA_TOPIC_NAME])
        return _answer(CoordinatorNotAvailableError.code)
    partition = partition_for(request.key, broker.config.offsets_topic_num_partitions)
    state = cache.partition_state(GROUP_METADATA_TOPIC_NAME, partition)
    endpoint = cache.leader_endpoint(GROUP_METADATA_TOPIC_NAME, partition,
                                     ctx.connection.listener_name)
    if state is None or endpoint is None:
        return _answer(CoordinatorNotAvailableError.code)
    return _answer(NONE, state.leader, endpoint.host or "", endpoint.port)
