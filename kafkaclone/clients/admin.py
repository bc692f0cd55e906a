"""AdminClient: topic, config and consumer group administration over the Kafka protocol,
synchronous.

A subset of Kafka's Admin API: create, delete, list and describe topics; create
partitions; describe, alter and incrementally alter configs; describe the cluster; the API
versions of each broker; list offsets; create, describe and delete ACLs; list, describe
and delete consumer groups, list, alter and delete their committed offsets (sent to the
group's coordinator, found with FindCoordinator and found again on NOT_COORDINATOR). It
bootstraps from ``bootstrap_servers`` with Metadata, sends controller-only requests
(CreateTopics, DeleteTopics, CreatePartitions) to the controller named by Metadata
(refreshing and retrying on NOT_CONTROLLER), a broker's own config requests to that broker,
and everything else (ACL requests included) to any broker.

Per-topic / per-resource outcomes come back as ``KafkaError | None`` (None: success), so a
caller can report each one; a request that cannot be made at all raises.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafkaclone.clients.connection import (
    DEFAULT_REQUEST_TIMEOUT_MS,
    BrokerConnection,
    parse_bootstrap,
)
from kafkaclone.clients.security import PLAINTEXT, ClientSecurity
from kafkaclone.common.acl import (
    ANY_FILTER,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    LeaderNotAvailableError,
    NetworkExceptionError,
    NotControllerError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_code,
)
from kafkaclone.common.scram import salted_password
from kafkaclone.common.topic import is_internal
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)

DEFAULT_API_TIMEOUT_MS: Final = 60000
TOPIC: Final = 2
BROKER: Final = 4


def _error(code: int, message: str | None) -> KafkaError | None:
    if code == NONE:
        return None
    try:
        raise_for_code(code, message or None)
    except KafkaError as exc:
        return exc
    return None


@dataclass(frozen=True)
class Node:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    error: KafkaError | None = None


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass(frozen=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's PartitionReassignment): the replica set (the
    original and the target replicas), and which of them are being added and removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: list[Node]


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True)
class ConfigResource:
    type: int
    """TOPIC (2) or BROKER (4), Kafka's ConfigResource.Type ids."""
    name: str


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    is_default: bool
    is_sensitive: bool
    read_only: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    config_type: int = 0
    documentation: str | None = None


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    value: str | None
    op: int = 0
    """SET 0, DELETE 1, APPEND 2, SUBTRACT 3."""


SET: Final = 0
DELETE: Final = 1
APPEND: Final = 2
SUBTRACT: Final = 3


SCRAM_MECHANISM_NAMES: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""The SCRAM mechanisms by their wire number (Kafka's ScramMechanism)."""


@dataclass(frozen=True)
class ReplicaInfo:
    """A log in a log directory (Kafka's admin ReplicaInfo)."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """A broker's log directory (Kafka's admin LogDirDescription): its error (an offline
    directory: KafkaStorageError) and its logs by (topic, partition)."""

    error: KafkaError | None
    replica_infos: dict[tuple[str, int], ReplicaInfo]


class AdminClient:
    def __init__(self, bootstrap_servers: str | Sequence[str], *,
                 client_id: str = "kafkaclone-admin",
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connection: BrokerConnection | None = None
        self._nodes: dict[int, Node] = {}
        self._controller_id: int | None = None
        self._cluster_id: str | None = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap_connection is not None:
            self._bootstrap_connection.close()
            self._bootstrap_connection = None

    # --- connections and metadata ----------------------------------------------------------

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return BrokerConnection(host, port, node_id=node_id, client_id=self.client_id,
                                request_timeout_ms=self.request_timeout_ms,
                                security=self.security)

    def _any_connection(self) -> BrokerConnection:
        for conn in self._connections.values():
            if conn.connected:
                return conn
        if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
            return self._bootstrap_connection
        failures = []
        for node in self._nodes.values():
            try:
                return self._connection(node.id)
            except NetworkExceptionError as exc:
                failures.append(str(exc))
        for host, port in self.bootstrap:
            conn = self._new_connection(host, port, None)
            try:
                conn.connect()
            except NetworkExceptionError as exc:
                failures.append(str(exc))
                continue
            self._bootstrap_connection = conn
            return conn
        raise NetworkExceptionError("No broker is reachable: " + "; ".join(failures))

    def _connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            if node_id not in self._nodes:
                self.refresh_metadata()
            node = self._nodes.get(node_id)
            if node is None:
                raise NetworkExceptionError(f"Broker {node_id} is not in the cluster metadata")
            conn = self._new_connection(node.host, node.port, node_id)
            self._connections[node_id] = conn
        conn.connect()
        return conn

    def _metadata(self, topics: list[str] | None) -> Any:
        """Metadata from any reachable broker. A connection found closed when the request is
        sent (its broker stopped since it was last used) is dropped and the request goes to
        the next broker, as Kafka's admin client retries on another node after a
        disconnection; Metadata changes nothing, so sending it again is safe."""
        request_cls = APIS[ApiKey.METADATA].request
        topic_cls = request_cls.structs["MetadataRequestTopic"]
        attempts = len(self._connections) + len(self.bootstrap) + 1
        for attempt in range(attempts):
            conn = self._any_connection()
            body = request_cls(
                topics=None if topics is None else [topic_cls(name=t) for t in topics],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)
            try:
                version = conn.version_for(ApiKey.METADATA)
                if version == 0 and topics is None:
                    body.topics = []
                _, response = conn.request(ApiKey.METADATA, body, version)
                break
            except NetworkExceptionError:
                if attempt == attempts - 1:
                    raise
        self._nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack)
                       for b in response.brokers}
        controller_id = getattr(response, "controller_id", -1)
        self._controller_id = None if controller_id is None or controller_id < 0 else controller_id
        self._cluster_id = getattr(response, "cluster_id", None)
        for node_id, existing in list(self._connections.items()):
            node = self._nodes.get(node_id)
            if node is None or (node.host, node.port) != (existing.host, existing.port):
                existing.close()
                del self._connections[node_id]
        return response

    def refresh_metadata(self) -> None:
        self._metadata([])

    def _controller_connection(self) -> BrokerConnection:
        self.refresh_metadata()
        if self._controller_id is None:
            raise NotControllerError("The cluster has no controller now")
        return self._connection(self._controller_id)

    def _to_controller(self, key: ApiKey, body: Any, results_of: Any,
                       timeout_ms: int) -> Any:
        """Send to the controller. When every entry answers NOT_CONTROLLER, or the
        controller cannot be reached, refresh the metadata and retry until the API timeout
        (``default_api_timeout_ms``), as Kafka's admin client does."""
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000.0
        while True:
            try:
                _, response = self._controller_connection().request(
                    key, body, broker_wait_ms=timeout_ms)
            except (NetworkExceptionError, NotControllerError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            codes = [r.error_code for r in results_of(response)]
            if not codes or any(c != NotControllerError.code for c in codes) or \
                    time.monotonic() > deadline:
                return response
            time.sleep(0.1)

    # --- SCRAM credentials (KIP-554) -------------------------------------------------------

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None
                                        ) -> dict[str, dict[str, int]]:
        """Each user's SCRAM mechanisms and their iteration counts (every user with
        credentials when ``users`` is None); a per-user error raises."""
        request_cls = APIS[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS].request
        body = request_cls(users=None if users is None else [
            request_cls.structs["UserName"](name=user) for user in users])
        _, response = self._any_connection().request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                                      body)
        raise_for_code(response.error_code, response.error_message)
        described: dict[str, dict[str, int]] = {}
        for result in response.results:
            raise_for_code(result.error_code, result.error_message)
            described[result.user] = {SCRAM_MECHANISM_NAMES.get(info.mechanism, "UNKNOWN"):
                                      info.iterations for info in result.credential_infos}
        return described

    def describe_client_quotas(
            self, components: Sequence[tuple[str, int, str | None]] = (), strict: bool = False
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """DescribeClientQuotas: the quotas of the entities the filter selects, each entity
        as {entity type (``user``, ``client-id``): name, None for the default}. A
        component is (entity type, match type: 0 exact / 1 default / 2 any, name for 0)."""
        request_cls = APIS[ApiKey.DESCRIBE_CLIENT_QUOTAS].request
        component_cls = request_cls.structs["ComponentData"]
        body = request_cls(components=[
            component_cls(entity_type=entity_type, match_type=match_type, match=match)
            for entity_type, match_type, match in components], strict=strict)
        _, response = self._any_connection().request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
        raise_for_code(response.error_code, response.error_message)
        return [({part.entity_type: part.entity_name for part in entry.entity},
                 {value.key: value.value for value in entry.values})
                for entry in response.entries or ()]

    def alter_client_quotas(
            self, entries: Sequence[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
            validate_only: bool = False) -> list[KafkaError | None]:
        """AlterClientQuotas: for each (entity, {quota key: value, None to remove}) its
        outcome, in order."""
        request_cls = APIS[ApiKey.ALTER_CLIENT_QUOTAS].request
        entry_cls = request_cls.structs["EntryData"]
        entity_cls = request_cls.structs["EntityData"]
        op_cls = request_cls.structs["OpData"]
        body = request_cls(entries=[
            entry_cls(entity=[entity_cls(entity_type=entity_type, entity_name=name)
                              for entity_type, name in entity.items()],
                      ops=[op_cls(key=key, value=0.0 if value is None else float(value),
                                  remove=value is None) for key, value in ops.items()])
            for entity, ops in entries], validate_only=validate_only)
        _, response = self._any_connection().request(ApiKey.ALTER_CLIENT_QUOTAS, body)
        return [None if r.error_code == 0 else error_for_code(r.error_code)(r.error_message or "")
                for r in response.entries]

    def alter_user_scram_credentials(
            self, upsertions: Sequence[tuple[str, str, int, str]] = (),
            deletions: Sequence[tuple[str, str]] = ()) -> dict[str, KafkaError | None]:
        """Upsert ``(user, mechanism, iterations, password)`` (the password is salted here
        and never sent) and delete ``(user, mechanism)``: each user's outcome."""
        request_cls = APIS[ApiKey.ALTER_USER_SCRAM_CREDENTIALS].request
        numbers = {name: number for number, name in SCRAM_MECHANISM_NAMES.items()}
        upsert_cls = request_cls.structs["ScramCredentialUpsertion"]
        delete_cls = request_cls.structs["ScramCredentialDeletion"]
        upserts = []
        for user, mechanism, iterations, password in upsertions:
            salt = secrets.token_bytes(32)
            salted = salted_password(mechanism, password, salt, iterations) \
                if mechanism in numbers else b""
            upserts.append(upsert_cls(name=user, mechanism=numbers.get(mechanism, 0),
                                      iterations=iterations, salt=salt, salted_password=salted))
        body = request_cls(
            deletions=[delete_cls(name=user, mechanism=numbers.get(mechanism, 0))
                       for user, mechanism in deletions],
            upsertions=upserts)
        _, response = self._any_connection().request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
        return {r.user: None if r.error_code == 0 else
                error_for_code(r.error_code)(r.error_message or "") for r in response.results}

    # --- cluster ----------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        conn = self._any_connection()
        if ApiKey.DESCRIBE_CLUSTER in conn.api_versions:
            request_cls = APIS[ApiKey.DESCRIBE_CLUSTER].request
            _, response = conn.request(ApiKey.DESCRIBE_CLUSTER, request_cls(
                include_cluster_authorized_operations=False))
            raise_for_code(response.error_code, response.error_message)
            nodes = [Node(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
            by_id = {n.id: n for n in nodes}
            return ClusterDescription(response.cluster_id, by_id.get(response.controller_id),
                                      nodes)
        self.refresh_metadata()
        nodes = sorted(self._nodes.values(), key=lambda n: n.id)
        controller = None if self._controller_id is None else self._nodes.get(
            self._controller_id)
        return ClusterDescription(self._cluster_id, controller, nodes)

    def api_versions(self) -> dict[Node, dict[int, tuple[int, int]]]:
        """Each broker's supported version range per API key."""
        self.refresh_metadata()
        result: dict[Node, dict[int, tuple[int, int]]] = {}
        for node in sorted(self._nodes.values(), key=lambda n: n.id):
            result[node] = dict(self._connection(node.id).api_versions)
        return result

    # --- topics -------------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> list[str]:
        response = self._metadata(None)
        return sorted(t.name for t in response.topics
                      if t.error_code == NONE and (include_internal or not is_internal(t.name)))

    def describe_topics(self, names: Iterable[str] | None = None
                        ) -> dict[str, TopicDescription | KafkaError]:
        """Each topic's description, or the error Metadata answered for it."""
        response = self._metadata(None if names is None else list(names))
        result: dict[str, TopicDescription | KafkaError] = {}
        for t in response.topics:
            error = _error(t.error_code, None)
            if error is not None:
                result[t.name] = error
                continue
            result[t.name] = TopicDescription(
                name=t.name, topic_id=getattr(t, "topic_id", uuid.UUID(int=0)),
                is_internal=bool(getattr(t, "is_internal", is_internal(t.name))),
                partitions=sorted((PartitionInfo(
                    partition=p.partition_index, leader=p.leader_id,
                    replicas=list(p.replica_nodes), isr=list(p.isr_nodes),
                    offline_replicas=list(getattr(p, "offline_replicas", []) or []),
                    error=_error(p.error_code, None)) for p in t.partitions),
                    key=lambda p: p.partition))
        return result

    def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False,
                      timeout_ms: int | None = None) -> dict[str, KafkaError | None]:
        request_cls = APIS[ApiKey.CREATE_TOPICS].request
        s = request_cls.structs
        topics = []
        for t in new_topics:
            assignment = t.replica_assignment
            topics.append(s["CreatableTopic"](
                name=t.name,
                num_partitions=-1 if assignment else t.num_partitions,
                replication_factor=-1 if assignment else t.replication_factor,
                assignments=[s["CreatableReplicaAssignment"](partition_index=p,
                                                             broker_ids=list(b))
                             for p, b in sorted((assignment or {}).items())],
                configs=[s["CreateableTopicConfig"](name=k, value=v)
                         for k, v in t.configs.items()]))
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        body = request_cls(topics=topics, timeout_ms=timeout, validate_only=validate_only)
        response = self._to_controller(ApiKey.CREATE_TOPICS, body, lambda r: r.topics, timeout)
        return {r.name: _error(r.error_code, getattr(r, "error_message", None))
                for r in response.topics}

    def delete_topics(self, names: Sequence[str], *, timeout_ms: int | None = None
                      ) -> dict[str, KafkaError | None]:
        request_cls = APIS[ApiKey.DELETE_TOPICS].request
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        state = request_cls.structs["DeleteTopicState"]
        body = request_cls(topic_names=list(names),
                           topics=[state(name=n, topic_id=uuid.UUID(int=0)) for n in names],
                           timeout_ms=timeout)
        response = self._to_controller(ApiKey.DELETE_TOPICS, body, lambda r: r.responses,
                                       timeout)
        return {r.name: _error(r.error_code, getattr(r, "error_message", None))
                for r in response.responses}

    def create_partitions(self, new_partitions: Mapping[str, NewPartitions], *,
                          validate_only: bool = False, timeout_ms: int | None = None
                          ) -> dict[str, KafkaError | None]:
        request_cls = APIS[ApiKey.CREATE_PARTITIONS].request
        s = request_cls.structs
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        body = request_cls(topics=[
            s["CreatePartitionsTopic"](
                name=name, count=p.total_count,
                assignments=None if p.new_assignments is None else [
                    s["CreatePartitionsAssignment"](broker_ids=list(a))
                    for a in p.new_assignments])
            for name, p in new_partitions.items()], timeout_ms=timeout,
            validate_only=validate_only)
        response = self._to_controller(ApiKey.CREATE_PARTITIONS, body, lambda r: r.results,
                                       timeout)
        return {r.name: _error(r.error_code, r.error_message) for r in response.results}

    # --- configs ------------------------------------------------------------------------------

    def _config_connection(self, resource: ConfigResource) -> BrokerConnection:
        if resource.type == BROKER and resource.name:
            return self._connection(int(resource.name))
        return self._any_connection()

    def _grouped(self, resources: Iterable[ConfigResource]
                 ) -> list[tuple[BrokerConnection, list[ConfigResource]]]:
        groups: dict[int, tuple[BrokerConnection, list[ConfigResource]]] = {}
        for resource in resources:
            conn = self._config_connection(resource)
            groups.setdefault(id(conn), (conn, []))[1].append(resource)
        return list(groups.values())

    def describe_configs(self, resources: Sequence[ConfigResource], *,
                         include_synonyms: bool = False, include_documentation: bool = False,
                         ) -> dict[ConfigResource, dict[str, ConfigEntry] | KafkaError]:
        request_cls = APIS[ApiKey.DESCRIBE_CONFIGS].request
        resource_cls = request_cls.structs["DescribeConfigsResource"]
        result: dict[ConfigResource, dict[str, ConfigEntry] | KafkaError] = {}
        for conn, group in self._grouped(resources):
            body = request_cls(resources=[resource_cls(resource_type=r.type, resource_name=r.name,
                                                       configuration_keys=None) for r in group],
                               include_synonyms=include_synonyms,
                               include_documentation=include_documentation)
            version, response = conn.request(ApiKey.DESCRIBE_CONFIGS, body)
            for r in response.results:
                resource = ConfigResource(r.resource_type, r.resource_name)
                error = _error(r.error_code, r.error_message)
                if error is not None:
                    result[resource] = error
                    continue
                entries = {}
                for c in r.configs:
                    source = c.config_source if version >= 1 else (5 if c.is_default else 0)
                    entries[c.name] = ConfigEntry(
                        name=c.name, value=c.value, source=source, is_default=source == 5,
                        is_sensitive=c.is_sensitive, read_only=c.read_only,
                        synonyms=[ConfigSynonym(s.name, s.value, s.source)
                                  for s in (c.synonyms if version >= 1 else [])],
                        config_type=c.config_type if version >= 3 else 0,
                        documentation=c.documentation if version >= 3 else None)
                result[resource] = entries
        return result

    def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                      validate_only: bool = False) -> dict[ConfigResource, KafkaError | None]:
        """Replace each resource's dynamic configs with the given complete set."""
        request_cls = APIS[ApiKey.ALTER_CONFIGS].request
        s = request_cls.structs
        result: dict[ConfigResource, KafkaError | None] = {}
        for conn, group in self._grouped(configs):
            body = request_cls(resources=[s["AlterConfigsResource"](
                resource_type=r.type, resource_name=r.name,
                configs=[s["AlterableConfig"](name=k, value=v) for k, v in configs[r].items()])
                for r in group], validate_only=validate_only)
            _, response = conn.request(ApiKey.ALTER_CONFIGS, body)
            for r in response.responses:
                result[ConfigResource(r.resource_type, r.resource_name)] = _error(
                    r.error_code, r.error_message)
        return result

    def incremental_alter_configs(self, configs: Mapping[ConfigResource, Sequence[AlterConfigOp]],
                                  *, validate_only: bool = False
                                  ) -> dict[ConfigResource, KafkaError | None]:
        request_cls = APIS[ApiKey.INCREMENTAL_ALTER_CONFIGS].request
        s = request_cls.structs
        result: dict[ConfigResource, KafkaError | None] = {}
        for conn, group in self._grouped(configs):
            body = request_cls(resources=[s["AlterConfigsResource"](
                resource_type=r.type, resource_name=r.name,
                configs=[s["AlterableConfig"](name=op.name, config_operation=op.op,
                                              value=op.value) for op in configs[r]])
                for r in group], validate_only=validate_only)
            _, response = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
            for r in response.responses:
                result[ConfigResource(r.resource_type, r.resource_name)] = _error(
                    r.error_code, r.error_message)
        return result

    # --- log directories ----------------------------------------------------------------------

    def describe_log_dirs(self, broker_ids: Iterable[int]
                          ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log directories with every log in them (Kafka's
        ``describeLogDirs``, asking for all topics)."""
        request_cls = APIS[ApiKey.DESCRIBE_LOG_DIRS].request
        result: dict[int, dict[str, LogDirDescription]] = {}
        for broker_id in broker_ids:
            _, response = self._connection(broker_id).request(ApiKey.DESCRIBE_LOG_DIRS,
                                                              request_cls(topics=None))
            dirs: dict[str, LogDirDescription] = {}
            for r in response.results:
                replicas = {(t.name, p.partition_index): ReplicaInfo(
                    p.partition_size, p.offset_lag, p.is_future_key)
                    for t in r.topics for p in t.partitions}
                dirs[r.log_dir] = LogDirDescription(_error(r.error_code, None), replicas)
            result[broker_id] = dirs
        return result

    def alter_replica_log_dirs(self, assignments: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], KafkaError | None]:
        """Move each (topic, partition, broker)'s replica to the log directory given
        (Kafka's ``alterReplicaLogDirs``): None where the broker accepted, else its error."""
        request_cls = APIS[ApiKey.ALTER_REPLICA_LOG_DIRS].request
        s = request_cls.structs
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (topic, partition, broker_id), path in assignments.items():
            by_broker.setdefault(broker_id, {}).setdefault(path, {}).setdefault(
                topic, []).append(partition)
        result: dict[tuple[str, int, int], KafkaError | None] = {}
        for broker_id, by_path in sorted(by_broker.items()):
            body = request_cls(dirs=[s["AlterReplicaLogDir"](path=path, topics=[
                s["AlterReplicaLogDirTopic"](name=topic, partitions=partitions)
                for topic, partitions in topics.items()]) for path, topics in by_path.items()])
            _, response = self._connection(broker_id).request(ApiKey.ALTER_REPLICA_LOG_DIRS,
                                                              body)
            for t in response.results:
                for p in t.partitions:
                    result[(t.topic_name, p.partition_index, broker_id)] = _error(
                        p.error_code, None)
        return result

    # --- records ------------------------------------------------------------------------------

    def delete_records(self, offsets: Mapping[tuple[str, int], int], *,
                       timeout_ms: int | None = None
                       ) -> dict[tuple[str, int], int | KafkaError]:
        """Delete the records before each (topic, partition)'s offset (-1: the high
        watermark), as Kafka's ``deleteRecords``: the partition's new low watermark, or
        the error its leader answered."""
        result: dict[tuple[str, int], int | KafkaError] = {}
        response = self._metadata(sorted({topic for topic, _ in offsets}))
        leaders: dict[tuple[str, int], int] = {}
        for t in response.topics:
            for p in t.partitions:
                leaders[(t.name, p.partition_index)] = p.leader_id
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for key in offsets:
            leader = leaders.get(key, -1)
            if key not in leaders:
                result[key] = UnknownTopicOrPartitionError(
                    f"Partition {key[0]}-{key[1]} does not exist")
            elif leader < 0:
                result[key] = LeaderNotAvailableError(f"{key[0]}-{key[1]} has no leader")
            else:
                by_leader.setdefault(leader, []).append(key)
        request_cls = APIS[ApiKey.DELETE_RECORDS].request
        s = request_cls.structs
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        for leader, keys in by_leader.items():
            by_topic: dict[str, list[Any]] = {}
            for topic, partition in keys:
                by_topic.setdefault(topic, []).append(s["DeleteRecordsPartition"](
                    partition_index=partition, offset=offsets[(topic, partition)]))
            body = request_cls(topics=[s["DeleteRecordsTopic"](name=t, partitions=p)
                                       for t, p in by_topic.items()], timeout_ms=timeout)
            _, answer = self._connection(leader).request(ApiKey.DELETE_RECORDS, body,
                                                         broker_wait_ms=timeout)
            for t in answer.topics:
                for p in t.partitions:
                    error = _error(p.error_code, None)
                    result[(t.name, p.partition_index)] = \
                        p.low_watermark if error is None else error
        return result

    # --- consumer groups ----------------------------------------------------------------------

    def find_coordinator(self, group_id: str) -> Node:
        """The broker coordinating ``group_id`` (FindCoordinator), retried while the
        coordinator is not available or loading, up to ``default_api_timeout_ms``."""
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000.0
        request_cls = APIS[ApiKey.FIND_COORDINATOR].request
        while True:
            _, response = self._any_connection().request(
                ApiKey.FIND_COORDINATOR, request_cls(key=group_id, key_type=0))
            error = _error(response.error_code, getattr(response, "error_message", None))
            if error is None:
                node = Node(response.node_id, response.host, response.port, None)
                self._nodes.setdefault(node.id, node)
                return node
            if not error.retriable or time.monotonic() > deadline:
                raise error
            time.sleep(0.2)

    def _to_coordinator(self, group_id: str, key: ApiKey, body: Any,
                        error_of: Any) -> Any:
        """Send to the group's coordinator; find it again (until the API timeout) when the
        answer is NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS."""
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000.0
        while True:
            node = self.find_coordinator(group_id)
            try:
                _, response = self._connection(node.id).request(key, body)
            except NetworkExceptionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            if error_of(response) in COORDINATOR_RETRY_CODES and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            return response

    def list_consumer_groups(self, states: Iterable[str] = ()) -> list[ConsumerGroupListing]:
        """Every group of every broker (ListGroups to each), sorted by id; ``states``
        filters by state (ListGroups v4)."""
        self.refresh_metadata()
        request_cls = APIS[ApiKey.LIST_GROUPS].request
        wanted = list(states)
        listings: dict[str, ConsumerGroupListing] = {}
        deadline = time.monotonic() + self.default_api_timeout_ms / 1000.0
        for node_id in sorted(self._nodes):
            connection = self._connection(node_id)
            version = connection.version_for(ApiKey.LIST_GROUPS)
            if wanted and version < 4:
                raise UnsupportedVersionError("Listing groups by state needs ListGroups v4")
            while True:
                _, response = connection.request(ApiKey.LIST_GROUPS,
                                                 request_cls(states_filter=wanted), version)
                if response.error_code not in COORDINATOR_RETRY_CODES or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.2)  # a broker still loading its groups: ask again
            raise_for_code(response.error_code)
            for g in response.groups:
                listings[g.group_id] = ConsumerGroupListing(
                    g.group_id, g.protocol_type == "", getattr(g, "group_state", None) or None)
        return [listings[g] for g in sorted(listings)]

    def describe_consumer_groups(self, group_ids: Iterable[str]
                                 ) -> dict[str, ConsumerGroupDescription | KafkaError]:
        from kafkaclone.protocol.messages.consumer_protocol import decode_assignment

        request_cls = APIS[ApiKey.DESCRIBE_GROUPS].request
        result: dict[str, ConsumerGroupDescription | KafkaError] = {}
        for group_id in group_ids:
            try:
                coordinator = self.find_coordinator(group_id)
                response = self._to_coordinator(
                    group_id, ApiKey.DESCRIBE_GROUPS,
                    request_cls(groups=[group_id], include_authorized_operations=False),
                    lambda r: r.groups[0].error_code)
            except KafkaError as exc:
                result[group_id] = exc
                continue
            described = response.groups[0]
            error = _error(described.error_code, None)
            if error is not None:
                result[group_id] = error
                continue
            members = []
            for m in described.members:
                partitions: list[tuple[str, int]] = []
                if described.protocol_type == "consumer" and m.member_assignment:
                    try:
                        _, decoded = decode_assignment(m.member_assignment)
                        partitions = [(a.topic, p) for a in decoded.assigned_partitions
                                      for p in a.partitions]
                    except KafkaError:
                        partitions = []
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                                 m.client_host, partitions))
            result[group_id] = ConsumerGroupDescription(
                group_id, described.protocol_type == "", members, described.protocol_data,
                described.group_state, coordinator)
        return result

    def list_consumer_group_offsets(self, group_id: str,
                                    partitions: Iterable[tuple[str, int]] | None = None
                                    ) -> dict[tuple[str, int], CommittedOffset]:
        """The group's committed offsets (all of them when ``partitions`` is None);
        partitions without a committed offset are left out."""
        request_cls = APIS[ApiKey.OFFSET_FETCH].request
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [request_cls.structs["OffsetFetchRequestTopic"](name=t, partition_indexes=p)
                      for t, p in by_topic.items()]
        response = self._to_coordinator(
            group_id, ApiKey.OFFSET_FETCH,
            request_cls(group_id=group_id, topics=topics, require_stable=False),
            lambda r: r.error_code)
        raise_for_code(response.error_code)
        result: dict[tuple[str, int], CommittedOffset] = {}
        for t in response.topics:
            for p in t.partitions:
                raise_for_code(p.error_code)
                if p.committed_offset >= 0:
                    result[(t.name, p.partition_index)] = CommittedOffset(
                        p.committed_offset, p.metadata or "", p.committed_leader_epoch)
        return result

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]
                                     ) -> dict[tuple[str, int], KafkaError | None]:
        """Commit ``offsets`` for the group as an admin (no generation, no member): only an
        inactive group accepts it (UNKNOWN_MEMBER_ID otherwise)."""
        request_cls = APIS[ApiKey.OFFSET_COMMIT].request
        s = request_cls.structs
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(s["OffsetCommitRequestPartition"](
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
        body = request_cls(group_id=group_id, generation_id=-1, member_id="",
                           group_instance_id=None, retention_time_ms=-1,
                           topics=[s["OffsetCommitRequestTopic"](name=t, partitions=p)
                                   for t, p in by_topic.items()])
        response = self._to_coordinator(
            group_id, ApiKey.OFFSET_COMMIT, body,
            lambda r: next((p.error_code for t in r.topics for p in t.partitions), NONE))
        return {(t.name, p.partition_index): _error(p.error_code, None)
                for t in response.topics for p in t.partitions}

    def delete_consumer_groups(self, group_ids: Sequence[str]) -> dict[str, KafkaError | None]:
        request_cls = APIS[ApiKey.DELETE_GROUPS].request
        result: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            try:
                response = self._to_coordinator(group_id, ApiKey.DELETE_GROUPS,
                                                request_cls(groups_names=[group_id]),
                                                lambda r: r.results[0].error_code)
                result[group_id] = _error(response.results[0].error_code, None)
            except KafkaError as exc:
                result[group_id] = exc
        return result

    def delete_consumer_group_offsets(self, group_id: str,
                                      partitions: Iterable[tuple[str, int]]
                                      ) -> tuple[KafkaError | None,
                                                 dict[tuple[str, int], KafkaError | None]]:
        """(the group-level error, each partition's outcome) of an OffsetDelete."""
        request_cls = APIS[ApiKey.OFFSET_DELETE].request
        s = request_cls.structs
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(
                s["OffsetDeleteRequestPartition"](partition_index=partition))
        response = self._to_coordinator(
            group_id, ApiKey.OFFSET_DELETE,
            request_cls(group_id=group_id, topics=[
                s["OffsetDeleteRequestTopic"](name=t, partitions=p)
                for t, p in by_topic.items()]),
            lambda r: r.error_code)
        return _error(response.error_code, None), {
            (t.name, p.partition_index): _error(p.error_code, None)
            for t in response.topics for p in t.partitions}

    # --- ACLs -------------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Add the ACLs (CreateAcls, to any broker): per binding, None or its error."""
        creation = CreateAclsRequest.AclCreation
        body = CreateAclsRequest(creations=[
            creation(resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                     resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
                     host=b.entry.host, operation=b.entry.operation,
                     permission_type=b.entry.permission_type)
            for b in bindings])
        _, response = self._any_connection().request(ApiKey.CREATE_ACLS, body)
        return [_error(r.error_code, r.error_message) for r in response.results]

    def describe_acls(self, binding_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The ACLs the filter matches (DescribeAcls); raises the broker's error
        (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED, ...)."""
        patterns, entries = binding_filter.pattern_filter, binding_filter.entry_filter
        body = DescribeAclsRequest(
            resource_type_filter=patterns.resource_type, resource_name_filter=patterns.name,
            pattern_type_filter=patterns.pattern_type, principal_filter=entries.principal,
            host_filter=entries.host, operation=entries.operation,
            permission_type=entries.permission_type)
        _, response = self._any_connection().request(ApiKey.DESCRIBE_ACLS, body)
        raise_for_code(response.error_code, response.error_message)
        return [AclBinding(ResourcePattern(ResourceType.from_code(r.resource_type),
                                           r.resource_name,
                                           PatternType.from_code(r.pattern_type)),
                           AccessControlEntry(a.principal, a.host,
                                              AclOperation.from_code(a.operation),
                                              AclPermissionType.from_code(a.permission_type)))
                for r in response.resources for a in r.acls]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeletion]:
        """Delete the ACLs each filter matches (DeleteAcls): per filter, its error or the
        ACLs it deleted, each with its own error."""
        wire = DeleteAclsRequest.DeleteAclsFilter
        body = DeleteAclsRequest(filters=[
            wire(resource_type_filter=f.pattern_filter.resource_type,
                 resource_name_filter=f.pattern_filter.name,
                 pattern_type_filter=f.pattern_filter.pattern_type,
                 principal_filter=f.entry_filter.principal, host_filter=f.entry_filter.host,
                 operation=f.entry_filter.operation,
                 permission_type=f.entry_filter.permission_type)
            for f in filters])
        _, response = self._any_connection().request(ApiKey.DELETE_ACLS, body)
        return [AclDeletion(_error(r.error_code, r.error_message), [
            (AclBinding(ResourcePattern(ResourceType.from_code(m.resource_type),
                                        m.resource_name, PatternType.from_code(m.pattern_type)),
                        AccessControlEntry(m.principal, m.host,
                                           AclOperation.from_code(m.operation),
                                           AclPermissionType.from_code(m.permission_type))),
             _error(m.error_code, m.error_message))
            for m in r.matching_acls]) for r in response.filter_results]

    def list_offsets(self, specs: Mapping[tuple[str, int], int]
                     ) -> dict[tuple[str, int], tuple[int, int] | KafkaError]:
        """ListOffsets to each partition's leader: per partition (offset, timestamp) for the
        spec -2 (earliest), -1 (latest) or a timestamp in ms (the first offset at or after
        it; offset -1 when there is none)."""
        response = self._metadata(sorted({topic for topic, _ in specs}))
        leaders = {(t.name, p.partition_index): p.leader_id
                   for t in response.topics for p in t.partitions}
        result: dict[tuple[str, int], tuple[int, int] | KafkaError] = {}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for key in specs:
            leader = leaders.get(key)
            if leader is None:
                result[key] = UnknownTopicOrPartitionError(
                    f"Partition {key[0]}-{key[1]} does not exist")
            elif leader < 0:
                result[key] = LeaderNotAvailableError(f"{key[0]}-{key[1]} has no leader")
            else:
                by_leader.setdefault(leader, []).append(key)
        request_cls = APIS[ApiKey.LIST_OFFSETS].request
        s = request_cls.structs
        for leader, keys in by_leader.items():
            by_topic: dict[str, list[Any]] = {}
            for topic, partition in keys:
                by_topic.setdefault(topic, []).append(s["ListOffsetsPartition"](
                    partition_index=partition, current_leader_epoch=-1,
                    timestamp=specs[(topic, partition)], max_num_offsets=1))
            connection = self._connection(leader)
            body = request_cls(replica_id=-1, isolation_level=0, topics=[
                s["ListOffsetsTopic"](name=t, partitions=p) for t, p in by_topic.items()])
            _, answer = connection.request(ApiKey.LIST_OFFSETS, body)
            for t in answer.topics:
                for p in t.partitions:
                    error = _error(p.error_code, None)
                    result[(t.name, p.partition_index)] = (
                        (p.offset, p.timestamp) if error is None else error)
        return result

    # --- partition reassignment (KIP-455) -----------------------------------------------------

    def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None], *,
        timeout_ms: int | None = None,
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Start (target replicas) or cancel (None) each partition's reassignment; each
        partition's error, None when accepted. A top-level error (not authorized) raises."""
        request_cls = APIS[ApiKey.ALTER_PARTITION_REASSIGNMENTS].request
        s = request_cls.structs
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), replicas in sorted(reassignments.items()):
            by_topic.setdefault(topic, []).append(s["ReassignablePartition"](
                partition_index=partition,
                replicas=None if replicas is None else list(replicas)))
        body = request_cls(timeout_ms=timeout, topics=[
            s["ReassignableTopic"](name=topic, partitions=partitions)
            for topic, partitions in by_topic.items()])
        response = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body,
                                       lambda r: [r], timeout)
        raise_for_code(response.error_code, response.error_message)
        return {(t.name, p.partition_index): _error(p.error_code, p.error_message)
                for t in response.responses for p in t.partitions}

    def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *,
        timeout_ms: int | None = None,
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """The reassignments in progress (of ``partitions``, or all); an error raises."""
        request_cls = APIS[ApiKey.LIST_PARTITION_REASSIGNMENTS].request
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(set(partitions)):
                by_topic.setdefault(topic, []).append(partition)
            topics = [request_cls.structs["ListPartitionReassignmentsTopics"](
                name=topic, partition_indexes=indexes) for topic, indexes in by_topic.items()]
        body = request_cls(timeout_ms=timeout, topics=topics)
        response = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, body,
                                       lambda r: [r], timeout)
        raise_for_code(response.error_code, response.error_message)
        return {(t.name, p.partition_index): PartitionReassignment(
            list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in response.topics for p in t.partitions}


COORDINATOR_RETRY_CODES: Final = frozenset({14, 15, 16})
"""COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR."""


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool
    state: str | None


@dataclass(frozen=True)
class MemberDescription:
    consumer_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str
    state: str
    coordinator: Node


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str
    leader_epoch: int


@dataclass(frozen=True)
class AclDeletion:
    """One DeleteAcls filter's outcome: its error, or the ACLs it deleted with theirs."""

    error: KafkaError | None
    deleted: list[tuple[AclBinding, KafkaError | None]]
