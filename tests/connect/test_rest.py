"""The REST routes without a socket or a broker: twisted.web's DummyRequest, the herder's
calls run inline; validation answers Kafka's ConfigInfos and error JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.web.test.requesthelper import DummyRequest

from kafkaclone.connect.herder import StandaloneHerder
from kafkaclone.connect.offsets import FileOffsetBackingStore
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.rest import ConnectRestResource
from kafkaclone.connect.worker import WorkerSettings

pytestmark = pytest.mark.timeout(10)


def inline(handler: Callable[[], tuple[int, object]]) -> Deferred[tuple[int, object]]:
    return maybeDeferred(handler)


@pytest.fixture
def resource() -> ConnectRestResource:
    settings = WorkerSettings(worker_id="w:8083", bootstrap_servers="127.0.0.1:1",
                              offset_flush_interval_s=1, offset_flush_timeout_s=1,
                              key_converter="org.apache.kafka.connect.json.JsonConverter",
                              value_converter="org.apache.kafka.connect.json.JsonConverter",
                              worker_props={})
    plugins = Plugins()
    return ConnectRestResource(StandaloneHerder(settings, plugins, FileOffsetBackingStore(None)),
                               plugins, "cluster-1", inline)


def call(resource: ConnectRestResource, method: str, path: str, body: object = None
         ) -> tuple[int, object]:
    request = DummyRequest([p.encode() for p in path.strip("/").split("/") if p])
    request.method = method.encode()
    request.content = io.BytesIO(b"" if body is None else json.dumps(body).encode())
    resource.render(request)
    assert request.finished
    raw = b"".join(request.written)
    return request.responseCode or 200, json.loads(raw) if raw else None


def test_root_plugins_and_unknown_paths(resource: ConnectRestResource) -> None:
    assert call(resource, "GET", "/") == (200, {"version": "2.8.0", "commit": "kafkaclone",
                                                "kafka_cluster_id": "cluster-1"})
    status, plugins = call(resource, "GET", "/connector-plugins")
    assert status == 200
    assert {"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink",
            "version": "2.8.0"} in plugins  # type: ignore[operator]
    assert call(resource, "GET", "/nope") == (404, {"error_code": 404,
                                                    "message": "HTTP 404 Not Found"})
    assert call(resource, "GET", "/connectors/x/status") == (
        404, {"error_code": 404, "message": "Connector x not found"})


def test_validate_answers_config_infos(resource: ConnectRestResource) -> None:
    status, infos = call(resource, "PUT", "/connector-plugins/FileStreamSink/config/validate",
                         {"connector.class": "FileStreamSink", "name": "s", "tasks.max": "x",
                          "transforms": "r", "transforms.r.type":
                          "org.apache.kafka.connect.transforms.RegexRouter"})
    assert status == 200
    assert isinstance(infos, dict)
    assert infos["name"] == "FileStreamSink"
    assert infos["error_count"] == 3  # tasks.max, topics / topics.regex
    by_name = {c["value"]["name"]: c for c in infos["configs"]}
    assert set(by_name["tasks.max"]["value"]) == {"name", "value", "recommended_values",
                                                  "errors", "visible"}
    assert by_name["tasks.max"]["value"]["errors"] == [
        "Invalid value 'x' for configuration tasks.max: not a number of type INT"]
    assert by_name["topics"]["value"]["errors"] == ["Must configure one of topics or "
                                                    "topics.regex"]
    assert by_name["transforms.r.regex"]["definition"]["group"] == "Transforms: r"
    assert by_name["file"]["definition"]["required"] is False
    assert "Common" in infos["groups"]


def test_post_of_an_invalid_config_starts_nothing(resource: ConnectRestResource) -> None:
    status, error = call(resource, "POST", "/connectors", {
        "name": "src", "config": {"connector.class": "FileStreamSource"}})
    assert status == 400
    assert isinstance(error, dict)
    assert error["error_code"] == 400
    assert error["message"].startswith(
        "Connector configuration is invalid and contains the following 1 error(s):\n"
        "topic: Missing required configuration \"topic\" which has no default value.")
    assert call(resource, "GET", "/connectors") == (200, [])
    status, unknown = call(resource, "POST", "/connectors", {
        "name": "x", "config": {"connector.class": "NoSuchConnector"}})
    assert status == 500
    assert "Failed to find any class that implements Connector" in unknown[  # type: ignore[index]
        "message"]


def test_plugins_resolve_kafka_class_names_aliases_and_extra_entry_points() -> None:
    plugins = Plugins({"com.example.Router": "kafkaclone.connect.transforms:RegexRouter"})
    assert plugins.connector_class("FileStreamSource") is plugins.connector_class(
        "org.apache.kafka.connect.file.FileStreamSourceConnector")
    assert plugins.converter_class(
        "org.apache.kafka.connect.converters.ByteArrayConverter").__name__ == \
        "ByteArrayConverter"
    assert plugins.transformation_class("com.example.Router").__name__ == "RegexRouter"
    # Sorted by class name, as Kafka's PluginDesc orders them.
    assert [p["class"] for p in plugins.connector_plugins()] == [
        "io.confluent.connect.jdbc.JdbcSinkConnector",
        "io.confluent.connect.jdbc.JdbcSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "org.apache.kafka.connect.file.FileStreamSourceConnector"]
