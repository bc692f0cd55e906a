"""The API registry, header versions and request/response framing."""

import struct

import pytest

from kafkaclone.common.errors import DecodeError, InvalidRequestError, UnsupportedVersionError
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

# What kafkaclone declares: Apache Kafka 2.8's version ranges. Issue 2 listed 2.7's ranges for
# CreateTopics (0-6), DeleteTopics (0-5), DescribeConfigs (0-3) and AlterConfigs (0-1); 2.8
# added CreateTopics v7 / DeleteTopics v6 (topic ids, KIP-516) and the first flexible
# DescribeConfigs v4 / AlterConfigs v2, and the issue says 2.8 wins.
KAFKA_2_8_RANGES = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 6),
    ApiKey.METADATA: (0, 11),
    ApiKey.LEADER_AND_ISR: (0, 5),
    ApiKey.STOP_REPLICA: (0, 3),
    ApiKey.UPDATE_METADATA: (0, 7),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 8),
    ApiKey.OFFSET_FETCH: (0, 7),
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 1),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 2),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.CREATE_ACLS: (0, 2),
    ApiKey.DELETE_ACLS: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

# The first flexible (KIP-482) version of each API in Kafka 2.8; None: never flexible.
FIRST_FLEXIBLE = {
    ApiKey.PRODUCE: 9, ApiKey.FETCH: 12, ApiKey.LIST_OFFSETS: 6, ApiKey.METADATA: 9,
    ApiKey.LEADER_AND_ISR: 4, ApiKey.STOP_REPLICA: 2, ApiKey.UPDATE_METADATA: 6,
    ApiKey.CONTROLLED_SHUTDOWN: 3, ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 6,
    ApiKey.FIND_COORDINATOR: 3, ApiKey.JOIN_GROUP: 6, ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4, ApiKey.SYNC_GROUP: 4, ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 3, ApiKey.SASL_HANDSHAKE: None, ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5, ApiKey.DELETE_TOPICS: 4, ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 2, ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.DESCRIBE_CONFIGS: 4, ApiKey.ALTER_CONFIGS: 2, ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.CREATE_PARTITIONS: 2, ApiKey.DELETE_GROUPS: 2, ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.OFFSET_DELETE: None, ApiKey.DESCRIBE_CLUSTER: 0,
    ApiKey.DESCRIBE_ACLS: 2, ApiKey.CREATE_ACLS: 2, ApiKey.DELETE_ACLS: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.ADD_OFFSETS_TO_TXN: 3, ApiKey.END_TXN: 3,
    ApiKey.WRITE_TXN_MARKERS: 1, ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0, ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1, ApiKey.ALTER_CLIENT_QUOTAS: 1,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0, ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
}


def test_every_api_is_declared_at_kafka_2_8_ranges():
    declared = {key: (a.min_version, a.max_version) for key, a in api.APIS.items()}
    assert declared == KAFKA_2_8_RANGES


@pytest.mark.parametrize("key", sorted(FIRST_FLEXIBLE))
def test_flexible_versions_match_kafka(key):
    target = api.APIS[key]
    first = FIRST_FLEXIBLE[key]
    for version in range(target.min_version, target.max_version + 1):
        expected = first is not None and version >= first
        assert target.request.is_flexible(version) is expected, version
        assert target.response.is_flexible(version) is expected, version


def test_header_versions():
    produce = api.APIS[ApiKey.PRODUCE]
    assert produce.request_header_version(8) == 1
    assert produce.request_header_version(9) == 2
    assert produce.response_header_version(8) == 0
    assert produce.response_header_version(9) == 1
    versions_api = api.APIS[ApiKey.API_VERSIONS]
    assert versions_api.request_header_version(3) == 2
    assert versions_api.response_header_version(3) == 0  # always v0, even when flexible
    shutdown = api.APIS[ApiKey.CONTROLLED_SHUTDOWN]
    assert shutdown.request_header_version(0) == 0
    assert shutdown.request_header_version(1) == 1


def test_request_round_trip_and_the_non_compact_client_id_of_header_v2():
    body = api.APIS[ApiKey.API_VERSIONS].request(
        client_software_name="kafkaclone", client_software_version="0.1"
    )
    frame = api.encode_request(ApiKey.API_VERSIONS, 3, 42, "client-1", body)
    # header v2: key, version, correlation id, INT16-length client id, empty tagged fields
    assert frame[:8] == struct.pack(">hhi", 18, 3, 42)
    assert frame[8:18] == b"\x00\x08client-1"
    assert frame[18] == 0
    decoded = api.decode_request(frame)
    assert decoded.api.key == ApiKey.API_VERSIONS
    assert decoded.api_version == 3
    assert decoded.correlation_id == 42
    assert decoded.header.client_id == "client-1"
    assert decoded.body == body


def test_response_round_trip():
    target = api.APIS[ApiKey.API_VERSIONS]
    body = target.response(error_code=0, api_keys=[
        target.response.cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in KAFKA_2_8_RANGES.items()
    ])
    frame = api.encode_response(ApiKey.API_VERSIONS, 3, 7, body)
    assert frame[:4] == struct.pack(">i", 7)  # header v0: no tagged fields
    assert api.decode_response(ApiKey.API_VERSIONS, 3, frame) == (7, body)


def test_unknown_api_key_is_an_invalid_request():
    frame = struct.pack(">hhi", 999, 0, 1) + b"\xff\xff"
    with pytest.raises(InvalidRequestError, match="unknown API key 999"):
        api.decode_request(frame)


def test_unsupported_version_carries_the_header_for_the_reply():
    frame = struct.pack(">hhi", ApiKey.API_VERSIONS, 99, 5) + b"\x00\x02me" + b"\x00" * 3
    with pytest.raises(UnsupportedVersionError) as info:
        api.decode_request(frame)
    assert info.value.code == 35
    assert info.value.header.correlation_id == 5
    assert info.value.header.client_id == "me"


@pytest.mark.parametrize("frame", [b"", b"\x00\x12", b"\x00\x12\x00\x00\x00\x00\x00"])
def test_short_headers_are_decode_errors(frame):
    with pytest.raises(DecodeError):
        api.decode_request(frame)


def test_trailing_bytes_after_a_request_are_refused():
    frame = api.encode_request(ApiKey.API_VERSIONS, 0, 1, None, api.APIS[18].request())
    with pytest.raises(DecodeError, match="left over"):
        api.decode_request(frame + b"junk")


@pytest.mark.timeout(30)
def test_request_parts_keep_the_record_batches_and_join_into_the_request():
    """A Produce request in parts: the bytes around each ``records`` value, and the values
    themselves by reference (not copied), adding up to encode_request's frame."""
    target = api.APIS[ApiKey.PRODUCE]
    structs = target.request.structs
    first, second = bytearray(b"\x01" * 300), memoryview(b"\x02" * 70)
    body = target.request(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        structs["TopicProduceData"](name="orders", partition_data=[
            structs["PartitionProduceData"](index=0, records=first),
            structs["PartitionProduceData"](index=1, records=second),
            structs["PartitionProduceData"](index=2, records=None),
        ])])
    for version in (3, 8, 9):  # INT32 lengths, and compact ones (flexible v9)
        parts = api.encode_request_parts(ApiKey.PRODUCE, version, 5, "p", body)
        assert b"".join(parts) == api.encode_request(ApiKey.PRODUCE, version, 5, "p", body)
        assert len(parts) == 5
        assert parts[1] is first and parts[3] is second
        decoded = api.decode_request(b"".join(parts))
        records = [p.records for t in decoded.body.topic_data for p in t.partition_data]
        assert [None if r is None else bytes(r) for r in records] == \
            [bytes(first), bytes(second), None]


@pytest.mark.timeout(30)
def test_a_request_without_records_is_one_part():
    body = api.APIS[ApiKey.API_VERSIONS].request(
        client_software_name="kafkaclone", client_software_version="0.1")
    parts = api.encode_request_parts(ApiKey.API_VERSIONS, 3, 1, "c", body)
    assert parts == [api.encode_request(ApiKey.API_VERSIONS, 3, 1, "c", body)]
