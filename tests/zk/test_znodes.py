"""Znode encodings: Kafka's exact bytes, decoding what Kafka brokers wrote, and every
payload validated against its JSON Schema in zk_schema/."""

from __future__ import annotations

import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.zk.errors import ZNodeDecodeError
from kafkaclone.zk.znodes import (
    PAYLOAD_ZNODES,
    PERSISTENT_ZK_PATHS,
    BrokerId,
    BrokerIdZNode,
    BrokerInfo,
    BrokerSequenceIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ConsumerIdsZNode,
    ConsumerOffsetZNode,
    ConsumerOwnersZNode,
    ConsumerRegistration,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    IsrChangeNotificationSequenceZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PayloadFormat,
    PreferredReplicaElectionZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicPartition,
    TopicPartitionStateZNode,
    TopicZNode,
    ZNodeKind,
    kafka_uuid_from_string,
    kafka_uuid_to_string,
    payload_instance,
)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "zk_schema"


@cache
def validator(schema: str) -> Draft202012Validator:
    document = json.loads((SCHEMA_DIR / f"{schema}.schema.json").read_text())
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


def assert_valid(znode: type, data: bytes) -> None:
    """``data`` is a payload ``znode``'s schema accepts."""
    errors = list(validator(znode.SCHEMA).iter_errors(payload_instance(znode, data)))
    assert not errors, [e.message for e in errors]


def assert_invalid(znode: type, instance: Any) -> None:
    assert not validator(znode.SCHEMA).is_valid(instance)


PLAINTEXT = EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "localhost", 9092)
TOPIC_ID = kafka_uuid_from_string("W3mXDtj1RsWmsEhQrZjN5g")


# -- the schema directory -----------------------------------------------------------------


def test_every_payload_znode_has_a_valid_schema_and_every_schema_a_znode() -> None:
    names = {znode.SCHEMA for znode in PAYLOAD_ZNODES}
    files = {path.name.removesuffix(".schema.json") for path in SCHEMA_DIR.glob("*.schema.json")}
    assert names == files
    for name in names:
        document = validator(name).schema
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert name.rsplit(".v", 1)[1].isdigit()


def test_every_payload_znode_declares_kind_and_format() -> None:
    for znode in PAYLOAD_ZNODES:
        assert isinstance(znode.KIND, ZNodeKind)
        assert isinstance(znode.FORMAT, PayloadFormat)


def test_schema_readme_documents_every_znode() -> None:
    readme = (SCHEMA_DIR / "README.md").read_text()
    for znode in PAYLOAD_ZNODES:
        assert f"{znode.SCHEMA}.schema.json" in readme, znode


def test_persistent_top_level_paths_are_kafkas() -> None:
    assert PERSISTENT_ZK_PATHS == (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
    )


# -- /brokers/ids/<id> ----------------------------------------------------------------------


def test_broker_registration_is_kafkas_bytes() -> None:
    # get /brokers/ids/1 on a Kafka 2.8 broker (kafka_2.13), advertised.listeners=PLAINTEXT://
    kafka = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://192.168.1.14:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"192.168.1.14","version":5,"timestamp":"1724097127252"}'
    )
    info = BrokerInfo(
        BrokerId(1),
        (EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "192.168.1.14", 9092),),
        timestamp_ms=1724097127252,
    )
    assert BrokerIdZNode.encode(info) == kafka
    assert BrokerIdZNode.decode(1, kafka) == info
    assert BrokerIdZNode.path(1) == "/brokers/ids/1"
    assert_valid(BrokerIdZNode, kafka)


def test_broker_registration_with_two_listeners_is_kafkas_bytes() -> None:
    kafka = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
        b'"PLAINTEXT_HOST":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092",'
        b'"PLAINTEXT_HOST://localhost:29092"],"jmx_port":-1,"port":9092,"host":"kafka-1",'
        b'"version":5,"timestamp":"1625336133848"}'
    )
    decoded = BrokerIdZNode.decode(1, kafka)
    assert decoded.endpoints == (
        EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "kafka-1", 9092),
        EndPoint("PLAINTEXT_HOST", SecurityProtocol.PLAINTEXT, "localhost", 29092),
    )
    assert BrokerIdZNode.encode(decoded) == kafka
    assert_valid(BrokerIdZNode, kafka)


def test_broker_registration_with_rack_ssl_only_and_ipv6() -> None:
    info = BrokerInfo(
        BrokerId(7),
        (EndPoint("INTERNAL", SecurityProtocol.SSL, "::1", 9093),),
        rack="rack-a",
        jmx_port=9999,
        features={"feature": {"min_version": 1, "max_version": 3}},
        timestamp_ms=5,
    )
    data = BrokerIdZNode.encode(info)
    assert data == (
        b'{"features":{"feature":{"min_version":1,"max_version":3}},'
        b'"listener_security_protocol_map":{"INTERNAL":"SSL"},'
        b'"endpoints":["INTERNAL://[::1]:9093"],"rack":"rack-a","jmx_port":9999,"port":-1,'
        b'"host":null,"version":5,"timestamp":"5"}'
    )
    assert BrokerIdZNode.decode(7, data) == info
    assert_valid(BrokerIdZNode, data)


def test_older_broker_registrations_decode() -> None:
    v4 = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
        b'"endpoints":["PLAINTEXT://192.168.2.242:9092","SSL://192.168.2.242:9093"],'
        b'"rack":"/default/rack0","jmx_port":21006,"host":"192.168.2.242",'
        b'"timestamp":"1580886124398","port":9092,"version":4}'
    )
    info = BrokerIdZNode.decode(1, v4)
    assert info.version == 4
    assert info.rack == "/default/rack0"
    assert info.jmx_port == 21006
    assert [ep.connection_string for ep in info.endpoints] == [
        "PLAINTEXT://192.168.2.242:9092",
        "SSL://192.168.2.242:9093",
    ]
    assert info.endpoint("ssl") == EndPoint("SSL", SecurityProtocol.SSL, "192.168.2.242", 9093)
    v1 = b'{"version":1,"host":"192.168.1.148","port":9092,"jmx_port":9999}'
    assert BrokerIdZNode.decode(0, v1).endpoints == (
        EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "192.168.1.148", 9092),
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[1]", b'{"version":0,"jmx_port":-1}', b'{"version":5,"endpoints":3}'],
)
def test_bad_broker_registrations_are_decode_errors(data: bytes) -> None:
    with pytest.raises(ZNodeDecodeError):
        BrokerIdZNode.decode(1, data)


# -- topics and partitions ----------------------------------------------------------------------


def test_topic_assignment_is_kafkas_bytes() -> None:
    kafka = (
        b'{"partitions":{"0":[1,0,2],"1":[0,2,1],"2":[2,1,0],"3":[1,2,0]},'
        b'"topic_id":"W3mXDtj1RsWmsEhQrZjN5g","adding_replicas":{},"removing_replicas":{},'
        b'"version":3}'
    )
    assignment = {0: [1, 0, 2], 1: [0, 2, 1], 2: [2, 1, 0], 3: [1, 2, 0]}
    assert TopicZNode.encode(TOPIC_ID, assignment) == kafka
    decoded = TopicZNode.decode("secondTopic", kafka)
    assert decoded.topic_id == TOPIC_ID
    assert decoded.replicas() == {p: tuple(r) for p, r in assignment.items()}
    assert TopicZNode.path("secondTopic") == "/brokers/topics/secondTopic"
    assert_valid(TopicZNode, kafka)


def test_topic_assignment_without_id_and_twelve_partitions_is_kafkas_bytes() -> None:
    kafka = (
        b'{"partitions":{"11":[1,3,4],"0":[0,1,2],"1":[1,2,3],"2":[2,3,4],"3":[3,4,0],'
        b'"4":[4,0,1],"5":[0,2,3],"6":[1,3,4],"7":[2,4,0],"8":[3,0,1],"9":[4,1,2],'
        b'"10":[1,2,3]},"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    decoded = TopicZNode.decode("t", kafka)
    assert decoded.topic_id is None
    assert list(decoded.partitions) == list(range(12))
    assert TopicZNode.encode(None, decoded.partitions) == kafka
    assert_valid(TopicZNode, kafka)


def test_topic_assignment_during_reassignment() -> None:
    assignment = {
        0: ReplicaAssignment((1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(1,)),
        1: ReplicaAssignment((2, 3, 4)),
    }
    data = TopicZNode.encode(TOPIC_ID, assignment)
    assert json.loads(data)["adding_replicas"] == {"0": [4]}
    assert json.loads(data)["removing_replicas"] == {"0": [1]}
    assert TopicZNode.decode("t", data).partitions == assignment
    assert_valid(TopicZNode, data)


def test_older_topic_assignments_decode() -> None:
    v1 = b'{"version":1,"partitions":{"12":[0,2],"8":[2,1],"4":[1,2]}}'
    decoded = TopicZNode.decode("event-topic", v1)
    assert decoded.topic_id is None
    assert decoded.replicas() == {4: (1, 2), 8: (2, 1), 12: (0, 2)}


def test_partition_state_is_kafkas_bytes() -> None:
    kafka = b'{"controller_epoch":20,"leader":1,"version":1,"leader_epoch":2,"isr":[1,0]}'
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 2, (1, 0), zk_version=7), 20)
    assert TopicPartitionStateZNode.encode(state) == kafka
    assert TopicPartitionStateZNode.decode(kafka, 7) == state
    assert (
        TopicPartitionStateZNode.path(TopicPartition("t", 3))
        == "/brokers/topics/t/partitions/3/state"
    )
    assert_valid(TopicPartitionStateZNode, kafka)


def test_leader_and_isr_transitions() -> None:
    initial = LeaderAndIsr.initial(1, [1, 2, 3])
    assert initial == LeaderAndIsr(1, 0, (1, 2, 3), 0)
    moved = initial.new_leader_and_isr(2, [2, 3])
    assert (moved.leader, moved.leader_epoch, moved.isr, moved.zk_version) == (2, 1, (2, 3), 0)
    assert moved.with_zk_version(4).zk_version == 4


@settings(max_examples=60, deadline=None)
@given(
    topic=st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(lambda t: t not in ".."),
    replicas=st.lists(
        st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5, unique=True),
        min_size=1,
        max_size=40,
    ),
    topic_id=st.none() | st.uuids(),
)
def test_any_topic_assignment_round_trips_and_validates(
    topic: str, replicas: list[list[int]], topic_id: uuid.UUID | None
) -> None:
    assignment = dict(enumerate(replicas))
    data = TopicZNode.encode(topic_id, assignment)
    assert_valid(TopicZNode, data)
    decoded = TopicZNode.decode(topic, data)
    assert decoded.topic_id == topic_id
    assert decoded.replicas() == {p: tuple(r) for p, r in assignment.items()}


@settings(max_examples=60, deadline=None)
@given(
    leader=st.integers(-2, 2**31 - 1),
    epochs=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=6, unique=True),
    zk_version=st.integers(0, 2**31 - 1),
)
def test_any_partition_state_round_trips_and_validates(
    leader: int, epochs: tuple[int, int], isr: list[int], zk_version: int
) -> None:
    state = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, epochs[0], tuple(isr), zk_version), epochs[1]
    )
    data = TopicPartitionStateZNode.encode(state)
    assert_valid(TopicPartitionStateZNode, data)
    assert TopicPartitionStateZNode.decode(data, zk_version) == state


# -- controller and cluster ---------------------------------------------------------------------


def test_controller_is_kafkas_bytes() -> None:
    kafka = b'{"version":1,"brokerid":1001,"timestamp":"1673382716473"}'
    assert ControllerZNode.encode(1001, 1673382716473) == kafka
    assert ControllerZNode.decode(kafka) == 1001
    assert_valid(ControllerZNode, kafka)
    # Kafka 3.x writes version 2 with kraftControllerEpoch: still readable
    assert ControllerZNode.decode(
        b'{"version":2,"brokerid":1,"timestamp":"1704032949256","kraftControllerEpoch":-1}'
    ) == 1


def test_controller_epoch_is_ascii() -> None:
    assert ControllerEpochZNode.encode(12) == b"12"
    assert ControllerEpochZNode.decode(b"12") == 12
    assert_valid(ControllerEpochZNode, b"12")
    assert_invalid(ControllerEpochZNode, "-1")
    assert_invalid(ControllerEpochZNode, "1.5")
    with pytest.raises(ZNodeDecodeError):
        ControllerEpochZNode.decode(b"twelve")


def test_cluster_id_is_kafkas_bytes() -> None:
    kafka = b'{"version":"1","id":"eQzK4lYlQ9y8P21IScOl_g"}'
    assert ClusterIdZNode.encode("eQzK4lYlQ9y8P21IScOl_g") == kafka
    assert ClusterIdZNode.decode(kafka) == "eQzK4lYlQ9y8P21IScOl_g"
    assert_valid(ClusterIdZNode, kafka)
    generated = ClusterIdZNode.generate()
    assert len(generated) == 22
    assert_valid(ClusterIdZNode, ClusterIdZNode.encode(generated))
    assert_invalid(ClusterIdZNode, {"version": 1, "id": generated})  # version is a string


def test_kafka_uuid_text_form() -> None:
    # Kafka's Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID (Uuid(0L, 1L))
    assert kafka_uuid_to_string(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert kafka_uuid_to_string(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert kafka_uuid_to_string(kafka_uuid_from_string("Hu9lfacGRriV0gSn6d_dNA")) == (
        "Hu9lfacGRriV0gSn6d_dNA"
    )
    with pytest.raises(ValueError, match="not a base64 uuid"):
        kafka_uuid_from_string("AAAA")


def test_empty_payloads() -> None:
    for znode in (BrokerSequenceIdZNode, DeleteTopicsTopicZNode):
        assert znode.encode() == b""
        assert_valid(znode, znode.encode())
        assert_invalid(znode, "x")
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"


# -- admin requests and notifications -------------------------------------------------------------


def test_reassign_partitions_is_kafkas_bytes() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2]}]}'
    reassignment = {TopicPartition("foo", 1): (1, 2)}
    assert ReassignPartitionsZNode.encode(reassignment) == kafka
    assert ReassignPartitionsZNode.decode(kafka) == reassignment
    assert_valid(ReassignPartitionsZNode, kafka)


def test_preferred_replica_election_and_isr_change_notification() -> None:
    partitions = [TopicPartition("a", 0), TopicPartition("b", 3)]
    expected = (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":3}]}'
    )
    for znode in (PreferredReplicaElectionZNode, IsrChangeNotificationSequenceZNode):
        data = znode.encode(partitions)
        assert data == expected
        assert znode.decode(data) == set(partitions)
        assert_valid(znode, data)
    assert IsrChangeNotificationSequenceZNode.path() == "/isr_change_notification/isr_change_"
    assert IsrChangeNotificationSequenceZNode.sequence_number(
        "/isr_change_notification/isr_change_0000000042"
    ) == "0000000042"


def test_config_entity_is_kafkas_bytes() -> None:
    data = ConfigEntityZNode.encode(
        {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
    )
    # the order of java.util.Properties (Java 11) for these keys
    assert data == (
        b'{"version":1,"config":{"compression.type":"producer","cleanup.policy":"compact",'
        b'"segment.bytes":"104857600"}}'
    )
    assert ConfigEntityZNode.decode(data)["segment.bytes"] == "104857600"
    assert_valid(ConfigEntityZNode, data)
    assert ConfigEntityZNode.encode({}) == b'{"version":1,"config":{}}'
    assert ConfigEntityZNode.decode(b"") == {}
    # Kafka 1.x (Java 8's Hashtable order) for the same config reads the same
    java8 = (
        b'{"version":1,"config":{"segment.bytes":"104857600","compression.type":"producer",'
        b'"cleanup.policy":"compact"}}'
    )
    assert ConfigEntityZNode.decode(java8) == ConfigEntityZNode.decode(data)
    assert ConfigEntityZNode.path("brokers", "<default>") == "/config/brokers/<default>"


def test_config_change_notification_is_kafkas_bytes() -> None:
    kafka = b'{"version":2,"entity_path":"topics/my-topic"}'
    assert ConfigEntityChangeNotificationSequenceZNode.encode("topics/my-topic") == kafka
    assert ConfigEntityChangeNotificationSequenceZNode.decode(kafka) == "topics/my-topic"
    assert_valid(ConfigEntityChangeNotificationSequenceZNode, kafka)
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert ConfigEntityChangeNotificationSequenceZNode.decode(v1) == "topics/t"
    with pytest.raises(ZNodeDecodeError):
        ConfigEntityChangeNotificationSequenceZNode.decode(b'{"version":3}')


def test_producer_id_block_is_kafkas_bytes() -> None:
    kafka = b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    assert ProducerIdBlockZNode.encode(ProducerIdBlock(1, 0, 999)) == kafka
    assert ProducerIdBlockZNode.decode(kafka) == ProducerIdBlock(1, 0, 999)
    assert ProducerIdBlockZNode.decode(b"") is None
    assert_valid(ProducerIdBlockZNode, kafka)
    with pytest.raises(ZNodeDecodeError):
        ProducerIdBlockZNode.decode(b'{"version":1,"broker":1,"block_start":"x","block_end":"1"}')


# -- /consumers ---------------------------------------------------------------------------


def test_consumer_znodes() -> None:
    assert ConsumerOffsetZNode.path("g", "t", 2) == "/consumers/g/offsets/t/2"
    assert ConsumerOffsetZNode.encode(1234) == b"1234"
    assert ConsumerOffsetZNode.decode(b"1234") == 1234
    assert_valid(ConsumerOffsetZNode, b"1234")
    assert_valid(ConsumerOffsetZNode, b"-1")
    assert_invalid(ConsumerOffsetZNode, "12a")

    registration = ConsumerRegistration({"t": 1}, "static", 1500000000000)
    data = ConsumerIdsZNode.encode(registration)
    assert data == (
        b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1500000000000"}'
    )
    assert ConsumerIdsZNode.decode(data) == registration
    assert ConsumerIdsZNode.path("g", "member-1") == "/consumers/g/ids/member-1"
    assert_valid(ConsumerIdsZNode, data)

    assert ConsumerOwnersZNode.path("g", "t", 0) == "/consumers/g/owners/t/0"
    assert ConsumerOwnersZNode.decode(ConsumerOwnersZNode.encode("member-1-0")) == "member-1-0"
    assert_valid(ConsumerOwnersZNode, b"member-1-0")
    assert_invalid(ConsumerOwnersZNode, "")


def test_broker_registration_listener_protocols() -> None:
    """As Kafka's BrokerIdZNode.decode: without a listener_security_protocol_map (v2) each
    listener is named after its protocol; a listener the map does not name, or a protocol
    Kafka does not know, is not a registration Kafka wrote."""
    v2 = (b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1",'
          b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}')
    assert BrokerIdZNode.decode(3, v2).endpoints == (
        EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "h", 9092),
        EndPoint("SSL", SecurityProtocol.SSL, "h", 9093),
    )
    unmapped = (b'{"version":5,"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["CLIENT://h:9092"],"jmx_port":-1,"timestamp":"1"}')
    with pytest.raises(ZNodeDecodeError, match="no security protocol defined for listener"):
        BrokerIdZNode.decode(3, unmapped)
    unknown = (b'{"version":5,"listener_security_protocol_map":{"CLIENT":"QUIC"},'
               b'"endpoints":["CLIENT://h:9092"],"jmx_port":-1,"timestamp":"1"}')
    with pytest.raises(ZNodeDecodeError, match="unknown security protocol"):
        BrokerIdZNode.decode(3, unknown)
