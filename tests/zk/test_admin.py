"""AdminZkClient against a real ZooKeeper: Kafka's bytes on success, Kafka's errors and
nothing written on failure, and Kafka's replica placement."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import (
    BrokerNotAvailableError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicExceptionError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.zk.admin import (
    AdminZkClient,
    BrokerMetadata,
    RackAwareMode,
    assign_replicas_to_brokers,
    has_collision,
    rack_alternated_broker_list,
    validate_topic_name,
)
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.errors import AdminOperationError, TopicAlreadyMarkedForDeletionError
from kafkaclone.zk.znodes import BrokerId, BrokerInfo, kafka_uuid_from_string
from tests.zk.conftest import run

TOPIC_ID = kafka_uuid_from_string("cMr3GpVESX2L3byPGf93lQ")


@pytest.fixture
def admin(zk_client: KafkaZkClient) -> AdminZkClient:
    run(zk_client.create_top_level_paths())
    for broker_id in (1, 2, 3):
        endpoint = EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "h", 9090 + broker_id)
        run(zk_client.register_broker(BrokerInfo(BrokerId(broker_id), (endpoint,))))
    return AdminZkClient(zk_client, rng=random.Random(7))


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(i) for i in ids]


def racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, rack) for i, rack in sorted(racks.items())]


def tree(zk: KazooClient, path: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode with its data and version (what "nothing written" compares)."""
    result = {}
    for child in zk.get_children(path):
        child_path = f"{path.rstrip('/')}/{child}"
        data, stat = zk.get(child_path)
        result[child_path] = (data, stat.version)
        result.update(tree(zk, child_path))
    return result


# -- replica placement (Kafka's AdminUtils) -------------------------------------------------------


def test_assignment_of_kafkas_documented_example() -> None:
    # AdminUtils' scaladoc: 5 brokers, 10 partitions, 3 replicas, start at broker-0
    assignment = assign_replicas_to_brokers(
        brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0)
    assert assignment == {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }  # fmt: skip


def test_assignment_with_fixed_start_and_shift() -> None:
    # worked by hand from Kafka's algorithm: start index 2, first shift 1, 4 brokers
    assert assign_replicas_to_brokers(
        brokers(10, 20, 30, 40), 5, 2, fixed_start_index=2, fixed_replica_shift=1
    ) == {0: (30, 10), 1: (40, 20), 2: (10, 30), 3: (20, 40), 4: (30, 20)}
    assert assign_replicas_to_brokers(
        brokers(1, 2, 3), 6, 3, fixed_start_index=0) == {
        0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2), 3: (1, 3, 2), 4: (2, 1, 3), 5: (3, 2, 1),
    }  # fmt: skip
    # continuing a topic from partition 3, as partition additions do
    assert assign_replicas_to_brokers(
        brokers(1, 2, 3), 2, 3, fixed_start_index=0, start_partition_id=3
    ) == {3: (1, 3, 2), 4: (2, 1, 3)}


def test_random_assignment_spreads_leaders_and_replicas() -> None:
    for seed in range(20):
        assignment = assign_replicas_to_brokers(
        brokers(1, 2, 3, 4), 8, 3, rng=random.Random(seed))
        assert sorted(assignment) == list(range(8))
        assert all(len(set(replicas)) == 3 for replicas in assignment.values())
        assert Counter(replicas[0] for replicas in assignment.values()) == {1: 2, 2: 2, 3: 2, 4: 2}
        assert Counter(b for r in assignment.values() for b in r) == {1: 6, 2: 6, 3: 6, 4: 6}


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "error"),
    [
        (0, 1, InvalidPartitionsError),
        (-1, 1, InvalidPartitionsError),
        (1, 0, InvalidReplicationFactorError),
        (1, 4, InvalidReplicationFactorError),
    ],
)
def test_assignment_errors(partitions: int, replication_factor: int, error: type) -> None:
    with pytest.raises(error):
        assign_replicas_to_brokers(
        brokers(1, 2, 3), partitions, replication_factor)


# Kafka's AdminRackAwareTest cluster: racks named out of broker order
SIX_BROKERS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_broker_list() -> None:
    assert rack_alternated_broker_list(SIX_BROKERS) == [0, 3, 1, 5, 4, 2]
    five = {b: r for b, r in SIX_BROKERS.items() if b != 5}
    assert rack_alternated_broker_list(five) == [0, 3, 1, 4, 2]
    assert rack_alternated_broker_list({0: "a", 1: "a", 2: "b", 3: "c", 4: "c"}) == [
        0, 2, 3, 1, 4]  # fmt: skip


def test_rack_aware_assignment_of_kafkas_test() -> None:
    # Kafka's AdminRackAwareTest: arranged list 0, 3, 1, 5, 4, 2; start index 0, shift 0
    assignment = assign_replicas_to_brokers(
        racked(SIX_BROKERS), 7, 3, fixed_start_index=0, start_partition_id=0)
    assert assignment == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3),
        6: (0, 4, 2),
    }  # fmt: skip


def test_rack_aware_assignment_with_more_replicas_than_racks() -> None:
    # worked by hand: racks r1 = {0, 1}, r2 = {2}; arranged list 0, 2, 1. Partition 2's
    # first candidate (broker 0) is skipped: its rack r1 already holds the leader while
    # r2 holds nothing. Partition 3 starts the second round: the shift grows by one.
    cluster = racked({0: "r1", 1: "r1", 2: "r2"})
    assert assign_replicas_to_brokers(cluster, 4, 3, fixed_start_index=0) == {
        0: (0, 2, 1), 1: (2, 1, 0), 2: (1, 2, 0), 3: (0, 2, 1)}
    assert assign_replicas_to_brokers(cluster, 3, 2, fixed_start_index=0) == {
        0: (0, 2), 1: (2, 1), 2: (1, 2)}
    # a fixed shift apart from the start: start index 1, shift 1 (times 2 racks)
    assert assign_replicas_to_brokers(
        cluster, 2, 2, fixed_start_index=1, fixed_replica_shift=1) == {0: (2, 1), 1: (1, 2)}


def test_rack_aware_assignment_properties() -> None:
    cluster = racked({1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"})
    rack_of = {b.id: b.rack for b in cluster}
    for seed in range(20):
        assignment = assign_replicas_to_brokers(cluster, 30, 3, rng=random.Random(seed))
        assert sorted(assignment) == list(range(30))
        assert all(len({rack_of[b] for b in r}) == 3 for r in assignment.values())
        assert Counter(r[0] for r in assignment.values()) == {b: 5 for b in range(1, 7)}
        assert Counter(b for r in assignment.values() for b in r) == {
            b: 15 for b in range(1, 7)}


def test_some_brokers_without_a_rack_is_kafkas_error() -> None:
    mixed = [BrokerMetadata(1, "a"), BrokerMetadata(2, None), BrokerMetadata(3, "b")]
    with pytest.raises(AdminOperationError) as raised:
        assign_replicas_to_brokers(mixed, 3, 2)
    assert raised.value.message == (
        "Not all brokers have rack information for replica rack aware assignment.")
    assert raised.value.code == -1  # not an ApiException in Kafka: UNKNOWN_SERVER_ERROR


def _register_racked(zk_client: KafkaZkClient, racks: dict[int, str | None]) -> None:
    run(zk_client.create_top_level_paths())
    for broker_id, rack in racks.items():
        endpoint = EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "h", 9090 + broker_id)
        run(zk_client.register_broker(BrokerInfo(BrokerId(broker_id), (endpoint,), rack=rack)))


def test_rack_aware_modes_on_a_mixed_cluster(zk_client: KafkaZkClient, zk: KazooClient) -> None:
    _register_racked(zk_client, {1: "a", 2: None, 3: "b"})
    admin = AdminZkClient(zk_client, rng=random.Random(3))
    before = tree(zk)
    with pytest.raises(AdminOperationError, match="Add --disable-rack-aware in command line"):
        run(admin.create_topic("t", 3, 2))
    assert tree(zk) == before
    assert run(admin.get_broker_metadatas(RackAwareMode.SAFE)) == brokers(1, 2, 3)
    assert run(admin.get_broker_metadatas(RackAwareMode.DISABLED)) == brokers(1, 2, 3)
    created = run(admin.create_topic("t", 3, 2, rack_aware_mode=RackAwareMode.DISABLED))
    assert len(created.partitions) == 3
    with pytest.raises(AdminOperationError):
        run(admin.add_partitions("t", 4))


def test_rack_aware_topic_creation_and_additions(zk_client: KafkaZkClient) -> None:
    racks: dict[int, str | None] = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
    _register_racked(zk_client, racks)
    admin = AdminZkClient(zk_client, rng=random.Random(5))
    assert run(admin.get_broker_metadatas(RackAwareMode.SAFE)) == [
        BrokerMetadata(b, r) for b, r in racks.items()]
    created = run(admin.create_topic("t", 12, 3))
    grown = run(admin.add_partitions("t", 20))
    assert {p: a.replicas for p, a in created.partitions.items()} == {
        p: r for p, r in grown.items() if p < 12}
    for replicas in grown.values():
        assert len({racks[b] for b in replicas}) == 3
    # the additions continue Kafka's placement: start at partition 0's leader's position
    # among the brokers by id, partition ids from 12
    first = created.partitions[0].replicas[0]
    assert {p: r for p, r in grown.items() if p >= 12} == assign_replicas_to_brokers(
        racked({b: r for b, r in racks.items() if r is not None}), 8, 3,
        fixed_start_index=first - 1, start_partition_id=12)


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "a/b", "with space", "ünïcode", "tab\t", "a:b"]
)
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicExceptionError):
        validate_topic_name(name)


def test_legal_topic_names() -> None:
    for name in ("a", "a" * 249, "My_Topic-1.v2", "...", "__consumer_offsets"):
        validate_topic_name(name)
    assert has_collision("a.b", "a_b")
    assert not has_collision("a.b", "a-b")


# -- create_topic ---------------------------------------------------------------------------------


def test_create_topic_writes_kafkas_json(admin: AdminZkClient, zk: KazooClient) -> None:
    created = run(
        admin.create_topic(
            "demo",
            6,
            3,
            {"cleanup.policy": "compact", "min.insync.replicas": "2"},
            fixed_start_index=0,
            topic_id=TOPIC_ID,
        )
    )
    assert created.topic_id == TOPIC_ID
    assert created.replicas() == {
        0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2), 3: (1, 3, 2), 4: (2, 1, 3), 5: (3, 2, 1),
    }  # fmt: skip
    assert zk.get("/brokers/topics/demo")[0] == (
        b'{"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2],"3":[1,3,2],"4":[2,1,3],'
        b'"5":[3,2,1]},"topic_id":"cMr3GpVESX2L3byPGf93lQ","adding_replicas":{},'
        b'"removing_replicas":{},"version":3}'
    )
    assert zk.get("/config/topics/demo")[0] == (
        b'{"version":1,"config":{"cleanup.policy":"compact","min.insync.replicas":"2"}}'
    )
    # the config is written before the assignment, as in Kafka
    assert zk.exists("/config/topics/demo").czxid < zk.exists("/brokers/topics/demo").czxid


def test_create_topic_without_configs_still_writes_an_empty_config(
    admin: AdminZkClient, zk: KazooClient
) -> None:
    created = run(admin.create_topic("t", 3, 2))
    assert zk.get("/config/topics/t")[0] == b'{"version":1,"config":{}}'
    written = json.loads(zk.get("/brokers/topics/t")[0])
    assert kafka_uuid_from_string(written["topic_id"]) == created.topic_id
    assert {int(p): tuple(r) for p, r in written["partitions"].items()} == created.replicas()


def test_create_topic_with_manual_assignment(admin: AdminZkClient, zk: KazooClient) -> None:
    created = run(admin.create_topic("m", -1, -1, replica_assignment={0: [3, 1], 1: [1, 2]}))
    assert created.replicas() == {0: (3, 1), 1: (1, 2)}
    assert json.loads(zk.get("/brokers/topics/m")[0])["partitions"] == {"0": [3, 1], "1": [1, 2]}


def test_validate_only_writes_nothing(admin: AdminZkClient, zk: KazooClient) -> None:
    before = tree(zk)
    created = run(admin.create_topic("v", 2, 2, validate_only=True))
    assert len(created.partitions) == 2
    assert tree(zk) == before


INVALID_CREATES: list[tuple[str, dict[str, Any], type[KafkaError]]] = [
    ("illegal name", {"topic": "a/b"}, InvalidTopicExceptionError),
    ("empty name", {"topic": ""}, InvalidTopicExceptionError),
    ("dot", {"topic": "."}, InvalidTopicExceptionError),
    ("dot dot", {"topic": ".."}, InvalidTopicExceptionError),
    ("too long", {"topic": "x" * 250}, InvalidTopicExceptionError),
    ("RF above live brokers", {"replication_factor": 4}, InvalidReplicationFactorError),
    ("RF zero", {"replication_factor": 0}, InvalidReplicationFactorError),
    ("zero partitions", {"partitions": 0}, InvalidPartitionsError),
    ("negative partitions", {"partitions": -3}, InvalidPartitionsError),
    ("unknown config", {"configs": {"no.such.config": "1"}}, InvalidConfigError),
    ("bad config value", {"configs": {"cleanup.policy": "sometimes"}}, InvalidConfigError),
    ("duplicate create", {"topic": "existing"}, TopicAlreadyExistsError),
    ("collision", {"topic": "col.lide"}, InvalidTopicExceptionError),
    (
        "non-consecutive partitions",
        {"replica_assignment": {0: [1], 2: [2]}},
        InvalidReplicaAssignmentError,
    ),
    ("duplicate replicas", {"replica_assignment": {0: [1, 1]}}, InvalidReplicaAssignmentError),
    (
        "inconsistent replication factor",
        {"replica_assignment": {0: [1, 2], 1: [1]}},
        InvalidReplicaAssignmentError,
    ),
    ("empty replicas", {"replica_assignment": {0: []}}, InvalidReplicaAssignmentError),
]


@pytest.mark.parametrize(
    ("request_args", "error"),
    [pytest.param(args, error, id=name) for name, args, error in INVALID_CREATES],
)
def test_invalid_creates_raise_kafkas_error_and_write_nothing(
    admin: AdminZkClient, zk: KazooClient, request_args: dict[str, Any], error: type[KafkaError]
) -> None:
    run(admin.create_topic("existing", 1, 1))
    run(admin.create_topic("col_lide", 1, 1))
    before = tree(zk)
    args: dict[str, Any] = {"topic": "new-topic", "partitions": 3, "replication_factor": 3}
    args.update(request_args)
    with pytest.raises(error):
        run(admin.create_topic(**args))
    assert tree(zk) == before


def test_error_codes_are_kafkas() -> None:
    assert InvalidTopicExceptionError.code == 17
    assert TopicAlreadyExistsError.code == 36
    assert InvalidPartitionsError.code == 37
    assert InvalidReplicationFactorError.code == 38
    assert InvalidReplicaAssignmentError.code == 39
    assert InvalidConfigError.code == 40


# -- delete_topic, add_partitions -----------------------------------------------------------------


def test_delete_topic(admin: AdminZkClient, zk: KazooClient) -> None:
    run(admin.create_topic("t", 1, 1))
    run(admin.delete_topic("t"))
    assert zk.get("/admin/delete_topics/t")[0] == b""
    with pytest.raises(TopicAlreadyMarkedForDeletionError):
        run(admin.delete_topic("t"))
    with pytest.raises(UnknownTopicOrPartitionError):
        run(admin.delete_topic("never-created"))
    assert zk.get_children("/admin/delete_topics") == ["t"]


def test_add_partitions_continues_kafkas_placement(admin: AdminZkClient, zk: KazooClient) -> None:
    run(admin.create_topic("t", 3, 3, fixed_start_index=0, topic_id=TOPIC_ID))
    assignment = run(admin.add_partitions("t", 5))
    assert assignment == {
        0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2), 3: (1, 3, 2), 4: (2, 1, 3),
    }  # fmt: skip
    written = json.loads(zk.get("/brokers/topics/t")[0])
    assert written["topic_id"] == "cMr3GpVESX2L3byPGf93lQ"
    assert written["partitions"]["4"] == [2, 1, 3]
    manual = run(admin.add_partitions("t", 6, [[3, 2, 1]]))
    assert manual[5] == (3, 2, 1)


@pytest.mark.parametrize(
    ("count", "assignment", "error"),
    [
        (2, None, InvalidPartitionsError),  # a decrease
        (3, None, InvalidPartitionsError),  # no change
        (4, [[1, 2, 9]], InvalidReplicaAssignmentError),  # unknown broker
        (5, [[1, 2, 3]], InvalidReplicaAssignmentError),  # wrong number of assignments
        (4, [[1, 2]], InvalidReplicaAssignmentError),  # inconsistent replication factor
        (4, [[1, 1, 2]], InvalidReplicaAssignmentError),  # duplicate broker
    ],
)
def test_invalid_partition_additions_write_nothing(
    admin: AdminZkClient,
    zk: KazooClient,
    count: int,
    assignment: list[list[int]] | None,
    error: type[KafkaError],
) -> None:
    run(admin.create_topic("t", 3, 3))
    before = tree(zk)
    with pytest.raises(error):
        run(admin.add_partitions("t", count, assignment))
    assert tree(zk) == before


def test_an_assignment_beyond_zookeepers_limit_is_refused_and_writes_nothing(
    admin: AdminZkClient, zk: KazooClient, zk_client: KafkaZkClient
) -> None:
    before = tree(zk)
    with pytest.raises(PolicyViolationError, match=r"jute\.maxbuffer"):
        run(admin.create_topic("huge", 100_000, 3))
    assert tree(zk) == before
    run(admin.create_topic("t", 3, 3))
    with pytest.raises(PolicyViolationError, match="100000 partitions"):
        run(admin.add_partitions("t", 100_000))
    assert zk.get("/brokers/topics/t")[1].version == 0
    run(admin.create_topic("after", 3, 3))  # the session still serves
    assert run(zk_client.get_topic_partition_count("after")) == 3


def test_add_partitions_to_a_missing_or_deleted_topic(admin: AdminZkClient) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        run(admin.add_partitions("nope", 3))
    run(admin.create_topic("t", 1, 1))
    run(admin.delete_topic("t"))
    with pytest.raises(InvalidTopicExceptionError, match="queued for deletion"):
        run(admin.add_partitions("t", 3))


def test_add_partitions_checks_broker_availability(admin: AdminZkClient) -> None:
    assert BrokerNotAvailableError.code == 8
    run(admin.create_topic("t", 1, 1))
    validate_only = run(admin.add_partitions("t", 2, [[2]], validate_only=True))
    assert validate_only == {0: validate_only[0], 1: (2,)}


# -- configs --------------------------------------------------------------------------------------


def test_change_topic_config(admin: AdminZkClient, zk: KazooClient) -> None:
    run(admin.create_topic("t", 1, 1))
    run(admin.change_topic_config("t", {"retention.ms": "60000"}))
    assert zk.get("/config/topics/t")[0] == b'{"version":1,"config":{"retention.ms":"60000"}}'
    notifications = zk.get_children("/config/changes")
    assert len(notifications) == 1
    assert zk.get(f"/config/changes/{notifications[0]}")[0] == (
        b'{"version":2,"entity_path":"topics/t"}'
    )
    assert run(admin.fetch_entity_config("topics", "t")) == {"retention.ms": "60000"}
    assert run(admin.get_all_topic_configs()) == {"t": {"retention.ms": "60000"}}
    before = tree(zk)
    with pytest.raises(UnknownTopicOrPartitionError):
        run(admin.change_topic_config("u", {"retention.ms": "1"}))
    with pytest.raises(InvalidConfigError):
        run(admin.change_topic_config("t", {"retention.ms": "soon"}))
    assert tree(zk) == before


def test_change_broker_config(admin: AdminZkClient, zk: KazooClient) -> None:
    run(admin.change_broker_config(1, {"log.cleaner.threads": "2"}))
    run(admin.change_broker_config(None, {"log.cleaner.threads": "3"}))
    assert zk.get("/config/brokers/1")[0] == b'{"version":1,"config":{"log.cleaner.threads":"2"}}'
    assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {
        "log.cleaner.threads": "3"
    }
    paths = sorted(
        json.loads(zk.get(f"/config/changes/{n}")[0])["entity_path"]
        for n in zk.get_children("/config/changes")
    )
    assert paths == ["brokers/1", "brokers/<default>"]
