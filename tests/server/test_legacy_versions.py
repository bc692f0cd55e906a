"""Clients older than Kafka 0.11: Produce v0-2 with legacy message sets (magic 0/1),
up-converted to the magic 2 batches the log holds, and Fetch v0-3, down-converted back.

Message sets are built by kafka-python's legacy builder and read back by both its reader
and kafkaclone's (kafka.record.legacy_records is the oracle); the last tests run
kafka-python's producer and consumer at api_version (0,8,x)..(0,10,1) against a cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.record.legacy_records import LegacyRecordBatch as KpLegacyBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkaclone.common.errors import InvalidRecordError
from kafkaclone.log.conversion import down_convert, up_convert
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import (
    Codec,
    LegacyRecord,
    RecordBatch,
    build_end_transaction_marker_batch,
    build_legacy_message_set,
    build_record_batch,
    iter_batches,
    iter_legacy_entries,
    iter_legacy_records,
)
from kafkaclone.protocol.records.record import ControlRecordType
from kafkaclone.server.handlers.registry import load_handlers, supported_versions
from tests.server.data_path_helpers import (
    DataPathBroker,
    close_broker,
    fetch_request,
    fetched,
    make_broker,
    produce_partition,
    produce_request,
)

pytestmark = pytest.mark.timeout(60)

CORRUPT_MESSAGE, UNSUPPORTED_VERSION, INVALID_TIMESTAMP, INVALID_RECORD = 2, 35, 32, 87
UNSUPPORTED_COMPRESSION_TYPE = 76
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
KP_CODECS = {Codec.NONE: 0, Codec.GZIP: 1, Codec.SNAPPY: 2, Codec.LZ4: 3}
T0 = 1_700_000_000_000  # the broker's clock (data_path_helpers.START_MS)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[DataPathBroker]:
    b = make_broker(tmp_path)
    try:
        yield b
    finally:
        close_broker(b)


def kp_message_set(magic: int, codec: Codec, messages: list[tuple[bytes | None, bytes, int]]
                   ) -> bytes:
    """A message set as kafka-python's legacy producer writes it (offsets 0..n-1)."""
    builder = LegacyRecordBatchBuilder(magic, KP_CODECS[codec], 1 << 20)
    for offset, (key, value, timestamp) in enumerate(messages):
        builder.append(offset, timestamp if magic else None, key, value)
    return bytes(builder.build())


def kp_read(message_set: bytes) -> list[tuple[int, int, int | None, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) of every message, by kafka-python's reader."""
    out = []
    records = MemoryRecords(message_set)
    while (entry := records.next_batch()) is not None:
        assert isinstance(entry, KpLegacyBatch)
        out.extend((entry.magic, r.offset, r.timestamp, r.key, r.value) for r in entry)
    return out


def stored(broker: DataPathBroker, topic: str) -> list[RecordBatch]:
    """The log's batches, read with Fetch v12."""
    response = broker.call(ApiKey.FETCH, 12, fetch_request({(topic, 0): 0}))
    data = bytes(fetched(response, topic, 0).records or b"")
    batches = list(iter_batches(data, allow_partial_tail=False))
    assert all(isinstance(b, RecordBatch) for b in batches)
    return [b for b in batches if isinstance(b, RecordBatch)]


def stored_records(broker: DataPathBroker, topic: str
                   ) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(b.offset_of(r), b.timestamp_of(r), r.key, r.value)
            for b in stored(broker, topic) for r in b.records()]


def produce_v(broker: DataPathBroker, version: int, topic: str, records: bytes | None) -> Any:
    response = broker.call(ApiKey.PRODUCE, version, produce_request({(topic, 0): records}))
    return produce_partition(response, topic, 0)


def fetch_v(broker: DataPathBroker, version: int, topic: str, offset: int = 0,
            partition_max_bytes: int = 1 << 20) -> Any:
    response = broker.call(ApiKey.FETCH, version, fetch_request(
        {(topic, 0): offset}, partition_max_bytes=partition_max_bytes))
    return fetched(response, topic, 0)


MESSAGES = [(b"k0", b"first", T0 - 5), (None, b"second", T0 - 3), (b"k2", b"", T0 - 4)]


# -- produce v0-2: up-conversion -------------------------------------------------------------


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (1, 1), (2, 1)])
def test_produce_legacy_message_sets_are_stored_as_magic_2(
        broker: DataPathBroker, version: int, magic: int, codec: Codec) -> None:
    broker.host("t", [0])
    assert produce_v(broker, 2, "t", kp_message_set(magic, codec, MESSAGES[:1])).base_offset == 0
    answer = produce_v(broker, version, "t", kp_message_set(magic, codec, MESSAGES))
    assert (answer.error_code, answer.base_offset) == (0, 1)
    if version == 2:
        assert answer.log_append_time_ms == -1  # CreateTime
    batches = stored(broker, "t")
    assert [(b.magic, b.compression, b.base_offset, b.records_count) for b in batches] == [
        (2, codec, 0, 1), (2, codec, 1, 3)]
    expected_ts = [ts if magic else -1 for _, _, ts in MESSAGES]
    assert stored_records(broker, "t")[1:] == [
        (offset, ts, key, value)
        for offset, ((key, value, _), ts) in enumerate(zip(MESSAGES, expected_ts, strict=True),
                                                       start=1)]
    assert batches[1].max_timestamp == max(expected_ts)


def test_produce_v2_under_log_append_time(broker: DataPathBroker) -> None:
    broker.host("lat", [0], configs={"message.timestamp.type": "LogAppendTime"})
    answer = produce_v(broker, 2, "lat", kp_message_set(1, Codec.GZIP, MESSAGES))
    assert (answer.error_code, answer.log_append_time_ms) == (0, broker.now_ms())
    assert [ts for _, ts, _, _ in stored_records(broker, "lat")] == [broker.now_ms()] * 3
    # magic 0 has no timestamps: the append time stands for them too.
    produce_v(broker, 0, "lat", kp_message_set(0, Codec.NONE, MESSAGES))
    assert [ts for _, ts, _, _ in stored_records(broker, "lat")] == [broker.now_ms()] * 6


@pytest.mark.parametrize(("topic_codec", "codec"), [("gzip", Codec.GZIP),
                                                    ("uncompressed", Codec.NONE),
                                                    ("producer", Codec.SNAPPY)])
def test_produce_legacy_follows_the_topic_compression_type(
        broker: DataPathBroker, topic_codec: str, codec: Codec) -> None:
    broker.host("c", [0], configs={"compression.type": topic_codec})
    assert produce_v(broker, 1, "c", kp_message_set(0, Codec.SNAPPY, MESSAGES)).error_code == 0
    assert [b.compression for b in stored(broker, "c")] == [codec]
    assert [v for _, _, _, v in stored_records(broker, "c")] == [v for _, v, _ in MESSAGES]


def test_produce_legacy_errors(broker: DataPathBroker) -> None:
    broker.host("e", [0])
    good = bytearray(kp_message_set(1, Codec.NONE, MESSAGES))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    assert produce_v(broker, 2, "e", bytes(bad_crc)).error_code == CORRUPT_MESSAGE
    log_append_time = build_legacy_message_set([(b"k", b"v", T0)], magic=1, timestamp_type=1)
    assert produce_v(broker, 2, "e", log_append_time).error_code == INVALID_TIMESTAMP
    # A message set with no complete message appends nothing.
    empty = produce_v(broker, 0, "e", bytes(good[:20]))
    assert (empty.error_code, empty.base_offset) == (0, -1)
    assert stored(broker, "e") == []
    # A magic 2 batch at v0-2 is taken as it is (Kafka's ProduceRequest checks the magic
    # from v3 only); two are INVALID_RECORD, as in Kafka's LogValidator.
    modern = build_record_batch([(b"a", b"1", None, T0)], codec=Codec.GZIP)
    assert produce_v(broker, 2, "e", modern).error_code == 0
    assert produce_v(broker, 1, "e", modern + modern).error_code == INVALID_RECORD
    assert [(o, v) for o, _, _, v in stored_records(broker, "e")] == [(0, b"1")]


def test_produce_legacy_timestamps_are_checked_one_by_one(broker: DataPathBroker) -> None:
    """message.timestamp.difference.max.ms holds for every message, not only the first and
    the largest; magic 0 messages have no timestamp to check."""
    broker.host("ts", [0], configs={"message.timestamp.difference.max.ms": "60000"})
    now = broker.now_ms()
    middle_too_old = [(b"a", b"1", now), (b"b", b"2", now - 3_600_000), (b"c", b"3", now)]
    for codec in (Codec.NONE, Codec.GZIP):
        refused = produce_v(broker, 2, "ts", kp_message_set(1, codec, middle_too_old))
        assert refused.error_code == INVALID_TIMESTAMP
    assert produce_v(broker, 1, "ts", kp_message_set(0, Codec.NONE, middle_too_old)
                     ).error_code == 0
    in_range = [(b"a", b"1", now), (b"b", b"2", now - 30_000), (b"c", b"3", now + 1)]
    assert produce_v(broker, 2, "ts", kp_message_set(1, Codec.LZ4, in_range)).error_code == 0
    assert [ts for _, ts, _, _ in stored_records(broker, "ts")] == [-1, -1, -1,
                                                                     now, now - 30_000, now + 1]


def test_up_convert_refuses_what_kafkas_log_validator_refuses() -> None:
    legacy = build_legacy_message_set([(b"k", b"old", T0)], magic=1)
    modern = build_record_batch([(b"m", b"new", [("h", b"x")], T0 + 1)])
    zero = build_legacy_message_set([(b"k", b"v")], magic=0)
    refusals = {
        "is not the same as the first batch's magic": [legacy + modern, legacy + zero],
        "more than one batch": [
            modern + modern,
            build_legacy_message_set([(b"a", b"1")], magic=1, codec=Codec.GZIP) + legacy,
            legacy + build_legacy_message_set([(b"a", b"1")], magic=1, codec=Codec.GZIP)],
        # a magic 1 wrapper whose messages are not at 0..n-1 (wrapper offset 7, two inside)
        "incremental offsets": [build_legacy_message_set(
            [LegacyRecord(6, T0, b"a", b"1"), LegacyRecord(7, T0, b"b", b"2")], magic=1,
            codec=Codec.GZIP)],
    }
    for message, sets in refusals.items():
        for message_set in sets:
            with pytest.raises(InvalidRecordError, match=message):
                up_convert(memoryview(message_set))
    # Several uncompressed legacy messages are one batch; a magic 2 batch stays as it is.
    several = up_convert(memoryview(legacy + legacy))
    assert several is not None and RecordBatch(several).records_count == 2
    assert bytes(up_convert(memoryview(modern)) or b"") == modern
    # A magic 0 wrapper keeps absolute inner offsets, which are not checked.
    absolute = build_legacy_message_set([LegacyRecord(6, -1, b"a", b"1")], magic=0,
                                        codec=Codec.SNAPPY)
    assert up_convert(memoryview(absolute)) is not None


# -- fetch v0-3: down-conversion -------------------------------------------------------------


def produce_modern(broker: DataPathBroker, topic: str, codec: Codec, count: int,
                   start: int = 0) -> None:
    records = [(b"key%d" % i, b"value-%d" % i, [("h", b"dropped")], T0 + i)
               for i in range(start, start + count)]
    response = broker.call(ApiKey.PRODUCE, 9, produce_request(
        {(topic, 0): build_record_batch(records, codec=codec)}))
    assert produce_partition(response, topic, 0).error_code == 0


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_down_converts_to_the_version_magic(broker: DataPathBroker, version: int,
                                                  codec: Codec) -> None:
    broker.host("d", [0])
    produce_modern(broker, "d", codec, 3)
    produce_modern(broker, "d", codec, 2, start=3)
    # Converted sets can be larger than what was read (lz4 wrappers are): like a client, go
    # on from the next offset.
    message_set = b""
    next_offset = 0
    for _ in range(5):
        data = fetch_v(broker, version, "d", offset=next_offset)
        assert (data.error_code, data.high_watermark) == (0, 5)
        message_set += bytes(data.records)
        next_offset = kp_read(message_set)[-1][1] + 1
        if next_offset == 5:
            break
    magic = 0 if version <= 1 else 1
    timestamps = [T0 + i if magic else None for i in range(5)]
    expected = [(magic, i, timestamps[i], b"key%d" % i, b"value-%d" % i) for i in range(5)]
    assert kp_read(message_set) == expected
    ours = [(r.magic, r.offset, r.timestamp if magic else None, r.key, r.value)
            for r in iter_legacy_records(message_set)]
    assert ours == expected
    entries = list(iter_legacy_entries(message_set, allow_partial_tail=False))
    if codec is Codec.NONE:
        assert [e.offset for e in entries] == [0, 1, 2, 3, 4]
    else:  # one wrapper per batch, at the offset of its last message, with the batch's codec
        assert [(e.offset, e.compression) for e in entries] == [(2, codec), (4, codec)]


def test_fetch_v2_keeps_log_append_time(broker: DataPathBroker) -> None:
    broker.host("lat", [0], configs={"message.timestamp.type": "LogAppendTime"})
    produce_modern(broker, "lat", Codec.LZ4, 2)
    message_set = bytes(fetch_v(broker, 2, "lat").records)
    entry = next(iter_legacy_entries(message_set, allow_partial_tail=False))
    assert (entry.timestamp_type, entry.timestamp) == (1, broker.now_ms())
    assert [r.timestamp for r in iter_legacy_records(message_set)] == [broker.now_ms()] * 2
    assert [r[2] for r in kp_read(message_set)] == [broker.now_ms()] * 2


def test_fetch_from_the_middle_of_a_batch(broker: DataPathBroker) -> None:
    broker.host("plain", [0])
    broker.host("packed", [0])
    produce_modern(broker, "plain", Codec.NONE, 4)
    produce_modern(broker, "packed", Codec.GZIP, 4)
    # Uncompressed: the set starts at the fetch offset; compressed: the whole wrapper, whose
    # earlier messages the client skips.
    assert [r[1] for r in kp_read(bytes(fetch_v(broker, 1, "plain", offset=2).records))] == [2, 3]
    assert [r[1] for r in kp_read(bytes(fetch_v(broker, 3, "packed", 2).records))] == [0, 1, 2, 3]


def test_fetch_size_limits(broker: DataPathBroker) -> None:
    broker.host("s", [0])
    for start in range(0, 30, 10):
        produce_modern(broker, "s", Codec.NONE, 10, start=start)
    first, second, _ = (b.size_in_bytes for b in stored(broker, "s"))
    assert first < second  # offsets 10-29 have longer keys
    # v3 (KIP-74): a first batch above the limit comes whole, down-converted.
    small = kp_read(bytes(fetch_v(broker, 3, "s", partition_max_bytes=10).records))
    assert [r[1] for r in small] == list(range(10))
    # v0-2: the limit is hard; of a first batch above it only the first bytes come, as they
    # are (Kafka's answer, which pre-KIP-74 clients report as a message too large).
    partial = bytes(fetch_v(broker, 2, "s", partition_max_bytes=first - 1).records)
    assert partial == stored(broker, "s")[0].to_bytes()[:first - 1]
    assert kp_read(partial) == []
    # Converted messages are larger than the batch they come from: the first batch comes
    # whole, later messages while they fit in what was read, whole.
    two = bytes(fetch_v(broker, 0, "s", partition_max_bytes=first + second + 5).records)
    offsets = [r[1] for r in kp_read(two)]
    assert offsets == list(range(len(offsets))) and 10 < len(offsets) < 20
    assert len(two) <= first + second and sum(
        e.size_in_bytes for e in iter_legacy_entries(two, allow_partial_tail=False)) == len(two)


def test_fetch_conversion_refusals(broker: DataPathBroker) -> None:
    broker.host("z", [0], configs={"compression.type": "zstd"})
    broker.host("off", [0], replicas=(1, 2), isr=(1,),
                configs={"message.downconversion.enable": "false"})
    produce_modern(broker, "z", Codec.NONE, 1)
    produce_modern(broker, "off", Codec.NONE, 1)
    # A zstd topic is refused to every version before v10 (which introduced zstd).
    assert [fetch_v(broker, v, "z").error_code for v in (0, 3, 4, 9, 10, 12)] == [
        UNSUPPORTED_COMPRESSION_TYPE] * 4 + [0, 0]
    assert fetch_v(broker, 1, "off").error_code == UNSUPPORTED_VERSION
    # Nothing to convert: no error. A follower (an old inter-broker protocol) is exempt.
    assert fetch_v(broker, 1, "off", offset=1).error_code == 0
    follower = fetched(broker.call(ApiKey.FETCH, 1, fetch_request({("off", 0): 0},
                                                                  replica_id=2)), "off", 0)
    assert follower.error_code == 0 and [r[1] for r in kp_read(bytes(follower.records))] == [0]
    assert fetch_v(broker, 4, "off").error_code == 0


def test_storage_errors_are_not_leader_or_follower_up_to_v5(broker: DataPathBroker) -> None:
    from kafkaclone.common.topic_partition import TopicPartition
    from kafkaclone.log.common import LogOffsetMetadata
    from kafkaclone.server.delayed.fetch import LogReadResult
    from kafkaclone.server.handlers.fetch import _older_version_errors

    failed = LogReadResult(56, None, LogOffsetMetadata(-1), -1, -1, -1, -1, -1, -1)
    tp = TopicPartition("gone", 0)
    assert [_older_version_errors(v, broker, tp, failed).error_code
            for v in (0, 3, 5, 6, 9)] == [6, 6, 6, 56, 56]


def test_down_convert_leaves_out_control_batches() -> None:
    data = build_record_batch([(b"k", b"v", None, T0)], base_offset=0)
    marker = build_end_transaction_marker_batch(ControlRecordType.COMMIT, producer_id=1,
                                                producer_epoch=0, coordinator_epoch=0,
                                                base_offset=1, timestamp=T0)
    after = build_record_batch([(b"k", b"w", None, T0)], base_offset=2, codec=Codec.GZIP)
    converted = down_convert(memoryview(data + marker + after), 1, 0)
    assert [(r[1], r[4]) for r in kp_read(converted)] == [(0, b"v"), (2, b"w")]
    with pytest.raises(Exception, match="zstandard"):
        down_convert(memoryview(build_record_batch([(b"k", b"v")], codec=Codec.ZSTD)), 0, 0)


def test_api_versions_advertise_the_legacy_versions() -> None:
    load_handlers()
    ranges = {key: (low, high) for key, low, high in supported_versions()}
    assert ranges[ApiKey.PRODUCE] == (0, 9)
    assert ranges[ApiKey.FETCH] == (0, 12)
    assert api.APIS[ApiKey.PRODUCE].min_version == 0



# -- kafka-python speaking 0.8.x-0.10.1, on a cluster ----------------------------------------

CLIENT_VERSIONS = [((0, 8, 2), ["gzip", "snappy", "lz4"]),
                   ((0, 9), ["gzip", "snappy", "lz4"]),
                   ((0, 10, 1), ["gzip", "snappy", "lz4"])]
"""Produce/Fetch versions they use: 0.8.2 v0/v0 (magic 0), 0.9 v1/v1 (magic 0), 0.10.1
v2/v3 (magic 1). Every codec kafka-python can write at that version (zstd needs 2.1)."""
PER_CODEC = 50


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from kafkaclone.testing.cluster import LocalCluster

    with LocalCluster(1, overrides={"num.partitions": "2",
                                    "default.replication.factor": "1"}) as local:
        yield local


def consume_all(consumer: Any, expected: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=500).values():
            got.extend(messages)
    return got


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("api_version", "codecs"), CLIENT_VERSIONS,
                         ids=["0.8.2", "0.9", "0.10.1"])
def test_kafka_python_legacy_round_trip(cluster: Any, api_version: tuple[int, ...],
                                        codecs: list[str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from tests.server.test_data_path_clients import create_topic

    name = "legacy-" + "-".join(map(str, api_version))
    create_topic(cluster, name, partitions=2)
    sent: list[tuple[int, bytes, bytes]] = []
    for codec in [None, *codecs]:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                 api_version=api_version, compression_type=codec,
                                 linger_ms=5, acks=1)
        try:
            futures = []
            for i in range(PER_CODEC):
                key, value = b"%s-%d" % (str(codec).encode(), i), b"v" * (i % 7) + b"%d" % i
                futures.append((i % 2, key, value,
                                producer.send(name, key=key, value=value, partition=i % 2)))
            for partition, key, value, future in futures:
                metadata = future.get(timeout=30)
                assert metadata.partition == partition
                sent.append((partition, key, value))
        finally:
            producer.close(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=api_version, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000)
    try:
        consumer.assign([TopicPartition(name, 0), TopicPartition(name, 1)])
        got = consume_all(consumer, len(sent))
    finally:
        consumer.close()
    assert len(got) == len(sent)
    for partition in (0, 1):
        mine = [m for m in got if m.partition == partition]
        assert [m.offset for m in mine] == list(range(len(mine)))
        assert [(m.key, m.value) for m in mine] == [(k, v) for p, k, v in sent if p == partition]
        if api_version >= (0, 10):
            assert all(m.timestamp > 0 and m.timestamp_type == 0 for m in mine)
        else:
            assert {(m.timestamp, m.timestamp_type) for m in mine} == {(None, None)}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kafka_python_0_8_1_consumes_and_commits_offsets(cluster: Any) -> None:
    """Kafka 0.8.1 speech: Produce v0, Fetch v0, OffsetCommit/OffsetFetch v0 (ZooKeeper
    offsets)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from tests.server.test_data_path_clients import create_topic

    topic, group = "legacy-0-8-1", "legacy-0-8-1-group"
    create_topic(cluster, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=(0, 8, 1), acks=1)
    try:
        for i in range(20):
            producer.send(topic, value=b"m%d" % i).get(timeout=30)
    finally:
        producer.close(timeout=10)
    tp = TopicPartition(topic, 0)

    def consumer() -> Any:
        c = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                          api_version=(0, 8, 1), enable_auto_commit=False,
                          auto_offset_reset="earliest")
        c.assign([tp])
        return c

    first = consumer()
    try:
        got = consume_all(first, 20)
        assert [m.value for m in got] == [b"m%d" % i for i in range(20)]
        first.commit({tp: OffsetAndMetadata(12, "", -1)})
        assert first.committed(tp) == 12
    finally:
        first.close()
    second = consumer()
    try:
        assert [m.offset for m in consume_all(second, 8)] == list(range(12, 20))
    finally:
        second.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("fallback", ["0.8.2", "0.9.0"])
def test_librdkafka_legacy_round_trip(cluster: Any, fallback: str) -> None:
    """librdkafka told the broker is 0.8.2 or 0.9.0 (no ApiVersions): Produce v0/v1 and
    Fetch v0/v1, magic 0, every codec it has for that format."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CkTopicPartition

    from tests.server.test_data_path_clients import create_topic

    legacy = {"bootstrap.servers": cluster.bootstrap_servers, "api.version.request": False,
              "broker.version.fallback": fallback, "log_level": 3}
    failures: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    for codec in ["none", "gzip", "snappy", "lz4"]:
        topic = f"rdkafka-{fallback.replace('.', '-')}-{codec}"
        create_topic(cluster, topic, partitions=1)
        producer = Producer({**legacy, "compression.codec": codec, "linger.ms": 5})
        for i in range(PER_CODEC):
            producer.produce(topic, key=b"k%d" % i, value=b"v" * (i % 5) + b"%d" % i,
                             on_delivery=on_delivery)
        assert producer.flush(30) == 0 and failures == []
        consumer = Consumer({**legacy, "group.id": f"check-{topic}",
                             "enable.auto.commit": False})
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes | None, bytes | None, tuple[int, int]]] = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < PER_CODEC and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                got.append((message.offset(), message.key(), message.value(),
                            message.timestamp()))
        finally:
            consumer.close()
        # magic 0: no timestamp (TIMESTAMP_NOT_AVAILABLE)
        assert got == [(i, b"k%d" % i, b"v" * (i % 5) + b"%d" % i, (0, 0))
                       for i in range(PER_CODEC)], codec


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_kafka_python_0_10_0_message_larger_than_the_fetch_size(cluster: Any) -> None:
    """Fetch v2 has no KIP-74: a message above max_partition_fetch_bytes is reported, as
    by a Kafka 2.8 broker (the client sees a partial message and raises)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.consumer.fetcher import RecordTooLargeError

    from tests.server.test_data_path_clients import create_topic

    topic = "legacy-too-large"
    create_topic(cluster, topic, partitions=1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=(0, 10, 0), acks=1)
    try:
        producer.send(topic, value=b"x" * 5000).get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=(0, 10, 0), enable_auto_commit=False,
                             max_partition_fetch_bytes=1024, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 30
        with pytest.raises(RecordTooLargeError):
            while time.monotonic() < deadline:
                assert consumer.poll(timeout_ms=500) == {}
    finally:
        consumer.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("api_version", [(0, 9), (0, 10, 1)], ids=["0.9", "0.10.1"])
def test_kafka_python_legacy_group_consumer(cluster: Any, api_version: tuple[int, ...]) -> None:
    """A subscribed group member of 0.9/0.10.1 (JoinGroup v0, Fetch v1/v3, OffsetCommit v2)
    reads everything and its commits are what a new member starts from."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from tests.server.test_data_path_clients import create_topic

    topic = "legacy-group-" + "-".join(map(str, api_version))
    group = f"{topic}-members"
    create_topic(cluster, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=api_version, acks=1, compression_type="gzip")
    try:
        for i in range(40):
            producer.send(topic, value=b"g%d" % i, partition=i % 2)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)

    def member() -> Any:
        return KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                             group_id=group, api_version=api_version,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10_000, heartbeat_interval_ms=1_000)

    first = member()
    try:
        got = consume_all(first, 40)
        assert sorted(m.value for m in got) == sorted(b"g%d" % i for i in range(40))
        first.commit()
        assert first.committed(TopicPartition(topic, 0)) == 20
    finally:
        first.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                             api_version=api_version, acks=1)
    try:
        producer.send(topic, value=b"after", partition=1).get(timeout=30)
    finally:
        producer.close(timeout=10)
    second = member()
    try:
        assert [(m.partition, m.offset, m.value) for m in consume_all(second, 1)] == [
            (1, 20, b"after")]
    finally:
        second.close()
