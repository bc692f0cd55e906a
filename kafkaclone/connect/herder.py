"""The standalone herder (Kafka's ``StandaloneHerder`` with ``AbstractHerder``'s
validation): connector configs in memory, every connector and task run by this worker.

Every method is blocking and thread-safe; the REST API calls them from Twisted's thread
pool. Errors are ``RestError`` carrying Kafka's HTTP status and message.

Extension point: a connector is any class registered in ``kafkaclone.connect.plugins``
(see :mod:`kafkaclone.connect.plugins`); JDBC connectors plug in there.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkaclone.common.config_def import ConfigKey
from kafkaclone.connect.api import (
    Config,
    ConfigValue,
    Connector,
    SinkConnector,
    SourceConnector,
    validate_with,
)
from kafkaclone.connect.config import CONNECTOR_CONFIG, SINK_CONFIG
from kafkaclone.connect.offsets import OffsetBackingStore
from kafkaclone.connect.plugins import PluginNotFoundError, Plugins
from kafkaclone.connect.worker import (
    State,
    Status,
    WorkerSettings,
    WorkerSinkTask,
    WorkerSourceTask,
    WorkerTask,
)

logger = logging.getLogger(__name__)


class RestError(Exception):
    """Kafka's ``ConnectRestException``: an HTTP status and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(name: str) -> RestError:
    return RestError(404, f"Connector {name} not found")


class _ConnectorContext:
    def __init__(self, herder: StandaloneHerder, name: str) -> None:
        self.herder = herder
        self.name = name

    def request_task_reconfiguration(self) -> None:
        threading.Thread(target=self.herder.reconfigure, args=(self.name,), daemon=True).start()

    def raise_error(self, error: Exception) -> None:
        self.herder.fail_connector(self.name, error)


@dataclass
class ConnectorRuntime:
    config: dict[str, str]
    connector: Connector
    status: Status
    task_configs: list[dict[str, str]] = field(default_factory=list)
    tasks: list[WorkerTask] = field(default_factory=list)
    target_paused: bool = False

    @property
    def type(self) -> str:
        return "source" if isinstance(self.connector, SourceConnector) else \
            "sink" if isinstance(self.connector, SinkConnector) else "unknown"


class StandaloneHerder:
    def __init__(self, settings: WorkerSettings, plugins: Plugins,
                 offsets: OffsetBackingStore) -> None:
        self.settings = settings
        self.plugins = plugins
        self.offsets = offsets
        self._lock = threading.RLock()
        self._connectors: dict[str, ConnectorRuntime] = {}

    # --- validation ---------------------------------------------------------------------

    def validate(self, config: Mapping[str, str]) -> dict[str, object]:
        """Kafka's ``AbstractHerder.validateConnectorConfig``: the ConfigInfos JSON."""
        class_name = config.get("connector.class")
        if not class_name:
            raise RestError(400, "Connector config " + _java_map(config) +
                            " contains no connector type")
        try:
            connector = self.plugins.connector_class(class_name)()
        except PluginNotFoundError as exc:
            raise RestError(500, str(exc)) from None
        base = SINK_CONFIG if isinstance(connector, SinkConnector) else CONNECTOR_CONFIG
        base_result = validate_with(base, config, ("name", "connector.class"))
        if isinstance(connector, SinkConnector):
            _check_sink_topics(config, base_result)
        transform_result, transform_keys = self._validate_transforms(config)
        own = connector.validate(config)
        own_def = connector.config()
        keys = [*base, *transform_keys, *own_def]
        values = [*base_result.config_values, *transform_result.config_values,
                  *own.config_values]
        groups = list(dict.fromkeys(k.group or "" for k in keys if k.group))
        return {
            "name": class_name,
            "error_count": sum(len(v.errors) for v in values),
            "groups": groups,
            "configs": [{"definition": _definition(key, i, required=key.name in (
                             "name", "connector.class", *connector.required_configs())),
                         "value": _value_json(value)}
                        for i, (key, value) in enumerate(zip(keys, values, strict=True))],
        }

    def _validate_transforms(self, config: Mapping[str, str]) -> tuple[Config, list[ConfigKey]]:
        values: list[ConfigValue] = []
        keys: list[ConfigKey] = []
        for alias in [a.strip() for a in config.get("transforms", "").split(",") if a.strip()]:
            prefix = f"transforms.{alias}."
            type_key = ConfigKey(prefix + "type", CONNECTOR_CONFIG["connector.class"].type, None,
                                 CONNECTOR_CONFIG["connector.class"].importance,
                                 "Class for the transformation.", group=f"Transforms: {alias}")
            type_value = ConfigValue(type_key.name, config.get(type_key.name))
            keys.append(type_key)
            values.append(type_value)
            class_name = config.get(type_key.name)
            if not class_name:
                type_value.errors.append(f"Missing required configuration \"{type_key.name}\" "
                                         "which has no default value.")
                continue
            try:
                transform = self.plugins.transformation_class(class_name)()
            except PluginNotFoundError as exc:
                type_value.errors.append(str(exc))
                continue
            own = transform.config()
            result = validate_with(own, {k[len(prefix):]: v for k, v in config.items()
                                         if k.startswith(prefix)})
            for key, value in zip(own, result.config_values, strict=True):
                keys.append(ConfigKey(prefix + key.name, key.type, key.default, key.importance,
                                      key.doc, key.validator, group=f"Transforms: {alias}"))
                value.name = prefix + key.name
                values.append(value)
        return Config(values), keys

    def _check_valid(self, config: Mapping[str, str]) -> None:
        infos = self.validate(config)
        count = infos["error_count"]
        assert isinstance(count, int)
        if count == 0:
            return
        configs = infos["configs"]
        assert isinstance(configs, list)
        messages = [f"{c['value']['name']}: {error}" for c in configs
                    for error in c["value"]["errors"]]
        raise RestError(400, f"Connector configuration is invalid and contains the following "
                        f"{count} error(s):\n" + "\n".join(messages) +
                        "\nYou can also find the above list of errors at the endpoint "
                        "`/connector-plugins/{connectorType}/config/validate`")

    # --- connectors ---------------------------------------------------------------------

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def _runtime(self, name: str) -> ConnectorRuntime:
        runtime = self._connectors.get(name)
        if runtime is None:
            raise not_found(name)
        return runtime

    def connector_info(self, name: str) -> dict[str, object]:
        with self._lock:
            runtime = self._runtime(name)
            return {"name": name, "config": dict(runtime.config),
                    "tasks": [{"connector": name, "task": i}
                              for i in range(len(runtime.task_configs))],
                    "type": runtime.type}

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._runtime(name).config)

    def put_connector_config(self, name: str, config: Mapping[str, str], *,
                             allow_replace: bool) -> tuple[bool, dict[str, object]]:
        """Create or replace; (created, ConnectorInfo)."""
        config = dict(config)
        config.setdefault("name", name)
        self._check_valid(config)
        with self._lock:
            existing = self._connectors.get(name)
            if existing is not None and not allow_replace:
                raise RestError(409, f"Connector {name} already exists")
            paused = False
            if existing is not None:
                paused = existing.target_paused
                self._stop_connector(name, existing)
            self._start_connector(name, config, paused)
            return existing is None, self.connector_info(name)

    def _start_connector(self, name: str, config: dict[str, str], paused: bool, *,
                         start_tasks: bool = True) -> None:
        """Start the connector, compute its task configs and (``start_tasks``) its tasks;
        the distributed herder runs tasks apart from their connector."""
        connector = self.plugins.connector_class(config["connector.class"])()
        runtime = ConnectorRuntime(config, connector, Status(State.UNASSIGNED),
                                   target_paused=paused)
        self._connectors[name] = runtime
        try:
            connector.initialize(_ConnectorContext(self, name))
            connector.start(config)
            runtime.status = Status(State.PAUSED if paused else State.RUNNING)
            max_tasks = int(config.get("tasks.max", "1"))
            runtime.task_configs = [self._task_config(connector, config, task)
                                    for task in connector.task_configs(max_tasks)]
        except Exception as exc:
            logger.exception("Failed to start connector %s", name)
            runtime.status = Status(State.FAILED, _trace(exc))
            return
        if not start_tasks:
            return
        for task_id in range(len(runtime.task_configs)):
            runtime.tasks.append(self._start_task(name, runtime, task_id))

    @staticmethod
    def _task_config(connector: Connector, config: Mapping[str, str],
                     task: Mapping[str, str]) -> dict[str, str]:
        """Kafka's ``Worker.connectorTaskConfigs``: the connector's task config plus
        ``task.class`` (and a sink's ``topics`` / ``topics.regex``)."""
        task_class = connector.task_class()
        out = {**task, "task.class": f"{task_class.__module__}.{task_class.__qualname__}"}
        if isinstance(connector, SinkConnector):
            for key in ("topics", "topics.regex"):
                if config.get(key):
                    out[key] = config[key]
        return out

    def _start_task(self, name: str, runtime: ConnectorRuntime, task_id: int) -> WorkerTask:
        task_props = runtime.task_configs[task_id]
        connector = runtime.connector
        logger.info("Starting task %s-%d", name, task_id)
        worker_task: WorkerTask
        if isinstance(connector, SourceConnector):
            worker_task = WorkerSourceTask(name, task_id, self.settings,
                                           connector.task_class()(), task_props,
                                           runtime.config, self.plugins, self.offsets)
        elif isinstance(connector, SinkConnector):
            worker_task = WorkerSinkTask(name, task_id, self.settings,
                                         connector.task_class()(), task_props,
                                         runtime.config, self.plugins)
        else:
            raise RestError(400, f"{type(connector).__name__} is neither a source nor a sink "
                            "connector")
        worker_task.start(runtime.target_paused)
        return worker_task

    def _stop_connector(self, name: str, runtime: ConnectorRuntime) -> None:
        timeout = self.settings.offset_flush_timeout_s + 5
        for task in runtime.tasks:
            task.stop(timeout)
        runtime.tasks = []
        try:
            runtime.connector.stop()
        except Exception:
            logger.exception("Error while stopping connector %s", name)
        del self._connectors[name]

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._stop_connector(name, self._runtime(name))

    def restart_connector(self, name: str) -> None:
        with self._lock:
            runtime = self._runtime(name)
            self._stop_connector(name, runtime)
            self._start_connector(name, runtime.config, runtime.target_paused)

    def reconfigure(self, name: str) -> None:
        """Kafka's ``StandaloneHerder.updateConnectorTasks`` (a connector's
        ``request_task_reconfiguration``): the running connector's task configs again;
        when they changed, its tasks are stopped and the new ones started."""
        with self._lock:
            runtime = self._new_task_configs(name)
            if runtime is None:
                return
            timeout = self.settings.offset_flush_timeout_s + 5
            for task in runtime.tasks:
                task.stop(timeout)
            runtime.tasks = [self._start_task(name, runtime, task_id)
                             for task_id in range(len(runtime.task_configs))]

    def _new_task_configs(self, name: str) -> ConnectorRuntime | None:
        """Ask a running connector for its task configs; its runtime with them when they
        differ from the ones it had, else None. Called with the lock held."""
        runtime = self._connectors.get(name)
        if runtime is None or runtime.status.state not in (State.RUNNING, State.PAUSED):
            return None
        try:
            max_tasks = int(runtime.config.get("tasks.max", "1"))
            configs = [self._task_config(runtime.connector, runtime.config, task)
                       for task in runtime.connector.task_configs(max_tasks)]
        except Exception as exc:
            logger.exception("Failed to reconfigure the tasks of connector %s", name)
            runtime.status = Status(State.FAILED, _trace(exc))
            return None
        if configs == runtime.task_configs:
            return None
        logger.info("Reconfiguring the tasks of connector %s: %d task config(s)", name,
                    len(configs))
        runtime.task_configs = configs
        return runtime

    def fail_connector(self, name: str, error: Exception) -> None:
        with self._lock:
            runtime = self._connectors.get(name)
            if runtime is not None:
                runtime.status = Status(State.FAILED, _trace(error))

    def restart_task(self, name: str, task_id: int) -> None:
        with self._lock:
            runtime = self._runtime(name)
            if not 0 <= task_id < len(runtime.tasks):
                raise RestError(404, f"Task {name}-{task_id} not found")
            runtime.tasks[task_id].stop(self.settings.offset_flush_timeout_s + 5)
            runtime.tasks[task_id] = self._start_task(name, runtime, task_id)

    def pause(self, name: str) -> None:
        with self._lock:
            runtime = self._runtime(name)
            runtime.target_paused = True
            if runtime.status.state is State.RUNNING:
                runtime.status = Status(State.PAUSED)
            for task in runtime.tasks:
                task.pause()

    def resume(self, name: str) -> None:
        with self._lock:
            runtime = self._runtime(name)
            runtime.target_paused = False
            if runtime.status.state is State.PAUSED:
                runtime.status = Status(State.RUNNING)
            for task in runtime.tasks:
                task.resume()

    # --- status -------------------------------------------------------------------------

    def _task_status(self, task: WorkerTask) -> dict[str, object]:
        out: dict[str, object] = {"id": task.task_id, "state": task.status.state.value,
                                  "worker_id": self.settings.worker_id}
        if task.status.trace is not None:
            out["trace"] = task.status.trace
        return out

    def status(self, name: str) -> dict[str, object]:
        with self._lock:
            runtime = self._runtime(name)
            connector: dict[str, object] = {"state": runtime.status.state.value,
                                            "worker_id": self.settings.worker_id}
            if runtime.status.trace is not None:
                connector["trace"] = runtime.status.trace
            return {"name": name, "connector": connector,
                    "tasks": [self._task_status(t) for t in runtime.tasks],
                    "type": runtime.type}

    def task_status(self, name: str, task_id: int) -> dict[str, object]:
        with self._lock:
            runtime = self._runtime(name)
            if not 0 <= task_id < len(runtime.tasks):
                raise RestError(404, f"No status found for task {name}-{task_id}")
            return self._task_status(runtime.tasks[task_id])

    def task_configs(self, name: str) -> list[dict[str, object]]:
        with self._lock:
            runtime = self._runtime(name)
            return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                    for i, c in enumerate(runtime.task_configs)]

    def put_task_configs(self, name: str, body: bytes, headers: Mapping[str, str]) -> None:
        """``POST /connectors/{name}/tasks``: the internal call a distributed worker makes
        to hand its connector's task configs to the leader."""
        raise RestError(500, "Kafka Connect in standalone mode does not support externally "
                        "setting task configurations.")

    def workers(self, name: str) -> list[WorkerTask]:
        with self._lock:
            return list(self._runtime(name).tasks)

    def stop(self) -> None:
        with self._lock:
            for name, runtime in list(self._connectors.items()):
                self._stop_connector(name, runtime)


def _check_sink_topics(config: Mapping[str, str], result: Config) -> None:
    """Kafka's ``SinkConnectorConfig.validate``: exactly one of topics / topics.regex."""
    has_topics = bool(config.get("topics", "").strip())
    has_regex = bool(config.get("topics.regex", "").strip())
    if has_topics == has_regex:
        message = ("Must configure one of topics or topics.regex" if not has_topics else
                   "topics and topics.regex are mutually exclusive options, but both are set.")
        for value in result.config_values:
            if value.name in ("topics", "topics.regex"):
                value.errors.append(message)


def _java_map(config: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in config.items()) + "}"


def _trace(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def _definition(key: ConfigKey, order: int, *, required: bool) -> dict[str, object]:
    """Kafka's ``ConfigKeyInfo``."""
    return {"name": key.name, "type": key.type.name, "required": required,
            "default_value": None if required else key.format(key.default),
            "importance": key.importance.name, "documentation": key.doc,
            "group": key.group or None, "order_in_group": order, "width": "NONE",
            "display_name": key.name, "dependents": []}


def _value_json(value: ConfigValue) -> dict[str, object]:
    """Kafka's ``ConfigValueInfo``: the value as the string given."""
    raw = value.value
    shown = None if raw is None else (
        ",".join(raw) if isinstance(raw, tuple) else
        ("true" if raw else "false") if isinstance(raw, bool) else str(raw))
    return {"name": value.name, "value": shown,
            "recommended_values": [str(v) for v in value.recommended_values],
            "errors": list(value.errors), "visible": value.visible}

