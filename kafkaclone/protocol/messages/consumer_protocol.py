"""The consumer protocol's embedded payloads (ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json), versions 0-1.

They are not API bodies: a consumer puts a subscription in the ``metadata`` of its
JoinGroup protocols and the group leader puts an assignment per member in SyncGroup, both
as opaque bytes to the broker. On the wire each payload is an int16 version followed by the
body. A reader meeting a newer version than it knows decodes it with its highest known
version and ignores the bytes left over: newer versions only append fields.
"""

from typing import Any

from kafkaclone.common.errors import DecodeError
from kafkaclone.protocol import types as t
from kafkaclone.protocol.schema import Message, MessageSpec, compile_message, data, field

CONSUMER_PROTOCOL_SUBSCRIPTION = data(
    "ConsumerProtocolSubscription", valid="0-1", flexible="none", fields=[
        field("topics", "[]string"),
        field("user_data", "bytes", nullable="0+", default=None),
        # v1 (KIP-429, cooperative rebalancing): what the member owns now.
        field("owned_partitions", "[]TopicPartition", "1+", fields=[
            field("topic", "string", "1+"),
            field("partitions", "[]int32", "1+"),
        ]),
    ],
)

# v1 is the same as v0; it goes with subscription v1.
CONSUMER_PROTOCOL_ASSIGNMENT = data(
    "ConsumerProtocolAssignment", valid="0-1", flexible="none", fields=[
        field("assigned_partitions", "[]TopicPartition", fields=[
            field("topic", "string"),
            field("partitions", "[]int32"),
        ]),
        field("user_data", "bytes", nullable="0+", default=None),
    ],
)


def _message(spec: MessageSpec) -> Message[Any]:
    # compile_message caches per declaration: this is the same Message (and class) that the
    # registry compiles (kafkaclone.protocol.api).
    return compile_message(spec)


def _encode(spec: MessageSpec, obj: Any, version: int) -> bytes:
    out = bytearray(t.INT16.pack(version))
    _message(spec).encode_into(obj, version, out)
    return bytes(out)


def _decode(spec: MessageSpec, buf: t.Buffer) -> tuple[int, Any]:
    message = _message(spec)
    if len(buf) < 2:
        raise DecodeError(f"{spec.name} of {len(buf)} bytes has no version")
    (version,) = t.INT16.unpack_from(buf, 0)
    if version < message.min_version:
        raise DecodeError(f"unsupported {spec.name} version {version}")
    version = min(version, message.max_version)
    obj, _end = message.decode(buf, version, 2)
    return version, obj


def encode_subscription(obj: Any, version: int) -> bytes:
    """A ConsumerProtocolSubscription with its int16 version in front."""
    return _encode(CONSUMER_PROTOCOL_SUBSCRIPTION, obj, version)


def decode_subscription(buf: t.Buffer) -> tuple[int, Any]:
    """(version it was decoded with, subscription); see the module doc for newer versions."""
    return _decode(CONSUMER_PROTOCOL_SUBSCRIPTION, buf)


def encode_assignment(obj: Any, version: int) -> bytes:
    """A ConsumerProtocolAssignment with its int16 version in front."""
    return _encode(CONSUMER_PROTOCOL_ASSIGNMENT, obj, version)


def decode_assignment(buf: t.Buffer) -> tuple[int, Any]:
    """(version it was decoded with, assignment); see the module doc for newer versions."""
    return _decode(CONSUMER_PROTOCOL_ASSIGNMENT, buf)
