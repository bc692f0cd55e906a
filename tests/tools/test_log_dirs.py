"""kafka-log-dirs.sh's output, as Kafka 2.8's LogDirsCommand formats it."""

from __future__ import annotations

import io
import json

import pytest

from kafkaclone.clients.admin import LogDirDescription, ReplicaInfo
from kafkaclone.common.errors import KafkaStorageError, LogDirNotFoundError
from kafkaclone.tools.log_dirs import format_as_json, java_exception_name, main

pytestmark = pytest.mark.timeout(30)


def test_the_json_is_kafkas_compact_format_with_keys_in_order() -> None:
    described = {1: {
        "/disk1": LogDirDescription(KafkaStorageError("offline"), {}),
        "/disk2": LogDirDescription(None, {("t", 0): ReplicaInfo(1024, 0, False),
                                           ("u", 3): ReplicaInfo(10, 2, True)}),
    }}
    assert format_as_json(described, set()) == (
        '{"version":1,"brokers":[{"broker":1,"logDirs":['
        '{"logDir":"/disk1","error":"org.apache.kafka.common.errors.KafkaStorageException",'
        '"partitions":[]},'
        '{"logDir":"/disk2","error":null,"partitions":['
        '{"partition":"t-0","size":1024,"offsetLag":0,"isFuture":false},'
        '{"partition":"u-3","size":10,"offsetLag":2,"isFuture":true}]}]}]}')
    only_u = json.loads(format_as_json(described, {"u"}))
    assert [p["partition"] for p in only_u["brokers"][0]["logDirs"][1]["partitions"]] == ["u-3"]


def test_java_exception_names() -> None:
    assert java_exception_name(LogDirNotFoundError("x")) == (
        "org.apache.kafka.common.errors.LogDirNotFoundException")


def test_describe_is_required() -> None:
    err = io.StringIO()
    assert main(["--bootstrap-server", "127.0.0.1:1"], out=io.StringIO(), err=err) == 1
    assert "--describe" in err.getvalue()
