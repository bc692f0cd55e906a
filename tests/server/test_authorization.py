"""Authorization through the request dispatcher with a stub principal on the connection and
a real AclAuthorizer on ZooKeeper: inter-broker APIs refused to a principal without
ClusterAction (and nothing done), the ACL APIs' cluster checks and per-entry errors, and
SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from twisted.internet import reactor

from kafkaclone.common.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkaclone.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    OperationNotAttemptedError,
    SecurityDisabledError,
    TransactionalIdAuthorizationFailedError,
)
from kafkaclone.common.security import KafkaPrincipal
from kafkaclone.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkaclone.network.socket_server import ConnectionInfo, response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ControlledShutdownRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    TxnOffsetCommitRequest,
    UpdateMetadataRequest,
    WriteTxnMarkersRequest,
)
from kafkaclone.server.authorizer.acl_authorizer import AclAuthorizer
from kafkaclone.server.request_handler import RequestHandler
from kafkaclone.testing.reactor import run
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import ProducerIdBlock

MALLORY = KafkaPrincipal("User", "mallory")
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
CONTROLLER = KafkaPrincipal("User", "broker")


class RecordingReplicaManager:
    """Fails the test if a refused request reaches it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def stop_replicas(self, *args: Any) -> Any:
        self.calls.append("stop_replicas")
        raise AssertionError("StopReplica reached the replica manager")

    async def become_leader_or_follower(self, *args: Any) -> Any:
        self.calls.append("become_leader_or_follower")
        raise AssertionError("LeaderAndIsr reached the replica manager")


@dataclass
class SecuredBroker:
    authorizer: AclAuthorizer | None
    replica_manager: RecordingReplicaManager = field(default_factory=RecordingReplicaManager)
    broker_id: int = 1
    broker_epoch: int = 100
    controller_epoch: int = 0
    controller: Any = None
    producer_id_manager: ProducerIdManager | None = None


@pytest.fixture
def authorizer(make_client: Callable[..., KafkaZkClient]) -> Iterator[AclAuthorizer]:
    acl_authorizer = AclAuthorizer(make_client(), reactor,
                                   super_users=frozenset({str(CONTROLLER)}))
    run(acl_authorizer.startup())
    yield acl_authorizer
    acl_authorizer.shutdown()


def call(broker: SecuredBroker, principal: KafkaPrincipal, key: ApiKey, version: int,
         body: Any) -> Any:
    connection = ConnectionInfo("PLAINTEXT-1", "10.0.0.7", 50000, principal=principal)
    frame = api.encode_request(key, version, 3, "someone", body)
    reply = run(RequestHandler(broker=broker).dispatch(connection, frame))  # type: ignore[arg-type]
    assert reply is not None
    _, response = api.decode_response(key, version, response_bytes(reply))
    return response


def stop_replica() -> StopReplicaRequest:
    state = StopReplicaRequest.StopReplicaTopicState
    return StopReplicaRequest(controller_id=1, controller_epoch=99, broker_epoch=100,
                              topic_states=[state(topic_name="orders", partition_states=[
                                  state.StopReplicaPartitionState(partition_index=0,
                                                                  delete_partition=True)])])


def leader_and_isr() -> LeaderAndIsrRequest:
    state = LeaderAndIsrRequest.LeaderAndIsrPartitionState
    topic = LeaderAndIsrRequest.LeaderAndIsrTopicState
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=99, broker_epoch=100,
                               topic_states=[topic(topic_name="orders", partition_states=[
                                   state(topic_name="orders", partition_index=0, leader=1,
                                         isr=[1], replicas=[1])])])


def test_a_client_cannot_impersonate_the_controller(authorizer: AclAuthorizer) -> None:
    broker = SecuredBroker(authorizer)
    stopped = call(broker, MALLORY, ApiKey.STOP_REPLICA, 3, stop_replica())
    assert stopped.error_code == ClusterAuthorizationFailedError.code
    assert [p.error_code for p in stopped.partition_errors] == [
        ClusterAuthorizationFailedError.code]
    led = call(broker, MALLORY, ApiKey.LEADER_AND_ISR, 5, leader_and_isr())
    assert led.error_code == ClusterAuthorizationFailedError.code
    updated = call(broker, MALLORY, ApiKey.UPDATE_METADATA, 7, UpdateMetadataRequest(
        controller_id=1, controller_epoch=99, broker_epoch=100))
    assert updated.error_code == ClusterAuthorizationFailedError.code
    shutdown = call(broker, MALLORY, ApiKey.CONTROLLED_SHUTDOWN, 3,
                    ControlledShutdownRequest(broker_id=2, broker_epoch=5))
    assert shutdown.error_code == ClusterAuthorizationFailedError.code
    assert broker.replica_manager.calls == []
    assert broker.controller_epoch == 0


def test_cluster_action_lets_a_broker_through(authorizer: AclAuthorizer) -> None:
    broker = SecuredBroker(authorizer)
    with pytest.raises(AssertionError, match="StopReplica reached"):
        call(broker, CONTROLLER, ApiKey.STOP_REPLICA, 3, stop_replica())
    assert broker.replica_manager.calls == ["stop_replicas"]


def creation(name: str, principal: str = "User:alice",
             resource_type: ResourceType = ResourceType.TOPIC) -> Any:
    return CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name,
        resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)


def test_acl_apis(authorizer: AclAuthorizer) -> None:
    broker = SecuredBroker(authorizer)
    refused = call(broker, MALLORY, ApiKey.CREATE_ACLS, 2,
                   CreateAclsRequest(creations=[creation("t")]))
    assert [r.error_code for r in refused.results] == [ClusterAuthorizationFailedError.code]
    created = call(broker, CONTROLLER, ApiKey.CREATE_ACLS, 2, CreateAclsRequest(creations=[
        creation("t"), creation("other-cluster", resource_type=ResourceType.CLUSTER),
        creation(""), creation("t", principal="alice")]))
    assert [r.error_code for r in created.results] == [0] + [InvalidRequestError.code] * 3
    assert "kafka-cluster" in (created.results[1].error_message or "")
    described = call(broker, MALLORY, ApiKey.DESCRIBE_ACLS, 1, DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY))
    assert described.error_code == ClusterAuthorizationFailedError.code
    described = call(broker, CONTROLLER, ApiKey.DESCRIBE_ACLS, 1, DescribeAclsRequest(
        resource_type_filter=ResourceType.TOPIC, resource_name_filter="t",
        pattern_type_filter=PatternType.MATCH, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY))
    assert [(r.resource_name, [(a.principal, a.operation) for a in r.acls])
            for r in described.resources] == [("t", [("User:alice", AclOperation.READ)])]
    delete_filter = DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=ResourceType.TOPIC, resource_name_filter=None,
        pattern_type_filter=PatternType.ANY, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY)
    deleted = call(broker, CONTROLLER, ApiKey.DELETE_ACLS, 2,
                   DeleteAclsRequest(filters=[delete_filter]))
    (result,) = deleted.filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.principal, m.error_code) for m in result.matching_acls] == [
        ("t", "User:alice", 0)]
    assert authorizer.bindings() == []


def test_acl_apis_without_an_authorizer_are_security_disabled() -> None:
    broker = SecuredBroker(None)
    created = call(broker, MALLORY, ApiKey.CREATE_ACLS, 0,
                   CreateAclsRequest(creations=[creation("t")]))
    assert [r.error_code for r in created.results] == [SecurityDisabledError.code]
    described = call(broker, MALLORY, ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY))
    assert described.error_code == SecurityDisabledError.code
    deleted = call(broker, MALLORY, ApiKey.DELETE_ACLS, 1, DeleteAclsRequest(filters=[
        DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=ResourceType.ANY,
                                           pattern_type_filter=PatternType.ANY,
                                           operation=AclOperation.ANY,
                                           permission_type=AclPermissionType.ANY)]))
    assert [r.error_code for r in deleted.filter_results] == [SecurityDisabledError.code]


def test_bindings_survive_the_wire(authorizer: AclAuthorizer) -> None:
    prefixed = AclBinding(ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED),
                          AccessControlEntry("User:*", "10.0.0.7", AclOperation.DESCRIBE,
                                             AclPermissionType.DENY))
    assert run(authorizer.create_acls([prefixed])) == [None]
    described = call(SecuredBroker(authorizer), CONTROLLER, ApiKey.DESCRIBE_ACLS, 1,
                     DescribeAclsRequest(resource_type_filter=ResourceType.GROUP,
                                         resource_name_filter="app-1",
                                         pattern_type_filter=PatternType.MATCH,
                                         operation=AclOperation.ANY,
                                         permission_type=AclPermissionType.ANY))
    (resource,) = described.resources
    assert (resource.resource_name, resource.pattern_type) == ("app-", PatternType.PREFIXED)
    (acl,) = resource.acls
    assert (acl.principal, acl.host, acl.operation, acl.permission_type) == (
        "User:*", "10.0.0.7", AclOperation.DESCRIBE, AclPermissionType.DENY)


def test_group_apis_check_the_group_and_its_topics(authorizer: AclAuthorizer) -> None:
    from tests.coordinator.test_group_handlers import (
        TOPIC,
        FakeBroker,
        commit_body,
        fetch_body,
        join,
    )
    from tests.coordinator.test_group_handlers import call as group_call

    anonymous = "User:ANONYMOUS"
    granted = [AclBinding(ResourcePattern(resource_type, name),
                          AccessControlEntry(anonymous, "*", AclOperation.READ,
                                             AclPermissionType.ALLOW))
               for resource_type, name in ((ResourceType.GROUP, "readers"),
                                           (ResourceType.TOPIC, TOPIC))]
    assert run(authorizer.create_acls(granted)) == [None, None]
    broker = FakeBroker()
    join(broker, 7, "hidden")  # made before authorization is on
    broker.authorizer = authorizer

    assert join(broker, 7, "others").error_code == GROUP_AUTHORIZATION_FAILED
    assert join(broker, 7, "readers").error_code != GROUP_AUTHORIZATION_FAILED
    found = group_call(broker, ApiKey.FIND_COORDINATOR, 3, key="others", key_type=0)
    assert found.error_code == GROUP_AUTHORIZATION_FAILED
    heartbeat = group_call(broker, ApiKey.HEARTBEAT, 4, group_id="others", generation_id=1,
                           member_id="m", group_instance_id=None)
    assert heartbeat.error_code == GROUP_AUTHORIZATION_FAILED

    committed = group_call(broker, ApiKey.OFFSET_COMMIT, 8, **commit_body(
        8, "readers", (TOPIC, 0, 42), ("secret", 0, 1)))
    assert {t.name: t.partitions[0].error_code for t in committed.topics} == {
        TOPIC: 0, "secret": TOPIC_AUTHORIZATION_FAILED}
    refused = group_call(broker, ApiKey.OFFSET_COMMIT, 8, **commit_body(8, "others",
                                                                       (TOPIC, 0, 1)))
    assert refused.topics[0].partitions[0].error_code == GROUP_AUTHORIZATION_FAILED
    assert "others" not in broker.store.offsets

    fetched = group_call(broker, ApiKey.OFFSET_FETCH, 7,
                         **fetch_body("readers", [(TOPIC, [0]), ("secret", [0])]))
    assert {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code)
            for t in fetched.topics} == {TOPIC: (42, 0),
                                         "secret": (-1, TOPIC_AUTHORIZATION_FAILED)}
    assert group_call(broker, ApiKey.OFFSET_FETCH, 7, **fetch_body("others", None)) \
        .error_code == GROUP_AUTHORIZATION_FAILED

    described = group_call(broker, ApiKey.DESCRIBE_GROUPS, 5, groups=["readers", "others"],
                           include_authorized_operations=True)
    assert [g.error_code for g in described.groups] == [0, GROUP_AUTHORIZATION_FAILED]
    # Read implies Describe; Delete is not granted.
    assert described.groups[0].authorized_operations == (
        1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    deleted = group_call(broker, ApiKey.DELETE_GROUPS, 2, groups_names=["readers"])
    assert deleted.results[0].error_code == GROUP_AUTHORIZATION_FAILED
    listed = group_call(broker, ApiKey.LIST_GROUPS, 4, states_filter=[])
    assert [g.group_id for g in listed.groups] == ["readers"]  # not "hidden"
    broker.authorizer = None
    listed = group_call(broker, ApiKey.LIST_GROUPS, 4, states_filter=[])
    assert sorted(g.group_id for g in listed.groups) == ["hidden", "readers"]


def test_admin_apis_check_topics_and_cluster(zk_client: KafkaZkClient, zk_connect: str,
                                            zk: Any) -> None:
    from tests.clients.cluster_double import admin_cluster
    from tests.server.test_admin_handlers import (
        alter,
        create,
        create_partitions,
        describe,
        request,
        topic,
    )
    from tests.server.test_admin_handlers import call as admin_call

    acl_authorizer = AclAuthorizer(zk_client, reactor)
    run(acl_authorizer.startup())
    anonymous = "User:ANONYMOUS"
    assert run(acl_authorizer.create_acls([
        AclBinding(ResourcePattern(ResourceType.TOPIC, "allowed"),
                   AccessControlEntry(anonymous, "*", operation, AclPermissionType.ALLOW))
        for operation in (AclOperation.CREATE, AclOperation.DESCRIBE_CONFIGS)] + [
        # the simulated controller's UpdateMetadata comes on the same (anonymous) connection
        AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"),
                   AccessControlEntry(anonymous, "*", AclOperation.CLUSTER_ACTION,
                                      AclPermissionType.ALLOW))])) == [None] * 3
    clusters = admin_cluster(zk_client, zk_connect)
    cluster = next(clusters)
    try:
        cluster.broker.authorizer = acl_authorizer
        created = create(cluster, topic("allowed", 1, 1), topic("denied", 1, 1))
        assert [(t.name, t.error_code) for t in created.topics] == [
            ("allowed", 0), ("denied", TOPIC_AUTHORIZATION_FAILED)]
        assert zk.exists("/brokers/topics/allowed") and not zk.exists("/brokers/topics/denied")

        deleted = admin_call(cluster, ApiKey.DELETE_TOPICS, 4, request(
            ApiKey.DELETE_TOPICS, topic_names=["allowed"], timeout_ms=5000))
        assert deleted.responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
        assert not zk.exists("/admin/delete_topics/allowed")

        assert describe(cluster, 2, "allowed").error_code == 0
        assert describe(cluster, 2, "denied").error_code == TOPIC_AUTHORIZATION_FAILED
        assert describe(cluster, 4, "1").error_code == ClusterAuthorizationFailedError.code
        altered = alter(cluster, 2, "allowed", **{"retention.ms": "1"})
        assert altered.error_code == TOPIC_AUTHORIZATION_FAILED
        assert not zk.exists("/config/topics/allowed") or b"retention.ms" not in zk.get(
            "/config/topics/allowed")[0]
        assert create_partitions(cluster, "allowed", 3).error_code == TOPIC_AUTHORIZATION_FAILED

        elected = admin_call(cluster, ApiKey.ELECT_LEADERS, 2, request(
            ApiKey.ELECT_LEADERS, election_type=0, topic_partitions=None, timeout_ms=1000))
        assert elected.error_code == ClusterAuthorizationFailedError.code
        described = admin_call(cluster, ApiKey.DESCRIBE_CLUSTER, 0, request(
            ApiKey.DESCRIBE_CLUSTER, include_cluster_authorized_operations=True))
        assert described.error_code == 0 and described.cluster_authorized_operations == 0
    finally:
        acl_authorizer.shutdown()
        clusters.close()


def test_init_producer_id_needs_idempotent_write_or_write_on_a_topic(
        authorizer: AclAuthorizer) -> None:
    """Kafka 2.8's InitProducerId checks: Write on the transactional id when there is one,
    else IdempotentWrite on the cluster or Write on any topic."""
    broker = SecuredBroker(authorizer)
    refused = call(broker, MALLORY, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000))
    assert refused.error_code == ClusterAuthorizationFailedError.code
    refused = call(broker, MALLORY, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id="tx-1", transaction_timeout_ms=60000))
    assert refused.error_code == TransactionalIdAuthorizationFailedError.code
    write = AclBinding(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                       AccessControlEntry(str(MALLORY), "*", AclOperation.WRITE,
                                          AclPermissionType.ALLOW))
    assert run(authorizer.create_acls([write])) == [None]
    broker.producer_id_manager = ProducerIdManager(1, OneBlock(), block_size=10)
    granted = call(broker, MALLORY, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000))
    assert (granted.error_code, granted.producer_id, granted.producer_epoch) == (0, 0, 0)


class OneBlock:
    """/latest_producer_id_block stand-in: the first block of ids."""

    async def allocate_producer_id_block(self, broker_id: int, block_size: int = 1000
                                         ) -> ProducerIdBlock:
        return ProducerIdBlock(broker_id, 0, block_size - 1)


class KnowsEveryPartition:
    def partition_state(self, topic: str, partition: int) -> object:
        return object()

    def contains(self, topic: str) -> bool:
        return True


@dataclass
class TxnBroker(SecuredBroker):
    """Fails the test (AttributeError) if a refused request reaches a coordinator."""

    metadata_cache: KnowsEveryPartition = field(default_factory=KnowsEveryPartition)
    reactor: Any = reactor


def allow(authorizer: AclAuthorizer, operation: AclOperation, resource_type: ResourceType,
          name: str) -> None:
    binding = AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                         AccessControlEntry(str(MALLORY), "*", operation,
                                            AclPermissionType.ALLOW))
    assert run(authorizer.create_acls([binding])) == [None]


def test_transaction_apis_check_transactional_id_group_topics_and_cluster(
        authorizer: AclAuthorizer) -> None:
    """Kafka 2.8's checks: Write on the transactional id for AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn and TxnOffsetCommit; Write on each topic added; Read on the
    group and its topics for offsets; ClusterAction for WriteTxnMarkers."""
    broker = TxnBroker(authorizer)
    marker = WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=5, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
            name="orders", partition_indexes=[0, 1])])
    written = call(broker, MALLORY, ApiKey.WRITE_TXN_MARKERS, 1,
                   WriteTxnMarkersRequest(markers=[marker]))
    assert [p.error_code for p in written.markers[0].topics[0].partitions] == [
        ClusterAuthorizationFailedError.code] * 2
    assert broker.replica_manager.calls == []

    add = AddPartitionsToTxnRequest(
        transactional_id="tx-1", producer_id=5, producer_epoch=0,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name, [0])
                for name in ("orders", "secret")])
    ended = call(broker, MALLORY, ApiKey.END_TXN, 3, EndTxnRequest(
        transactional_id="tx-1", producer_id=5, producer_epoch=0, committed=True))
    assert ended.error_code == TransactionalIdAuthorizationFailedError.code
    added = call(broker, MALLORY, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert {t.name: t.results[0].error_code for t in added.results} == dict.fromkeys(
        ("orders", "secret"), TransactionalIdAuthorizationFailedError.code)
    offsets = AddOffsetsToTxnRequest(transactional_id="tx-1", producer_id=5,
                                     producer_epoch=0, group_id="readers")
    assert call(broker, MALLORY, ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets).error_code == \
        TransactionalIdAuthorizationFailedError.code
    topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    commit = TxnOffsetCommitRequest(
        transactional_id="tx-1", group_id="readers", producer_id=5, producer_epoch=0,
        topics=[topic(name="secret", partitions=[
            topic.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])
    committed = call(broker, MALLORY, ApiKey.TXN_OFFSET_COMMIT, 3, commit)
    assert committed.topics[0].partitions[0].error_code == \
        TransactionalIdAuthorizationFailedError.code

    allow(authorizer, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx-1")
    allow(authorizer, AclOperation.WRITE, ResourceType.TOPIC, "orders")
    added = call(broker, MALLORY, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert {t.name: t.results[0].error_code for t in added.results} == {
        "orders": OperationNotAttemptedError.code, "secret": TOPIC_AUTHORIZATION_FAILED}
    assert call(broker, MALLORY, ApiKey.ADD_OFFSETS_TO_TXN, 3, offsets).error_code == \
        GROUP_AUTHORIZATION_FAILED
    committed = call(broker, MALLORY, ApiKey.TXN_OFFSET_COMMIT, 3, commit)
    assert committed.topics[0].partitions[0].error_code == GROUP_AUTHORIZATION_FAILED
    allow(authorizer, AclOperation.READ, ResourceType.GROUP, "readers")
    committed = call(broker, MALLORY, ApiKey.TXN_OFFSET_COMMIT, 3, commit)
    assert committed.topics[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
