"""Topic names: Kafka's rules (``org.apache.kafka.common.internals.Topic``)."""

from __future__ import annotations

import re
from typing import Final

from kafkaclone.common.errors import InvalidTopicExceptionError

GROUP_METADATA_TOPIC_NAME: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME: Final = "__transaction_state"
INTERNAL_TOPICS: Final = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})

MAX_NAME_LENGTH: Final = 249
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicExceptionError (INVALID_TOPIC_EXCEPTION) for an illegal name."""
    if not name:
        raise InvalidTopicExceptionError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicExceptionError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicExceptionError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"Topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicExceptionError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'")


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def has_collision_chars(name: str) -> bool:
    """'.' and '_' collide in metric names: Kafka warns when a name has either."""
    return "." in name or "_" in name


def has_collision(topic_a: str, topic_b: str) -> bool:
    """Whether two names are the same once '.' is read as '_'."""
    return topic_a.replace(".", "_") == topic_b.replace(".", "_")
