"""CreateTopics (key 19), v0-7: Kafka 2.8's KafkaApis.handleCreateTopicsRequest and
ZkAdminManager.createTopics in ZooKeeper mode.

Only the controller accepts (others answer NOT_CONTROLLER). Each topic is validated (name,
existence, counts or manual assignment, configs) before anything is written; a valid one
is written to ZooKeeper (``/config/topics/<t>`` then ``/brokers/topics/<t>``) unless the
request is validate_only. The answer then waits in the topic purgatory
(DelayedCreatePartitions), at most ``timeout_ms``, until the controller's UpdateMetadata
shows a leader for every new partition in the metadata cache; topics still leaderless then
are REQUEST_TIMED_OUT. Replicas are placed rack-aware when every live broker has a
``broker.rack`` (Kafka's AdminUtils.assignReplicasToBrokers). v5+ report the partition
count, the replication factor and the configs of each created topic; v7 its id.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Any

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.config_def import ConfigError
from kafkaclone.common.errors import (
    NONE,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import CreateTopicsRequest, CreateTopicsResponse
from kafkaclone.server.handlers.admin_support import (
    NO_NUM_PARTITIONS,
    NO_REPLICATION_FACTOR,
    NOT_CONTROLLER,
    broker_config_layers,
    error_of,
    is_active_controller,
    topic_config_entries,
    wait_for_leaders,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices
from kafkaclone.zk.admin import BrokerMetadata, assign_replicas_to_brokers

log = logging.getLogger(__name__)

_Result = CreateTopicsResponse.CreatableTopicResult
_Config = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
_ZERO_ID = uuid.UUID(int=0)


async def _prepare(broker: BrokerServices, topic: Any) -> dict[int, tuple[int, ...]]:
    """The topic's validated assignment (Kafka's order of checks); raises KafkaError."""
    name = topic.name
    if broker.metadata_cache.contains(name):
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    null_configs = [c.name for c in topic.configs if c.value is None]
    if null_configs:
        raise InvalidRequestError(
            f"Null value not supported for topic configs : {','.join(null_configs)}")
    if topic.assignments and (topic.num_partitions != NO_NUM_PARTITIONS
                              or topic.replication_factor != NO_REPLICATION_FACTOR):
        raise InvalidRequestError(
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both "
            "cannot be used at the same time.")
    if topic.assignments:
        return {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
    config = broker.config
    partitions = (config.get_int("num.partitions") if topic.num_partitions == NO_NUM_PARTITIONS
                  else topic.num_partitions)
    replication_factor = (config.get_int("default.replication.factor")
                          if topic.replication_factor == NO_REPLICATION_FACTOR
                          else topic.replication_factor)
    # Kafka places on the metadata cache's live brokers with their racks: some with a rack
    # and some without is "Not all brokers have rack information ..." (UNKNOWN_SERVER_ERROR).
    live = sorted((BrokerMetadata(b.id, b.rack) for b in broker.metadata_cache.alive_brokers()),
                  key=lambda b: b.id)
    return assign_replicas_to_brokers(live, partitions, replication_factor)


@handler(ApiKey.CREATE_TOPICS, versions=(0, 7))
async def handle_create_topics(
        ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    results = {t.name: _Result(name=t.name, error_code=NONE, error_message=None)
               for t in request.topics}
    ordered = [results[t.name] for t in request.topics]
    if not is_active_controller(broker):
        for result in ordered:
            result.error_code = NOT_CONTROLLER
        return CreateTopicsResponse(topics=ordered)

    counts = Counter(t.name for t in request.topics)
    for name, count in counts.items():
        if count > 1:
            results[name].error_code = InvalidRequestError.code
            results[name].error_message = "Found multiple entries for this topic."

    # Create on the cluster allows every topic, else Create on each topic is needed.
    denied = (frozenset() if ctx.authorize_cluster(AclOperation.CREATE) else
              ctx.unauthorized_names(AclOperation.CREATE, ResourceType.TOPIC, counts))
    validate_only = version >= 1 and bool(request.validate_only)
    created: dict[str, set[int]] = {}
    layers = None
    for topic in request.topics:
        result = results[topic.name]
        if counts[topic.name] > 1:
            continue
        if topic.name in denied:
            result.error_code = TopicAuthorizationFailedError.code
            result.error_message = "Authorization failed."
            continue
        try:
            if version >= 5 and layers is None:
                layers = await broker_config_layers(broker)
            assignment = await _prepare(broker, topic)
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            await broker.admin_zk.validate_topic_create(topic.name, assignment, configs)
            topic_id = _ZERO_ID
            if not validate_only:
                topic_id = uuid.uuid4()
                await broker.admin_zk.create_topic_with_assignment(topic.name, configs,
                                                                  assignment, topic_id)
        except ConfigError as exc:
            result.error_code, result.error_message = InvalidConfigError.code, exc.message
            continue
        except KafkaError as exc:
            log.info("Error processing create topic request for %s: %s", topic.name, exc)
            result.error_code, result.error_message = error_of(exc)
            continue
        except Exception as exc:
            log.exception("Error processing create topic request for %s", topic.name)
            result.error_code, result.error_message = error_of(exc)
            continue
        created[topic.name] = set(assignment)
        result.topic_id = topic_id
        if layers is not None:
            result.num_partitions = len(assignment)
            result.replication_factor = len(assignment[min(assignment)])
            result.configs = [
                _Config(name=e.name, value=e.value, read_only=e.read_only,
                        config_source=int(e.source), is_sensitive=e.is_sensitive)
                for e in topic_config_entries(layers, configs)
            ]

    if created and not validate_only:
        for name in await wait_for_leaders(broker, created, request.timeout_ms):
            result = results[name]
            result.error_code, result.error_message = RequestTimedOutError.code, None
            result.configs, result.num_partitions, result.replication_factor = [], -1, -1
    return CreateTopicsResponse(topics=ordered)
