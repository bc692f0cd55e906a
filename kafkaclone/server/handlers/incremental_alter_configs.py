"""IncrementalAlterConfigs (key 44), v0-1: Kafka 2.8's
ZkAdminManager.incrementalAlterConfigs.

Each resource's operations (SET, DELETE, APPEND and SUBTRACT for list configs) are applied
to its current overrides in ZooKeeper, and the result is validated and written exactly as
AlterConfigs writes a complete set. A key named twice, a null value for anything but
DELETE, APPEND/SUBTRACT on a non-list config and an unknown operation are INVALID_REQUEST.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Mapping

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.config_def import ConfigDef, ConfigKey, ConfigType
from kafkaclone.common.errors import NONE, InvalidConfigError, InvalidRequestError
from kafkaclone.log.config import LOG_CONFIG_KEYS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkaclone.server.config import BROKER_CONFIG
from kafkaclone.server.handlers.admin_support import (
    ResourceType,
    alter_config_error,
    broker_id_of_resource,
    config_resource_refusal,
)
from kafkaclone.server.handlers.alter_configs import alter_resource_configs
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices
from kafkaclone.zk.znodes import ConfigEntityType, ConfigEntityZNode

log = logging.getLogger(__name__)

_Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
_AlterableConfig = _Resource.AlterableConfig
_Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


class OpType(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _list_key(keys: ConfigDef, name: str, verb: str) -> ConfigKey:
    key = keys.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    if key.type is not ConfigType.LIST:
        raise InvalidRequestError(f"Config value {verb} is not allowed for config key: {name}")
    return key


def apply_operations(current: Mapping[str, str], operations: list[_AlterableConfig],
                     keys: ConfigDef) -> dict[str, str]:
    """Kafka's prepareIncrementalConfigs: the overrides after ``operations``."""
    props = dict(current)
    for op in operations:
        name, value = op.name, op.value
        if op.config_operation == OpType.DELETE:
            props.pop(name, None)
        elif value is None:
            raise InvalidRequestError(
                f"Null value not supported for : {_op_name(op.config_operation)}:{name}")
        elif op.config_operation == OpType.SET:
            props[name] = value
        elif op.config_operation in (OpType.APPEND, OpType.SUBTRACT):
            verb = "append" if op.config_operation == OpType.APPEND else "subtract"
            key = _list_key(keys, name, verb)
            old = props.get(name)
            if old is None:
                old = key.format(key.default) or ""
            old_items = old.split(",") if old else []
            given = value.split(",")
            if op.config_operation == OpType.APPEND:
                new_items = old_items + given
            else:
                new_items = list(old_items)
                for item in given:
                    if item in new_items:
                        new_items.remove(item)
            props[name] = ",".join(new_items)
        else:
            raise InvalidRequestError(f"Unknown config operation {op.config_operation}")
    return props


def _op_name(op: int) -> str:
    try:
        return OpType(op).name
    except ValueError:
        return str(op)


async def _alter(broker: BrokerServices, resource: _Resource, validate_only: bool) -> None:
    counts = Counter(op.name for op in resource.configs)
    duplicates = sorted(name for name, n in counts.items() if n > 1)
    if duplicates:
        raise InvalidRequestError(f"Error due to duplicate config keys : {','.join(duplicates)}")
    nulls = [f"{_op_name(op.config_operation)}:{op.name}" for op in resource.configs
             if op.value is None and op.config_operation != OpType.DELETE]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {','.join(nulls)}")
    name = resource.resource_name
    if resource.resource_type == ResourceType.TOPIC:
        current = await broker.admin_zk.fetch_entity_config(ConfigEntityType.TOPIC, name)
        props = apply_operations(current, list(resource.configs), LOG_CONFIG_KEYS)
    elif resource.resource_type == ResourceType.BROKER:
        broker_id = broker_id_of_resource(broker, name)
        entity = ConfigEntityZNode.DEFAULT_ENTITY_NAME if broker_id is None else str(broker_id)
        current = await broker.admin_zk.fetch_entity_config(ConfigEntityType.BROKER, entity)
        props = apply_operations(current, list(resource.configs), BROKER_CONFIG)
    else:
        raise InvalidRequestError("AlterConfigs is only supported for topics and brokers, but "
                                  f"resource type is {resource.resource_type}")
    await alter_resource_configs(broker, resource.resource_type, name, props, validate_only)


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1))
async def handle_incremental_alter_configs(
        ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
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
            await _alter(broker, resource, bool(request.validate_only))
        except Exception as exc:
            log.info("Error processing incremental alter configs request for resource %s %s: "
                     "%s", resource.resource_type, resource.resource_name, exc)
            result.error_code, result.error_message = alter_config_error(
                exc, resource.resource_type, resource.resource_name)
        results.append(result)
    return IncrementalAlterConfigsResponse(responses=results)
