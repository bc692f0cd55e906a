"""Kafka Connect's REST API on twisted.web (Kafka's ``RestServer`` and
``ConnectorsResource`` / ``ConnectorPluginsResource`` / ``RootResource``): the same paths,
methods, status codes and JSON shapes, errors as ``{"error_code": ..., "message": ...}``.

The herder's methods block (they start and stop task threads), so each request runs
through ``run_blocking`` (Twisted's thread pool in the worker; a plain call in tests).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import unquote

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from kafkaclone.connect.herder import RestError, StandaloneHerder
from kafkaclone.connect.plugins import Plugins

logger = logging.getLogger(__name__)

Handler = Callable[[], tuple[int, object]]
RunBlocking = Callable[[Handler], "Deferred[tuple[int, object]]"]
KAFKA_VERSION: Final = "2.8.0"
COMMIT: Final = "kafkaclone"


class ConnectRestResource(Resource):
    isLeaf = True

    def __init__(self, herder: StandaloneHerder, plugins: Plugins, cluster_id: str | None,
                 run_blocking: RunBlocking) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.herder = herder
        self.plugins = plugins
        self.cluster_id = cluster_id
        self.run_blocking = run_blocking

    def render(self, request: Request) -> int:
        method = (request.method or b"GET").decode("ascii")
        path = [unquote(p.decode("utf-8")) for p in (request.postpath or []) if p]
        body = request.content.read() if request.content is not None else b""
        expand = [v.decode() for v in (request.args or {}).get(b"expand", [])]
        headers = {name.decode("latin-1").lower(): values[-1].decode("latin-1")
                   for name, values in request.requestHeaders.getAllRawHeaders()}

        def handle() -> tuple[int, object]:
            return self.route(method, path, body, expand, headers)

        def write(result: tuple[int, object]) -> None:
            status, document = result
            request.setResponseCode(status)
            if document is not None or status not in (202, 204):
                request.setHeader(b"content-type", b"application/json")  # type: ignore[no-untyped-call]
                request.write(json.dumps(document).encode("utf-8"))  # type: ignore[no-untyped-call]
            request.finish()  # type: ignore[no-untyped-call]

        def failed(failure: Failure) -> None:
            error = failure.value
            if isinstance(error, RestError):
                write((error.status, {"error_code": error.status, "message": error.message}))
            else:
                logger.error("Uncaught exception in REST call to /%s: %s", "/".join(path),
                             failure.getTraceback())
                write((500, {"error_code": 500, "message": str(error)}))

        self.run_blocking(handle).addCallbacks(write, failed)
        return NOT_DONE_YET

    def route(self, method: str, path: list[str], body: bytes, expand: list[str] | None = None,
              headers: Mapping[str, str] | None = None) -> tuple[int, object]:
        h = self.herder
        match (method, path):
            case ("GET", []):
                return 200, {"version": KAFKA_VERSION, "commit": COMMIT,
                             "kafka_cluster_id": self.cluster_id}
            case ("GET", ["connectors"]) if expand:
                # KIP-465: ?expand=status&expand=info
                out: dict[str, dict[str, object]] = {}
                for listed in h.connectors():
                    entry = out[listed] = {}
                    if "info" in expand:
                        entry["info"] = h.connector_info(listed)
                    if "status" in expand:
                        entry["status"] = h.status(listed)
                return 200, out
            case ("GET", ["connectors"]):
                return 200, h.connectors()
            case ("POST", ["connectors"]):
                request = _json_object(body)
                name = request.get("name")
                config = request.get("config")
                if not isinstance(config, dict):
                    raise RestError(400, "Connector config is required")
                config = {str(k): str(v) for k, v in config.items()}
                if not isinstance(name, str) or not name.strip():
                    name = config.get("name", "")
                    if not name:
                        raise RestError(400, "Connector name is required")
                if "name" in config and config["name"] != name:
                    raise RestError(400, "Connector name configuration (" + config["name"] +
                                    ") doesn't match connector name in the URL (" + name + ")")
                _, info = h.put_connector_config(name, config, allow_replace=False)
                return 201, info
            case ("GET", ["connectors", name]):
                return 200, h.connector_info(name)
            case ("GET", ["connectors", name, "config"]):
                return 200, h.connector_config(name)
            case ("PUT", ["connectors", name, "config"]):
                config = {str(k): str(v) for k, v in _json_object(body).items()}
                if "name" in config and config["name"] != name:
                    raise RestError(400, "Connector name configuration (" + config["name"] +
                                    ") doesn't match connector name in the URL (" + name + ")")
                created, info = h.put_connector_config(name, config, allow_replace=True)
                return (201 if created else 200), info
            case ("GET", ["connectors", name, "status"]):
                return 200, h.status(name)
            case ("GET", ["connectors", name, "tasks"]):
                return 200, h.task_configs(name)
            case ("POST", ["connectors", name, "tasks"]):
                h.put_task_configs(name, body, headers or {})
                return 204, None
            case ("GET", ["connectors", name, "tasks", task, "status"]):
                return 200, h.task_status(name, _task_id(task))
            case ("POST", ["connectors", name, "restart"]):
                h.restart_connector(name)
                return 204, None
            case ("POST", ["connectors", name, "tasks", task, "restart"]):
                h.restart_task(name, _task_id(task))
                return 204, None
            case ("PUT", ["connectors", name, "pause"]):
                h.pause(name)
                return 202, None
            case ("PUT", ["connectors", name, "resume"]):
                h.resume(name)
                return 202, None
            case ("DELETE", ["connectors", name]):
                h.delete_connector(name)
                return 204, None
            case ("GET", ["connector-plugins"]):
                return 200, self.plugins.connector_plugins()
            case ("PUT", ["connector-plugins", plugin, "config", "validate"]):
                config = {str(k): str(v) for k, v in _json_object(body).items()}
                config.setdefault("connector.class", plugin)
                return 200, h.validate(config)
        raise RestError(404, "HTTP 404 Not Found")


def _json_object(body: bytes) -> dict[str, object]:
    try:
        document = json.loads(body or b"null")
    except ValueError as exc:
        raise RestError(500, f"Unrecognized token in request body: {exc}") from None
    if not isinstance(document, dict):
        raise RestError(500, "Cannot deserialize the request body: a JSON object is expected")
    return document


def _task_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RestError(404, "HTTP 404 Not Found") from None
