"""Client quotas in ZooKeeper (Kafka 2.8's ZkAdminManager.describeClientQuotas /
alterClientQuotas, shared by the AlterClientQuotas and DescribeClientQuotas handlers and
``kafka-configs.sh --zookeeper``).

An entity is a user, a client id, or both; either name may be the default (None here,
``<default>`` in the path). Its quotas are configs of

- ``/config/users/<user>`` (the user's SCRAM credentials share the znode),
- ``/config/clients/<client-id>``,
- ``/config/users/<user>/clients/<client-id>``,

names sanitized (URL-encoded), values strings: ``producer_byte_rate`` and
``consumer_byte_rate`` whole numbers (``1048576``), ``request_percentage`` a Java double
(``200.0``). Each change is announced under ``/config/changes`` with the entity path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.errors import InvalidRequestError, UnsupportedVersionError
from kafkaclone.common.security import desanitize, sanitize
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import ConfigEntityType, ConfigEntityTypeZNode, ConfigEntityZNode

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
QUOTA_CONFIG_TYPES: Final[Mapping[str, type]] = {
    "producer_byte_rate": int,
    "consumer_byte_rate": int,
    "request_percentage": float,
}
"""Kafka's QuotaConfigs for users and client ids, with their value types."""

Entity = dict[str, str | None]
"""Entity type (``user``, ``client-id``) to name, None for the default entity."""

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2


@dataclass(frozen=True)
class FilterComponent:
    """One part of a DescribeClientQuotas filter: ``entity_type`` must be ``match`` (a name,
    or None for the default entity), or with ``any_name`` any name given."""

    entity_type: str
    match: str | None = None
    any_name: bool = False


def _name(name: str | None) -> str:
    return ConfigEntityZNode.DEFAULT_ENTITY_NAME if name is None else sanitize(name)


def _unname(znode_name: str) -> str | None:
    return None if znode_name == ConfigEntityZNode.DEFAULT_ENTITY_NAME else desanitize(znode_name)


def entity_path(entity: Entity) -> tuple[str, str]:
    """(config entity type, entity name) of the entity's znode; InvalidRequestError for an
    entity that is not a user, a client id or both."""
    if IP in entity:
        raise InvalidRequestError("IP quotas are not supported by this broker")
    unknown = sorted(set(entity) - {USER, CLIENT_ID})
    if unknown:
        raise InvalidRequestError(f"Unhandled client quota entity type: {unknown[0]}")
    if USER in entity and CLIENT_ID in entity:
        return (ConfigEntityType.USER,
                f"{_name(entity[USER])}/clients/{_name(entity[CLIENT_ID])}")
    if USER in entity:
        return ConfigEntityType.USER, _name(entity[USER])
    if CLIENT_ID in entity:
        return ConfigEntityType.CLIENT, _name(entity[CLIENT_ID])
    raise InvalidRequestError("Invalid empty client quota entity")


def quota_value_text(key: str, value: float) -> str:
    """The znode's text of a quota value; InvalidRequestError for an unknown key or a value
    of the wrong kind (Kafka: a LONG config must be a whole number)."""
    kind = QUOTA_CONFIG_TYPES.get(key)
    if kind is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if math.isnan(value) or math.isinf(value):
        raise InvalidRequestError(f"Configuration {key} must be a finite number")
    if value <= 0:
        raise InvalidRequestError(f"Configuration {key} must be a positive number")
    if kind is int:
        if abs(round(value) - value) > 1e-6:
            raise InvalidRequestError(f"Configuration {key} must be a Long value")
        return str(round(value))
    return repr(float(value))


async def alter_client_quotas(zk: KafkaZkClient, entity: Entity,
                              ops: Sequence[tuple[str, float | None]],
                              validate_only: bool = False) -> None:
    """Set (a value) or remove (None) each quota of ``entity``; other configs of its znode
    (SCRAM credentials) stay."""
    entity_type, entity_name = entity_path(entity)
    texts = {key: None if value is None else quota_value_text(key, value)
             for key, value in ops}
    for key, text in texts.items():
        if text is None and key not in QUOTA_CONFIG_TYPES:
            raise InvalidRequestError(f"Invalid configuration key {key}")
    if validate_only:
        return
    configs = await zk.get_entity_configs(entity_type, entity_name)
    for key, text in texts.items():
        if text is None:
            configs.pop(key, None)
        else:
            configs[key] = text
    await zk.set_or_create_entity_configs(entity_type, entity_name, configs)
    await zk.create_config_change_notification(f"{entity_type}/{entity_name}")


async def all_quota_entities(zk: KafkaZkClient) -> list[tuple[Entity, dict[str, float]]]:
    """Every user, client id and (user, client id) entity with a quota, and its quotas."""
    found: list[tuple[Entity, dict[str, float]]] = []

    async def read(entity: Entity, entity_type: str, name: str) -> None:
        configs = await zk.get_entity_configs(entity_type, name)
        quotas = {}
        for key, text in configs.items():
            if key in QUOTA_CONFIG_TYPES:
                try:
                    quotas[key] = float(text)
                except ValueError:
                    continue
        if quotas:
            found.append((entity, quotas))

    for client in await zk.get_all_entities_with_config(ConfigEntityType.CLIENT):
        await read({CLIENT_ID: _unname(client)}, ConfigEntityType.CLIENT, client)
    for user in await zk.get_all_entities_with_config(ConfigEntityType.USER):
        await read({USER: _unname(user)}, ConfigEntityType.USER, user)
        clients_path = f"{ConfigEntityTypeZNode.path(ConfigEntityType.USER)}/{user}/clients"
        for client in sorted(await zk.get_children(clients_path)):
            await read({USER: _unname(user), CLIENT_ID: _unname(client)},
                       ConfigEntityType.USER, f"{user}/clients/{client}")
    return found


def check_filter(components: Sequence[FilterComponent]) -> None:
    """Kafka's checks of a DescribeClientQuotas filter."""
    seen: set[str] = set()
    for component in components:
        if component.entity_type == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        if component.entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersionError(
                f"Custom entity type '{component.entity_type}' not supported")
        if component.entity_type in seen:
            raise InvalidRequestError(
                f"Duplicate {component.entity_type} filter component entity type")
        seen.add(component.entity_type)
    if IP in seen and seen & {USER, CLIENT_ID}:
        raise InvalidRequestError("Invalid entity filter component combination, IP filter "
                                  "component should not be used with user or clientId "
                                  "filter component.")


def matches(entity: Entity, components: Sequence[FilterComponent], strict: bool) -> bool:
    """Whether the filter selects ``entity`` (ZkAdminManager.handleDescribeClientQuotas)."""
    by_type = {component.entity_type: component for component in components}
    for entity_type in (USER, CLIENT_ID):
        component = by_type.get(entity_type)
        present = entity_type in entity
        if component is None:
            if present and strict:
                return False
        elif component.any_name:
            if not present:
                return False
        elif not present or entity[entity_type] != component.match:
            return False
    return IP not in by_type


async def describe_client_quotas(zk: KafkaZkClient, components: Sequence[FilterComponent],
                                 strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    check_filter(components)
    return [(entity, quotas) for entity, quotas in await all_quota_entities(zk)
            if matches(entity, components, strict)]
