"""kafka-reassign-partitions.sh without a cluster: Kafka's JSON files, its options and the
refusals (log-dir moves are not supported). The actions run against a real cluster in
tests/controller/test_reassignment.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.tools import reassign_partitions as tool
from kafkaclone.tools.command import CommandError

pytestmark = pytest.mark.timeout(30)


def test_reassignment_json_is_read_and_written_as_kafka_does() -> None:
    doc = {"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 0, "replicas": [2, 3]}]}
    parsed = tool.parse_partition_reassignment_data(doc)
    assert parsed == {TopicPartition("t", 1): [3, 1], TopicPartition("t", 0): [2, 3]}
    assert tool.format_as_reassignment_json(parsed) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],'
        '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[3,1],'
        '"log_dirs":["any","any"]}]}')
    assert tool.parse_topics_data({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]}
                                  ) == ["a", "b"]


@pytest.mark.parametrize(("entries", "message"), [
    ([{"topic": "t", "partition": 0, "replicas": [1, 1]}], "duplicate entries"),
    ([{"topic": "t", "partition": 0, "replicas": [1]},
      {"topic": "t", "partition": 0, "replicas": [2]}], "duplicate topic partitions"),
    ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/data", "any"]}],
     "not supported"),
    ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}],
     "different from size of log dirs"),
    ([], "cannot be empty"),
])
def test_bad_reassignment_files_are_refused(entries: list[dict[str, object]],
                                            message: str) -> None:
    with pytest.raises(CommandError, match=message):
        tool.parse_partition_reassignment_data({"version": 1, "partitions": entries})


def test_options_need_one_action_and_refuse_log_dir_throttles(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1]}]}))
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--list", "--verify"],
                     out=io.StringIO(), err=err) == 1
    assert "exactly one action" in err.getvalue()
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--execute",
                      "--reassignment-json-file", str(plan),
                      "--replica-alter-log-dirs-throttle", "100"],
                     out=io.StringIO(), err=err) == 1
    assert "--replica-alter-log-dirs-throttle is not supported" in err.getvalue()
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--verify", "--throttle", "5",
                      "--reassignment-json-file", str(plan)],
                     out=io.StringIO(), err=err) == 1
    assert "only allowed with execute" in err.getvalue()
