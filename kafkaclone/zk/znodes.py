"""Kafka's znodes: one class per znode, holding its path, its encoding and its decoding.

This mirrors Kafka 2.8's ``kafka.zk.ZkData``: the same paths, the same JSON field names and
versions, and the same bytes, keys in the order a Kafka 2.8 broker (Scala 2.13, Java 11)
writes them (see ``jvm_order``). Every payload class names its JSON Schema in ``zk_schema/``
(``SCHEMA``, e.g. ``zk_schema/topic.v3.schema.json``) and its payload format:

- ``PayloadFormat.JSON``: a JSON document;
- ``PayloadFormat.TEXT``: plain UTF-8 text (``/controller_epoch``, committed offsets), whose
  schema describes the text as a JSON string;
- ``PayloadFormat.EMPTY``: no data (``/admin/delete_topics/<t>``, ``/brokers/seqid``).

Decoders raise ``ZNodeDecodeError`` for a payload Kafka would not have written. Values that
conditional writes need carry the znode's zkVersion (``LeaderAndIsr.zk_version``,
``Versioned``).
"""

from __future__ import annotations

import base64
import enum
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, NewType, TypeVar

from kafkaclone.common.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.common.endpoint import (
    DEFAULT_SECURITY_PROTOCOL_MAP,
    EndPoint,
    SecurityProtocol,
    normalise_listener_name,
)
from kafkaclone.common.topic_partition import TopicPartition as TopicPartition
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.jvm_order import (
    java_hash_map_order,
    java_properties_order,
    scala_immutable_map_order,
    scala_mutable_hash_map_order,
)

BrokerId = NewType("BrokerId", int)

MATCH_ANY_VERSION: Final = -1
"""As the expected version of a conditional write: any version matches (ZooKeeper's -1)."""
UNKNOWN_VERSION: Final = -2
"""The zkVersion reported for a znode that does not exist (Kafka's ZkVersion.UnknownVersion)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A decoded payload and the zkVersion it was read at."""

    value: T
    zk_version: int


class ZNodeKind(enum.Enum):
    PERSISTENT = "persistent"
    EPHEMERAL = "ephemeral"
    PERSISTENT_SEQUENTIAL = "persistent sequential"


class PayloadFormat(enum.Enum):
    JSON = "json"
    TEXT = "text"
    EMPTY = "empty"


class ConfigEntityType:
    """The entity types with config znodes (``/config/<type>/<name>``): Kafka's
    kafka.server.ConfigType, named apart from ConfigDef's value types (``ConfigType``)."""

    TOPIC: Final = "topics"
    CLIENT: Final = "clients"
    USER: Final = "users"
    BROKER: Final = "brokers"
    ALL: Final = (TOPIC, CLIENT, USER, BROKER)


# -- JSON helpers ----------------------------------------------------------------------------


def _json_bytes(value: Any) -> bytes:
    """Jackson's compact output: no spaces, non-ASCII characters as UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _ordered(order: Iterable[str], values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: values[key] for key in order}


def _parse_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeDecodeError(what, data, f"not JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise ZNodeDecodeError(what, data, "not a JSON object")
    return parsed


def _int(obj: Mapping[str, Any], key: str, what: str, data: bytes) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeDecodeError(what, data, f"{key!r} is not an integer")
    return value


def _str(obj: Mapping[str, Any], key: str, what: str, data: bytes) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ZNodeDecodeError(what, data, f"{key!r} is not a string")
    return value


def _int_list(value: Any, what: str, data: bytes, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(
        isinstance(item, bool) or not isinstance(item, int) for item in value
    ):
        raise ZNodeDecodeError(what, data, f"{key!r} is not a list of integers")
    return tuple(value)


def _text(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZNodeDecodeError(what, data, "not UTF-8") from exc


def _ascii_int(data: bytes, what: str) -> int:
    text = _text(data, what).strip()
    try:
        return int(text)
    except ValueError as exc:
        raise ZNodeDecodeError(what, data, "not a decimal integer") from exc


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def _decode_partitions(data: bytes, what: str) -> list[TopicPartition]:
    obj = _parse_object(data, what)
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise ZNodeDecodeError(what, data, "'partitions' is not a list")
    result = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZNodeDecodeError(what, data, "a partition is not an object")
        result.append(
            TopicPartition(_str(entry, "topic", what, data), _int(entry, "partition", what, data))
        )
    return result


def kafka_uuid_to_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def kafka_uuid_from_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a base64 uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- containers ------------------------------------------------------------------------------


class ClusterZNode:
    PATH: Final = "/cluster"


class BrokersZNode:
    PATH: Final = "/brokers"


class BrokerIdsZNode:
    PATH: Final = "/brokers/ids"


class TopicsZNode:
    PATH: Final = "/brokers/topics"


class ConfigZNode:
    PATH: Final = "/config"


class AdminZNode:
    PATH: Final = "/admin"


class ConsumerPathZNode:
    """The old consumers' root, where committed offsets live (``offsets.storage=zookeeper``)."""

    PATH: Final = "/consumers"


def _znode_name_char_is_safe(char: str) -> bool:
    code = ord(char)
    return not (
        char in "%/"
        or code <= 0x1F
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xF8FF
        or code >= 0xFFF0
    )


def encode_znode_name(name: str) -> str:
    """A group or member id as one znode name (the inverse is :func:`decode_znode_name`).

    A name ZooKeeper accepts as a path component is kept as it is, so the usual group ids
    appear unchanged under ``/consumers``. Otherwise each character ZooKeeper refuses
    (``/``, control characters U+0000-U+001F and U+007F-U+009F, U+D800-U+F8FF, U+FFF0 and
    above, which Java sees as surrogates) and ``%`` itself become ``%XX`` per UTF-8 byte;
    the names ``.`` and ``..`` become ``%2E`` and ``%2E%2E``; the empty name (legal for
    OffsetCommit and OffsetFetch) becomes ``%``."""
    if name == "":
        return "%"
    if name in (".", ".."):
        return "%2E" * len(name)
    if all(_znode_name_char_is_safe(char) for char in name):
        return name
    out = []
    for char in name:
        if _znode_name_char_is_safe(char):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


def decode_znode_name(name: str) -> str:
    """The group or member id :func:`encode_znode_name` turned into ``name``."""
    if name == "%":
        return ""
    if "%" not in name:
        return name
    raw = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%" and _is_hex(name[i + 1:i + 3]):
            raw.append(int(name[i + 1:i + 3], 16))
            i += 3
        else:
            raw.extend(name[i].encode("utf-8"))
            i += 1
    return raw.decode("utf-8", "surrogatepass")


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


class LogDirEventNotificationZNode:
    PATH: Final = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``, persistent sequential: a broker
    lost a log directory; the controller learns which replicas from its LeaderAndIsr
    response (JSON v1, Kafka's ``{"version":1,"broker":<id>,"event":1}``)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT_SEQUENTIAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "log_dir_event_notification_sequence.v1"
    SEQUENCE_NUMBER_PREFIX: Final = "log_dir_event_"
    LOG_DIR_FAILURE_EVENT: Final = 1

    @staticmethod
    def path(sequence_number: str = "") -> str:
        prefix = LogDirEventNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return f"{LogDirEventNotificationZNode.PATH}/{prefix}{sequence_number}"

    @staticmethod
    def sequence_number(path: str) -> str:
        prefix = LogDirEventNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path[path.rindex(prefix) + len(prefix) :]

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _json_bytes({"version": 1, "broker": broker_id,
                            "event": LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT})

    @staticmethod
    def decode(data: bytes) -> int:
        """The broker id of the event."""
        what = "log dir event notification"
        return _int(_parse_object(data, what), "broker", what, data)


# -- /cluster/id ------------------------------------------------------------------------------


class ClusterIdZNode:
    """``{"version":"1","id":"<22-char base64 uuid>"}``: note the version is a string."""

    PATH: Final = "/cluster/id"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "cluster_id.v1"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _json_bytes({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return _str(_parse_object(data, "cluster id"), "id", "cluster id", data)

    @staticmethod
    def generate() -> str:
        """A new cluster id, as Kafka makes it (a random uuid in URL-safe base64)."""
        return kafka_uuid_to_string(uuid.uuid4())


# -- /brokers/ids/<id> ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration (Kafka's Broker + BrokerInfo)."""

    broker_id: BrokerId
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Supported features: name -> {"min_version": n, "max_version": m} (KIP-584)."""
    version: int = 5
    timestamp_ms: int | None = None
    """Registration time; ``None`` means "now" when encoding."""

    def endpoint(self, listener_name: str) -> EndPoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener_name == normalise_listener_name(listener_name):
                return endpoint
        return None


class BrokerIdZNode:
    """``/brokers/ids/<id>``, ephemeral: a live broker's registration (JSON v5)."""

    KIND: ClassVar = ZNodeKind.EPHEMERAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "broker_id.v5"
    VERSION: Final = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.PATH}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        """Kafka's v5 registration. The top-level host and port are the first PLAINTEXT
        endpoint's (null and -1 without one), for old clients; rack only when set."""
        plaintext = next(
            (ep for ep in info.endpoints if ep.security_protocol is SecurityProtocol.PLAINTEXT),
            None,
        )
        timestamp = info.timestamp_ms if info.timestamp_ms is not None else _now_ms()
        protocol_map = {ep.listener_name: ep.security_protocol.name for ep in info.endpoints}
        values: dict[str, Any] = {
            "version": BrokerIdZNode.VERSION,
            "host": plaintext.host if plaintext is not None else None,
            "port": plaintext.port if plaintext is not None else -1,
            "endpoints": [ep.connection_string for ep in info.endpoints],
            "jmx_port": info.jmx_port,
            "timestamp": str(timestamp),
        }
        if info.rack is not None:
            values["rack"] = info.rack
        values["listener_security_protocol_map"] = _ordered(
            scala_immutable_map_order(ep.listener_name for ep in info.endpoints), protocol_map
        )
        values["features"] = _ordered(
            java_hash_map_order(info.features),
            {
                name: {"min_version": r["min_version"], "max_version": r["max_version"]}
                for name, r in info.features.items()
            },
        )
        return _json_bytes(_ordered(scala_mutable_hash_map_order(values, size_hint=6), values))

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        """Any registration version Kafka ever wrote (1 to 5)."""
        what = f"registration of broker {broker_id}"
        obj = _parse_object(data, what)
        version = _int(obj, "version", what, data)
        jmx_port = _int(obj, "jmx_port", what, data) if "jmx_port" in obj else -1
        if version < 1:
            raise ZNodeDecodeError(what, data, f"unsupported version {version}")
        if version == 1:
            host, port = _str(obj, "host", what, data), _int(obj, "port", what, data)
            endpoints: tuple[EndPoint, ...] = (
                EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, host, port),
            )
        else:
            raw_map = obj.get("listener_security_protocol_map")
            listeners = obj.get("endpoints")
            if not isinstance(raw_map, dict) and raw_map is not None:
                raise ZNodeDecodeError(what, data, "bad listener_security_protocol_map")
            if not isinstance(listeners, list):
                raise ZNodeDecodeError(what, data, "bad endpoints")
            try:
                # v2 registrations have no map: each listener is named after its protocol.
                protocol_map = DEFAULT_SECURITY_PROTOCOL_MAP if raw_map is None else {
                    normalise_listener_name(str(name)): SecurityProtocol.for_name(str(protocol))
                    for name, protocol in raw_map.items()
                }
                endpoints = tuple(EndPoint.parse(str(ep), protocol_map) for ep in listeners)
            except ValueError as exc:
                raise ZNodeDecodeError(what, data, str(exc)) from exc
        rack = obj.get("rack")
        features = obj.get("features") or {}
        timestamp = obj.get("timestamp")
        return BrokerInfo(
            broker_id=BrokerId(broker_id),
            endpoints=endpoints,
            rack=rack if isinstance(rack, str) else None,
            jmx_port=jmx_port,
            features=features if isinstance(features, dict) else {},
            version=version,
            timestamp_ms=int(timestamp) if isinstance(timestamp, str) and timestamp else None,
        )


class BrokerSequenceIdZNode:
    """``/brokers/seqid``: empty; its zkVersion is the sequence generated broker ids come
    from (``reserved.broker.max.id`` + version)."""

    PATH: Final = "/brokers/seqid"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.EMPTY
    SCHEMA: ClassVar = "broker_sequence_id.v0"

    @staticmethod
    def encode() -> bytes:
        return b""


# -- /brokers/topics/<t> ------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's replicas, and during a reassignment the ones being added / removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment is done."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Kafka's ReplicaAssignment.reassignTo: RS = TRS + ORS (in that order, without
        duplicates), AR = RS - ORS, RR = RS - TRS."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's id and replica assignment (Kafka's TopicIdReplicaAssignment)."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]

    def replicas(self) -> dict[int, tuple[int, ...]]:
        return {p: a.replicas for p, a in sorted(self.partitions.items())}

    def topic_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in sorted(self.partitions)]


class TopicZNode:
    """``/brokers/topics/<t>``: the topic's id and replica assignment (JSON v3)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "topic.v3"
    VERSION: Final = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode(
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, ReplicaAssignment] | Mapping[int, Sequence[int]],
    ) -> bytes:
        """``assignment``: partition -> ReplicaAssignment, or partition -> replicas."""
        partitions: dict[str, list[int]] = {}
        adding: dict[str, list[int]] = {}
        removing: dict[str, list[int]] = {}
        for partition, value in assignment.items():
            ra = value if isinstance(value, ReplicaAssignment) else ReplicaAssignment(tuple(value))
            partitions[str(partition)] = list(ra.replicas)
            if ra.adding_replicas:
                adding[str(partition)] = list(ra.adding_replicas)
            if ra.removing_replicas:
                removing[str(partition)] = list(ra.removing_replicas)

        def scala_map(values: dict[str, list[int]]) -> dict[str, list[int]]:
            return _ordered(scala_mutable_hash_map_order(values), values)

        values: dict[str, Any] = {
            "version": TopicZNode.VERSION,
            "partitions": scala_map(partitions),
            "adding_replicas": scala_map(adding),
            "removing_replicas": scala_map(removing),
        }
        if topic_id is not None:
            values["topic_id"] = kafka_uuid_to_string(topic_id)
        return _json_bytes(_ordered(scala_mutable_hash_map_order(values, size_hint=4), values))

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicAssignment:
        what = f"assignment of topic {topic}"
        obj = _parse_object(data, what)
        topic_id = None
        if obj.get("topic_id") is not None:
            try:
                topic_id = kafka_uuid_from_string(_str(obj, "topic_id", what, data))
            except ValueError as exc:
                raise ZNodeDecodeError(what, data, "bad topic_id") from exc

        def replica_map(key: str) -> dict[str, Any]:
            value = obj.get(key) or {}
            if not isinstance(value, dict):
                raise ZNodeDecodeError(what, data, f"{key!r} is not an object")
            return value

        adding = replica_map("adding_replicas")
        removing = replica_map("removing_replicas")
        partitions: dict[int, ReplicaAssignment] = {}
        for partition, replicas in replica_map("partitions").items():
            try:
                partition_id = int(partition)
            except ValueError as exc:
                raise ZNodeDecodeError(what, data, f"bad partition {partition!r}") from exc
            partitions[partition_id] = ReplicaAssignment(
                _int_list(replicas, what, data, partition),
                _int_list(adding.get(partition, []), what, data, partition),
                _int_list(removing.get(partition, []), what, data, partition),
            )
        return TopicAssignment(topic, topic_id, dict(sorted(partitions.items())))


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionsZNode.path(tp.topic)}/{tp.partition}"


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR, with the state znode's zkVersion (the
    partition epoch) it was read at or written with."""

    NO_LEADER: ClassVar[int] = -1
    LEADER_DURING_DELETE: ClassVar[int] = -2
    INITIAL_LEADER_EPOCH: ClassVar[int] = 0
    INITIAL_ZK_VERSION: ClassVar[int] = 0

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0

    @classmethod
    def initial(cls, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        return cls(leader, cls.INITIAL_LEADER_EPOCH, tuple(isr), cls.INITIAL_ZK_VERSION)

    # Built with the constructor, not dataclasses.replace (several times slower): the
    # controller calls these per partition, 10,000 at a time in a failover.

    def new_leader_and_isr(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """Kafka's newLeaderAndIsr: a new leader or ISR, the leader epoch bumped."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version)

    def new_epoch_and_zk_version(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch + 1, self.isr, self.zk_version + 1)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr, zk_version)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


class TopicPartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, leader epoch, ISR and the epoch
    of the controller that wrote it (JSON v1). Its zkVersion is the partition epoch."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "topic_partition_state.v1"
    VERSION: Final = 1

    @staticmethod
    def path(tp: TopicPartition) -> str:
        return f"{TopicPartitionZNode.path(tp)}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        lai = state.leader_and_isr
        # Kafka builds a five-key immutable Map: this is its iteration order.
        return _json_bytes(
            {
                "controller_epoch": state.controller_epoch,
                "leader": lai.leader,
                "version": TopicPartitionStateZNode.VERSION,
                "leader_epoch": lai.leader_epoch,
                "isr": list(lai.isr),
            }
        )

    @staticmethod
    def decode(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
        what = "partition state"
        obj = _parse_object(data, what)
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                leader=_int(obj, "leader", what, data),
                leader_epoch=_int(obj, "leader_epoch", what, data),
                isr=_int_list(obj.get("isr"), what, data, "isr"),
                zk_version=zk_version,
            ),
            _int(obj, "controller_epoch", what, data),
        )


# -- controller ----------------------------------------------------------------------------------


class ControllerZNode:
    """``/controller``, ephemeral: the controller election's lock."""

    PATH: Final = "/controller"
    KIND: ClassVar = ZNodeKind.EPHEMERAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "controller.v1"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        timestamp = timestamp_ms if timestamp_ms is not None else _now_ms()
        return _json_bytes({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp)})

    @staticmethod
    def decode(data: bytes) -> BrokerId:
        return BrokerId(_int(_parse_object(data, "controller"), "brokerid", "controller", data))


class ControllerEpochZNode:
    """``/controller_epoch``: the controller epoch as ASCII. Its zkVersion guards every
    controller write."""

    PATH: Final = "/controller_epoch"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.TEXT
    SCHEMA: ClassVar = "controller_epoch.v0"
    INITIAL_CONTROLLER_EPOCH: Final = 0
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION: Final = 0

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        return _ascii_int(data, "controller epoch")


# -- /admin ----------------------------------------------------------------------------------------


class DeleteTopicsZNode:
    PATH: Final = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<t>``: empty; asks the controller to delete the topic."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.EMPTY
    SCHEMA: ClassVar = "delete_topics_topic.v0"

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode() -> bytes:
        return b""


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: a legacy (pre-KIP-455) reassignment request (JSON v1)."""

    PATH: Final = "/admin/reassign_partitions"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "reassign_partitions.v1"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        return _json_bytes(
            {
                "version": 1,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                    for tp, replicas in reassignment.items()
                ],
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
        what = "partition reassignment"
        obj = _parse_object(data, what)
        entries = obj.get("partitions")
        if not isinstance(entries, list):
            raise ZNodeDecodeError(what, data, "'partitions' is not a list")
        result: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in entries:
            if not isinstance(entry, dict):
                raise ZNodeDecodeError(what, data, "a partition is not an object")
            tp = TopicPartition(
                _str(entry, "topic", what, data), _int(entry, "partition", what, data)
            )
            result[tp] = _int_list(entry.get("replicas"), what, data, "replicas")
        return result


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose leadership should move back to
    their preferred (first) replica (JSON v1)."""

    PATH: Final = "/admin/preferred_replica_election"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "preferred_replica_election.v1"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _json_bytes({"version": 1, "partitions": _partitions_json(partitions)})

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return set(_decode_partitions(data, "preferred replica election"))


# -- /isr_change_notification ------------------------------------------------------------------


class IsrChangeNotificationZNode:
    PATH: Final = "/isr_change_notification"


class IsrChangeNotificationSequenceZNode:
    """``/isr_change_notification/isr_change_<seq>``, persistent sequential: partitions whose
    ISR a leader changed, for the controller to announce (JSON v1)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT_SEQUENTIAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "isr_change_notification_sequence.v1"
    SEQUENCE_NUMBER_PREFIX: Final = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return f"{IsrChangeNotificationZNode.PATH}/{prefix}{sequence_number}"

    @staticmethod
    def sequence_number(path: str) -> str:
        prefix = IsrChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
        return path[path.rindex(prefix) + len(prefix) :]

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _json_bytes({"version": 1, "partitions": _partitions_json(partitions)})

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return set(_decode_partitions(data, "ISR change notification"))


# -- /config -------------------------------------------------------------------------------------


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"{ConfigZNode.PATH}/{entity_type}"


class ConfigEntityZNode:
    """``/config/<type>/<name>`` (``topics/<t>``, ``brokers/<id>``, ``brokers/<default>``):
    the entity's config overrides, values as strings (JSON v1)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "config_entity.v1"
    DEFAULT_ENTITY_NAME: Final = "<default>"

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        """Keys in the order of the java.util.Properties Kafka fills in ``config``'s order."""
        values = {key: str(value) for key, value in config.items()}
        ordered = _ordered(java_properties_order(values), values)
        return _json_bytes({"version": 1, "config": ordered})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        """An empty or config-less payload is an empty config, as in Kafka."""
        if not data:
            return {}
        config = _parse_object(data, "entity config").get("config")
        if not isinstance(config, dict):
            return {}
        return {
            str(key): value if isinstance(value, str) else json.dumps(value)
            for key, value in config.items()
        }


class ConfigEntityChangeNotificationZNode:
    PATH: Final = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """``/config/changes/config_change_<seq>``, persistent sequential: which entity's config
    changed, so every broker re-reads it (JSON v2)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT_SEQUENTIAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "config_entity_change_notification_sequence.v2"
    SEQUENCE_NUMBER_PREFIX: Final = "config_change_"
    CREATE_PATH: Final = "/config/changes/config_change_"

    @staticmethod
    def encode(sanitized_entity_path: str) -> bytes:
        return _json_bytes({"version": 2, "entity_path": sanitized_entity_path})

    @staticmethod
    def decode(data: bytes) -> str:
        """The entity path (``topics/<t>``); version 1 notifications (entity_type and
        entity_name) are read too."""
        what = "config change notification"
        obj = _parse_object(data, what)
        version = _int(obj, "version", what, data)
        if version == 1:
            entity_type = _str(obj, "entity_type", what, data)
            return f"{entity_type}/{_str(obj, 'entity_name', what, data)}"
        if version == 2:
            return _str(obj, "entity_path", what, data)
        raise ZNodeDecodeError(what, data, f"unsupported version {version}")


# -- ACLs (Kafka's ZkAclStore / ZkAclChangeStore) -------------------------------------------------


class AclZNode:
    """``/kafka-acl``: the LITERAL ACLs, ``/kafka-acl/<ResourceType>/<name>`` (LiteralAclStore)."""

    PATH: Final = "/kafka-acl"


class ExtendedAclZNode:
    """``/kafka-acl-extended``: the ACLs of other pattern types, under
    ``/kafka-acl-extended/<pattern type in lower case>/<ResourceType>/<name>`` (ExtendedAclStore:
    ``prefixed``)."""

    PATH: Final = "/kafka-acl-extended"


def acl_store_path(pattern_type: PatternType) -> str:
    """Where the ACLs of ``pattern_type`` live (ZkAclStore.aclPath)."""
    if pattern_type == PatternType.LITERAL:
        return AclZNode.PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{ExtendedAclZNode.PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


class AclResourceTypeZNode:
    """``/kafka-acl/Topic``, ``/kafka-acl-extended/prefixed/Group``: one container per resource
    type (ZkAclStore.path(resourceType)), created with the ACL paths."""

    @staticmethod
    def path(pattern_type: PatternType, resource_type: ResourceType) -> str:
        return f"{acl_store_path(pattern_type)}/{resource_type.pascal_name}"


class ResourceZNode:
    """``/kafka-acl/<ResourceType>/<name>`` and
    ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``: every ACL of one resource
    pattern (JSON v1, Kafka's AclEntry.toJsonCompatibleMap). Written conditionally on its
    zkVersion; deleted when its last ACL goes."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "acl_resource.v1"

    @staticmethod
    def path(pattern: ResourcePattern) -> str:
        container = AclResourceTypeZNode.path(pattern.pattern_type, pattern.resource_type)
        return f"{container}/{pattern.name}"

    @staticmethod
    def encode(entries: Iterable[AccessControlEntry]) -> bytes:
        return _json_bytes({"version": 1, "acls": [
            {"principal": entry.principal,
             "permissionType": entry.permission_type.pascal_name,
             "operation": entry.operation.pascal_name,
             "host": entry.host}
            for entry in sorted(set(entries))]})

    @staticmethod
    def decode(data: bytes) -> set[AccessControlEntry]:
        """An empty payload is no ACLs, as Kafka reads it."""
        what = "ACLs"
        if not data:
            return set()
        obj = _parse_object(data, what)
        if _int(obj, "version", what, data) != 1:
            raise ZNodeDecodeError(what, data, "unsupported version")
        acls = obj.get("acls")
        if not isinstance(acls, list):
            raise ZNodeDecodeError(what, data, "'acls' is not a list")
        entries = set()
        for acl in acls:
            if not isinstance(acl, dict):
                raise ZNodeDecodeError(what, data, "an ACL is not a JSON object")
            operation = AclOperation.from_string(_str(acl, "operation", what, data))
            permission = AclPermissionType.from_string(_str(acl, "permissionType", what, data))
            if operation in (AclOperation.UNKNOWN, AclOperation.ANY) or permission in (
                    AclPermissionType.UNKNOWN, AclPermissionType.ANY):
                raise ZNodeDecodeError(what, data, "unknown operation or permission type")
            entries.add(AccessControlEntry(_str(acl, "principal", what, data),
                                           _str(acl, "host", what, data), operation, permission))
        return entries


ACL_CHANGE_SEQUENCE_NUMBER_PREFIX: Final = "acl_changes_"


class AclChangeNotificationZNode:
    """``/kafka-acl-changes``: announcements of changed LITERAL ACLs (LiteralAclChangeStore)."""

    PATH: Final = "/kafka-acl-changes"


class AclChangeNotificationSequenceZNode:
    """``/kafka-acl-changes/acl_changes_<seq>``, persistent sequential: the resource whose
    LITERAL ACLs changed, as text ``<RESOURCE_TYPE>:<name>`` (Kafka 2.8 writes the Java enum
    name, ``TOPIC:orders``; any spelling of the type is read)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT_SEQUENTIAL
    FORMAT: ClassVar = PayloadFormat.TEXT
    SCHEMA: ClassVar = "acl_change_notification_sequence.v0"
    CREATE_PATH: Final = f"{AclChangeNotificationZNode.PATH}/{ACL_CHANGE_SEQUENCE_NUMBER_PREFIX}"

    @staticmethod
    def encode(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type != PatternType.LITERAL:
            raise ValueError("Only literal resource patterns can be encoded")
        return f"{pattern.resource_type.name}:{pattern.name}".encode()

    @staticmethod
    def decode(data: bytes) -> ResourcePattern:
        text = _text(data, "ACL change notification")
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise ZNodeDecodeError("ACL change notification", data,
                                   "expected a string in format ResourceType:ResourceName")
        return ResourcePattern(ResourceType.from_string(resource_type), name,
                               PatternType.LITERAL)


class ExtendedAclChangeNotificationZNode:
    """``/kafka-acl-extended-changes``: announcements of changed PREFIXED ACLs
    (ExtendedAclChangeStore)."""

    PATH: Final = "/kafka-acl-extended-changes"


class ExtendedAclChangeNotificationSequenceZNode:
    """``/kafka-acl-extended-changes/acl_changes_<seq>``, persistent sequential: the resource
    pattern whose ACLs changed (JSON v1, Kafka's ExtendedAclChangeEvent)."""

    KIND: ClassVar = ZNodeKind.PERSISTENT_SEQUENTIAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "extended_acl_change_notification_sequence.v1"
    CREATE_PATH: Final = (
        f"{ExtendedAclChangeNotificationZNode.PATH}/{ACL_CHANGE_SEQUENCE_NUMBER_PREFIX}")

    @staticmethod
    def encode(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type == PatternType.LITERAL:
            raise ValueError("Literal pattern types are not supported")
        return _json_bytes({"version": 1, "resourceType": pattern.resource_type.name,
                            "name": pattern.name, "patternType": pattern.pattern_type.name})

    @staticmethod
    def decode(data: bytes) -> ResourcePattern:
        what = "extended ACL change notification"
        obj = _parse_object(data, what)
        if _int(obj, "version", what, data) > 1:
            raise ZNodeDecodeError(what, data, "unsupported version")
        return ResourcePattern(ResourceType.from_string(_str(obj, "resourceType", what, data)),
                               _str(obj, "name", what, data),
                               PatternType.from_string(_str(obj, "patternType", what, data)))


def acl_change_store(pattern_type: PatternType) -> tuple[str, str]:
    """(notification container, sequential create path) announcing ``pattern_type``'s changes."""
    if pattern_type == PatternType.LITERAL:
        return AclChangeNotificationZNode.PATH, AclChangeNotificationSequenceZNode.CREATE_PATH
    return (ExtendedAclChangeNotificationZNode.PATH,
            ExtendedAclChangeNotificationSequenceZNode.CREATE_PATH)


# -- /latest_producer_id_block -------------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of producer ids a broker allocated: ``block_start`` to ``block_end``
    inclusive."""

    broker_id: int
    block_start: int
    block_end: int


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last allocated producer id block (JSON v1)."""

    PATH: Final = "/latest_producer_id_block"
    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "producer_id_block.v1"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _json_bytes(
            {
                "version": 1,
                "broker": block.broker_id,
                "block_start": str(block.block_start),
                "block_end": str(block.block_end),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock | None:
        """None for the empty znode (no block allocated yet)."""
        if not data:
            return None
        what = "producer id block"
        obj = _parse_object(data, what)
        bounds = (_str(obj, "block_start", what, data), _str(obj, "block_end", what, data))
        try:
            block_start, block_end = (int(bound) for bound in bounds)
        except ValueError as exc:
            raise ZNodeDecodeError(what, data, "block bounds are not integers") from exc
        return ProducerIdBlock(_int(obj, "broker", what, data), block_start, block_end)


# -- /consumers ------------------------------------------------------------------------------------


class ConsumerOffsetZNode:
    """``/consumers/<g>/offsets/<t>/<p>``: a committed offset as decimal ASCII."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.TEXT
    SCHEMA: ClassVar = "consumer_offset.v0"

    @staticmethod
    def group_path(group: str) -> str:
        return f"{ConsumerPathZNode.PATH}/{encode_znode_name(group)}"

    @staticmethod
    def offsets_path(group: str) -> str:
        return f"{ConsumerOffsetZNode.group_path(group)}/offsets"

    @staticmethod
    def topic_path(group: str, topic: str) -> str:
        return f"{ConsumerOffsetZNode.offsets_path(group)}/{topic}"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOffsetZNode.topic_path(group, topic)}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        return _ascii_int(data, "committed offset")


@dataclass(frozen=True)
class OffsetCommitMetadata:
    """What an OffsetCommit carries besides the offset (kept next to the decimal value)."""

    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None


class ConsumerOffsetMetadataZNode:
    """``/consumers/<g>/offsets/<t>/<p>/metadata``: the commit's metadata string, leader
    epoch and timestamps (JSON v1), a child of the offset znode so that the offset's own
    value stays the decimal text legacy tools read. kafkaclone's own znode."""

    KIND: ClassVar = ZNodeKind.PERSISTENT
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "consumer_offset_metadata.v1"
    NAME: ClassVar = "metadata"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return (f"{ConsumerOffsetZNode.path(group, topic, partition)}/"
                f"{ConsumerOffsetMetadataZNode.NAME}")

    @staticmethod
    def encode(value: OffsetCommitMetadata) -> bytes:
        payload: dict[str, Any] = {
            "version": 1,
            "metadata": value.metadata,
            "leader_epoch": value.leader_epoch,
            "commit_timestamp": value.commit_timestamp_ms,
        }
        if value.expire_timestamp_ms is not None:
            payload["expire_timestamp"] = value.expire_timestamp_ms
        return _json_bytes(payload)

    @staticmethod
    def decode(data: bytes) -> OffsetCommitMetadata:
        what = "offset commit metadata"
        obj = _parse_object(data, what)
        if obj.get("version") != 1:
            raise ZNodeDecodeError(what, data, "unknown version")
        expire = obj.get("expire_timestamp")
        if expire is not None and (isinstance(expire, bool) or not isinstance(expire, int)):
            raise ZNodeDecodeError(what, data, "'expire_timestamp' is not an integer")
        return OffsetCommitMetadata(
            metadata=_str(obj, "metadata", what, data),
            leader_epoch=_int(obj, "leader_epoch", what, data),
            commit_timestamp_ms=_int(obj, "commit_timestamp", what, data),
            expire_timestamp_ms=expire,
        )


@dataclass(frozen=True)
class ConsumerRegistration:
    """What an old (ZooKeeper) consumer wrote under ``/consumers/<g>/ids/<id>``."""

    subscription: Mapping[str, int]
    """topic -> number of streams"""
    pattern: str = "static"
    timestamp_ms: int | None = None


class ConsumerIdsZNode:
    """``/consumers/<g>/ids/<member>``, ephemeral: a group member's registration (JSON v1),
    mirrored for monitoring tools that read old-consumer znodes."""

    KIND: ClassVar = ZNodeKind.EPHEMERAL
    FORMAT: ClassVar = PayloadFormat.JSON
    SCHEMA: ClassVar = "consumer_ids.v1"

    @staticmethod
    def ids_path(group: str) -> str:
        return f"{ConsumerOffsetZNode.group_path(group)}/ids"

    @staticmethod
    def path(group: str, member_id: str) -> str:
        return f"{ConsumerIdsZNode.ids_path(group)}/{encode_znode_name(member_id)}"

    @staticmethod
    def encode(registration: ConsumerRegistration) -> bytes:
        timestamp = (
            registration.timestamp_ms if registration.timestamp_ms is not None else _now_ms()
        )
        subscription = dict(registration.subscription)
        return _json_bytes(
            {
                "version": 1,
                "subscription": _ordered(scala_immutable_map_order(subscription), subscription),
                "pattern": registration.pattern,
                "timestamp": str(timestamp),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ConsumerRegistration:
        what = "consumer registration"
        obj = _parse_object(data, what)
        subscription = obj.get("subscription")
        if not isinstance(subscription, dict):
            raise ZNodeDecodeError(what, data, "'subscription' is not an object")
        timestamp = obj.get("timestamp")
        return ConsumerRegistration(
            subscription={str(k): _int(subscription, k, what, data) for k in subscription},
            pattern=_str(obj, "pattern", what, data),
            timestamp_ms=int(timestamp) if isinstance(timestamp, str) and timestamp else None,
        )


class ConsumerOwnersZNode:
    """``/consumers/<g>/owners/<t>/<p>``, ephemeral: the consumer (thread) id owning the
    partition, as plain text."""

    KIND: ClassVar = ZNodeKind.EPHEMERAL
    FORMAT: ClassVar = PayloadFormat.TEXT
    SCHEMA: ClassVar = "consumer_owners.v0"

    @staticmethod
    def topic_path(group: str, topic: str) -> str:
        return f"{ConsumerOffsetZNode.group_path(group)}/owners/{topic}"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{ConsumerOwnersZNode.topic_path(group, topic)}/{partition}"

    @staticmethod
    def encode(consumer_id: str) -> bytes:
        return consumer_id.encode("utf-8")

    @staticmethod
    def decode(data: bytes) -> str:
        return _text(data, "partition owner")


PERSISTENT_ZK_PATHS: Final = (
    ConsumerPathZNode.PATH,
    BrokerIdsZNode.PATH,
    TopicsZNode.PATH,
    ConfigEntityChangeNotificationZNode.PATH,
    DeleteTopicsZNode.PATH,
    BrokerSequenceIdZNode.PATH,
    IsrChangeNotificationZNode.PATH,
    ProducerIdBlockZNode.PATH,
    LogDirEventNotificationZNode.PATH,
    *(ConfigEntityTypeZNode.path(entity_type) for entity_type in ConfigEntityType.ALL),
)
"""The persistent paths a broker makes sure exist at startup (Kafka's ZkData.PersistentZkPaths)."""

ACL_ZK_PATHS: Final = (
    *(path for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED) for path in (
        acl_store_path(pattern_type),
        *(AclResourceTypeZNode.path(pattern_type, resource_type)
          for resource_type in ResourceType if resource_type.value > ResourceType.ANY.value))),
    AclChangeNotificationZNode.PATH,
    ExtendedAclChangeNotificationZNode.PATH,
)
"""The paths an AclAuthorizer makes sure exist when it starts (KafkaZkClient.createAclPaths)."""

PAYLOAD_ZNODES: Final = (
    ClusterIdZNode,
    BrokerIdZNode,
    BrokerSequenceIdZNode,
    TopicZNode,
    TopicPartitionStateZNode,
    ControllerZNode,
    ControllerEpochZNode,
    DeleteTopicsTopicZNode,
    ReassignPartitionsZNode,
    PreferredReplicaElectionZNode,
    IsrChangeNotificationSequenceZNode,
    LogDirEventNotificationSequenceZNode,
    ConfigEntityZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ProducerIdBlockZNode,
    ConsumerOffsetZNode,
    ConsumerOffsetMetadataZNode,
    ConsumerIdsZNode,
    ConsumerOwnersZNode,
    ResourceZNode,
    AclChangeNotificationSequenceZNode,
    ExtendedAclChangeNotificationSequenceZNode,
)
"""Every znode class with a payload, each with its ``KIND``, ``FORMAT`` and ``SCHEMA``."""


def payload_instance(znode: type, data: bytes) -> Any:
    """The JSON instance that ``znode``'s schema validates for ``data``: the parsed document
    for JSON payloads, the text itself for text and empty payloads."""
    payload_format = getattr(znode, "FORMAT", None)
    if payload_format is PayloadFormat.JSON:
        return json.loads(data.decode("utf-8"))
    if payload_format in (PayloadFormat.TEXT, PayloadFormat.EMPTY):
        return data.decode("utf-8")
    raise TypeError(f"{znode.__name__} has no payload")
