"""Metadata (key 3): brokers, controller, and topic/partition leadership, from the cache.

As Kafka 2.8 (``KafkaApis.handleTopicMetadataRequest``):

- v0 asks for every topic with an empty list, v1+ with a null list;
- the brokers listed are the live ones with an endpoint on the listener the request came in
  on, and partition leaders are reported on that listener too;
- a requested topic the cache does not know is INVALID_TOPIC_EXCEPTION if its name is
  illegal, is created when ``auto.create.topics.enable`` and the request allow it (then
  answered LEADER_NOT_AVAILABLE until its leaders are elected), and is otherwise
  UNKNOWN_TOPIC_OR_PARTITION;
- v10 and v11 carry topic ids in the response but do not look topics up by id: a request
  naming a topic by id only is INVALID_REQUEST.

An answer naming only known topics is kept encoded in the MetadataCache until its next
update, by everything else it depends on (version, topics asked, auto-creation allowed,
listener, the authorized-operations flags, cluster id), and sent again as it is to the same
request. Not kept: answers when an authorizer is configured (ACLs change without an
UpdateMetadata) or when the request quota is on (its throttle time goes into the body).
"""

from __future__ import annotations

from typing import Final

from kafkaclone.common.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkaclone.common.errors import (
    InvalidRequestError,
    InvalidTopicExceptionError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import is_internal, validate_topic_name
from kafkaclone.protocol.api import EncodedResponse, encode_response_body
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import MetadataRequest, MetadataResponse
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.metadata_cache import TopicMetadata
from kafkaclone.server.services import BrokerServices

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition

AUTHORIZED_OPERATIONS_OMITTED: Final = -2147483648
# With no authorizer configured every operation is allowed. Bits are Kafka's AclOperation
# codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_ACL_OPERATIONS: Final = tuple(AclOperation(op) for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_ACL_OPERATIONS: Final = tuple(AclOperation(op) for op in (5, 7, 8, 9, 10, 11, 12))
TOPIC_OPERATIONS: Final = sum(1 << op for op in TOPIC_ACL_OPERATIONS)
CLUSTER_OPERATIONS: Final = sum(1 << op for op in CLUSTER_ACL_OPERATIONS)


def _requested_topics(request: MetadataRequest, version: int) -> list[str] | None:
    """The topic names asked for, or None for "every topic"."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    names: list[str] = []
    for topic in request.topics:
        if topic.name is None or (version >= 10 and topic.topic_id.int != 0):
            raise InvalidRequestError("Metadata v10 and v11 do not look topics up by id")
        names.append(topic.name)
    return list(dict.fromkeys(names))


def _topic_entry(error_code: int, name: str, topic: TopicMetadata | None,
                 include_operations: bool) -> _Topic:
    entry = _Topic(error_code=error_code, name=name, is_internal=is_internal(name),
                   topic_authorized_operations=(TOPIC_OPERATIONS if include_operations
                                                else AUTHORIZED_OPERATIONS_OMITTED))
    if topic is not None:
        entry.topic_id = topic.topic_id
        entry.partitions = [
            _Partition(error_code=p.error_code, partition_index=p.partition, leader_id=p.leader,
                       leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                       offline_replicas=p.offline_replicas)
            for p in topic.partitions
        ]
    return entry


@handler(ApiKey.METADATA, versions=(0, 11))
async def handle_metadata(ctx: RequestContext, request: MetadataRequest
                          ) -> MetadataResponse | EncodedResponse:
    broker: BrokerServices = ctx.broker
    cache = broker.metadata_cache
    version = ctx.api_version
    listener = ctx.connection.listener_name
    include_operations = version >= 8 and bool(request.include_topic_authorized_operations)

    try:
        requested = _requested_topics(request, version)
    except InvalidRequestError:
        return MetadataResponse(topics=[_topic_entry(InvalidRequestError.code, t.name or "",
                                                     None, False)
                                        for t in request.topics or ()])
    allow_auto_create = broker.auto_create_topics_enable and (
        version < 4 or bool(request.allow_auto_topic_creation))
    include_cluster_operations = (
        8 <= version <= 10 and bool(request.include_cluster_authorized_operations))
    answer_key = None
    if broker.authorizer is None and not ctx.quotas.request.enabled:
        answer_key = (version, None if requested is None else tuple(requested),
                      allow_auto_create, listener, include_operations,
                      include_cluster_operations, broker.cluster_id)
        kept = cache.metadata_answer(answer_key)
        if kept is not None:
            return kept
    generation = cache.generation
    response = await _metadata_response(ctx, request, requested, allow_auto_create,
                                        include_operations, include_cluster_operations)
    if answer_key is not None and all(topic.error_code == 0 for topic in response.topics):
        answer = encode_response_body(ApiKey.METADATA, version, response)
        cache.keep_metadata_answer(answer_key, answer, generation)
        return answer
    return response


async def _metadata_response(ctx: RequestContext, request: MetadataRequest,
                             requested: list[str] | None, allow_auto_create: bool,
                             include_operations: bool,
                             include_cluster_operations: bool) -> MetadataResponse:
    """The answer built from the MetadataCache (auto-creating what may be)."""
    broker: BrokerServices = ctx.broker
    cache = broker.metadata_cache
    version = ctx.api_version
    listener = ctx.connection.listener_name
    names = cache.all_topics() if requested is None else requested
    # Topics the principal may not Describe: left out of "every topic", answered
    # TOPIC_AUTHORIZATION_FAILED when named, without saying whether they exist.
    denied = ctx.unauthorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if denied:
        names = [name for name in names if name not in denied or requested is not None]
    known = {t.name: t for t in cache.topic_metadata(
        [name for name in names if name not in denied], listener,
        error_unavailable_endpoints=version == 0,
        error_unavailable_listeners=version >= 6,
    )}

    errors: dict[str, int] = dict.fromkeys(denied, TopicAuthorizationFailedError.code)
    missing = [name for name in names if name not in known and name not in denied]
    creatable: list[str] = []
    for name in missing:
        try:
            validate_topic_name(name)
        except InvalidTopicExceptionError:
            errors[name] = InvalidTopicExceptionError.code
            continue
        creatable.append(name)
    if creatable and allow_auto_create and not ctx.authorize_cluster(AclOperation.CREATE):
        # Creating needs Create on the cluster or on the topic.
        refused = ctx.unauthorized_names(AclOperation.CREATE, ResourceType.TOPIC, creatable)
        errors.update(dict.fromkeys(refused, TopicAuthorizationFailedError.code))
        creatable = [name for name in creatable if name not in refused]
    if creatable and allow_auto_create:
        errors.update(await broker.auto_create_topics(creatable))
    else:
        errors.update(dict.fromkeys(creatable, UnknownTopicOrPartitionError.code))

    topics = [
        _topic_entry(0, name, known[name], include_operations) if name in known
        else _topic_entry(errors[name], name, None, include_operations)
        for name in names
    ]
    if include_operations and broker.authorizer is not None:
        for entry in topics:
            if entry.name is not None and entry.error_code == 0:
                entry.topic_authorized_operations = ctx.authorized_operations(
                    ResourceType.TOPIC, entry.name, TOPIC_ACL_OPERATIONS)
    brokers = [
        _Broker(node_id=b.id, host=ep.host or "", port=ep.port, rack=b.rack)
        for b, ep in cache.alive_endpoints(listener)
    ]
    controller_id = cache.controller_id
    return MetadataResponse(
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=-1 if controller_id is None else controller_id,
        topics=topics,
        cluster_authorized_operations=(
            (CLUSTER_OPERATIONS if broker.authorizer is None else ctx.authorized_operations(
                ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_ACL_OPERATIONS))
            if include_cluster_operations else AUTHORIZED_OPERATIONS_OMITTED),
    )
