"""Admin APIs (CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders) and the ZooKeeper-era inter-broker APIs (LeaderAndIsr,
UpdateMetadata, StopReplica, ControlledShutdown), at Kafka 2.8's versions.

Every version of every message round-trips a hand-built message whose every field holds a
non-default value; where kio (generated from Kafka's JSON) has the version, kio must write
the same bytes and read ours to the same values. The versions kio lacks (the inter-broker
APIs, CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0) are checked against frames
spelled out byte by byte.
"""

from __future__ import annotations

import datetime
import uuid
import warnings
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kafkaclone.common.errors import DecodeError
from kafkaclone.protocol.api import APIS, decode_request, encode_request
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.schema import Message
from tests.protocol.admin_helpers import (
    NO_TAGS,
    array,
    boolean,
    classes,
    compact_array,
    compact_int32s,
    compact_string,
    i8,
    i16,
    i32,
    i64,
    int32s,
    string,
)
from tests.protocol.kio_helpers import (
    assert_every_field_set,
    assert_kio_agrees,
    at_version,
    kio_class,
    kio_decode,
    kio_encode,
    round_trip,
)

pytestmark = pytest.mark.timeout(30)

CREATE_TOPICS = APIS[ApiKey.CREATE_TOPICS]
DELETE_TOPICS = APIS[ApiKey.DELETE_TOPICS]
CREATE_PARTITIONS = APIS[ApiKey.CREATE_PARTITIONS]
DESCRIBE_CONFIGS = APIS[ApiKey.DESCRIBE_CONFIGS]
ALTER_CONFIGS = APIS[ApiKey.ALTER_CONFIGS]
INCREMENTAL_ALTER_CONFIGS = APIS[ApiKey.INCREMENTAL_ALTER_CONFIGS]
LEADER_AND_ISR = APIS[ApiKey.LEADER_AND_ISR]
UPDATE_METADATA = APIS[ApiKey.UPDATE_METADATA]
STOP_REPLICA = APIS[ApiKey.STOP_REPLICA]
CONTROLLED_SHUTDOWN = APIS[ApiKey.CONTROLLED_SHUTDOWN]
ELECT_LEADERS = APIS[ApiKey.ELECT_LEADERS]

ORDERS_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
BROKER_EPOCH = 0x1_0000_002A  # does not fit in 32 bits

# Kafka 2.8: (valid versions, first flexible version).
KAFKA_2_8 = {
    ApiKey.LEADER_AND_ISR: ((0, 5), 4),
    ApiKey.STOP_REPLICA: ((0, 3), 2),
    ApiKey.UPDATE_METADATA: ((0, 7), 6),
    ApiKey.CONTROLLED_SHUTDOWN: ((0, 3), 3),
    ApiKey.CREATE_TOPICS: ((0, 7), 5),
    ApiKey.DELETE_TOPICS: ((0, 6), 4),
    ApiKey.DESCRIBE_CONFIGS: ((0, 4), 4),
    ApiKey.ALTER_CONFIGS: ((0, 2), 2),
    ApiKey.CREATE_PARTITIONS: ((0, 3), 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ((0, 1), 1),
    ApiKey.ELECT_LEADERS: ((0, 2), 2),
}

# --- one message per body, every field of every version set -------------------------------


def create_topics_request() -> Any:
    m = classes(CREATE_TOPICS.request)
    return m(
        topics=[
            m.CreatableTopic(
                name="orders", num_partitions=6, replication_factor=3,
                assignments=[m.CreatableReplicaAssignment(partition_index=0,
                                                          broker_ids=[1, 2, 3]),
                             m.CreatableReplicaAssignment(partition_index=1,
                                                          broker_ids=[2, 3, 1])],
                configs=[m.CreateableTopicConfig(name="cleanup.policy", value="compact"),
                         m.CreateableTopicConfig(name="retention.ms", value=None)],
            ),
        ],
        timeout_ms=30000,
        validate_only=True,
    )


def create_topics_response() -> Any:
    m = classes(CREATE_TOPICS.response)
    return m(
        throttle_time_ms=120,
        topics=[
            m.CreatableTopicResult(
                name="orders", topic_id=ORDERS_ID, error_code=0, error_message=None,
                topic_config_error_code=29, num_partitions=6, replication_factor=3,
                configs=[m.CreatableTopicConfigs(name="cleanup.policy", value="compact",
                                                 read_only=True, config_source=1,
                                                 is_sensitive=True)],
            ),
            m.CreatableTopicResult(name="payments", error_code=36,
                                   error_message="Topic 'payments' already exists.",
                                   configs=None),
        ],
    )


def delete_topics_request() -> Any:
    m = classes(DELETE_TOPICS.request)
    return m(
        topics=[m.DeleteTopicState(name="orders", topic_id=ORDERS_ID),
                m.DeleteTopicState(name=None, topic_id=uuid.UUID(int=7))],
        topic_names=["orders", "payments"],
        timeout_ms=15000,
    )


def delete_topics_response() -> Any:
    m = classes(DELETE_TOPICS.response)
    return m(
        throttle_time_ms=7,
        responses=[m.DeletableTopicResult(
            name="orders", topic_id=ORDERS_ID, error_code=3,
            error_message="This server does not host this topic-partition.",
        )],
    )


def create_partitions_request() -> Any:
    m = classes(CREATE_PARTITIONS.request)
    return m(
        topics=[
            m.CreatePartitionsTopic(
                name="orders", count=8,
                assignments=[m.CreatePartitionsAssignment(broker_ids=[1, 2]),
                             m.CreatePartitionsAssignment(broker_ids=[2, 3])],
            ),
            m.CreatePartitionsTopic(name="payments", count=4, assignments=None),
        ],
        timeout_ms=25000,
        validate_only=True,
    )


def create_partitions_response() -> Any:
    m = classes(CREATE_PARTITIONS.response)
    return m(
        throttle_time_ms=9,
        results=[
            m.CreatePartitionsTopicResult(name="orders", error_code=0, error_message=None),
            m.CreatePartitionsTopicResult(
                name="payments", error_code=37,
                error_message="Topic currently has 4 partitions, which is higher than the "
                              "requested 2."),
        ],
    )


def elect_leaders_request() -> Any:
    m = classes(ELECT_LEADERS.request)
    return m(
        election_type=1,
        topic_partitions=[m.TopicPartitions(topic="orders", partitions=[0, 2, 5]),
                          m.TopicPartitions(topic="payments", partitions=[1])],
        timeout_ms=15000,
    )


def elect_leaders_response() -> Any:
    m = classes(ELECT_LEADERS.response)
    return m(
        throttle_time_ms=3,
        error_code=41,
        replica_election_results=[
            m.ReplicaElectionResult(topic="orders", partition_result=[
                m.PartitionResult(partition_id=0, error_code=0, error_message=None),
                m.PartitionResult(partition_id=2, error_code=84,
                                  error_message="Leader election not needed for topic "
                                                "partition."),
            ]),
        ],
    )


def describe_configs_request() -> Any:
    m = classes(DESCRIBE_CONFIGS.request)
    return m(
        resources=[
            m.DescribeConfigsResource(resource_type=2, resource_name="orders",
                                      configuration_keys=["retention.ms", "cleanup.policy"]),
            m.DescribeConfigsResource(resource_type=4, resource_name="1",
                                      configuration_keys=None),
        ],
        include_synonyms=True,
        include_documentation=True,
    )


def describe_configs_response() -> Any:
    m = classes(DESCRIBE_CONFIGS.response)
    return m(
        throttle_time_ms=11,
        results=[
            m.DescribeConfigsResult(
                error_code=0, error_message=None, resource_type=2, resource_name="orders",
                configs=[m.DescribeConfigsResourceResult(
                    name="retention.ms", value="86400000", read_only=False, is_default=True,
                    config_source=1, is_sensitive=True,
                    synonyms=[m.DescribeConfigsSynonym(name="retention.ms",
                                                       value="86400000", source=1),
                              m.DescribeConfigsSynonym(name="log.retention.hours",
                                                       value=None, source=5)],
                    config_type=5, documentation="How long to keep a log segment.",
                )],
            ),
            m.DescribeConfigsResult(
                error_code=29, error_message="Cluster authorization failed.",
                resource_type=4, resource_name="2",
                configs=[m.DescribeConfigsResourceResult(
                    name="ssl.key.password", value=None, read_only=True, is_sensitive=False,
                    documentation=None,
                )],
            ),
        ],
    )


def alter_configs_request() -> Any:
    m = classes(ALTER_CONFIGS.request)
    return m(
        resources=[m.AlterConfigsResource(
            resource_type=2, resource_name="orders",
            configs=[m.AlterableConfig(name="retention.ms", value="3600000"),
                     m.AlterableConfig(name="cleanup.policy", value=None)],
        )],
        validate_only=True,
    )


def alter_configs_response() -> Any:
    m = classes(ALTER_CONFIGS.response)
    return m(
        throttle_time_ms=13,
        responses=[m.AlterConfigsResourceResponse(
            error_code=40, error_message="Invalid value -5 for configuration retention.ms",
            resource_type=2, resource_name="orders",
        )],
    )


def incremental_alter_configs_request() -> Any:
    m = classes(INCREMENTAL_ALTER_CONFIGS.request)
    return m(
        resources=[m.AlterConfigsResource(
            resource_type=2, resource_name="orders",
            configs=[m.AlterableConfig(name="cleanup.policy", config_operation=2,
                                       value="compact"),
                     m.AlterableConfig(name="retention.ms", config_operation=1, value=None)],
        )],
        validate_only=True,
    )


def incremental_alter_configs_response() -> Any:
    m = classes(INCREMENTAL_ALTER_CONFIGS.response)
    return m(
        throttle_time_ms=17,
        responses=[m.AlterConfigsResourceResponse(
            error_code=40, error_message="Config value append is not allowed for config key",
            resource_type=4, resource_name="1",
        )],
    )


def leader_and_isr_request() -> Any:
    m = classes(LEADER_AND_ISR.request)

    def state(partition: int) -> Any:
        return m.LeaderAndIsrPartitionState(
            topic_name="orders", partition_index=partition, controller_epoch=7, leader=2,
            leader_epoch=4, isr=[2, 3], zk_version=12, replicas=[2, 3, 1],
            adding_replicas=[1], removing_replicas=[4], is_new=True,
        )

    return m(
        controller_id=1, controller_epoch=7, broker_epoch=BROKER_EPOCH, type=2,
        ungrouped_partition_states=[state(0), state(1)],
        topic_states=[m.LeaderAndIsrTopicState(topic_name="orders", topic_id=ORDERS_ID,
                                               partition_states=[state(0), state(1)])],
        live_leaders=[m.LeaderAndIsrLiveLeader(broker_id=2, host_name="broker2.example",
                                               port=9092)],
    )


def leader_and_isr_response() -> Any:
    m = classes(LEADER_AND_ISR.response)
    error = m.LeaderAndIsrPartitionError(topic_name="orders", partition_index=1,
                                         error_code=56)
    return m(
        error_code=11,
        partition_errors=[error],
        topics=[m.LeaderAndIsrTopicError(topic_id=ORDERS_ID, partition_errors=[error])],
    )


def update_metadata_request() -> Any:
    m = classes(UPDATE_METADATA.request)
    state = m.UpdateMetadataPartitionState(
        topic_name="orders", partition_index=3, controller_epoch=7, leader=1,
        leader_epoch=5, isr=[1, 2], zk_version=9, replicas=[1, 2, 3], offline_replicas=[3],
    )
    return m(
        controller_id=1, controller_epoch=7, broker_epoch=BROKER_EPOCH,
        ungrouped_partition_states=[state],
        topic_states=[m.UpdateMetadataTopicState(topic_name="orders", topic_id=ORDERS_ID,
                                                 partition_states=[state])],
        live_brokers=[
            m.UpdateMetadataBroker(
                id=1, v0_host="broker1.example", v0_port=9092,
                endpoints=[m.UpdateMetadataEndpoint(port=9093, host="broker1.example",
                                                    listener="SASL_SSL",
                                                    security_protocol=3)],
                rack="rack-a",
            ),
            m.UpdateMetadataBroker(id=2, v0_host="broker2.example", v0_port=9092,
                                   endpoints=[], rack=None),
        ],
    )


def update_metadata_response() -> Any:
    return UPDATE_METADATA.response.cls(error_code=11)


def stop_replica_request() -> Any:
    m = classes(STOP_REPLICA.request)
    return m(
        controller_id=1, controller_epoch=7, broker_epoch=BROKER_EPOCH,
        delete_partitions=True,
        ungrouped_partitions=[m.StopReplicaPartitionV0(topic_name="orders",
                                                       partition_index=2)],
        topics=[m.StopReplicaTopicV1(name="orders", partition_indexes=[2, 3])],
        topic_states=[m.StopReplicaTopicState(
            topic_name="orders",
            partition_states=[m.StopReplicaPartitionState(partition_index=2, leader_epoch=4,
                                                          delete_partition=True)],
        )],
    )


def stop_replica_response() -> Any:
    m = classes(STOP_REPLICA.response)
    return m(error_code=11, partition_errors=[
        m.StopReplicaPartitionError(topic_name="orders", partition_index=2, error_code=74),
    ])


def controlled_shutdown_request() -> Any:
    return CONTROLLED_SHUTDOWN.request.cls(broker_id=2, broker_epoch=BROKER_EPOCH)


def controlled_shutdown_response() -> Any:
    m = classes(CONTROLLED_SHUTDOWN.response)
    return m(error_code=41, remaining_partitions=[
        m.RemainingPartition(topic_name="orders", partition_index=3),
    ])


FULL_MESSAGES: list[tuple[Message, Any]] = [
    (ELECT_LEADERS.request, elect_leaders_request()),
    (ELECT_LEADERS.response, elect_leaders_response()),
    (CREATE_TOPICS.request, create_topics_request()),
    (CREATE_TOPICS.response, create_topics_response()),
    (DELETE_TOPICS.request, delete_topics_request()),
    (DELETE_TOPICS.response, delete_topics_response()),
    (CREATE_PARTITIONS.request, create_partitions_request()),
    (CREATE_PARTITIONS.response, create_partitions_response()),
    (DESCRIBE_CONFIGS.request, describe_configs_request()),
    (DESCRIBE_CONFIGS.response, describe_configs_response()),
    (ALTER_CONFIGS.request, alter_configs_request()),
    (ALTER_CONFIGS.response, alter_configs_response()),
    (INCREMENTAL_ALTER_CONFIGS.request, incremental_alter_configs_request()),
    (INCREMENTAL_ALTER_CONFIGS.response, incremental_alter_configs_response()),
    (LEADER_AND_ISR.request, leader_and_isr_request()),
    (LEADER_AND_ISR.response, leader_and_isr_response()),
    (UPDATE_METADATA.request, update_metadata_request()),
    (UPDATE_METADATA.response, update_metadata_response()),
    (STOP_REPLICA.request, stop_replica_request()),
    (STOP_REPLICA.response, stop_replica_response()),
    (CONTROLLED_SHUTDOWN.request, controlled_shutdown_request()),
    (CONTROLLED_SHUTDOWN.response, controlled_shutdown_response()),
]

EVERY_VERSION = [
    pytest.param(message, obj, version, id=f"{message.name}-v{version}")
    for message, obj in FULL_MESSAGES
    for version in range(message.min_version, message.max_version + 1)
]

# kio module of each API that kio knows (kio dropped the ZooKeeper-era inter-broker APIs).
KIO_MODULES = {
    ApiKey.CREATE_TOPICS: "create_topics",
    ApiKey.DELETE_TOPICS: "delete_topics",
    ApiKey.CREATE_PARTITIONS: "create_partitions",
    ApiKey.DESCRIBE_CONFIGS: "describe_configs",
    ApiKey.ALTER_CONFIGS: "alter_configs",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "incremental_alter_configs",
    ApiKey.ELECT_LEADERS: "elect_leaders",
}


def _kio_params() -> list[Any]:
    full = {message.name: obj for message, obj in FULL_MESSAGES}
    params = []
    for key, module in KIO_MODULES.items():
        api = APIS[key]
        for kind, message in (("request", api.request), ("response", api.response)):
            obj = full[message.name]
            for version in range(message.min_version, message.max_version + 1):
                cls = kio_class(module, version, kind, message.name)
                if cls is not None:
                    params.append(pytest.param(message, obj, version, cls,
                                               id=f"{message.name}-v{version}"))
    return params


KIO_VERSIONS = _kio_params()


# --- declarations --------------------------------------------------------------------------


def test_versions_are_kafka_2_8s() -> None:
    for key, ((low, high), first_flexible) in KAFKA_2_8.items():
        api = APIS[key]
        assert (api.min_version, api.max_version) == (low, high), api.name
        for message in (api.request, api.response):
            flexible = [v for v in range(low, high + 1) if message.is_flexible(v)]
            assert flexible == list(range(first_flexible, high + 1)), message.name


def test_versions_match_what_a_kafka_2_8_broker_advertises() -> None:
    # kafka-python records each release's ApiVersions answer; importing it warns about its
    # own use of importlib.resources.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    advertised = BROKER_API_VERSIONS[(2, 8)]
    for key, (versions, _) in KAFKA_2_8.items():
        assert advertised[key] == versions, key.name
    # The ranges first asked for (CreateTopics 0-6, DeleteTopics 0-5, DescribeConfigs 0-3,
    # AlterConfigs 0-1) are Kafka 2.7's.
    assert [BROKER_API_VERSIONS[(2, 7)][k] for k in (19, 20, 32, 33)] == [
        (0, 6), (0, 5), (0, 3), (0, 1)]


def test_header_versions() -> None:
    assert CONTROLLED_SHUTDOWN.request_header_version(0) == 0
    assert CONTROLLED_SHUTDOWN.request_header_version(1) == 1
    assert CONTROLLED_SHUTDOWN.request_header_version(3) == 2
    assert LEADER_AND_ISR.request_header_version(3) == 1
    assert LEADER_AND_ISR.request_header_version(4) == 2
    assert LEADER_AND_ISR.response_header_version(4) == 1
    assert UPDATE_METADATA.request_header_version(5) == 1
    assert UPDATE_METADATA.response_header_version(6) == 1
    assert CREATE_TOPICS.response_header_version(4) == 0
    assert CREATE_TOPICS.response_header_version(5) == 1


def test_common_structs_are_one_class() -> None:
    req = LEADER_AND_ISR.request.cls
    assert req.LeaderAndIsrTopicState.LeaderAndIsrPartitionState is req.LeaderAndIsrPartitionState
    resp = LEADER_AND_ISR.response.cls
    assert resp.LeaderAndIsrTopicError.LeaderAndIsrPartitionError is (
        resp.LeaderAndIsrPartitionError)
    um = UPDATE_METADATA.request.cls
    assert um.UpdateMetadataTopicState.UpdateMetadataPartitionState is (
        um.UpdateMetadataPartitionState)


def test_defaults_follow_kafka() -> None:
    assert CREATE_TOPICS.request.cls().timeout_ms == 60000
    assert CREATE_TOPICS.response.cls.CreatableTopicResult().num_partitions == -1
    assert CREATE_TOPICS.response.cls.CreatableTopicResult().replication_factor == -1
    assert DELETE_TOPICS.request.cls.DeleteTopicState().name is None
    assert DELETE_TOPICS.response.cls.DeletableTopicResult().error_message is None
    assert CREATE_PARTITIONS.response.cls.CreatePartitionsTopicResult().error_message is None
    config = classes(DESCRIBE_CONFIGS.response).DescribeConfigsResourceResult()
    assert (config.config_source, config.config_type) == (-1, 0)
    assert LEADER_AND_ISR.request.cls().broker_epoch == -1
    assert UPDATE_METADATA.request.cls().broker_epoch == -1
    assert STOP_REPLICA.request.cls().broker_epoch == -1
    assert classes(STOP_REPLICA.request).StopReplicaPartitionState().leader_epoch == -1
    assert CONTROLLED_SHUTDOWN.request.cls().broker_epoch == -1
    assert ELECT_LEADERS.request.cls().timeout_ms == 60000


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "full", "version"), EVERY_VERSION)
def test_round_trip_every_field(message: Message, full: Any, version: int) -> None:
    obj = at_version(message, full, version)
    assert_every_field_set(message, obj, version)
    round_trip(message, obj, version)


def test_every_version_is_covered() -> None:
    assert len(EVERY_VERSION) == 2 * sum(high - low + 1 for (low, high), _ in KAFKA_2_8.values())


# --- kio -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "full", "version", "kio_cls"), KIO_VERSIONS)
def test_kio_agrees(message: Message, full: Any, version: int, kio_cls: type[Any]) -> None:
    assert_kio_agrees(message, at_version(message, full, version), version, kio_cls)


def test_kio_covers_the_expected_versions() -> None:
    covered = {(p.values[0].name, p.values[2]) for p in KIO_VERSIONS}
    expected = set()
    for name, versions in [("CreateTopics", range(2, 8)), ("DeleteTopics", range(1, 7)),
                           ("CreatePartitions", range(4)), ("DescribeConfigs", range(1, 5)),
                           ("AlterConfigs", range(3)), ("IncrementalAlterConfigs", range(2)),
                           ("ElectLeaders", range(3))]:
        for kind in ("Request", "Response"):
            expected |= {(name + kind, v) for v in versions}
    assert covered == expected


def test_kio_reads_our_create_topics_v7() -> None:
    ours = at_version(CREATE_TOPICS.response, create_topics_response(), 7)
    kio_cls = kio_class("create_topics", 7, "response", "CreateTopicsResponse")
    assert kio_cls is not None
    theirs = kio_decode(kio_cls, CREATE_TOPICS.response.encode(ours, 7))
    assert theirs.throttle_time == datetime.timedelta(milliseconds=120)
    orders, payments = theirs.topics
    assert (orders.name, orders.topic_id, orders.error_code) == ("orders", ORDERS_ID, 0)
    assert orders.topic_config_error_code == 29
    assert (orders.num_partitions, orders.replication_factor) == (6, 3)
    assert orders.configs[0].value == "compact" and orders.configs[0].config_source == 1
    assert payments.error_code == 36 and payments.configs is None


def test_we_read_kio_create_topics_v4() -> None:
    from kio.schema.create_topics.v4 import request as k

    entity = k.CreateTopicsRequest(
        topics=(k.CreatableTopic(
            name="clicks", num_partitions=-1, replication_factor=-1,
            assignments=(k.CreatableReplicaAssignment(partition_index=0, broker_ids=(3, 1)),),
            configs=(k.CreatableTopicConfig(name="min.insync.replicas", value="2"),),
        ),),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    ours = CREATE_TOPICS.request.decode_exact(kio_encode(entity), 4)
    (topic,) = ours.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("clicks", -1, -1)
    assert topic.assignments[0].broker_ids == [3, 1]
    assert (topic.configs[0].name, topic.configs[0].value) == ("min.insync.replicas", "2")
    assert (ours.timeout_ms, ours.validate_only) == (5000, False)


def test_we_read_kio_delete_topics_v6() -> None:
    from kio.schema.delete_topics.v6 import request as k

    entity = k.DeleteTopicsRequest(
        topics=(k.DeleteTopicState(name=None, topic_id=ORDERS_ID),
                k.DeleteTopicState(name="payments", topic_id=None)),
        timeout=datetime.timedelta(milliseconds=30000),
    )
    ours = DELETE_TOPICS.request.decode_exact(kio_encode(entity), 6)
    assert [(t.name, t.topic_id) for t in ours.topics] == [
        (None, ORDERS_ID), ("payments", uuid.UUID(int=0))]
    assert ours.timeout_ms == 30000 and ours.topic_names == []


def test_kio_reads_our_delete_topics_v5_response() -> None:
    ours = at_version(DELETE_TOPICS.response, delete_topics_response(), 5)
    kio_cls = kio_class("delete_topics", 5, "response", "DeleteTopicsResponse")
    assert kio_cls is not None
    theirs = kio_decode(kio_cls, DELETE_TOPICS.response.encode(ours, 5))
    (result,) = theirs.responses
    assert (result.name, result.error_code) == ("orders", 3)
    assert result.error_message == "This server does not host this topic-partition."


def test_kio_reads_our_create_partitions_v3() -> None:
    ours = create_partitions_request()
    kio_cls = kio_class("create_partitions", 3, "request", "CreatePartitionsRequest")
    assert kio_cls is not None
    theirs = kio_decode(kio_cls, CREATE_PARTITIONS.request.encode(ours, 3))
    orders, payments = theirs.topics
    assert orders.count == 8 and [a.broker_ids for a in orders.assignments] == [(1, 2), (2, 3)]
    assert payments.assignments is None
    assert theirs.timeout == datetime.timedelta(seconds=25) and theirs.validate_only is True


def test_we_read_kio_describe_configs_v4_response() -> None:
    from kio.schema.describe_configs.v4 import response as k

    entity = k.DescribeConfigsResponse(
        throttle_time=datetime.timedelta(0),
        results=(k.DescribeConfigsResult(
            error_code=ErrorCode.none, error_message=None, resource_type=2,
            resource_name="clicks",
            configs=(k.DescribeConfigsResourceResult(
                name="compression.type", value="producer", read_only=False,
                config_source=5, is_sensitive=False,
                synonyms=(k.DescribeConfigsSynonym(name="compression.type",
                                                   value="producer", source=5),),
                config_type=2, documentation=None,
            ),),
        ),),
    )
    ours = DESCRIBE_CONFIGS.response.decode_exact(kio_encode(entity), 4)
    (config,) = ours.results[0].configs
    assert (config.name, config.value, config.config_source) == (
        "compression.type", "producer", 5)
    assert config.synonyms[0].source == 5 and config.config_type == 2
    assert config.documentation is None and config.is_default is False


def test_kio_reads_our_alter_configs_v2() -> None:
    ours = alter_configs_request()
    kio_cls = kio_class("alter_configs", 2, "request", "AlterConfigsRequest")
    assert kio_cls is not None
    theirs = kio_decode(kio_cls, ALTER_CONFIGS.request.encode(ours, 2))
    (resource,) = theirs.resources
    assert (resource.resource_type, resource.resource_name) == (2, "orders")
    assert [(c.name, c.value) for c in resource.configs] == [
        ("retention.ms", "3600000"), ("cleanup.policy", None)]


def test_kio_reads_our_incremental_alter_configs_v1() -> None:
    ours = incremental_alter_configs_request()
    kio_cls = kio_class("incremental_alter_configs", 1, "request",
                        "IncrementalAlterConfigsRequest")
    assert kio_cls is not None
    theirs = kio_decode(kio_cls, INCREMENTAL_ALTER_CONFIGS.request.encode(ours, 1))
    assert [(c.name, c.config_operation, c.value) for c in theirs.resources[0].configs] == [
        ("cleanup.policy", 2, "compact"), ("retention.ms", 1, None)]
    assert theirs.validate_only is True


# --- frames spelled out byte by byte (versions kio lacks) ----------------------------------


def test_create_topics_v0_request_bytes() -> None:
    m = classes(CREATE_TOPICS.request)
    obj = m(topics=[m.CreatableTopic(
        name="t", num_partitions=2, replication_factor=1,
        assignments=[m.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])],
        configs=[m.CreateableTopicConfig(name="k", value=None)],
    )], timeout_ms=1000)
    expected = (
        array(string("t") + i32(2) + i16(1)
              + array(i32(0) + int32s(1))
              + array(string("k") + string(None)))
        + i32(1000)
    )
    assert CREATE_TOPICS.request.encode(obj, 0) == expected
    assert CREATE_TOPICS.request.encode(obj, 1) == expected + boolean(False)


def test_create_topics_v1_response_bytes() -> None:
    m = classes(CREATE_TOPICS.response)
    obj = m(topics=[m.CreatableTopicResult(name="t", error_code=36, error_message="exists")])
    body = string("t") + i16(36)
    assert CREATE_TOPICS.response.encode(obj, 0) == array(body)
    assert CREATE_TOPICS.response.encode(obj, 1) == array(body + string("exists"))


def test_create_topics_v5_response_tagged_field() -> None:
    m = classes(CREATE_TOPICS.response)
    topic = m.CreatableTopicResult(name="t", error_code=0, error_message=None,
                                   num_partitions=1, replication_factor=1, configs=None)
    untagged = compact_string("t") + i16(0) + compact_string(None) + i32(1) + i16(1) + b"\x00"
    obj = m(throttle_time_ms=0, topics=[topic])
    assert CREATE_TOPICS.response.encode(obj, 5) == (
        i32(0) + compact_array(untagged + NO_TAGS) + NO_TAGS)
    topic.topic_config_error_code = 29
    # One tagged field: tag 0, 2 bytes, INT16 29.
    assert CREATE_TOPICS.response.encode(obj, 5) == (
        i32(0) + compact_array(untagged + b"\x01\x00\x02" + i16(29)) + NO_TAGS)
    assert CREATE_TOPICS.response.decode_exact(CREATE_TOPICS.response.encode(obj, 5), 5) == obj


def test_delete_topics_v0_bytes() -> None:
    req = DELETE_TOPICS.request.cls(topic_names=["a", "bc"], timeout_ms=500)
    assert DELETE_TOPICS.request.encode(req, 0) == array(string("a"), string("bc")) + i32(500)
    m = classes(DELETE_TOPICS.response)
    resp = m(responses=[m.DeletableTopicResult(name="a", error_code=3)])
    assert DELETE_TOPICS.response.encode(resp, 0) == array(string("a") + i16(3))


def test_describe_configs_v0_bytes() -> None:
    m = classes(DESCRIBE_CONFIGS.request)
    req = m(resources=[m.DescribeConfigsResource(resource_type=2, resource_name="t",
                                                 configuration_keys=None)])
    assert DESCRIBE_CONFIGS.request.encode(req, 0) == array(i8(2) + string("t") + i32(-1))
    r = classes(DESCRIBE_CONFIGS.response)
    resp = r(throttle_time_ms=4, results=[r.DescribeConfigsResult(
        error_code=0, error_message=None, resource_type=2, resource_name="t",
        configs=[r.DescribeConfigsResourceResult(name="k", value="v", read_only=True,
                                                 is_default=True, is_sensitive=False)],
    )])
    expected = i32(4) + array(
        i16(0) + string(None) + i8(2) + string("t")
        + array(string("k") + string("v") + boolean(True) + boolean(True) + boolean(False))
    )
    assert DESCRIBE_CONFIGS.response.encode(resp, 0) == expected
    assert DESCRIBE_CONFIGS.response.decode_exact(expected, 0) == resp


def _leader_and_isr_state(*, v1_plus: bool, topic: bool, reassigning: bool) -> bytes:
    """PartitionState(partition 0, controller epoch 7, leader 2, leader epoch 4, isr [2, 3],
    zk version 12, replicas [2, 3]) in classic encoding."""
    out = string("t") if topic else b""
    out += i32(0) + i32(7) + i32(2) + i32(4) + int32s(2, 3) + i32(12) + int32s(2, 3)
    if reassigning:
        out += int32s(3) + int32s()
    if v1_plus:
        out += boolean(True)
    return out


def _leader_and_isr(version: int) -> Any:
    m = classes(LEADER_AND_ISR.request)
    state = m.LeaderAndIsrPartitionState(
        topic_name="t" if version < 2 else "", partition_index=0, controller_epoch=7,
        leader=2, leader_epoch=4, isr=[2, 3], zk_version=12, replicas=[2, 3],
        adding_replicas=[3] if version >= 3 else [], is_new=version >= 1,
    )
    obj = m(controller_id=1, controller_epoch=7,
            live_leaders=[m.LeaderAndIsrLiveLeader(broker_id=2, host_name="h", port=9092)])
    if version < 2:
        obj.ungrouped_partition_states = [state]
    else:
        obj.broker_epoch = 9
        obj.topic_states = [m.LeaderAndIsrTopicState(
            topic_name="t", topic_id=ORDERS_ID if version >= 5 else uuid.UUID(int=0),
            partition_states=[state])]
    if version >= 5:
        obj.type = 1
    return obj


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_leader_and_isr_classic_bytes(version: int) -> None:
    state = _leader_and_isr_state(v1_plus=version >= 1, topic=version < 2,
                                  reassigning=version >= 3)
    leader = i32(2) + string("h") + i32(9092)
    if version < 2:
        expected = i32(1) + i32(7) + array(state) + array(leader)
    else:
        expected = i32(1) + i32(7) + i64(9) + array(string("t") + array(state)) + array(leader)
    obj = _leader_and_isr(version)
    assert LEADER_AND_ISR.request.encode(obj, version) == expected
    assert LEADER_AND_ISR.request.decode_exact(expected, version) == obj


def test_leader_and_isr_v5_bytes() -> None:
    state = (i32(0) + i32(7) + i32(2) + i32(4) + compact_int32s(2, 3) + i32(12)
             + compact_int32s(2, 3) + compact_int32s(3) + compact_int32s() + boolean(True)
             + NO_TAGS)
    expected = (
        i32(1) + i32(7) + i64(9) + i8(1)
        + compact_array(compact_string("t") + ORDERS_ID.bytes + compact_array(state) + NO_TAGS)
        + compact_array(i32(2) + compact_string("h") + i32(9092) + NO_TAGS)
        + NO_TAGS
    )
    obj = _leader_and_isr(5)
    assert LEADER_AND_ISR.request.encode(obj, 5) == expected
    assert LEADER_AND_ISR.request.decode_exact(expected, 5) == obj
    # v4 is the same without the type and the topic id.
    v4 = expected.replace(i8(1) + bytes([2]) + compact_string("t") + ORDERS_ID.bytes,
                          bytes([2]) + compact_string("t"))
    assert LEADER_AND_ISR.request.encode(_leader_and_isr(4), 4) == v4


def test_leader_and_isr_response_layouts() -> None:
    m = classes(LEADER_AND_ISR.response)
    error = m.LeaderAndIsrPartitionError(topic_name="t", partition_index=1, error_code=56)
    v4 = m(error_code=0, partition_errors=[error])
    assert LEADER_AND_ISR.response.encode(v4, 0) == i16(0) + array(string("t") + i32(1) + i16(56))
    assert LEADER_AND_ISR.response.encode(v4, 4) == (
        i16(0) + compact_array(compact_string("t") + i32(1) + i16(56) + NO_TAGS) + NO_TAGS)
    v5 = m(error_code=0, topics=[m.LeaderAndIsrTopicError(
        topic_id=ORDERS_ID,
        partition_errors=[m.LeaderAndIsrPartitionError(partition_index=1, error_code=56)])])
    expected = i16(0) + compact_array(
        ORDERS_ID.bytes + compact_array(i32(1) + i16(56) + NO_TAGS) + NO_TAGS) + NO_TAGS
    assert LEADER_AND_ISR.response.encode(v5, 5) == expected
    assert LEADER_AND_ISR.response.decode_exact(expected, 5) == v5


def test_update_metadata_v0_bytes() -> None:
    m = classes(UPDATE_METADATA.request)
    obj = m(
        controller_id=1, controller_epoch=7,
        ungrouped_partition_states=[m.UpdateMetadataPartitionState(
            topic_name="t", partition_index=0, controller_epoch=7, leader=1, leader_epoch=5,
            isr=[1], zk_version=9, replicas=[1, 2])],
        live_brokers=[m.UpdateMetadataBroker(id=1, v0_host="h", v0_port=9092)],
    )
    expected = (
        i32(1) + i32(7)
        + array(string("t") + i32(0) + i32(7) + i32(1) + i32(5) + int32s(1) + i32(9)
                + int32s(1, 2))
        + array(i32(1) + string("h") + i32(9092))
    )
    assert UPDATE_METADATA.request.encode(obj, 0) == expected
    assert UPDATE_METADATA.request.decode_exact(expected, 0) == obj


def test_update_metadata_v4_and_v7_bytes() -> None:
    m = classes(UPDATE_METADATA.request)
    state = m.UpdateMetadataPartitionState(
        topic_name="t", partition_index=0, controller_epoch=7, leader=1, leader_epoch=5,
        isr=[1], zk_version=9, replicas=[1, 2], offline_replicas=[2])
    endpoint = m.UpdateMetadataEndpoint(port=9093, host="h", listener="SSL",
                                        security_protocol=1)
    v4 = m(controller_id=1, controller_epoch=7, ungrouped_partition_states=[state],
           live_brokers=[m.UpdateMetadataBroker(id=1, endpoints=[endpoint], rack="r")])
    expected_v4 = (
        i32(1) + i32(7)
        + array(string("t") + i32(0) + i32(7) + i32(1) + i32(5) + int32s(1) + i32(9)
                + int32s(1, 2) + int32s(2))
        + array(i32(1) + array(i32(9093) + string("h") + string("SSL") + i16(1)) + string("r"))
    )
    assert UPDATE_METADATA.request.encode(v4, 4) == expected_v4
    assert UPDATE_METADATA.request.decode_exact(expected_v4, 4) == v4

    grouped_state = m.UpdateMetadataPartitionState(
        partition_index=0, controller_epoch=7, leader=1, leader_epoch=5, isr=[1],
        zk_version=9, replicas=[1, 2], offline_replicas=[2])
    v7 = m(controller_id=1, controller_epoch=7, broker_epoch=9,
           topic_states=[m.UpdateMetadataTopicState(topic_name="t", topic_id=ORDERS_ID,
                                                    partition_states=[grouped_state])],
           live_brokers=[m.UpdateMetadataBroker(id=1, endpoints=[endpoint], rack=None)])
    expected_v7 = (
        i32(1) + i32(7) + i64(9)
        + compact_array(
            compact_string("t") + ORDERS_ID.bytes
            + compact_array(i32(0) + i32(7) + i32(1) + i32(5) + compact_int32s(1) + i32(9)
                            + compact_int32s(1, 2) + compact_int32s(2) + NO_TAGS)
            + NO_TAGS)
        + compact_array(
            i32(1)
            + compact_array(i32(9093) + compact_string("h") + compact_string("SSL") + i16(1)
                            + NO_TAGS)
            + compact_string(None) + NO_TAGS)
        + NO_TAGS
    )
    assert UPDATE_METADATA.request.encode(v7, 7) == expected_v7
    assert UPDATE_METADATA.request.decode_exact(expected_v7, 7) == v7
    assert UPDATE_METADATA.response.encode(UPDATE_METADATA.response.cls(error_code=0), 7) == (
        i16(0) + NO_TAGS)


def test_stop_replica_layouts() -> None:
    m = classes(STOP_REPLICA.request)
    v0 = m(controller_id=1, controller_epoch=7, delete_partitions=True,
           ungrouped_partitions=[m.StopReplicaPartitionV0(topic_name="t", partition_index=2)])
    expected_v0 = i32(1) + i32(7) + boolean(True) + array(string("t") + i32(2))
    assert STOP_REPLICA.request.encode(v0, 0) == expected_v0
    assert STOP_REPLICA.request.decode_exact(expected_v0, 0) == v0

    v1 = m(controller_id=1, controller_epoch=7, broker_epoch=9, delete_partitions=False,
           topics=[m.StopReplicaTopicV1(name="t", partition_indexes=[2, 3])])
    expected_v1 = i32(1) + i32(7) + i64(9) + boolean(False) + array(string("t") + int32s(2, 3))
    assert STOP_REPLICA.request.encode(v1, 1) == expected_v1
    assert STOP_REPLICA.request.encode(v1, 2) == (
        i32(1) + i32(7) + i64(9) + boolean(False)
        + compact_array(compact_string("t") + compact_int32s(2, 3) + NO_TAGS) + NO_TAGS)

    v3 = m(controller_id=1, controller_epoch=7, broker_epoch=9, topic_states=[
        m.StopReplicaTopicState(topic_name="t", partition_states=[
            m.StopReplicaPartitionState(partition_index=2, leader_epoch=-2,
                                        delete_partition=True)])])
    expected_v3 = (
        i32(1) + i32(7) + i64(9)
        + compact_array(compact_string("t")
                        + compact_array(i32(2) + i32(-2) + boolean(True) + NO_TAGS) + NO_TAGS)
        + NO_TAGS
    )
    assert STOP_REPLICA.request.encode(v3, 3) == expected_v3
    assert STOP_REPLICA.request.decode_exact(expected_v3, 3) == v3

    r = classes(STOP_REPLICA.response)
    resp = r(error_code=0, partition_errors=[
        r.StopReplicaPartitionError(topic_name="t", partition_index=2, error_code=74)])
    assert STOP_REPLICA.response.encode(resp, 1) == i16(0) + array(string("t") + i32(2) + i16(74))


def test_controlled_shutdown_v0_frame_has_header_v0() -> None:
    body = CONTROLLED_SHUTDOWN.request.cls(broker_id=2)
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 0, 42, "ignored", body)
    # api key, version, correlation id, then the body: no client id in header v0.
    assert frame == i16(7) + i16(0) + i32(42) + i32(2)
    decoded = decode_request(frame)
    assert decoded.api is CONTROLLED_SHUTDOWN and decoded.correlation_id == 42
    assert decoded.body == body


def test_controlled_shutdown_v2_and_v3_frames() -> None:
    body = CONTROLLED_SHUTDOWN.request.cls(broker_id=2, broker_epoch=9)
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 2, 42, "broker-2", body)
    assert frame == i16(7) + i16(2) + i32(42) + string("broker-2") + i32(2) + i64(9)
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 3, 42, "broker-2", body)
    # Header v2 keeps a classic client id, then empty tags; the body is flexible.
    assert frame == (i16(7) + i16(3) + i32(42) + string("broker-2") + NO_TAGS
                     + i32(2) + i64(9) + NO_TAGS)
    assert decode_request(frame).body == body
    r = classes(CONTROLLED_SHUTDOWN.response)
    resp = r(error_code=0, remaining_partitions=[r.RemainingPartition(topic_name="t",
                                                                       partition_index=1)])
    assert CONTROLLED_SHUTDOWN.response.encode(resp, 1) == (
        i16(0) + array(string("t") + i32(1)))


# --- nulls ---------------------------------------------------------------------------------


def test_null_only_where_kafka_allows_it() -> None:
    m = classes(DELETE_TOPICS.response)
    nameless = m(responses=[m.DeletableTopicResult(name=None, topic_id=ORDERS_ID,
                                                   error_code=100)])
    round_trip(DELETE_TOPICS.response, nameless, 6)
    with pytest.raises(ValueError, match="DeleteTopicsResponse v5"):
        DELETE_TOPICS.response.encode(nameless, 5)
    t = classes(CREATE_TOPICS.request)
    no_topics = t(topics=None)
    with pytest.raises(ValueError, match="non-nullable array topics"):
        CREATE_TOPICS.request.encode(no_topics, 0)


def test_decoder_refuses_a_null_non_nullable_array() -> None:
    # LeaderAndIsr v2 with a null topic_states array.
    frame = i32(1) + i32(7) + i64(9) + i32(-1) + array()
    with pytest.raises(DecodeError, match="non-nullable array topic_states is null"):
        LEADER_AND_ISR.request.decode_exact(frame, 2)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_null_partitions_means_every_partition(version: int) -> None:
    message = ELECT_LEADERS.request
    obj = message.cls(election_type=0 if version == 0 else 1, topic_partitions=None,
                      timeout_ms=5000)
    encoded = message.encode(obj, version)
    decoded, end = message.decode(memoryview(encoded), version, 0)
    assert end == len(encoded)
    assert decoded.topic_partitions is None and decoded.timeout_ms == 5000
    kio_cls = kio_class("elect_leaders", version, "request", message.name)
    assert kio_cls is not None
    assert kio_decode(kio_cls, encoded).topic_partitions is None
