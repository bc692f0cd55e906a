"""SCRAM credentials in ZooKeeper, as the admin APIs change them (Kafka 2.8's
ZkAdminManager.describeUserScramCredentials / alterUserScramCredentials, KIP-554).

Credentials live in ``/config/users/<sanitized user>`` under the mechanism's name in
Kafka's format; a change writes the znode, then a ``users/<user>`` change notification, so
every broker's credential cache follows. The mechanisms are numbered as on the wire:
1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.errors import (
    NONE,
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from kafkaclone.common.scram import MIN_ITERATIONS, SCRAM_MECHANISMS, ScramCredential
from kafkaclone.common.security import desanitize, sanitize
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import ConfigEntityType

MECHANISM_IDS: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_NUMBERS: Final = {name: number for number, name in MECHANISM_IDS.items()}
MAX_ITERATIONS: Final = 16384
"""Kafka's ScramMechanism.maxIterations."""


@dataclass(frozen=True)
class UserResult:
    user: str
    error_code: int = NONE
    error_message: str | None = None


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


async def describe(zk: KafkaZkClient, users: Sequence[str] | None
                   ) -> list[tuple[UserResult, list[tuple[int, int]]]]:
    """Each user's (mechanism number, iterations); all users with credentials if None."""
    if users is None:
        names = await zk.get_all_entities_with_config(ConfigEntityType.USER)
        wanted = [(desanitize(name), False) for name in names]
    else:
        duplicates = {u for u in users if users.count(u) > 1}
        wanted = [(user, user in duplicates) for user in dict.fromkeys(users)]
    results: list[tuple[UserResult, list[tuple[int, int]]]] = []
    for user, duplicate in wanted:
        if duplicate:
            results.append((UserResult(user, DuplicateResourceError.code,
                                       "Cannot describe SCRAM credentials for the same user "
                                       "twice in a single request"), []))
            continue
        config = await zk.get_entity_configs(ConfigEntityType.USER, sanitize(user))
        infos = []
        for mechanism, number in MECHANISM_NUMBERS.items():
            if mechanism in config:
                try:
                    credential = ScramCredential.from_config_value(config[mechanism])
                except ValueError:
                    continue
                infos.append((number, credential.iterations))
        if not infos:
            if users is None:
                continue
            results.append((UserResult(user, ResourceNotFoundError.code,
                                       "Attempt to describe a user credential that does not "
                                       "exist"), []))
            continue
        results.append((UserResult(user), infos))
    return results


def credential_from_salted_password(mechanism: str, upsertion: Upsertion) -> ScramCredential:
    """Kafka's ScramFormatter: StoredKey and ServerKey from the salted password."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    client_key = hmac.new(upsertion.salted_password, b"Client Key", hash_name).digest()
    return ScramCredential(upsertion.salt, hashlib.new(hash_name, client_key).digest(),
                           hmac.new(upsertion.salted_password, b"Server Key",
                                    hash_name).digest(),
                           upsertion.iterations)


async def alter(zk: KafkaZkClient, deletions: Sequence[tuple[str, int]],
                upsertions: Sequence[Upsertion]) -> list[UserResult]:
    """Apply the deletions and upsertions user by user; a user's result is its first
    error (and then nothing of that user changes)."""
    users = [user for user, _ in deletions] + [u.user for u in upsertions]
    errors: dict[str, UserResult] = {}

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, UserResult(user, code, message))

    seen: set[tuple[str, int]] = set()
    for user, mechanism in [*deletions, *((u.user, u.mechanism) for u in upsertions)]:
        if (user, mechanism) in seen:
            fail(user, DuplicateResourceError.code,
                 "A user credential cannot be altered twice in the same request")
        seen.add((user, mechanism))
        if not user:
            fail(user, UnacceptableCredentialError.code,
                 "Username must not be empty")
        if mechanism not in MECHANISM_IDS:
            fail(user, UnsupportedSaslMechanismError.code,
                 "Unknown SCRAM mechanism")
    for upsertion in upsertions:
        name = MECHANISM_IDS.get(upsertion.mechanism)
        if name is None:
            continue
        if upsertion.iterations < MIN_ITERATIONS:
            fail(upsertion.user, UnacceptableCredentialError.code,
                 f"Iterations {upsertion.iterations} is less than the minimum "
                 f"{MIN_ITERATIONS} required for {name}")
        elif upsertion.iterations > MAX_ITERATIONS:
            fail(upsertion.user, UnacceptableCredentialError.code,
                 f"Iterations {upsertion.iterations} is more than the maximum "
                 f"{MAX_ITERATIONS} allowed for {name}")
    configs: dict[str, dict[str, str]] = {}
    for user in dict.fromkeys(users):
        if user not in errors:
            configs[user] = await zk.get_entity_configs(ConfigEntityType.USER, sanitize(user))
    for user, mechanism in deletions:
        if user in configs and MECHANISM_IDS[mechanism] not in configs[user]:
            fail(user, ResourceNotFoundError.code,
                 "Attempt to delete a user credential that does not exist")
    for user, mechanism in deletions:
        if user not in errors:
            configs[user].pop(MECHANISM_IDS[mechanism], None)
    for upsertion in upsertions:
        if upsertion.user not in errors:
            name = MECHANISM_IDS[upsertion.mechanism]
            configs[upsertion.user][name] = credential_from_salted_password(
                name, upsertion).to_config_value()
    for user, config in configs.items():
        if user in errors:
            continue
        await zk.set_or_create_entity_configs(ConfigEntityType.USER, sanitize(user), config)
        await zk.create_config_change_notification(f"{ConfigEntityType.USER}/{sanitize(user)}")
    return [errors.get(user, UserResult(user)) for user in dict.fromkeys(users)]
