"""Data-path and metadata messages: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords, InitProducerId, Metadata, DescribeCluster, SaslHandshake, SaslAuthenticate.

For every message and version: a hand-built instance with a non-default value in every field
present at that version round-trips. Where kio (generated from Kafka 4.x's JSON) has the
version, our bytes must be kio's bytes and the values must agree both ways; for the older
versions kio dropped, kafka-python's legacy structs play the same part.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kafkaclone.common.errors import DecodeError
from kafkaclone.protocol.schema import Message
from tests.protocol.data_path_helpers import compiled, normalise, positional, versions
from tests.protocol.kio_helpers import (
    assert_every_field_set,
    at_version,
    from_kio,
    kio_decode,
    kio_encode,
    kio_types,
    round_trip,
    to_kio,
)

pytestmark = pytest.mark.timeout(60)

# An opaque record batch: the protocol layer never looks inside.
BATCH = bytes.fromhex("00000000000000000000003affffffff02") + bytes(range(45))
TOPIC_ID = uuid.UUID("4d5a27b1-7c2e-4f1a-9d43-0b8c3e6f2a19")

# module: (kio package, API name, API key, (min, max) of Kafka 2.8)
APIS: dict[str, tuple[str, str, int, tuple[int, int]]] = {
    "produce": ("produce", "Produce", 0, (0, 9)),
    "fetch": ("fetch", "Fetch", 1, (0, 12)),
    "list_offsets": ("list_offsets", "ListOffsets", 2, (0, 6)),
    "metadata": ("metadata", "Metadata", 3, (0, 11)),
    "sasl_handshake": ("sasl_handshake", "SaslHandshake", 17, (0, 1)),
    "delete_records": ("delete_records", "DeleteRecords", 21, (0, 2)),
    "init_producer_id": ("init_producer_id", "InitProducerId", 22, (0, 4)),
    "offset_for_leader_epoch": ("offset_for_leader_epoch", "OffsetForLeaderEpoch", 23, (0, 4)),
    "sasl_authenticate": ("sasl_authenticate", "SaslAuthenticate", 36, (0, 2)),
    "describe_cluster": ("describe_cluster", "DescribeCluster", 60, (0, 0)),
}

FLEXIBLE_FROM = {
    "produce": 9, "fetch": 12, "list_offsets": 6, "metadata": 9, "sasl_handshake": None,
    "delete_records": 2, "init_producer_id": 2, "offset_for_leader_epoch": 4,
    "sasl_authenticate": 2, "describe_cluster": 0,
}


# --- hand-built instances: every field of every version set to something other than its
# default (fields that only old versions have included) --------------------------------------


def produce_request() -> Any:
    R = compiled("produce")[0].cls
    return R(
        transactional_id="payments-txn-1", acks=-1, timeout_ms=30000,
        topic_data=[R.TopicProduceData(name="orders", partition_data=[
            R.TopicProduceData.PartitionProduceData(index=3, records=BATCH),
        ])],
    )


def produce_response() -> Any:
    R = compiled("produce")[1].cls
    P = R.TopicProduceResponse.PartitionProduceResponse
    return R(
        responses=[R.TopicProduceResponse(name="orders", partition_responses=[
            P(index=3, error_code=87, base_offset=1200, log_append_time_ms=1_700_000_000_123,
              log_start_offset=100,
              record_errors=[P.BatchIndexAndErrorMessage(
                  batch_index=2, batch_index_error_message="timestamp out of range")],
              error_message="one or more records have been rejected"),
        ])],
        throttle_time_ms=25,
    )


def fetch_request() -> Any:
    R = compiled("fetch")[0].cls
    return R(
        cluster_id="Y0R9F8tWTa2oZ1JxQ1cDIw", replica_id=2, max_wait_ms=500, min_bytes=1,
        max_bytes=52428800, isolation_level=1, session_id=77, session_epoch=4,
        topics=[R.FetchTopic(topic="orders", partitions=[
            R.FetchTopic.FetchPartition(
                partition=3, current_leader_epoch=7, fetch_offset=1200,
                last_fetched_epoch=6, log_start_offset=100, partition_max_bytes=1048576),
        ])],
        forgotten_topics_data=[R.ForgottenTopic(topic="clicks", partitions=[0, 5])],
        rack_id="eu-west-1a",
    )


def fetch_response() -> Any:
    R = compiled("fetch")[1].cls
    P = R.FetchableTopicResponse.PartitionData
    return R(
        throttle_time_ms=25, error_code=70, session_id=77,
        responses=[R.FetchableTopicResponse(topic="orders", partitions=[
            P(partition_index=3, error_code=1, high_watermark=1300, last_stable_offset=1290,
              log_start_offset=100,
              diverging_epoch=P.EpochEndOffset(epoch=5, end_offset=1100),
              current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
              snapshot_id=P.SnapshotId(end_offset=900, epoch=4),
              aborted_transactions=[P.AbortedTransaction(producer_id=4000, first_offset=1210)],
              preferred_read_replica=3, records=BATCH),
        ])],
    )


def list_offsets_request() -> Any:
    R = compiled("list_offsets")[0].cls
    return R(
        replica_id=2, isolation_level=1,
        topics=[R.ListOffsetsTopic(name="orders", partitions=[
            R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=3, current_leader_epoch=7, timestamp=-2, max_num_offsets=5),
        ])],
    )


def list_offsets_response() -> Any:
    R = compiled("list_offsets")[1].cls
    return R(
        throttle_time_ms=25,
        topics=[R.ListOffsetsTopicResponse(name="orders", partitions=[
            R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                partition_index=3, error_code=74, old_style_offsets=[1300, 0],
                timestamp=1_700_000_000_123, offset=1250, leader_epoch=7),
        ])],
    )


def metadata_request() -> Any:
    R = compiled("metadata")[0].cls
    return R(
        topics=[R.MetadataRequestTopic(topic_id=TOPIC_ID, name="orders")],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


def metadata_response() -> Any:
    R = compiled("metadata")[1].cls
    T = R.MetadataResponseTopic
    return R(
        throttle_time_ms=25,
        brokers=[R.MetadataResponseBroker(node_id=1, host="broker-1.local", port=9092,
                                          rack="eu-west-1a")],
        cluster_id="Y0R9F8tWTa2oZ1JxQ1cDIw", controller_id=1,
        topics=[T(error_code=9, name="orders", topic_id=TOPIC_ID, is_internal=True,
                  partitions=[T.MetadataResponsePartition(
                      error_code=9, partition_index=3, leader_id=1, leader_epoch=7,
                      replica_nodes=[1, 2, 3], isr_nodes=[1, 2], offline_replicas=[3])],
                  topic_authorized_operations=0x0DF8)],
        cluster_authorized_operations=0x0F80,
    )


def sasl_handshake_request() -> Any:
    return compiled("sasl_handshake")[0].cls(mechanism="SCRAM-SHA-256")


def sasl_handshake_response() -> Any:
    return compiled("sasl_handshake")[1].cls(error_code=33, mechanisms=["PLAIN", "SCRAM-SHA-512"])


def delete_records_request() -> Any:
    R = compiled("delete_records")[0].cls
    return R(
        topics=[R.DeleteRecordsTopic(name="orders", partitions=[
            R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=3, offset=1000),
        ])],
        timeout_ms=30000,
    )


def delete_records_response() -> Any:
    R = compiled("delete_records")[1].cls
    return R(
        throttle_time_ms=25,
        topics=[R.DeleteRecordsTopicResult(name="orders", partitions=[
            R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                partition_index=3, low_watermark=1000, error_code=1),
        ])],
    )


def init_producer_id_request() -> Any:
    return compiled("init_producer_id")[0].cls(
        transactional_id="payments-txn-1", transaction_timeout_ms=60000,
        producer_id=4000, producer_epoch=3)


def init_producer_id_response() -> Any:
    return compiled("init_producer_id")[1].cls(
        throttle_time_ms=25, error_code=90, producer_id=4000, producer_epoch=4)


def offset_for_leader_epoch_request() -> Any:
    R = compiled("offset_for_leader_epoch")[0].cls
    return R(
        replica_id=2,
        topics=[R.OffsetForLeaderTopic(topic="orders", partitions=[
            R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=3, current_leader_epoch=7, leader_epoch=5),
        ])],
    )


def offset_for_leader_epoch_response() -> Any:
    R = compiled("offset_for_leader_epoch")[1].cls
    return R(
        throttle_time_ms=25,
        topics=[R.OffsetForLeaderTopicResult(topic="orders", partitions=[
            R.OffsetForLeaderTopicResult.EpochEndOffset(
                error_code=74, partition=3, leader_epoch=5, end_offset=1100),
        ])],
    )


def sasl_authenticate_request() -> Any:
    return compiled("sasl_authenticate")[0].cls(auth_bytes=b"\x00alice\x00secret")


def sasl_authenticate_response() -> Any:
    return compiled("sasl_authenticate")[1].cls(
        error_code=58, error_message="Authentication failed: invalid credentials",
        auth_bytes=b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=", session_lifetime_ms=3_600_000)


def describe_cluster_request() -> Any:
    return compiled("describe_cluster")[0].cls(include_cluster_authorized_operations=True)


def describe_cluster_response() -> Any:
    R = compiled("describe_cluster")[1].cls
    return R(
        throttle_time_ms=25, error_code=31, error_message="Cluster authorization failed.",
        cluster_id="Y0R9F8tWTa2oZ1JxQ1cDIw", controller_id=2,
        brokers=[R.DescribeClusterBroker(broker_id=1, host="broker-1.local", port=9092,
                                         rack="eu-west-1a")],
        cluster_authorized_operations=0x0F80,
    )


FULL: dict[tuple[str, str], Callable[[], Any]] = {
    (module, kind): globals()[f"{module}_{kind}"]
    for module in APIS for kind in ("request", "response")
}


def _message(module: str, kind: str) -> Message:
    request, response = compiled(module)
    return request if kind == "request" else response


ALL_VERSIONS = [
    (module, kind, version)
    for module in APIS for kind in ("request", "response")
    for version in versions(_message(module, kind))
]
KIO_VERSIONS = [
    (module, kind, version) for module, kind, version in ALL_VERSIONS
    if kio_types(APIS[module][0], version) is not None
]


def _params(cases: list[tuple[str, str, int]]) -> list[Any]:
    return [pytest.param(*case, id="{}-{}-v{}".format(*case)) for case in cases]


CASES = _params(ALL_VERSIONS)
KIO_CASES = _params(KIO_VERSIONS)


# --- declarations ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", list(APIS))
def test_declared_ranges_are_kafka_2_8s(module: str) -> None:
    _, name, key, (low, high) = APIS[module]
    request, response = compiled(module)
    assert (request.name, response.name) == (f"{name}Request", f"{name}Response")
    assert request.spec.api_key == response.spec.api_key == key
    assert (request.min_version, request.max_version) == (low, high)
    assert (response.min_version, response.max_version) == (low, high)
    flexible = [v for v in range(low, high + 1) if request.is_flexible(v)]
    assert flexible == [v for v in range(low, high + 1) if response.is_flexible(v)]
    first = FLEXIBLE_FROM[module]
    assert flexible == ([] if first is None else list(range(first, high + 1)))


def test_modules_are_registered() -> None:
    module = importlib.import_module("kafkaclone.protocol.api")
    for _, name, key, (low, high) in APIS.values():
        api = module.APIS[key]
        assert (api.name, api.min_version, api.max_version) == (name, low, high)


# --- round trips of every version -----------------------------------------------------------


@pytest.mark.parametrize(("module", "kind", "version"), CASES)
def test_every_field_round_trips(module: str, kind: str, version: int) -> None:
    message = _message(module, kind)
    obj = at_version(message, FULL[module, kind](), version)
    assert_every_field_set(message, obj, version, in_every_element=True)
    round_trip(message, obj, version)


@pytest.mark.parametrize(("module", "kind", "version"), CASES)
def test_fields_a_version_lacks_are_not_sent(module: str, kind: str, version: int) -> None:
    message = _message(module, kind)
    full = FULL[module, kind]()
    encoded = message.encode(full, version)
    assert encoded == message.encode(at_version(message, full, version), version)
    assert message.decode_exact(encoded, version) == at_version(message, full, version)


# --- against kio -------------------------------------------------------------------------------

def _kio_type(module: str, kind: str, version: int) -> type[Any]:
    types = kio_types(APIS[module][0], version)
    assert types is not None
    return types[0] if kind == "request" else types[1]


@pytest.mark.parametrize(("module", "kind", "version"), KIO_CASES)
def test_kio_reads_what_we_write(module: str, kind: str, version: int) -> None:
    message = _message(module, kind)
    ours = at_version(message, FULL[module, kind](), version)
    theirs = kio_decode(_kio_type(module, kind, version), message.encode(ours, version))
    assert from_kio(message, theirs, version) == ours
    assert theirs == to_kio(message, ours, version, _kio_type(module, kind, version))


@pytest.mark.parametrize(("module", "kind", "version"), KIO_CASES)
def test_we_read_what_kio_writes(module: str, kind: str, version: int) -> None:
    message = _message(module, kind)
    ours = at_version(message, FULL[module, kind](), version)
    theirs = to_kio(message, ours, version, _kio_type(module, kind, version))
    data = kio_encode(theirs)
    assert message.decode_exact(data, version) == ours
    assert message.encode(ours, version) == data


def test_kio_covers_the_versions_it_still_has() -> None:
    covered = {(module, version) for module, _, version in KIO_VERSIONS}
    assert {v for m, v in covered if m == "produce"} == set(range(3, 10))
    assert {v for m, v in covered if m == "fetch"} == set(range(4, 13))
    assert {v for m, v in covered if m == "list_offsets"} == set(range(1, 7))
    assert {v for m, v in covered if m == "offset_for_leader_epoch"} == {2, 3, 4}
    assert {v for m, v in covered if m == "metadata"} == set(range(12))
    for module in ("delete_records", "init_producer_id", "sasl_handshake",
                   "sasl_authenticate", "describe_cluster"):
        low, high = APIS[module][3]
        assert {v for m, v in covered if m == module} == set(range(low, high + 1))


def test_kio_agrees_on_a_realistic_fetch_with_tagged_fields() -> None:
    request, response = compiled("fetch")
    ours = fetch_response()
    theirs = kio_decode(_kio_type("fetch", "response", 12), response.encode(ours, 12))
    partition = theirs.responses[0].partitions[0]
    assert partition.diverging_epoch.epoch == 5
    assert partition.diverging_epoch.end_offset == 1100
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 7)
    assert (partition.snapshot_id.end_offset, partition.snapshot_id.epoch) == (900, 4)
    assert partition.records == BATCH
    fetch = kio_decode(_kio_type("fetch", "request", 12), request.encode(fetch_request(), 12))
    assert fetch.cluster_id == "Y0R9F8tWTa2oZ1JxQ1cDIw"
    assert fetch.topics[0].partitions[0].last_fetched_epoch == 6


# --- against kafka-python's legacy structs, for the versions kio no longer has --------------

LEGACY = {
    "produce": ("produce", "ProduceRequest", "ProduceResponse", range(0, 3)),
    "fetch": ("fetch", "FetchRequest", "FetchResponse", range(0, 4)),
    "list_offsets": ("list_offsets", "ListOffsetsRequest", "ListOffsetsResponse", range(0, 1)),
    "offset_for_leader_epoch": ("offset_for_leader_epoch", "OffsetForLeaderEpochRequest",
                                "OffsetForLeaderEpochResponse", range(0, 2)),
}

LEGACY_CASES = [
    pytest.param(module, kind, version, id=f"{module}-{kind}-v{version}")
    for module, (_, _, _, old) in LEGACY.items() for kind in ("request", "response")
    for version in old
]


def _legacy_struct(module: str, kind: str, version: int) -> Any:
    package, request, response = LEGACY[module][:3]
    legacy = importlib.import_module(f"kafka.protocol.old.{package}")
    return getattr(legacy, f"{request if kind == 'request' else response}_v{version}")


# Importing kafka-python reads its JSON schemas with importlib.resources.read_text and
# open_text, which Python 3.11 deprecates.
@pytest.mark.filterwarnings(r"ignore:\w+ is deprecated. Use files\(\) instead:DeprecationWarning")
@pytest.mark.parametrize(("module", "kind", "version"), LEGACY_CASES)
def test_kafka_python_agrees_on_old_versions(module: str, kind: str, version: int) -> None:
    message = _message(module, kind)
    ours = at_version(message, FULL[module, kind](), version)
    struct = _legacy_struct(module, kind, version)
    values = positional(message, ours, version)
    data = struct(*values).encode()
    assert message.encode(ours, version) == data
    assert message.decode_exact(data, version) == ours
    decoded = struct.decode(data)
    assert normalise([getattr(decoded, name) for name in struct.SCHEMA.names]) == normalise(values)


# --- concrete bytes and nulls -----------------------------------------------------------------


def test_metadata_v0_request_bytes() -> None:
    request = compiled("metadata")[0]
    body = request.encode(request.cls(topics=[request.cls.MetadataRequestTopic(name="t")]), 0)
    assert body == b"\x00\x00\x00\x01" + b"\x00\x01t"


def test_metadata_null_topics_mean_all_topics_from_v1() -> None:
    request = compiled("metadata")[0]
    assert request.encode(request.cls(topics=None), 1) == b"\xff\xff\xff\xff"
    assert request.decode_exact(b"\xff\xff\xff\xff", 1).topics is None
    # v9 is flexible: a null compact array is a single zero byte, then the three booleans
    # (allow_auto_topic_creation true) and the tagged-field count.
    assert request.encode(request.cls(topics=None), 9) == b"\x00" + b"\x01\x00\x00" + b"\x00"
    with pytest.raises(ValueError, match="non-nullable"):
        request.encode(request.cls(topics=None), 0)
    with pytest.raises(DecodeError):
        request.decode_exact(b"\xff\xff\xff\xff", 0)


def test_metadata_v10_topic_id_on_the_wire() -> None:
    request = compiled("metadata")[0]
    body = request.encode(request.cls(
        topics=[request.cls.MetadataRequestTopic(topic_id=TOPIC_ID, name=None)],
        allow_auto_topic_creation=True, include_topic_authorized_operations=False), 10)
    # compact array of one, 16 uuid bytes, null compact string, the struct's tag count,
    # allow_auto_topic_creation, include_cluster_authorized_operations (v8-10),
    # include_topic_authorized_operations, tag count
    assert body == b"\x02" + TOPIC_ID.bytes + b"\x00\x00" + b"\x01\x00\x00" + b"\x00"
    assert request.decode_exact(body, 10).topics[0].topic_id == TOPIC_ID


def test_produce_nulls() -> None:
    request = compiled("produce")[0]
    R = request.cls
    obj = R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.TopicProduceData.PartitionProduceData(index=0)])])
    v3 = round_trip(request, obj, 3)
    assert v3 == (b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01"
                  + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"
                  + b"\xff\xff\xff\xff")
    v9 = round_trip(request, obj, 9)
    assert v9 == (b"\x00" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x02" + b"\x02t" + b"\x02"
                  + b"\x00\x00\x00\x00" + b"\x00" + b"\x00" + b"\x00" + b"\x00")


def test_fetch_v12_tagged_fields_are_sent_only_when_set() -> None:
    response = compiled("fetch")[1]
    R = response.cls
    P = R.FetchableTopicResponse.PartitionData
    plain = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        P(partition_index=0, high_watermark=10, records=None)])])
    body = round_trip(response, plain, 12)
    # the partition ends with preferred_read_replica -1, null records, zero tags
    assert body.endswith(b"\xff\xff\xff\xff" + b"\x00" + b"\x00" + b"\x00" + b"\x00")
    plain.responses[0].partitions[0].current_leader = P.LeaderIdAndEpoch(leader_id=4,
                                                                          leader_epoch=9)
    tagged = round_trip(response, plain, 12)
    # one tagged field: tag 1, size 9 (two int32 and the struct's own empty tag count)
    assert b"\x01\x01\x09" + b"\x00\x00\x00\x04" + b"\x00\x00\x00\x09" + b"\x00" in tagged
    assert len(tagged) == len(body) + 11
    decoded = response.decode_exact(tagged, 12).responses[0].partitions[0]
    assert (decoded.current_leader.leader_id, decoded.current_leader.leader_epoch) == (4, 9)
    assert decoded.diverging_epoch == P.EpochEndOffset()
    assert decoded.aborted_transactions == []


def test_fetch_response_null_aborted_transactions() -> None:
    response = compiled("fetch")[1]
    R = response.cls
    P = R.FetchableTopicResponse.PartitionData
    obj = R(responses=[R.FetchableTopicResponse(topic="t", partitions=[
        P(partition_index=0, aborted_transactions=None, records=BATCH)])])
    for version in (4, 11, 12):
        assert round_trip(response, obj, version)
        assert response.decode_exact(response.encode(obj, version), version) \
            .responses[0].partitions[0].aborted_transactions is None


def test_sasl_handshake_is_never_flexible() -> None:
    request, response = compiled("sasl_handshake")
    assert request.encode(request.cls(mechanism="PLAIN"), 1) == b"\x00\x05PLAIN"
    assert response.encode(response.cls(error_code=0, mechanisms=["PLAIN"]), 1) == \
        b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x05PLAIN"


def test_defaults_are_kafkas() -> None:
    fetch = compiled("fetch")[0].cls()
    assert (fetch.cluster_id, fetch.max_bytes, fetch.isolation_level) == (None, 0x7FFFFFFF, 0)
    assert (fetch.session_id, fetch.session_epoch, fetch.rack_id) == (0, -1, "")
    partition = compiled("fetch")[0].cls.FetchTopic.FetchPartition()
    assert (partition.current_leader_epoch, partition.last_fetched_epoch,
            partition.log_start_offset) == (-1, -1, -1)
    assert compiled("offset_for_leader_epoch")[0].cls().replica_id == -2
    assert compiled("list_offsets")[0].cls.ListOffsetsTopic.ListOffsetsPartition() \
        .max_num_offsets == 1
    metadata = compiled("metadata")[1].cls()
    assert (metadata.cluster_id, metadata.controller_id,
            metadata.cluster_authorized_operations) == (None, -1, -2147483648)
    assert compiled("metadata")[0].cls().allow_auto_topic_creation is True
    assert compiled("produce")[0].cls().transactional_id is None
    partition_response = compiled("produce")[1].cls.TopicProduceResponse \
        .PartitionProduceResponse()
    assert (partition_response.log_append_time_ms, partition_response.log_start_offset,
            partition_response.error_message) == (-1, -1, None)
    assert compiled("init_producer_id")[1].cls().producer_id == -1
    assert compiled("describe_cluster")[1].cls().controller_id == -1
