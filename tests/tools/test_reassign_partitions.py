"""kafka-reassign-partitions.sh without a cluster: Kafka's JSON files (log dirs included),
its options, its refusals and its lines for log-dir moves. The actions run against a real
cluster in tests/controller/test_reassignment.py and tests/tools/test_reassign_log_dirs.py."""

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
    parsed, replica_dirs = tool.parse_partition_reassignment_data(doc)
    assert parsed == {TopicPartition("t", 1): [3, 1], TopicPartition("t", 0): [2, 3]}
    assert replica_dirs == {}
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
    ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/data", 7]}],
     "Invalid log_dirs"),
    ([{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}],
     "different from size of log dirs"),
    ([], "cannot be empty"),
])
def test_bad_reassignment_files_are_refused(entries: list[dict[str, object]],
                                            message: str) -> None:
    with pytest.raises(CommandError, match=message):
        tool.parse_partition_reassignment_data({"version": 1, "partitions": entries})


def test_log_dirs_name_the_replicas_to_move_and_are_written_back() -> None:
    doc = {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d/b", "any"]},
        {"topic": "u", "partition": 3, "replicas": [2], "log_dirs": ["/d/a"]}]}
    parsed, replica_dirs = tool.parse_partition_reassignment_data(doc)
    assert replica_dirs == {("t", 0, 1): "/d/b", ("u", 3, 2): "/d/a"}
    assert json.loads(tool.format_as_reassignment_json(parsed, replica_dirs))["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d/b", "any"]},
        {"topic": "u", "partition": 3, "replicas": [2], "log_dirs": ["/d/a"]}]


def test_move_states_are_reported_in_kafkas_words() -> None:
    state = tool.MoveState
    lines = tool.format_move_states({
        ("t", 0, 2): state("/b", "/b", None),
        ("t", 0, 1): state("/b", "/a", "/b"),
        ("t", 1, 1): state("/b", "/a", "/c"),
        ("t", 2, 1): state("/b", "/a", None),
        ("t", 3, 1): state("/b", None, None),
        ("t", 4, 1): None,
    })
    assert lines == [
        "Reassignment of replica t-0-1 is still in progress.",
        "Partition t-1 on broker 1 is being moved to log dir /c instead of /b.",
        "Partition t-2 on broker 1 is not being moved from log dir /a to /b.",
        "Partition t-3 is not found in any live log dir on broker 1. There is likely an "
        "offline log directory on the broker.",
        "Partition t-4 cannot be found in any live log directory on broker 1.",
        "Reassignment of replica t-0-2 completed successfully.",
    ]
    assert [s.done for s in (state("/b", "/a", "/b"), state("/b", "/b", None))] == [False,
                                                                                   True]


def test_options_need_one_action_and_refuse_log_dir_throttles(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1]}]}))
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--list", "--verify"],
                     out=io.StringIO(), err=err) == 1
    assert "exactly one action" in err.getvalue()
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--verify",
                      "--reassignment-json-file", str(plan),
                      "--replica-alter-log-dirs-throttle", "100"],
                     out=io.StringIO(), err=err) == 1
    assert "replica-alter-log-dirs-throttle is only allowed with execute" in err.getvalue()
    err = io.StringIO()
    assert tool.main(["--bootstrap-server", "127.0.0.1:1", "--verify", "--throttle", "5",
                      "--reassignment-json-file", str(plan)],
                     out=io.StringIO(), err=err) == 1
    assert "only allowed with execute" in err.getvalue()
