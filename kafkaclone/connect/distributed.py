"""``connect-distributed.sh worker.properties``: Kafka's ``ConnectDistributed`` and
``DistributedHerder``, in small.

Workers with one ``group.id`` form a group through the broker's group protocol
(:mod:`kafkaclone.connect.group_member`, eager). Connector configs live in
``config.storage.topic`` (1 partition), source offsets in ``offset.storage.topic`` and
statuses in ``status.storage.topic``, all compacted and created with Kafka's defaults
(partitions 1 / 25 / 5, replication factor 3, lowered by the ``*.replication.factor``
keys). Record keys are Kafka's (``connector-<name>``, ``target-state-<name>``,
``status-connector-<name>``, ``status-task-<name>-<id>``; offsets keyed by the JSON
``["<connector>", {<source partition>}]`` with the JSON offset as value, as Kafka writes
them); task configs are one record ``tasks-<name>`` (Kafka writes ``task-<name>-<id>`` and
``commit-<name>``).

Differences from Kafka, beyond the eager protocol: the leader assigns whole connectors
(a connector with all its tasks, round robin over the workers), where Kafka assigns tasks
separately; the worker running a connector computes its task configs itself.

Writes (creating, changing, deleting a connector) go to the leader: a follower forwards
the REST call to the leader's URL, as Kafka's. Pause and resume write the target state;
restarts go to the worker running the connector.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kafkaclone.clients import ConsumerRecord
from kafkaclone.clients.admin import AdminClient
from kafkaclone.common.config_def import AbstractConfig
from kafkaclone.common.properties import parse_properties
from kafkaclone.connect.api import SourceConnector, SourceOffset, SourcePartition
from kafkaclone.connect.config import WORKER_CONFIG
from kafkaclone.connect.group_member import WorkerGroupMember
from kafkaclone.connect.herder import RestError, StandaloneHerder, not_found
from kafkaclone.connect.kafka_log import KafkaBasedLog, ensure_topic
from kafkaclone.connect.offsets import PartitionKey, partition_key
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.rest import ConnectRestResource
from kafkaclone.connect.standalone import listen_address, worker_settings
from kafkaclone.connect.worker import State, WorkerSettings

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
        self.config_log = KafkaBasedLog(bootstrap, config.get_str("config.storage.topic"),
                                        f"{client_id}-configs", self._apply_config)
        self.status_log = KafkaBasedLog(bootstrap, config.get_str("status.storage.topic"),
                                        f"{client_id}-statuses", self._apply_status)
        self.member = WorkerGroupMember(
            bootstrap, config.get_str("group.id"), client_id=client_id,
            session_timeout_ms=config.get_int("session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("heartbeat.interval.ms"),
            rebalance_timeout_ms=config.get_int("rebalance.timeout.ms"))
        self.leader_url: str | None = None
        self.assigned: list[str] = []
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
                self.task_sets[key[len("tasks-"):]] = [dict(t) for t in value["tasks"]]

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

    def _assign(self, leader: str, members: dict[str, dict[str, Any]]
                ) -> dict[str, dict[str, Any]]:
        """The leader's round robin of connectors over workers."""
        self.config_log.read_to_end()
        ids = sorted(members)
        with self._lock:
            names = sorted(self.configs)
        leader_url = members[leader]["url"]
        out: dict[str, dict[str, Any]] = {m: {"leader": leader,
                                             "leader_url": leader_url, "connectors": []}
                                          for m in ids}
        for i, name in enumerate(names):
            out[ids[i % len(ids)]]["connectors"].append(name)
        return out

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.member.need_rejoin.is_set():
                    self._rebalance()
                self._reconcile()
                self._publish_status()
            except Exception:
                logger.exception("Distributed herder tick failed; retrying")
                self.member.need_rejoin.set()
            self._stopping.wait(0.25)

    def _rebalance(self) -> None:
        self.joined.clear()
        with self._lock:
            for name, runtime in list(self._connectors.items()):
                self._stop_connector(name, runtime)
        self.config_log.read_to_end()
        assignment = self.member.join({"url": self.url}, self._assign)
        self.leader_url = assignment["leader_url"]
        self.offset_store.log.read_to_end()
        with self._lock:
            self.assigned = list(assignment["connectors"])
        self.joined.set()

    def _reconcile(self) -> None:
        """Run what is assigned here with its latest config and target state."""
        new_tasks: dict[str, list[dict[str, str]]] = {}
        with self._lock:
            for name in self.assigned:
                config = self.configs.get(name)
                runtime = self._connectors.get(name)
                paused = self.target_states.get(name) == "PAUSED"
                if config is None:
                    if runtime is not None:
                        self._stop_connector(name, runtime)
                    continue
                if runtime is not None and runtime.config != config:
                    self._stop_connector(name, runtime)
                    runtime = None
                if runtime is None:
                    self._start_connector(name, dict(config), paused)
                    started = self._connectors[name]
                    if self.task_sets.get(name) != started.task_configs:
                        new_tasks[name] = started.task_configs
                elif paused != runtime.target_paused:
                    (super().pause if paused else super().resume)(name)
        for name, tasks in new_tasks.items():
            self._write_config(f"tasks-{name}", {"tasks": tasks})

    def _publish_status(self) -> None:
        current: dict[str, dict[str, Any]] = {}
        with self._lock:
            generation = self.member.generation
            for name, runtime in self._connectors.items():
                current[f"status-connector-{name}"] = {
                    "state": runtime.status.state.value, "trace": runtime.status.trace,
                    "worker_id": self.settings.worker_id, "generation": generation}
                for task in runtime.tasks:
                    current[f"status-task-{name}-{task.task_id}"] = {
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

    def _forward(self, base: str | None, method: str, path: str, body: object = None
                 ) -> object:
        """Kafka's ``RestClient.httpRequest`` to another worker; its errors as RestError."""
        if base is None:
            raise RestError(409, "Cannot complete request because of a conflicting operation "
                            "(e.g. worker rebalance)")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
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

    def _owner_url(self, name: str) -> str | None:
        status = self.statuses.get(f"status-connector-{name}")
        return None if status is None else f"http://{status['worker_id']}"

    def restart_connector(self, name: str) -> None:
        with self._lock:
            self._known(name)
            local = name in self._connectors
        if local:
            super().restart_connector(name)
        else:
            self._forward(self._owner_url(name), "POST", f"/connectors/{name}/restart")

    def restart_task(self, name: str, task_id: int) -> None:
        with self._lock:
            self._known(name)
            local = name in self._connectors
        if local:
            super().restart_task(name, task_id)
        else:
            self._forward(self._owner_url(name), "POST",
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
    config = AbstractConfig(WORKER_CONFIG, {k: v for k, v in props.items()
                                            if k in WORKER_CONFIG})
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
