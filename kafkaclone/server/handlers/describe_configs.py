"""DescribeConfigs (key 32), v0-4: Kafka 2.8's ConfigHelper.describeConfigs.

Topics: every topic config with its value (the topic's override, else the broker default
behind it), its source (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and, v1+ when asked,
its synonyms; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal name
INVALID_TOPIC_EXCEPTION. Brokers: this broker's id describes every broker config (read-only
unless dynamically updatable); an empty name the cluster-wide dynamic defaults; another
broker's id is INVALID_REQUEST (clients send it to that broker). v3+ carry config types and,
when asked, documentation. v0 has no sources, only ``is_default``.
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import (
    NONE,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import validate_topic_name
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DescribeConfigsRequest, DescribeConfigsResponse
from kafkaclone.server.handlers.admin_support import (
    BrokerConfigLayers,
    ConfigEntry,
    ConfigSource,
    ResourceType,
    broker_config_entries,
    broker_config_layers,
    broker_id_of_resource,
    config_resource_refusal,
    error_of,
    topic_config_entries,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices
from kafkaclone.zk.znodes import ConfigEntityType

log = logging.getLogger(__name__)

_Resource = DescribeConfigsRequest.DescribeConfigsResource
_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym


def _entry(entry: ConfigEntry) -> _Entry:
    return _Entry(
        name=entry.name, value=entry.value, read_only=entry.read_only,
        is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
        config_source=int(entry.source), is_sensitive=entry.is_sensitive,
        synonyms=[_Synonym(name=s.name, value=s.value, source=int(s.source))
                  for s in entry.synonyms],
        config_type=entry.config_type, documentation=entry.documentation)


async def _describe(broker: BrokerServices, layers: BrokerConfigLayers, resource: _Resource,
                    include_synonyms: bool, include_documentation: bool) -> list[ConfigEntry]:
    keys = resource.configuration_keys
    if resource.resource_type == ResourceType.TOPIC:
        topic = resource.resource_name
        validate_topic_name(topic)
        if not broker.metadata_cache.contains(topic):
            raise UnknownTopicOrPartitionError()
        props = await broker.admin_zk.fetch_entity_config(ConfigEntityType.TOPIC, topic)
        return topic_config_entries(layers, props, keys, include_synonyms=include_synonyms,
                                    include_documentation=include_documentation)
    if resource.resource_type == ResourceType.BROKER:
        broker_id = broker_id_of_resource(broker, resource.resource_name)
        return broker_config_entries(layers, broker.config, per_broker=broker_id is not None,
                                     keys=keys, include_synonyms=include_synonyms,
                                     include_documentation=include_documentation)
    raise InvalidRequestError(f"Unsupported resource type: {resource.resource_type}")


@handler(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4))
async def handle_describe_configs(
        ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    include_synonyms = version >= 1 and bool(request.include_synonyms)
    include_documentation = version >= 3 and bool(request.include_documentation)
    layers: BrokerConfigLayers | None = None
    results = []
    for resource in request.resources:
        result = _Result(error_code=NONE, error_message=None,
                         resource_type=resource.resource_type,
                         resource_name=resource.resource_name, configs=[])
        refusal = config_resource_refusal(ctx, AclOperation.DESCRIBE_CONFIGS,
                                          resource.resource_type, resource.resource_name)
        if refusal is not None:
            result.error_code, result.error_message = refusal.code, refusal.message
            results.append(result)
            continue
        try:
            if layers is None:
                layers = await broker_config_layers(broker)
            entries = await _describe(broker, layers, resource, include_synonyms,
                                      include_documentation)
        except Exception as exc:
            log.info("Error processing describe configs request for resource %s %s: %s",
                     resource.resource_type, resource.resource_name, exc)
            result.error_code, result.error_message = error_of(exc)
        else:
            result.configs = [_entry(e) for e in entries]
        results.append(result)
    return DescribeConfigsResponse(results=results)
