"""``connect-distributed.sh worker.properties``: Kafka's ``ConnectDistributed`` and
``DistributedHerder``, in small.

Workers with one ``group.id`` form a group through the broker's group protocol
(:mod:`kafkaclone.connect.group_member`) with Kafka's Connect subprotocols
(:mod:`kafkaclone.connect.connect_protocol`): ``connect.protocol=sessioned`` (the default)
or ``compatible`` rebalance incrementally and cooperatively (a worker keeps running what
is not revoked; the leader's :class:`~kafkaclone.connect.assignor.IncrementalCooperativeAssignor`
holds a departed worker's connectors and tasks for ``scheduled.rebalance.max.delay.ms``),
``eager`` stops everything at each rebalance. Connectors and tasks are assigned
separately, as Kafka's.

Connector configs live in ``config.storage.topic`` (1 partition), source offsets in
``offset.storage.topic`` and statuses in ``status.storage.topic``, all compacted and created
with Kafka's defaults (partitions 1 / 25 / 5, replication factor 3, lowered by the
``*.replication.factor`` keys). Record keys are Kafka's (``connector-<name>``,
``target-state-<name>``, ``session-key``, ``status-connector-<name>``,
``status-task-<name>-<id>``; offsets keyed by the JSON ``["<connector>", {<source
partition>}]`` with the JSON offset as value, as Kafka writes them); task configs are one
record ``tasks-<name>`` (Kafka writes ``task-<name>-<id>`` and ``commit-<name>``).

The worker running a connector computes its task configs; the leader writes them, others
send them to the leader (``POST /connectors/{name}/tasks``, signed with the session key in
a sessioned group, see :mod:`kafkaclone.connect.signature`). Writes from the REST API
(creating, changing, deleting a connector) go to the leader: a follower forwards the REST
call to the leader's URL, as Kafka's. Pause and resume write the target state; restarts go
to the worker running the connector or task.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kafkaclone.clients import ConsumerRecord
from kafkaclone.clients.admin import AdminClient
from kafkaclone.common.config_def import AbstractConfig, ConfigError
from kafkaclone.common.properties import parse_properties
from kafkaclone.connect.api import SourceConnector, SourceOffset, SourcePartition
from kafkaclone.connect.assignor import (
    IncrementalCooperativeAssignor,
    config_mismatch,
    eager_assign,
)
from kafkaclone.connect.config import WORKER_CONFIG, check_distributed_config
from kafkaclone.connect.connect_protocol import (
    CONNECT_PROTOCOL_V0,
    CONNECT_PROTOCOL_V1,
    NO_ERROR,
    ConnectAssignment,
    ConnectProtocolCompatibility,
    TaskId,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from kafkaclone.connect.group_member import WorkerGroupMember
from kafkaclone.connect.herder import ConnectorRuntime, RestError, StandaloneHerder, not_found
from kafkaclone.connect.kafka_log import KafkaBasedLog, ensure_topic
from kafkaclone.connect.offsets import PartitionKey, partition_key
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.rest import ConnectRestResource
from kafkaclone.connect.signature import (
    SESSION_KEY_RECORD,
    SessionKey,
    SignatureError,
    generate_key,
    sign,
    verify,
)
from kafkaclone.connect.standalone import listen_address, worker_settings
from kafkaclone.connect.worker import State, Status, WorkerSettings, WorkerTask

logger = logging.getLogger(__name__)

REBALANCE_WAIT_S: Final = 30.0


class KafkaOffsetBackingStore:
    """Kafka's ``KafkaOffsetBackingStore``."""

    def __init__(self, bootstrap: str, topic: str, client_id: str) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, PartitionKey], SourceOffset] = {}
        self.log = KafkaBasedLog(bootstrap, topic, client_id, self._apply)

    def _apply(self, record: ConsumerRecord) -> None:
        if not isinstance(record.key, bytes):
            return
        connector, partition = json.loads(record.key)
        key = (str(connector), partition_key(partition))
        with self._lock:
            if record.value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = json.loads(record.value)

    def get(self, connector: str, partition: SourcePartition) -> SourceOffset | None:
        with self._lock:
            return self._data.get((connector, partition_key(partition)))

    def set(self, connector: str, offsets: Mapping[PartitionKey,
                                                   tuple[SourcePartition, SourceOffset]]
            ) -> None:
        producer = self.log.producer
        futures = [producer.send(self.log.topic, json.dumps(dict(offset)).encode(),
                                 key=json.dumps([connector, dict(partition)]).encode())
                   for partition, offset in offsets.values()]
        for future in futures:
            future.result(timeout=30)
        with self._lock:
            for key, (_, offset) in offsets.items():
                self._data[(connector, key)] = offset


class DistributedHerder(StandaloneHerder):
    def __init__(self, settings: WorkerSettings, plugins: Plugins,
                 offsets: KafkaOffsetBackingStore, config: AbstractConfig, url: str) -> None:
        super().__init__(settings, plugins, offsets)
        self.offset_store = offsets
        self.url = url
        bootstrap = settings.bootstrap_servers
        client_id = f"connect-{settings.worker_id}"
        self.configs: dict[str, dict[str, str]] = {}
        self.target_states: dict[str, str] = {}
        self.task_sets: dict[str, list[dict[str, str]]] = {}
        self.statuses: dict[str, dict[str, Any]] = {}
        self.config_offset = -1
        """The offset after the last config record read (Kafka's config state offset)."""
        self.session_key: SessionKey | None = None
        self.config_log = KafkaBasedLog(bootstrap, config.get_str("config.storage.topic"),
                                        f"{client_id}-configs", self._apply_config)
        self.status_log = KafkaBasedLog(bootstrap, config.get_str("status.storage.topic"),
                                        f"{client_id}-statuses", self._apply_status)
        self.member = WorkerGroupMember(
            bootstrap, config.get_str("group.id"), client_id=client_id,
            session_timeout_ms=config.get_int("session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("heartbeat.interval.ms"),
            rebalance_timeout_ms=config.get_int("rebalance.timeout.ms"))
        self.mode = ConnectProtocolCompatibility.from_config(config.get_str("connect.protocol"))
        self.assignor = IncrementalCooperativeAssignor(
            config.get_int("scheduled.rebalance.max.delay.ms"),
            lambda: int(time.time() * 1000))
        self.key_algorithm = config.get_str("inter.worker.key.generation.algorithm")
        key_size = config.get("inter.worker.key.size")
        self.key_size = key_size if isinstance(key_size, int) else None
        self.key_ttl_ms = config.get_int("inter.worker.key.ttl.ms")
        self.signature_algorithm = config.get_str("inter.worker.signature.algorithm")
        self.verification_algorithms = tuple(
            config.get_list("inter.worker.verification.algorithms"))
        self.leader_url: str | None = None
        self.assigned_connectors: set[str] = set()
        self.assigned_tasks: set[TaskId] = set()
        self._tasks: dict[TaskId, tuple[dict[str, str], WorkerTask]] = {}
        """The tasks running here, with the config each started with."""
        self._task_configs_sent: dict[str, list[dict[str, str]]] = {}
        self._rejoin_at: float | None = None
        self._published: dict[str, dict[str, Any]] = {}
        self.joined = threading.Event()
        """Set while this worker holds an assignment (cleared during a rebalance)."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="DistributedHerder",
                                        daemon=True)

    # --- the topics ---------------------------------------------------------------------

    def _apply_config(self, record: ConsumerRecord) -> None:
        key = record.key.decode() if isinstance(record.key, bytes) else ""
        value = None if record.value is None else json.loads(record.value)
        with self._lock:
            self.config_offset = record.offset + 1
            if key.startswith("connector-"):
                name = key[len("connector-"):]
                known = name in self.configs
                if value is None:
                    self.configs.pop(name, None)
                    self.task_sets.pop(name, None)
                else:
                    self.configs[name] = dict(value["properties"])
                if known != (value is not None):
                    self.member.need_rejoin.set()  # the set of connectors changed
            elif key.startswith("target-state-"):
                self.target_states[key[len("target-state-"):]] = \
                    "STARTED" if value is None else str(value["state"])
            elif key.startswith("tasks-") and value is not None:
                name = key[len("tasks-"):]
                before = len(self.task_sets.get(name, []))
                self.task_sets[name] = [dict(t) for t in value["tasks"]]
                if len(self.task_sets[name]) != before:
                    self.member.need_rejoin.set()  # tasks to assign or to revoke
            elif key == SESSION_KEY_RECORD and value is not None:
                self.session_key = SessionKey.from_json(value)

    def _apply_status(self, record: ConsumerRecord) -> None:
        key = record.key.decode() if isinstance(record.key, bytes) else ""
        with self._lock:
            if record.value is None:
                self.statuses.pop(key, None)
            else:
                self.statuses[key] = json.loads(record.value)

    def _write_config(self, key: str, value: object) -> None:
        self.config_log.send(key.encode(), None if value is None else
                             json.dumps(value).encode())
        self.config_log.read_to_end()

    # --- the worker's loop --------------------------------------------------------------

    def start(self) -> None:
        self.offset_store.log.start()
        self.config_log.start()
        self.status_log.start()
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
                    logger.info("The scheduled rebalance delay has expired; rejoining")
                    self._rejoin_at = None
                    self.member.need_rejoin.set()
                if self.member.need_rejoin.is_set():
                    self._rebalance()
                self._rotate_session_key()
                self._reconcile()
                self._publish_status()
            except Exception:
                logger.exception("Distributed herder tick failed; retrying")
                self.member.need_rejoin.set()
            self._stopping.wait(0.25)

    def _cooperative(self) -> bool:
        """Whether the group runs an incremental cooperative protocol (chosen by the
        coordinator at the last join; a worker in eager mode never does)."""
        return self.mode is not ConnectProtocolCompatibility.EAGER and \
            self.member.protocol in ("compatible", "sessioned")

    def _offered(self) -> list[tuple[str, bytes]]:
        """Kafka's ``WorkerCoordinator.metadata``: every protocol of this worker's mode."""
        with self._lock:
            current = ConnectAssignment(
                CONNECT_PROTOCOL_V1, NO_ERROR, self.member.leader_id, self.leader_url or "",
                self.config_offset, sorted(self.assigned_connectors),
                sorted(self.assigned_tasks))
            offset = self.config_offset
        out = []
        for protocol in self.mode.offered():
            current.version = protocol.version
            state = WorkerState(self.url, offset,
                                current if protocol.version > CONNECT_PROTOCOL_V0 else None)
            out.append((protocol.protocol, encode_metadata(state, protocol.version)))
        return out

    def _assign(self, protocol: str, leader: str, members: dict[str, bytes], generation: int
                ) -> dict[str, bytes]:
        """The leader's part of the join: the assignor of the chosen protocol."""
        states = {member: decode_metadata(data) for member, data in members.items()}
        chosen = ConnectProtocolCompatibility.from_protocol(protocol)
        max_offset = max(state.config_offset for state in states.values())
        self.config_log.read_to_end()
        with self._lock:
            offset = self.config_offset
            task_counts = {name: len(self.task_sets.get(name, [])) for name in self.configs}
        if offset < max_offset:
            logger.info("Was selected to perform assignments, but do not have latest config "
                        "found in sync request (%d < %d)", offset, max_offset)
            out = config_mismatch(states, leader, chosen.version, max_offset)
        elif chosen is ConnectProtocolCompatibility.EAGER:
            out = eager_assign(states, leader, offset, task_counts)
        else:
            out = self.assignor.assign(
                states, leader, offset, task_counts, version=chosen.version,
                generation=generation,
                last_completed_generation=self.member.last_completed_generation)
        return {member: encode_assignment(a) for member, a in out.items()}

    def _stop_task(self, task_id: TaskId) -> None:
        _, task = self._tasks.pop(task_id)
        task.stop(self.settings.offset_flush_timeout_s + 5)

    def _revoke(self, connectors: Iterable[str], tasks: Iterable[TaskId]) -> None:
        with self._lock:
            for task_id in tasks:
                self.assigned_tasks.discard(task_id)
                if task_id in self._tasks:
                    self._stop_task(task_id)
            for name in connectors:
                self.assigned_connectors.discard(name)
                runtime = self._connectors.get(name)
                if runtime is not None:
                    self._stop_connector(name, runtime)

    def _rebalance(self) -> None:
        self.joined.clear()
        if not self._cooperative() or not self.member.member_id:
            # Eager, or this worker lost its membership (the group may have handed its
            # work out already): stop everything before joining.
            self._revoke(list(self.assigned_connectors), list(self.assigned_tasks))
        self.config_log.read_to_end()
        protocol, data = self.member.join(self._offered, self._assign)
        assignment = decode_assignment(data)
        if assignment.failed:
            logger.info("Assignment failed (config offset %d); reading configs and rejoining",
                        assignment.config_offset)
            self.config_log.read_to_end()
            self.member.need_rejoin.set()
            return
        self.leader_url = assignment.leader_url
        self.offset_store.log.read_to_end()
        if protocol == ConnectProtocolCompatibility.EAGER.protocol:
            with self._lock:
                keep_connectors = set(assignment.connectors)
                keep_tasks = set(assignment.tasks)
            self._revoke(self.assigned_connectors - keep_connectors,
                         self.assigned_tasks - keep_tasks)
            with self._lock:
                self.assigned_connectors = keep_connectors
                self.assigned_tasks = keep_tasks
        else:
            self._revoke(assignment.revoked_connectors, assignment.revoked_tasks)
            with self._lock:
                self.assigned_connectors.update(assignment.connectors)
                self.assigned_tasks.update(assignment.tasks)
            if assignment.revoked_connectors or assignment.revoked_tasks:
                self.member.need_rejoin.set()  # the second round hands the revoked work out
        self._rejoin_at = (time.monotonic() + assignment.delay / 1000.0
                           if assignment.delay > 0 else None)
        logger.info("Assignment at generation %d (%s): connectors %s, tasks %s; revoked "
                    "connectors %s, tasks %s; delay %d ms", self.member.generation, protocol,
                    assignment.connectors, assignment.tasks, assignment.revoked_connectors,
                    assignment.revoked_tasks, assignment.delay)
        self.joined.set()

    def _rotate_session_key(self) -> None:
        """Kafka's leader writes a session key when the group is sessioned and it has none
        or the one it has is older than ``inter.worker.key.ttl.ms``."""
        if self.member.protocol != ConnectProtocolCompatibility.SESSIONED.protocol or \
                not self.joined.is_set() or self.leader_url != self.url:
            return
        now = int(time.time() * 1000)
        key = self.session_key
        if key is not None and now < key.creation_timestamp + self.key_ttl_ms:
            return
        logger.info("Writing a new session key to the config topic")
        self._write_config(SESSION_KEY_RECORD,
                           generate_key(self.key_algorithm, self.key_size, now).to_json())

    def _reconcile(self) -> None:
        """Run what is assigned here with its latest config and target state."""
        to_send: dict[str, list[dict[str, str]]] = {}
        with self._lock:
            for name, stale in list(self._connectors.items()):
                if name not in self.assigned_connectors or name not in self.configs:
                    self._stop_connector(name, stale)
            for name in sorted(self.assigned_connectors):
                config = self.configs.get(name)
                if config is None:
                    continue
                runtime: ConnectorRuntime | None = self._connectors.get(name)
                paused = self.target_states.get(name) == "PAUSED"
                if runtime is not None and runtime.config != config:
                    self._stop_connector(name, runtime)
                    runtime = None
                if runtime is None:
                    self._start_connector(name, dict(config), paused, start_tasks=False)
                    self._task_configs_sent.pop(name, None)
                    runtime = self._connectors[name]
                elif paused != runtime.target_paused:
                    runtime.target_paused = paused
                    if runtime.status.state in (State.RUNNING, State.PAUSED):
                        runtime.status = Status(State.PAUSED if paused else State.RUNNING)
                if runtime.status.state is not State.FAILED and \
                        self.task_sets.get(name) != runtime.task_configs and \
                        self._task_configs_sent.get(name) != runtime.task_configs:
                    to_send[name] = runtime.task_configs
            for task_id, (started_with, _) in list(self._tasks.items()):
                name, number = task_id
                tasks = self.task_sets.get(name, [])
                if task_id not in self.assigned_tasks or name not in self.configs or \
                        number >= len(tasks) or tasks[number] != started_with:
                    self._stop_task(task_id)
            for task_id in sorted(self.assigned_tasks):
                name, number = task_id
                config = self.configs.get(name)
                tasks = self.task_sets.get(name, [])
                paused = self.target_states.get(name) == "PAUSED"
                running = self._tasks.get(task_id)
                if running is not None:
                    task = running[1]
                    if paused != task.paused.is_set():
                        (task.pause if paused else task.resume)()
                elif config is not None and number < len(tasks):
                    self._start_assigned_task(name, number, config, tasks, paused)
        for name, task_configs in to_send.items():
            self._put_task_configs_to_leader(name, task_configs)

    def _start_assigned_task(self, name: str, number: int, config: dict[str, str],
                             tasks: list[dict[str, str]], paused: bool) -> None:
        runtime = ConnectorRuntime(dict(config),
                                   self.plugins.connector_class(config["connector.class"])(),
                                   Status(State.UNASSIGNED), task_configs=list(tasks),
                                   target_paused=paused)
        self._tasks[(name, number)] = (tasks[number], self._start_task(name, runtime, number))

    def _put_task_configs_to_leader(self, name: str, task_configs: list[dict[str, str]]
                                    ) -> None:
        """Kafka's ``DistributedHerder.reconfigureConnector``: the leader writes task
        configs; another worker sends them to it, signed in a sessioned group."""
        self._task_configs_sent[name] = task_configs
        try:
            if self.leader_url == self.url:
                self._write_config(f"tasks-{name}", {"tasks": task_configs})
                return
            body = json.dumps(task_configs).encode()
            headers: dict[str, str] = {}
            if self.member.protocol == ConnectProtocolCompatibility.SESSIONED.protocol:
                key = self.session_key
                if key is None:
                    raise RestError(409, "no session key has been read yet")
                headers = sign(key, self.signature_algorithm, body)
            self._forward(self.leader_url, "POST", f"/connectors/{name}/tasks", raw=body,
                          headers=headers)
        except (RestError, TimeoutError) as exc:
            logger.warning("Failed to hand the task configs of %s to the leader, will retry: "
                           "%s", name, exc)
            self._task_configs_sent.pop(name, None)

    def put_task_configs(self, name: str, body: bytes, headers: Mapping[str, str]) -> None:
        # No waiting for a rebalance here: the sender's herder thread is blocked on this
        # call, and the rebalance may be waiting for that worker to join.
        if not self.joined.is_set() or self.leader_url != self.url:
            raise RestError(409, "Cannot complete request because of a conflicting operation "
                            "(e.g. worker rebalance)")
        if self.member.protocol == ConnectProtocolCompatibility.SESSIONED.protocol:
            try:
                verify(self.session_key, self.verification_algorithms, body, headers)
            except SignatureError as exc:
                raise RestError(exc.status, exc.message) from None
        try:
            tasks = json.loads(body)
        except ValueError as exc:
            raise RestError(400, f"Unrecognized token in request body: {exc}") from None
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise RestError(400, "A list of task configs is expected")
        with self._lock:
            self._known(name)
        self._write_config(f"tasks-{name}", {"tasks": [
            {str(k): str(v) for k, v in t.items()} for t in tasks]})

    def _publish_status(self) -> None:
        current: dict[str, dict[str, Any]] = {}
        with self._lock:
            generation = self.member.generation
            for name, runtime in self._connectors.items():
                current[f"status-connector-{name}"] = {
                    "state": runtime.status.state.value, "trace": runtime.status.trace,
                    "worker_id": self.settings.worker_id, "generation": generation}
            for (name, number), (_, task) in self._tasks.items():
                current[f"status-task-{name}-{number}"] = {
                    "state": task.status.state.value, "trace": task.status.trace,
                    "worker_id": self.settings.worker_id, "generation": generation}
        for key, value in current.items():
            if self._published.get(key) != value:
                self.status_log.send(key.encode(), json.dumps(value).encode())
                self._published[key] = value

    # --- forwarding -----------------------------------------------------------------------

    def _is_leader(self) -> bool:
        """Whether this worker leads the group, once a rebalance in progress is over (Kafka
        answers 409 at once; waiting spares the client a retry)."""
        self.joined.wait(REBALANCE_WAIT_S)
        return self.leader_url is not None and self.leader_url == self.url

    def _forward(self, base: str | None, method: str, path: str, body: object = None, *,
                 raw: bytes | None = None, headers: Mapping[str, str] | None = None
                 ) -> object:
        """Kafka's ``RestClient.httpRequest`` to another worker; its errors as RestError."""
        if base is None:
            raise RestError(409, "Cannot complete request because of a conflicting operation "
                            "(e.g. worker rebalance)")
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                         headers={"Content-Type": "application/json",
                                                  **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            answer = json.loads(error.read() or b"{}")
            raise RestError(error.code, str(answer.get("message", error.reason))) from None
        except OSError as exc:
            raise RestError(500, f"IO Error trying to forward REST request: {exc}") from None

    # --- the REST API's calls -------------------------------------------------------------

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self.configs)

    def _known(self, name: str) -> dict[str, str]:
        config = self.configs.get(name)
        if config is None:
            raise not_found(name)
        return config

    def connector_info(self, name: str) -> dict[str, object]:
        with self._lock:
            config = self._known(name)
            connector = self.plugins.connector_class(config["connector.class"])()
            return {"name": name, "config": dict(config),
                    "tasks": [{"connector": name, "task": i}
                              for i in range(len(self.task_sets.get(name, [])))],
                    "type": "source" if isinstance(connector, SourceConnector) else "sink"}

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._known(name))

    def put_connector_config(self, name: str, config: Mapping[str, str], *,
                             allow_replace: bool) -> tuple[bool, dict[str, object]]:
        if not self._is_leader():
            if allow_replace:
                created = name not in self.configs
                info = self._forward(self.leader_url, "PUT", f"/connectors/{name}/config",
                                     dict(config))
            else:
                created = True
                info = self._forward(self.leader_url, "POST", "/connectors",
                                     {"name": name, "config": dict(config)})
            assert isinstance(info, dict)
            return created, info
        config = dict(config)
        config.setdefault("name", name)
        self._check_valid(config)
        with self._lock:
            exists = name in self.configs
        if exists and not allow_replace:
            raise RestError(409, f"Connector {name} already exists")
        self._write_config(f"connector-{name}", {"properties": config})
        return not exists, self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        if not self._is_leader():
            self._forward(self.leader_url, "DELETE", f"/connectors/{name}")
            return
        with self._lock:
            self._known(name)
        self._write_config(f"connector-{name}", None)
        self._write_config(f"target-state-{name}", None)

    def pause(self, name: str) -> None:
        with self._lock:
            self._known(name)
        self._write_config(f"target-state-{name}", {"state": "PAUSED"})

    def resume(self, name: str) -> None:
        with self._lock:
            self._known(name)
        self._write_config(f"target-state-{name}", {"state": "STARTED"})

    def _owner_url(self, key: str) -> str | None:
        status = self.statuses.get(key)
        return None if status is None else f"http://{status['worker_id']}"

    def reconfigure(self, name: str) -> None:
        """Kafka's ``DistributedHerder.requestTaskReconfiguration``: the connector's new
        task configs; the herder's loop hands them to the leader, which writes them to the
        config topic, and every worker restarts the tasks whose config changed."""
        with self._lock:
            if name in self.assigned_connectors:
                self._new_task_configs(name)

    def restart_connector(self, name: str) -> None:
        with self._lock:
            self._known(name)
            runtime = self._connectors.get(name)
            if runtime is not None:
                self._stop_connector(name, runtime)
                self._start_connector(name, runtime.config, runtime.target_paused,
                                      start_tasks=False)
                return
        self._forward(self._owner_url(f"status-connector-{name}"), "POST",
                      f"/connectors/{name}/restart")

    def restart_task(self, name: str, task_id: int) -> None:
        with self._lock:
            self._known(name)
            running = self._tasks.get((name, task_id))
            if running is not None:
                self._stop_task((name, task_id))
                config = self.configs[name]
                self._start_assigned_task(name, task_id, config, self.task_sets.get(name, []),
                                          self.target_states.get(name) == "PAUSED")
                return
        self._forward(self._owner_url(f"status-task-{name}-{task_id}"), "POST",
                      f"/connectors/{name}/tasks/{task_id}/restart")

    def _status_json(self, key: str, **extra: object) -> dict[str, object]:
        found = self.statuses.get(key)
        out: dict[str, object] = dict(extra)
        if found is None:
            out.update(state=State.UNASSIGNED.value, worker_id=None)
            return out
        out.update(state=found["state"], worker_id=found["worker_id"])
        if found.get("trace"):
            out["trace"] = found["trace"]
        return out

    def status(self, name: str) -> dict[str, object]:
        info = self.connector_info(name)
        with self._lock:
            tasks = info["tasks"]
            assert isinstance(tasks, list)
            return {"name": name, "connector": self._status_json(f"status-connector-{name}"),
                    "tasks": [self._status_json(f"status-task-{name}-{i}", id=i)
                              for i in range(len(tasks))],
                    "type": info["type"]}

    def task_status(self, name: str, task_id: int) -> dict[str, object]:
        with self._lock:
            self._known(name)
            if not 0 <= task_id < len(self.task_sets.get(name, [])):
                raise RestError(404, f"No status found for task {name}-{task_id}")
            return self._status_json(f"status-task-{name}-{task_id}", id=task_id)

    def task_configs(self, name: str) -> list[dict[str, object]]:
        with self._lock:
            self._known(name)
            return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                    for i, c in enumerate(self.task_sets.get(name, []))]

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(30)
        with self._lock:
            for task_id in list(self._tasks):
                self._stop_task(task_id)
        super().stop()
        self.member.close()
        for log in (self.config_log, self.status_log, self.offset_store.log):
            log.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("Usage: ConnectDistributed worker.properties", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    props = parse_properties(Path(args[0]).read_text(encoding="utf-8"))
    try:
        config = AbstractConfig(WORKER_CONFIG, {k: v for k, v in props.items()
                                                if k in WORKER_CONFIG})
        check_distributed_config(config)
    except ConfigError as exc:
        print(f"Invalid worker configuration: {exc}", file=sys.stderr)
        return 1
    for required in ("group.id", "config.storage.topic", "offset.storage.topic",
                     "status.storage.topic"):
        if config.get(required) is None:
            print(f"Missing required configuration \"{required}\" which has no default value.",
                  file=sys.stderr)
            return 1
    host, port = listen_address(config)
    settings = worker_settings(props, config, host, port)
    bootstrap = settings.bootstrap_servers
    ensure_topic(bootstrap, config.get_str("config.storage.topic"), 1,
                 config.get_int("config.storage.replication.factor"))
    ensure_topic(bootstrap, config.get_str("offset.storage.topic"),
                 config.get_int("offset.storage.partitions"),
                 config.get_int("offset.storage.replication.factor"))
    ensure_topic(bootstrap, config.get_str("status.storage.topic"),
                 config.get_int("status.storage.partitions"),
                 config.get_int("status.storage.replication.factor"))
    cluster_id = None
    with AdminClient(bootstrap) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    plugins = Plugins()
    offsets = KafkaOffsetBackingStore(bootstrap, config.get_str("offset.storage.topic"),
                                      f"connect-{settings.worker_id}-offsets")
    herder = DistributedHerder(settings, plugins, offsets, config,
                               f"http://{settings.worker_id}")
    herder.start()

    from twisted.internet import reactor as global_reactor
    from twisted.internet.threads import deferToThread
    from twisted.web.server import Site

    reactor: Any = global_reactor  # the global reactor's type is a module
    site = Site(ConnectRestResource(herder, plugins, cluster_id, deferToThread))  # type: ignore[no-untyped-call]
    reactor.listenTCP(port, site, interface=host)
    logger.info("REST server listening at http://%s:%d/, advertising URL http://%s/", host,
                port, settings.worker_id)
    reactor.addSystemEventTrigger("before", "shutdown", herder.stop)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
