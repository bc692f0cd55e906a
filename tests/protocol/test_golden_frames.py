"""Golden request frames from real clients: byte-identical round trips and what they say.

The fixtures in tests/protocol/golden/ were captured from confluent-kafka (librdkafka),
kafka-python and kcat by ``tests/protocol/golden/capture.py``; the live test at the end runs
that capture again against the installed clients.
"""

from __future__ import annotations

import shutil
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
import pytest

from kafkaclone.common.errors import UnsupportedVersionError
from kafkaclone.protocol.api import (
    APIS,
    RequestFrame,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    peek_request_header,
)
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.messages.consumer_protocol import (
    decode_assignment,
    decode_subscription,
)
from tests.protocol.golden import capture
from tests.protocol.golden.capture import (
    CLIENT_IDS,
    CODEC_IDS,
    CREATED_TOPIC,
    GROUP,
    TOPIC,
    VALUE,
)

FIXTURES = capture.fixture_paths()
# Every fixture but the KIP-511 probe (test_kip511_probe), which no codec decodes.
DECODABLE = [p for p in FIXTURES if not capture.is_kip511_probe(p.read_bytes())]


def _parse_name(path: Path) -> tuple[ApiKey, int, str, str | None]:
    """(api, version, client, codec) from ``<api>_v<version>_<client>[_<codec>].bin``."""
    stem = path.stem
    api_part, _, rest = stem.rpartition("_v")
    version_text, _, client_part = rest.partition("_")
    codec = None
    if api_part == "produce":
        client_part, _, codec = client_part.rpartition("_")
    return ApiKey[api_part.upper()], int(version_text), client_part, codec


def _reencode(request: RequestFrame) -> bytes:
    """Header and body encoded again from the decoded objects (tagged fields included)."""
    out = bytearray()
    version = request.api_version
    RequestHeader.encode_into(request.header, request.api.request_header_version(version), out)
    request.api.request.encode_into(request.body, version, out)
    return bytes(out)


def assert_round_trip(frame: bytes) -> RequestFrame:
    request = decode_request(frame)
    assert _reencode(request) == frame
    if not request.header.unknown_tagged_fields:
        again = encode_request(request.api.key, request.api_version, request.correlation_id,
                               request.header.client_id, request.body)
        assert again == frame
    return request


def test_fixtures_exist() -> None:
    assert len(FIXTURES) >= 40
    names = [path.name for path in FIXTURES]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("client", sorted(capture.REQUIRED))
def test_committed_fixtures_cover_the_required_apis(client: str) -> None:
    labels = {capture.fixture_label(p.name) for p in FIXTURES if capture.client_of(p) == client}
    assert capture.REQUIRED[client] <= labels, sorted(capture.REQUIRED[client] - labels)


# --- every fixture -------------------------------------------------------------------------


@pytest.mark.parametrize("path", DECODABLE, ids=lambda p: p.stem)
def test_round_trip_and_header(path: Path) -> None:
    key, version, client, _codec = _parse_name(path)
    frame = path.read_bytes()
    assert peek_request_header(frame)[:2] == (key, version)
    request = assert_round_trip(frame)
    assert request.api.key == key
    assert request.api_version == version
    assert request.header.client_id == CLIENT_IDS[client]
    assert request.correlation_id >= 0
    assert request.api.request_header_version(version) == (
        2 if request.api.request.is_flexible(version) else 1)


@pytest.mark.parametrize("path", DECODABLE, ids=lambda p: p.stem)
def test_semantics(path: Path) -> None:
    key, _version, client, codec = _parse_name(path)
    request = decode_request(path.read_bytes())
    check = SEMANTICS.get(key)
    assert check is not None, f"no semantic checks for {key.name}"
    check(request, client, codec)


def test_kip511_probe() -> None:
    probes = [p for p in FIXTURES if capture.is_kip511_probe(p.read_bytes())]
    assert probes, "kafka-python 3 opens with an ApiVersions version newer than Kafka 2.8's"
    for path in probes:
        _key, version, client, _codec = _parse_name(path)
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(path.read_bytes())
        header = info.value.header  # type: ignore[attr-defined]
        assert header.request_api_version == version
        assert header.client_id == CLIENT_IDS[client]
        # The pretend broker answers as Kafka 2.8 does: v0, error 35, ApiVersions' range.
        state = capture.ClusterState("127.0.0.1", 9092)
        response = capture.respond(state, path.read_bytes())
        assert response is not None
        correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, response)
        assert correlation_id == header.correlation_id
        assert body.error_code == UnsupportedVersionError.code
        api = APIS[ApiKey.API_VERSIONS]
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
            (ApiKey.API_VERSIONS, api.min_version, api.max_version)]


# --- what each API's frames say ------------------------------------------------------------

Check = Callable[[RequestFrame, str, "str | None"], None]
SEMANTICS: dict[ApiKey, Check] = {}


def semantics(key: ApiKey) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        SEMANTICS[key] = fn
        return fn
    return register


def _batches(records: Any) -> list[tuple[int, int, int]]:
    """(magic, codec, record count) of each v2 batch, checking lengths and CRC32C."""
    data = bytes(records)
    out = []
    pos = 0
    while pos < len(data):
        base_offset, batch_length, _epoch, magic, crc = struct.unpack_from(">qiibI", data, pos)
        end = pos + 12 + batch_length
        assert end <= len(data)
        assert magic == 2
        assert base_offset == 0
        assert crc32c.crc32c(data[pos + 21:end]) == crc
        attributes, _last_delta = struct.unpack_from(">hi", data, pos + 21)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        out.append((magic, attributes & 0x07, count))
        pos = end
    return out


@semantics(ApiKey.PRODUCE)
def _produce(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.acks in (-1, 1)
    assert body.transactional_id is None
    [topic] = body.topic_data
    assert topic.name == TOPIC
    [partition] = topic.partition_data
    assert partition.index == 0
    batches = _batches(partition.records)
    assert batches
    assert codec is not None
    for _magic, batch_codec, count in batches:
        assert batch_codec == CODEC_IDS[codec]
        assert count >= 1
    if codec == "none":
        assert VALUE in bytes(partition.records)
    else:
        assert VALUE not in bytes(partition.records)


@semantics(ApiKey.FETCH)
def _fetch(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.replica_id == -1
    assert body.max_wait_ms >= 0
    [topic] = body.topics
    assert topic.topic == TOPIC
    [partition] = topic.partitions
    assert partition.partition == 0
    assert partition.fetch_offset >= 0
    assert partition.partition_max_bytes > 0


@semantics(ApiKey.LIST_OFFSETS)
def _list_offsets(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.replica_id == -1
    [topic] = body.topics
    assert topic.name == TOPIC
    [partition] = topic.partitions
    assert partition.partition_index == 0
    assert partition.timestamp in (-1, -2)  # latest, earliest


@semantics(ApiKey.METADATA)
def _metadata(request: RequestFrame, client: str, codec: str | None) -> None:
    topics = request.body.topics
    names = [topic.name for topic in topics or []]
    assert names == [] or TOPIC in names or CREATED_TOPIC in names
    if request.api_version >= 4:
        assert request.body.allow_auto_topic_creation in (True, False)


@semantics(ApiKey.FIND_COORDINATOR)
def _find_coordinator(request: RequestFrame, client: str, codec: str | None) -> None:
    assert request.body.key == GROUP
    assert request.body.key_type == 0


@semantics(ApiKey.JOIN_GROUP)
def _join_group(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.group_id == GROUP
    assert body.protocol_type == "consumer"
    assert body.session_timeout_ms > 0
    assert body.protocols
    for protocol in body.protocols:
        assert protocol.name in ("range", "roundrobin", "sticky", "cooperative-sticky")
        _version, subscription = decode_subscription(protocol.metadata)
        assert subscription.topics == [TOPIC]


@semantics(ApiKey.SYNC_GROUP)
def _sync_group(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.group_id == GROUP
    assert body.generation_id == 1
    assert body.member_id.startswith(CLIENT_IDS[client])
    [assignment] = body.assignments  # the member leads its own one-member group
    assert assignment.member_id == body.member_id
    _version, decoded = decode_assignment(assignment.assignment)
    assert [(tp.topic, tp.partitions) for tp in decoded.assigned_partitions] == [(TOPIC, [0])]


@semantics(ApiKey.HEARTBEAT)
def _heartbeat(request: RequestFrame, client: str, codec: str | None) -> None:
    assert request.body.group_id == GROUP
    assert request.body.generation_id == 1
    assert request.body.member_id.startswith(CLIENT_IDS[client])


@semantics(ApiKey.LEAVE_GROUP)
def _leave_group(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.group_id == GROUP
    members = [body.member_id] if request.api_version < 3 else [
        m.member_id for m in body.members]
    assert members and all(m.startswith(CLIENT_IDS[client]) for m in members)


@semantics(ApiKey.OFFSET_COMMIT)
def _offset_commit(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.group_id == GROUP
    assert body.generation_id == 1
    assert body.member_id.startswith(CLIENT_IDS[client])
    [topic] = body.topics
    assert topic.name == TOPIC
    [partition] = topic.partitions
    assert partition.partition_index == 0
    assert partition.committed_offset == 1  # the one record at offset 0 was consumed


@semantics(ApiKey.OFFSET_FETCH)
def _offset_fetch(request: RequestFrame, client: str, codec: str | None) -> None:
    body = request.body
    assert body.group_id == GROUP
    if body.topics is not None:
        assert [(t.name, t.partition_indexes) for t in body.topics] == [(TOPIC, [0])]


@semantics(ApiKey.CREATE_TOPICS)
def _create_topics(request: RequestFrame, client: str, codec: str | None) -> None:
    [topic] = request.body.topics
    assert topic.name == CREATED_TOPIC
    assert (topic.num_partitions, topic.replication_factor) == (1, 1)
    assert topic.assignments == []
    assert request.body.timeout_ms > 0
    assert request.body.validate_only is False


@semantics(ApiKey.DELETE_TOPICS)
def _delete_topics(request: RequestFrame, client: str, codec: str | None) -> None:
    if request.api_version >= 6:
        assert [t.name for t in request.body.topics] == [CREATED_TOPIC]
    else:
        assert request.body.topic_names == [CREATED_TOPIC]


@semantics(ApiKey.INIT_PRODUCER_ID)
def _init_producer_id(request: RequestFrame, client: str, codec: str | None) -> None:
    assert request.body.transactional_id is None
    assert request.body.transaction_timeout_ms >= 0
    if request.api_version >= 3:
        assert (request.body.producer_id, request.body.producer_epoch) == (-1, -1)


@semantics(ApiKey.LIST_GROUPS)
def _list_groups(request: RequestFrame, client: str, codec: str | None) -> None:
    if request.api_version >= 4:
        assert isinstance(request.body.states_filter, list)


@semantics(ApiKey.DESCRIBE_GROUPS)
def _describe_groups(request: RequestFrame, client: str, codec: str | None) -> None:
    assert request.body.groups == [GROUP]


@semantics(ApiKey.API_VERSIONS)
def _api_versions(request: RequestFrame, client: str, codec: str | None) -> None:
    if request.api_version >= 3:
        expected = {"librdkafka": "confluent-kafka-python", "kafka_python": "kafka-python",
                    "kcat": "librdkafka"}[client]
        assert request.body.client_software_name == expected
        assert request.body.client_software_version


# --- live: the installed clients, captured now ---------------------------------------------


@pytest.mark.slow
def test_live_capture(tmp_path: Path) -> None:
    """Every frame the installed clients send now round-trips; the required APIs are seen."""
    clients = [c for c in CLIENT_IDS if c != "kcat" or shutil.which("kcat")]
    threads_before = set(threading.enumerate())
    result = capture.capture(clients, seconds=6.0, budget=50.0)
    written = capture.write_fixtures(result, tmp_path)

    assert not result.problems, result.problems
    assert not result.skipped, result.skipped
    assert sum(result.seconds.values()) < 60, result.seconds
    for client in clients:
        lacking = capture.REQUIRED[client] - result.seen.get(client, set())
        assert not lacking, f"{client} did not send {sorted(lacking)}"
    for captured in result.frames:
        if capture.is_kip511_probe(captured.frame):
            continue
        request = assert_round_trip(captured.frame)
        assert request.header.client_id == CLIENT_IDS[captured.client]
    for path in written:
        frame = path.read_bytes()
        if not capture.is_kip511_probe(frame):
            SEMANTICS[decode_request(frame).api.key](decode_request(frame),
                                                     *_parse_name(path)[2:])
    # The committed fixtures were not touched, and the broker left no thread behind.
    assert capture.fixture_paths() == FIXTURES
    leftover = [th for th in set(threading.enumerate()) - threads_before
                if th.name.startswith("golden")]
    assert not leftover
