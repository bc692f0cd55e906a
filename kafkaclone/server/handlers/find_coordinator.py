"""FindCoordinator (key 10), v0-3: the broker coordinating a group (Kafka 2.8's
``KafkaApis.handleFindCoordinatorRequest``).

A group's coordinator is the leader of partition ``abs(javaStringHashCode(group)) %
offsets.topic.num.partitions`` of ``__consumer_offsets``, reported on the listener the
request came in on. While that topic does not exist it is created (with
``offsets.topic.num.partitions`` x ``offsets.topic.replication.factor``; fewer live brokers
than the replication factor refuse, as Kafka) and the answer is COORDINATOR_NOT_AVAILABLE,
which clients retry; so is a partition without a live leader. A transactional id's
coordinator (key type 1) is found the same way: the leader of partition
``abs(javaStringHashCode(id)) % transaction.state.log.num.partitions`` of
``__transaction_state``, created on first use with the ``transaction.state.log.*``
settings. Other key types are INVALID_REQUEST.
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
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kafkaclone.coordinator.group.coordinator import partition_for as group_partition_for
from kafkaclone.coordinator.transaction.state_manager import (
    partition_for as transaction_partition_for,
)
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
    if key_type == GROUP_KEY_TYPE:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.key):
            return _answer(GroupAuthorizationFailedError.code)
        topic = GROUP_METADATA_TOPIC_NAME
        partition = group_partition_for(request.key, broker.config.offsets_topic_num_partitions)
    elif key_type == TRANSACTION_KEY_TYPE:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key):
            return _answer(TransactionalIdAuthorizationFailedError.code)
        topic = TRANSACTION_STATE_TOPIC_NAME
        partition = transaction_partition_for(
            request.key, broker.config.transaction_state_log_num_partitions)
    else:
        return _answer(InvalidRequestError.code)
    cache = broker.metadata_cache
    if not cache.contains(topic):
        await broker.auto_create_topics([topic])
        return _answer(CoordinatorNotAvailableError.code)
    state = cache.partition_state(topic, partition)
    endpoint = cache.leader_endpoint(topic, partition, ctx.connection.listener_name)
    if state is None or endpoint is None:
        return _answer(CoordinatorNotAvailableError.code)
    return _answer(NONE, state.leader, endpoint.host or "", endpoint.port)
