"""kafka-consumer-groups.sh against a local cluster: Kafka's output for --list, --describe
(offsets and lag while a producer runs ahead of a slow consumer, --members [--verbose],
--state), --reset-offsets (dry run, execute, every target, refused for an active group),
--delete-offsets and --delete; and that a group re-reads after --to-earliest --execute."""

from __future__ import annotations

import io
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kazoo.client import KazooClient

from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.tools import consumer_groups
from kafkaclone.tools.consumer_groups import parse_duration_ms

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka-consumer-groups.sh"
TOPICS_SCRIPT = SCRIPT.with_name("kafka-topics.sh")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={"offsets.topic.num.partitions": "4"}) as local:
        yield local


@pytest.fixture(scope="module")
def zk(cluster: LocalCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def tool(cluster: LocalCluster, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = consumer_groups.main(["--bootstrap-server", cluster.bootstrap_servers, *args],
                                out, err)
    return code, out.getvalue(), err.getvalue()


def create_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    done = subprocess.run(
        [str(TOPICS_SCRIPT), "--bootstrap-server", cluster.bootstrap_servers, "--create",
         "--topic", name, "--partitions", str(partitions), "--replication-factor", "1"],
        capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = producer.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} has no leaders")


def produce(cluster: LocalCluster, topic: str, per_partition: int, partitions: int,
            start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"{start + i}".encode(), partition=p,
                             timestamp=1_700_000_000_000 + (start + i) * 1000)
    assert producer.flush(30) == 0


def group_consumer(cluster: LocalCluster, group: str, **extra: object) -> Consumer:
    config: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
        "client.id": "slow-client", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500}
    config.update(extra)
    return Consumer(config)


def wait_assigned(c: Consumer, count: int) -> None:
    deadline = time.monotonic() + 60
    while len(c.assignment()) < count:
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.1)


def test_describe_shows_lag_of_a_slow_consumer_and_members(cluster: LocalCluster) -> None:
    topic = group = "lagging"
    create_topic(cluster, topic, 2)
    produce(cluster, topic, 20, 2)
    c = group_consumer(cluster, group)
    try:
        c.subscribe([topic])
        wait_assigned(c, 2)
        c.commit(offsets=[CkTopicPartition(topic, 0, 15), CkTopicPartition(topic, 1, 5)],
                 asynchronous=False)
        produce(cluster, topic, 30, 2, start=20)  # the producer runs ahead: ends at 50
        c.poll(0.1)
        code, out, err = tool(cluster, "--describe", "--group", group)
        assert code == 0, out + err
        lines = out.split("\n")
        assert lines[0] == ""
        member_id = c.memberid()
        assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                    "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = [line.split() for line in lines[2:] if line]
        assert rows == [[group, topic, "0", "15", "50", "35", member_id, "/127.0.0.1",
                         "slow-client"],
                        [group, topic, "1", "5", "50", "45", member_id, "/127.0.0.1",
                         "slow-client"]]
        width = max(15, len(member_id))
        assert lines[1] == (f"{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} "
                            f"{'CURRENT-OFFSET':<15} {'LOG-END-OFFSET':<15} {'LAG':<15} "
                            f"{'CONSUMER-ID':<{width}} {'HOST':<15} CLIENT-ID")
        code, out, _ = tool(cluster, "--describe", "--group", group, "--members", "--verbose")
        assert code == 0
        lines = out.split("\n")
        assert lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                    "#PARTITIONS", "ASSIGNMENT"]
        assert lines[2].split() == [group, member_id, "/127.0.0.1", "slow-client", "2",
                                    f"{topic}(0,1)"]
        code, out, _ = tool(cluster, "--describe", "--group", group, "--state")
        lines = out.split("\n")
        assert lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY",
                                    "STATE", "#MEMBERS"]
        fields = lines[2].split()
        assert fields[0] == group and fields[3:] == ["range", "Stable", "1"]
        # An active group's offsets cannot be reset.
        code, out, _ = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                            "--to-earliest", "--execute")
        assert code == 0
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                "but the current state is Stable.") in out
        # Listing, with and without states.
        code, out, _ = tool(cluster, "--list")
        assert group in out.split("\n")
        code, out, _ = tool(cluster, "--list", "--state", "stable")
        assert out.split("\n")[0].split() == ["GROUP", "STATE"]
        assert [group, "Stable"] in [line.split() for line in out.split("\n")]
    finally:
        c.close()
    code, out, err = tool(cluster, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in err
    rows = [line.split() for line in out.split("\n")[2:] if line]
    assert rows == [[group, topic, "0", "15", "50", "35", "-", "-", "-"],
                    [group, topic, "1", "5", "50", "45", "-", "-", "-"]]


def test_reset_to_earliest_makes_the_group_read_again(cluster: LocalCluster,
                                                      zk: KazooClient) -> None:
    topic = group = "rereading"
    create_topic(cluster, topic, 2)
    produce(cluster, topic, 10, 2)

    def read_all() -> list[int]:
        c = group_consumer(cluster, group)
        values: list[int] = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 60
            idle_since = None
            while time.monotonic() < deadline:
                message = c.poll(0.2)
                if message is None or message.error() is not None:
                    if values and idle_since is None:
                        idle_since = time.monotonic()
                    if idle_since is not None and time.monotonic() - idle_since > 2:
                        break
                    if not values and len(c.assignment()) == 2 and time.monotonic() > \
                            deadline - 50:
                        break
                    continue
                idle_since = None
                values.append(int(message.value()))
                c.commit(message, asynchronous=False)
        finally:
            c.close()
        return sorted(values)

    assert read_all() == sorted(list(range(10)) * 2)
    assert zk.get(f"/consumers/{group}/offsets/{topic}/0")[0] == b"10"
    # Dry run (the default): nothing changes.
    code, out, err = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                          "--to-earliest")
    assert code == 0 and "WARN: No action will be performed" in err
    assert out.split("\n")[1] == (f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} "
                                  f"{'NEW-OFFSET':<15}")
    assert [line.split() for line in out.split("\n")[2:] if line] == [
        [group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert zk.get(f"/consumers/{group}/offsets/{topic}/0")[0] == b"10"
    code, out, _ = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                        "--to-earliest", "--execute")
    assert code == 0
    assert zk.get(f"/consumers/{group}/offsets/{topic}/0")[0] == b"0"
    assert zk.get(f"/consumers/{group}/offsets/{topic}/1")[0] == b"0"
    assert read_all() == sorted(list(range(10)) * 2)


def reset(cluster: LocalCluster, group: str, *args: str) -> dict[tuple[str, int], int]:
    code, out, err = tool(cluster, "--reset-offsets", "--group", group, "--dry-run", *args)
    assert code == 0, out + err
    return {(f[1], int(f[2])): int(f[3]) for f in (line.split() for line in out.split("\n")[2:])
            if f}


def test_reset_targets(cluster: LocalCluster) -> None:
    topic = group = "targets"
    create_topic(cluster, topic, 2)
    produce(cluster, topic, 10, 2)  # timestamps 1_700_000_000_000 + i s
    code, _out, _ = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                        "--to-offset", "4", "--execute")
    assert code == 0
    everything = ["--topic", topic]
    assert reset(cluster, group, *everything, "--to-latest") == {(topic, 0): 10, (topic, 1): 10}
    assert reset(cluster, group, "--all-topics", "--to-current") == {(topic, 0): 4,
                                                                     (topic, 1): 4}
    assert reset(cluster, group, "--topic", f"{topic}:1", "--shift-by", "3") == {
        (topic, 1): 7}
    assert reset(cluster, group, *everything, "--shift-by", "-100") == {(topic, 0): 0,
                                                                        (topic, 1): 0}
    assert reset(cluster, group, *everything, "--to-offset", "99") == {(topic, 0): 10,
                                                                       (topic, 1): 10}
    assert reset(cluster, group, *everything, "--to-datetime",
                 "2023-11-14T22:13:26.000Z") == {(topic, 0): 6, (topic, 1): 6}
    assert reset(cluster, group, *everything, "--by-duration", "PT1H") == {(topic, 0): 10,
                                                                          (topic, 1): 10}
    assert reset(cluster, group, *everything, "--by-duration", "P36500D") == {(topic, 0): 0,
                                                                             (topic, 1): 0}


def test_delete_offsets_and_delete_group(cluster: LocalCluster, zk: KazooClient) -> None:
    topic = group = "deleting"
    create_topic(cluster, topic, 2)
    code, _, _ = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                      "--to-earliest", "--execute")
    assert code == 0
    code, out, _ = tool(cluster, "--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert code == 0
    assert f"Request succeed for deleting offsets with topic {topic} group {group}" in out
    assert [line.split() for line in out.split("\n")[-3:] if line] == [
        ["TOPIC", "PARTITION", "STATUS"], [topic, "1", "Successful"]]
    assert zk.exists(f"/consumers/{group}/offsets/{topic}/1") is None
    assert zk.exists(f"/consumers/{group}/offsets/{topic}/0") is not None
    code, out, _ = tool(cluster, "--delete", "--group", group, "--group", "never-was")
    assert "Error: Deletion of some consumer groups failed:" in out
    assert ("* Group 'never-was' could not be deleted due to: "
            "org.apache.kafka.common.errors.GroupIdNotFoundException") in out
    assert f"These consumer groups were deleted successfully: '{group}'" in out
    assert zk.exists(f"/consumers/{group}") is None
    code, out, _ = tool(cluster, "--describe", "--group", group)
    assert f"Error: Consumer group '{group}' does not exist." in out


def test_script_and_usage_errors(cluster: LocalCluster) -> None:
    done = subprocess.run([str(SCRIPT), "--bootstrap-server", cluster.bootstrap_servers,
                           "--list"], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    code, _, err = tool(cluster, "--describe")
    assert code == 1 and "[all-groups], [group]" in err
    code, _, err = tool(cluster, "--reset-offsets", "--group", "g", "--all-topics")
    assert code == 1 and "takes exactly one of these options" in err
    code, _, err = tool(cluster, "--list", "--describe")
    assert code == 1 and "exactly one action" in err


def test_parse_duration() -> None:
    assert parse_duration_ms("PT1H") == 3_600_000
    assert parse_duration_ms("P1DT2H3M4.5S") == 93_784_500
    assert parse_duration_ms("-PT10S") == -10_000


def test_all_groups_and_export(cluster: LocalCluster) -> None:
    topic = "many-groups"
    create_topic(cluster, topic, 1)
    produce(cluster, topic, 5, 1)
    for group in ("many-a", "many-b"):
        code, _, _ = tool(cluster, "--reset-offsets", "--group", group, "--topic", topic,
                          "--to-offset", "2", "--execute")
        assert code == 0
    code, out, _ = tool(cluster, "--list")
    assert {"many-a", "many-b"} <= set(out.split("\n"))
    code, out, err = tool(cluster, "--describe", "--all-groups")
    assert code == 0, out + err
    rows = [line.split() for line in out.split("\n") if line.startswith("many-")]
    assert ["many-a", topic, "0", "2", "5", "3", "-", "-", "-"] in rows
    assert ["many-b", topic, "0", "2", "5", "3", "-", "-", "-"] in rows
    code, out, _ = tool(cluster, "--reset-offsets", "--group", "many-a", "--topic", topic,
                        "--to-latest", "--dry-run", "--export")
    assert code == 0 and out == f"{topic},0,5\n"
