"""UpdateMetadata feeds the MetadataCache; Metadata answers from it.

The cluster state arrives the way the controller will send it (an encoded UpdateMetadata
request through the dispatcher); Metadata answers are read by kafka-python's decoder and
by real clients (confluent-kafka / librdkafka, kafka-python) over TCP.
"""

import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from twisted.internet import reactor
from twisted.internet.testing import StringTransport

from kafkaclone.common.errors import LeaderNotAvailableError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.network.socket_server import KafkaServerFactory
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.delayed.admin import (
    DelayedCreatePartitions,
    DelayedDeleteTopics,
    DelayedElectLeader,
)
from kafkaclone.server.delayed.purgatory import DelayedOperationPurgatory
from kafkaclone.server.metadata_cache import MetadataCache
from kafkaclone.server.request_handler import RequestHandler

UPDATE = api.APIS[ApiKey.UPDATE_METADATA].request
TOPIC_ID = uuid.UUID("0b9f8f49-a1c2-4d36-9b0b-0e3f4a5b6c7d")


@dataclass
class FakeBroker:
    """The parts of a broker the handlers use (kafkaclone.server.services.BrokerServices)."""

    broker_id: int = 1
    cluster_id: str | None = "kc-test-cluster-00001"
    metadata_cache: MetadataCache = field(default_factory=lambda: MetadataCache(1))
    controller_epoch: int = 0
    broker_epoch: int = 100
    auto_create_topics_enable: bool = False
    authorizer: object = None
    created: list[str] = field(default_factory=list)
    topic_purgatory: DelayedOperationPurgatory = field(
        default_factory=lambda: DelayedOperationPurgatory("topic", reactor))
    elect_leader_purgatory: DelayedOperationPurgatory = field(
        default_factory=lambda: DelayedOperationPurgatory("ElectLeader", reactor))

    async def auto_create_topics(self, names):
        self.created.extend(names)
        return dict.fromkeys(names, LeaderNotAvailableError.code)


def update_metadata_request(port=9092, *, controller_epoch=1, broker_epoch=-1, live=(1, 2, 3),
                            leaders=(1, 2, 3), listener="PLAINTEXT", delete_topic=False):
    s = UPDATE.structs
    partitions = [
        s["UpdateMetadataPartitionState"](
            partition_index=p, controller_epoch=controller_epoch,
            leader=-2 if delete_topic else leaders[p], leader_epoch=5, isr=[1, 2, 3],
            zk_version=7, replicas=[1, 2, 3], offline_replicas=[])
        for p in range(3)
    ]
    brokers = [
        s["UpdateMetadataBroker"](id=b, rack=None, endpoints=[
            s["UpdateMetadataEndpoint"](port=port + (b - 1) * 0, host="127.0.0.1",
                                        listener=listener, security_protocol=0)])
        for b in live
    ]
    return UPDATE(controller_id=1, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                  topic_states=[s["UpdateMetadataTopicState"](
                      topic_name="demo", topic_id=TOPIC_ID, partition_states=partitions)],
                  live_brokers=brokers)


def frame(key, version, body, correlation_id=1):
    payload = api.encode_request(key, version, correlation_id, "test", body)
    return struct.pack(">i", len(payload)) + payload


def exchange(dispatcher, request_bytes):
    conn = KafkaServerFactory(dispatcher).buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(request_bytes)
    data = transport.value()
    (length,) = struct.unpack_from(">i", data)
    assert len(data) == 4 + length
    return data[4:]


def apply_update(dispatcher, body, version=7):
    reply = exchange(dispatcher, frame(ApiKey.UPDATE_METADATA, version, body))
    return api.decode_response(ApiKey.UPDATE_METADATA, version, reply)[1].error_code


@pytest.fixture
def broker():
    return FakeBroker()


@pytest.fixture
def dispatcher(broker):
    return RequestHandler(broker=broker)


def kafka_python_metadata(dispatcher, version, topics, **fields):
    request = MetadataRequest(version=version, topics=topics, **fields)
    request.with_header(correlation_id=3, client_id="kp")
    reply = exchange(dispatcher, request.encode(header=True, framed=True))
    return MetadataResponse.decode(reply, version=version, header=True)


@pytest.mark.parametrize("version", range(12))
def test_metadata_every_version_read_by_kafka_python(broker, dispatcher, version):
    assert apply_update(dispatcher, update_metadata_request()) == 0
    topics = [] if version == 0 else None  # "all topics"
    response = kafka_python_metadata(dispatcher, version, topics)
    assert sorted(b.node_id for b in response.brokers) == [1, 2, 3]
    assert {(b.host, b.port) for b in response.brokers} == {("127.0.0.1", 9092)}
    (topic,) = response.topics
    assert topic.name == "demo"
    assert topic.error_code == 0
    assert [(p.partition_index, p.leader_id, p.error_code) for p in topic.partitions] == [
        (0, 1, 0), (1, 2, 0), (2, 3, 0)]
    assert all(p.isr_nodes == [1, 2, 3] for p in topic.partitions)
    if version >= 1:
        assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id == "kc-test-cluster-00001"
    if version >= 7:
        assert topic.partitions[0].leader_epoch == 5
    if version >= 10:
        assert uuid.UUID(str(topic.topic_id)) == TOPIC_ID


def test_unknown_and_illegal_topics(dispatcher):
    apply_update(dispatcher, update_metadata_request())
    response = kafka_python_metadata(dispatcher, 9, [MetadataRequest.MetadataRequestTopic(
        name=n) for n in ("missing", "bad/name", "demo")], allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("missing", 3), ("bad/name", 17), ("demo", 0)]


def test_auto_create_when_enabled(broker, dispatcher):
    broker.auto_create_topics_enable = True
    response = kafka_python_metadata(dispatcher, 4, [MetadataRequest.MetadataRequestTopic(
        name="fresh")], allow_auto_topic_creation=True)
    assert [(t.name, t.error_code) for t in response.topics] == [("fresh", 5)]
    assert broker.created == ["fresh"]
    response = kafka_python_metadata(dispatcher, 4, [MetadataRequest.MetadataRequestTopic(
        name="other")], allow_auto_topic_creation=False)
    assert [(t.name, t.error_code) for t in response.topics] == [("other", 3)]
    assert broker.created == ["fresh"]


def test_dead_leader_is_leader_not_available_and_v0_hides_dead_replicas(dispatcher):
    apply_update(dispatcher, update_metadata_request(live=(1, 2)))
    v0 = kafka_python_metadata(dispatcher, 0, [])
    by_partition = {p.partition_index: p for p in v0.topics[0].partitions}
    assert by_partition[2].error_code == 5 and by_partition[2].leader_id == -1
    assert by_partition[0].error_code == 9  # REPLICA_NOT_AVAILABLE: broker 3 is dead
    assert by_partition[0].replica_nodes == [1, 2]
    v9 = kafka_python_metadata(dispatcher, 9, None)
    by_partition = {p.partition_index: p for p in v9.topics[0].partitions}
    assert by_partition[0].error_code == 0
    assert by_partition[0].replica_nodes == [1, 2, 3]


def test_leader_without_this_listener_is_listener_not_found_from_v6(dispatcher):
    apply_update(dispatcher, update_metadata_request(listener="INTERNAL"))
    assert kafka_python_metadata(dispatcher, 6, None).brokers == []
    partitions = kafka_python_metadata(dispatcher, 6, None).topics[0].partitions
    assert {p.error_code for p in partitions} == {72}
    partitions = kafka_python_metadata(dispatcher, 5, None).topics[0].partitions
    assert {p.error_code for p in partitions} == {5}


def test_stale_controller_epoch_is_refused_and_changes_nothing(broker, dispatcher):
    assert apply_update(dispatcher, update_metadata_request(controller_epoch=4)) == 0
    assert broker.controller_epoch == 4
    stale = update_metadata_request(controller_epoch=3, live=(1,))
    assert apply_update(dispatcher, stale) == 11  # STALE_CONTROLLER_EPOCH
    assert [b.id for b in broker.metadata_cache.alive_brokers()] == [1, 2, 3]


def test_stale_broker_epoch_is_refused(broker, dispatcher):
    assert apply_update(dispatcher, update_metadata_request(broker_epoch=99)) == 77
    assert broker.metadata_cache.all_topics() == []
    assert apply_update(dispatcher, update_metadata_request(broker_epoch=100)) == 0


def test_topic_deletion_removes_partitions(broker, dispatcher):
    apply_update(dispatcher, update_metadata_request())
    assert broker.metadata_cache.all_topics() == ["demo"]
    apply_update(dispatcher, update_metadata_request(delete_topic=True))
    assert broker.metadata_cache.all_topics() == []


def test_update_metadata_completes_the_admin_requests_waiting_on_what_it_names(
        broker, dispatcher):
    cache = broker.metadata_cache
    created, deleted, elected = [], [], []
    broker.topic_purgatory.try_complete_else_watch(
        DelayedCreatePartitions(60_000, {"demo": {0, 1, 2}}, cache, created.append), ["demo"])
    broker.topic_purgatory.try_complete_else_watch(
        DelayedCreatePartitions(60_000, {"other": {0}}, cache, created.append), ["other"])
    demo_1 = TopicPartition("demo", 1)
    broker.elect_leader_purgatory.try_complete_else_watch(
        DelayedElectLeader(60_000, {demo_1: 3}, cache, elected.append), [demo_1])
    assert apply_update(dispatcher, update_metadata_request(leaders=(1, 2, 1))) == 0
    assert created == [set()] and elected == []  # "other" is not named; leader 1 is not 3
    assert apply_update(dispatcher, update_metadata_request(leaders=(1, 3, 1))) == 0
    assert elected == [set()]
    broker.topic_purgatory.try_complete_else_watch(
        DelayedDeleteTopics(60_000, ["demo"], cache, deleted.append), ["demo"])
    assert apply_update(dispatcher, update_metadata_request(delete_topic=True)) == 0
    assert deleted == [set()]
    assert broker.topic_purgatory.delayed == 1  # "other" still waits
    broker.topic_purgatory.shutdown()
    assert created == [set(), {"other"}]


@pytest.mark.parametrize("version", [0, 1, 4, 5, 6])
def test_older_update_metadata_layouts(broker, dispatcher, version):
    s = UPDATE.structs
    state = s["UpdateMetadataPartitionState"](
        topic_name="old", partition_index=0, controller_epoch=1, leader=1, leader_epoch=2,
        isr=[1], zk_version=1, replicas=[1], offline_replicas=[])
    endpoint = s["UpdateMetadataEndpoint"](port=9999, host="h", listener="PLAINTEXT",
                                           security_protocol=0)
    live = s["UpdateMetadataBroker"](id=1, v0_host="h", v0_port=9999, endpoints=[endpoint])
    body = UPDATE(controller_id=1, controller_epoch=1, live_brokers=[live],
                  ungrouped_partition_states=[state],
                  topic_states=[s["UpdateMetadataTopicState"](topic_name="old",
                                                              partition_states=[state])])
    assert apply_update(dispatcher, body, version) == 0
    endpoint_seen = broker.metadata_cache.leader_endpoint("old", 0, "PLAINTEXT")
    assert (endpoint_seen.host, endpoint_seen.port) == ("h", 9999)


def run_client_while_serving(dispatcher, client, timeout=20.0):
    """Listen on 127.0.0.1, run ``client(port)`` in a thread and turn the reactor meanwhile."""
    factory = KafkaServerFactory(dispatcher)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    result: dict = {}

    def target():
        try:
            result["value"] = client(port.getHost().port)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        reactor.iterate(0.005)
    stopping = port.stopListening()
    while thread.is_alive() and time.monotonic() < deadline + 10:
        reactor.iterate(0.005)
    for conn in list(factory.connections):
        conn.transport.loseConnection()
    for _ in range(100):
        if stopping.called and not factory.connections:
            break
        reactor.iterate(0.01)
    thread.join(timeout=1)
    assert not thread.is_alive(), "client thread did not finish"
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_confluent_kafka_lists_brokers_and_topics(broker, dispatcher):
    from confluent_kafka.admin import AdminClient

    def client(port):
        apply_update(dispatcher, update_metadata_request(port=port))
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                             "socket.timeout.ms": 5000})
        metadata = admin.list_topics(timeout=10)
        return ({b.id for b in metadata.brokers.values()}, metadata.controller_id,
                metadata.cluster_id,
                {t: sorted(p.leader for p in tm.partitions.values())
                 for t, tm in metadata.topics.items()})

    brokers, controller, cluster, topics = run_client_while_serving(dispatcher, client)
    assert brokers == {1, 2, 3}
    assert controller == 1
    assert cluster == "kc-test-cluster-00001"
    assert topics == {"demo": [1, 2, 3]}


def test_kafka_python_consumer_sees_partitions(broker, dispatcher):
    from kafka import KafkaConsumer

    def client(port):
        apply_update(dispatcher, update_metadata_request(port=port))
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}",
                                 request_timeout_ms=10000)
        try:
            return consumer.topics(), consumer.partitions_for_topic("demo")
        finally:
            consumer.close()

    topics, partitions = run_client_while_serving(dispatcher, client)
    assert "demo" in topics
    assert partitions == {0, 1, 2}


def kafka_python_metadata_on(dispatcher, listener, version, topics, **fields):
    request = MetadataRequest(version=version, topics=topics, **fields)
    request.with_header(correlation_id=3, client_id="kp")
    conn = KafkaServerFactory(dispatcher, listener_name=listener).buildProtocol(None)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(request.encode(header=True, framed=True))
    return MetadataResponse.decode(transport.value()[4:], version=version, header=True)


def two_listener_update(*, live=(1, 2, 3), leaders=(1, 2, 3), internal=(1, 2, 3)):
    """Brokers with PLAINTEXT on port 9000 + id and, those in ``internal``, INTERNAL on
    port 9100 + id."""
    body = update_metadata_request(live=live, leaders=leaders)
    s = UPDATE.structs
    for b in body.live_brokers:
        b.endpoints = [s["UpdateMetadataEndpoint"](port=9000 + b.id, host="127.0.0.1",
                                                   listener="PLAINTEXT", security_protocol=0)]
        if b.id in internal:
            b.endpoints.append(s["UpdateMetadataEndpoint"](
                port=9100 + b.id, host="127.0.0.1", listener="INTERNAL", security_protocol=0))
    return body


def summary(response):
    return ([(b.node_id, b.host, b.port) for b in response.brokers],
            [(t.name, t.error_code, [(p.partition_index, p.error_code, p.leader_id,
                                      p.replica_nodes, p.isr_nodes) for p in t.partitions])
             for t in response.topics])


def all_topics(version):
    return [] if version == 0 else None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [0, 1, 5, 6, 9, 11])
def test_a_kept_metadata_answer_gives_way_to_the_next_update_metadata(
        broker, dispatcher, version):
    assert apply_update(dispatcher, update_metadata_request(leaders=(1, 2, 3))) == 0
    first = kafka_python_metadata(dispatcher, version, all_topics(version))
    again = kafka_python_metadata(dispatcher, version, all_topics(version))
    assert summary(again) == summary(first)
    assert [p.leader_id for p in again.topics[0].partitions] == [1, 2, 3]

    assert apply_update(dispatcher, update_metadata_request(leaders=(3, 1, 2))) == 0
    moved = kafka_python_metadata(dispatcher, version, all_topics(version))
    assert [p.leader_id for p in moved.topics[0].partitions] == [3, 1, 2]

    assert apply_update(dispatcher, update_metadata_request(live=(1, 2),
                                                            leaders=(3, 1, 2))) == 0
    lost = kafka_python_metadata(dispatcher, version, all_topics(version))
    assert sorted(b.node_id for b in lost.brokers) == [1, 2]
    dead_led = lost.topics[0].partitions[0]
    assert (dead_led.leader_id, dead_led.error_code) == (-1, 5)
    if version == 0:  # broker 3 left out of the replicas, flagged REPLICA_NOT_AVAILABLE
        assert lost.topics[0].partitions[1].replica_nodes == [1, 2]
        assert lost.topics[0].partitions[1].error_code == 9

    assert apply_update(dispatcher, update_metadata_request(delete_topic=True)) == 0
    assert kafka_python_metadata(dispatcher, version, all_topics(version)).topics == []


@pytest.mark.timeout(60)
def test_kept_metadata_answers_are_per_listener_and_version(broker, dispatcher):
    assert apply_update(dispatcher, two_listener_update()) == 0
    for _ in range(2):
        plain = kafka_python_metadata_on(dispatcher, "PLAINTEXT", 9, None)
        internal = kafka_python_metadata_on(dispatcher, "INTERNAL", 9, None)
        assert sorted(b.port for b in plain.brokers) == [9001, 9002, 9003]
        assert sorted(b.port for b in internal.brokers) == [9101, 9102, 9103]
        v1 = kafka_python_metadata_on(dispatcher, "INTERNAL", 1, None)
        assert sorted(b.port for b in v1.brokers) == [9101, 9102, 9103]
        assert [p.leader_id for p in v1.topics[0].partitions] == [1, 2, 3]

    # broker 1 drops its INTERNAL listener: only that listener's answers change
    assert apply_update(dispatcher, two_listener_update(internal=(2, 3))) == 0
    internal = kafka_python_metadata_on(dispatcher, "INTERNAL", 9, None)
    assert sorted(b.node_id for b in internal.brokers) == [2, 3]
    assert [p.error_code for p in internal.topics[0].partitions] == [72, 0, 0]
    v5 = kafka_python_metadata_on(dispatcher, "INTERNAL", 5, None)
    assert [p.error_code for p in v5.topics[0].partitions] == [5, 0, 0]
    plain = kafka_python_metadata_on(dispatcher, "PLAINTEXT", 9, None)
    assert [(p.leader_id, p.error_code) for p in plain.topics[0].partitions] == [
        (1, 0), (2, 0), (3, 0)]


@pytest.mark.timeout(60)
def test_answers_naming_unknown_topics_are_not_kept(broker, dispatcher):
    """Each such request tries the auto-creation again, as before answers were kept."""
    broker.auto_create_topics_enable = True
    apply_update(dispatcher, update_metadata_request())
    for _ in range(2):
        response = kafka_python_metadata(dispatcher, 9, [MetadataRequest.MetadataRequestTopic(
            name=name) for name in ("demo", "fresh")], allow_auto_topic_creation=True)
        assert [(t.name, t.error_code) for t in response.topics] == [("demo", 0), ("fresh", 5)]
    assert broker.created == ["fresh", "fresh"]
    # the same topic asked with auto-creation refused is its own answer
    response = kafka_python_metadata(dispatcher, 9, [MetadataRequest.MetadataRequestTopic(
        name="fresh")], allow_auto_topic_creation=False)
    assert [(t.name, t.error_code) for t in response.topics] == [("fresh", 3)]


@pytest.mark.timeout(60)
def test_an_answer_built_across_an_update_is_not_kept(broker, dispatcher):
    """An answer whose building spanned an UpdateMetadata (its handler waited) speaks of
    the snapshot before it: it is sent, not kept."""
    assert apply_update(dispatcher, update_metadata_request(leaders=(1, 2, 3))) == 0
    cache = broker.metadata_cache
    before = cache.generation
    assert apply_update(dispatcher, update_metadata_request(leaders=(3, 1, 2))) == 0
    stale = api.EncodedResponse(9, b"stale")
    cache.keep_metadata_answer("key", stale, before)
    assert cache.metadata_answer("key") is None
    cache.keep_metadata_answer("key", stale, cache.generation)
    assert cache.metadata_answer("key") is stale
