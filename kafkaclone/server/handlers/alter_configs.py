"""AlterConfigs (key 33), v0-2: Kafka 2.8's ZkAdminManager.alterConfigs.

The request carries a resource's complete new set of overrides. Topics: the topic must be
in the metadata cache (UNKNOWN_TOPIC_OR_PARTITION), names must be topic configs
(INVALID_CONFIG) and values valid (INVALID_REQUEST, as Kafka answers a ConfigException);
then ``/config/topics/<t>`` is replaced and a change notification written. Brokers: this
broker's id or an empty name (the cluster-wide default); only dynamically updatable broker
configs (INVALID_REQUEST otherwise); ``/config/brokers/<id>`` or ``<default>``. Null
values are INVALID_REQUEST. validate_only checks and writes nothing.
"""

from __future__ import annotations

import logging

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import NONE, InvalidRequestError, UnknownTopicOrPartitionError
from kafkaclone.common.topic import validate_topic_name
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import AlterConfigsRequest, AlterConfigsResponse
from kafkaclone.server.handlers.admin_support import (
    ResourceType,
    alter_config_error,
    broker_config_layers,
    broker_id_of_resource,
    config_resource_refusal,
    new_broker_props,
    refuse_listener_changes,
    validate_dynamic_broker_configs,
    validate_log_cleaner_reconfiguration,
    validate_thread_pool_reconfiguration,
    validate_topic_configs,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)

_Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def alter_resource_configs(broker: BrokerServices, resource_type: int, name: str,
                                 props: dict[str, str], validate_only: bool) -> None:
    """Validate then (unless validate_only) write a resource's complete set of overrides."""
    if resource_type == ResourceType.TOPIC:
        validate_topic_name(name)
        if not broker.metadata_cache.contains(name):
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        validate_topic_configs(props)
        if not validate_only:
            log.info("Updating topic %s with new configuration %s", name, props)
            await broker.admin_zk.change_topic_config(name, props)
    elif resource_type == ResourceType.BROKER:
        broker_id = broker_id_of_resource(broker, name)
        validate_dynamic_broker_configs(props, per_broker=broker_id is not None)
        refuse_listener_changes(props, broker.config.originals)
        layers = await broker_config_layers(broker)
        new_props = new_broker_props(broker, layers, broker_id, props)
        validate_thread_pool_reconfiguration(layers.effective_broker_props(), new_props)
        if broker.log_cleaner is not None:
            validate_log_cleaner_reconfiguration(broker.log_cleaner.config, new_props)
        if not validate_only:
            await broker.admin_zk.change_broker_config(broker_id, props)
    elif resource_type == ResourceType.BROKER_LOGGER:
        raise InvalidRequestError(
            "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
    else:
        raise InvalidRequestError(f"Unexpected resource type {resource_type}")


@handler(ApiKey.ALTER_CONFIGS, versions=(0, 2))
async def handle_alter_configs(
        ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    broker: BrokerServices = ctx.broker
    results = []
    for resource in request.resources:
        result = _Result(error_code=NONE, error_message=None,
                         resource_type=resource.resource_type,
                         resource_name=resource.resource_name)
        refusal = config_resource_refusal(ctx, AclOperation.ALTER_CONFIGS,
                                          resource.resource_type, resource.resource_name)
        if refusal is not None:
            result.error_code, result.error_message = refusal.code, refusal.message
            results.append(result)
            continue
        try:
            nulls = [c.name for c in resource.configs if c.value is None]
            if nulls:
                raise InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")
            props = {c.name: c.value for c in resource.configs if c.value is not None}
            await alter_resource_configs(broker, resource.resource_type,
                                         resource.resource_name, props,
                                         bool(request.validate_only))
        except Exception as exc:
            log.info("Error processing alter configs request for resource %s %s: %s",
                     resource.resource_type, resource.resource_name, exc)
            result.error_code, result.error_message = alter_config_error(
                exc, resource.resource_type, resource.resource_name)
        results.append(result)
    return AlterConfigsResponse(responses=results)
