"""Produce (key 0): append record batches on partition leaders (Kafka 2.8's
``KafkaApis.handleProduceRequest``).

Versions 3-9 carry magic 2 batches. Versions 0-2 (clients older than 0.11) carry legacy
message sets (magic 0/1), which are up-converted to one magic 2 batch before the append
(kafkaclone.log.conversion, with Kafka's LogValidator rules for them); a magic 2 batch
sent at v0-2 is appended as it is, and a set with no complete message appends nothing
(base offset -1).

A request carrying a transactional batch but no transactional id is refused whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, nothing appended (Kafka checks
this first, authorizer or not).

Per partition, as Kafka answers:

- a topic or partition the cluster does not have: UNKNOWN_TOPIC_OR_PARTITION;
- not exactly one magic 2 batch: INVALID_RECORD; a zstd batch before v7:
  UNSUPPORTED_COMPRESSION_TYPE;
- then the ReplicaManager's append (kafkaclone.server.replica_manager): NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS, CORRUPT_MESSAGE (bad CRC; nothing is appended), MESSAGE_TOO_LARGE,
  RECORD_LIST_TOO_LARGE, INVALID_RECORD, INVALID_TIMESTAMP, the producer state's
  OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID (nothing is
  appended; a duplicate of one of a producer's last 5 batches is answered with the offset
  it got the first time), and with acks=-1 NOT_ENOUGH_REPLICAS_AFTER_APPEND or
  REQUEST_TIMED_OUT;
- acks other than 0, 1, -1: INVALID_REQUIRED_ACKS everywhere.

acks=0 gets no response; if a partition failed the connection is closed instead, so the
client refreshes its metadata (as Kafka does).

The common shape, one partition of one topic with acks 0, 1 or -1 and no transactional id
(most client requests: a producer sends each leader's partitions in one request),
takes :func:`produce_one_partition` at v3-9: the frame is read in place and a successful
answer written directly, without the request and response objects. Anything else, and
anything that would fail before the append (unknown partition, a batch that is not
exactly one magic 2 batch, a transactional batch, an authorizer, client quotas), goes to
:func:`handle_produce`; the append's own errors are answered as the handler answers them.
"""

from __future__ import annotations

import logging
import struct
from typing import Final

from twisted.internet.defer import Deferred

from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.conversion import up_convert
from kafkaclone.network.socket_server import CloseConnection
from kafkaclone.protocol.api import EncodedResponse
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ProduceRequest, ProduceResponse
from kafkaclone.protocol.records import Codec
from kafkaclone.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    MAGIC_V2,
    TRANSACTIONAL_FLAG_MASK,
)
from kafkaclone.protocol.records.common import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    SIZE_OFFSET,
)
from kafkaclone.protocol.types import INT16, INT32, Buffer, write_uvarint
from kafkaclone.server.delayed.produce import ProducePartitionResult, ProducePartitionStatus
from kafkaclone.server.handlers.registry import (
    DECLINED,
    FastPathDeclined,
    RequestContext,
    fast_path,
    handler,
)
from kafkaclone.server.services import BrokerServices

log = logging.getLogger(__name__)

_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def validate_records(version: int, records: Buffer | None) -> memoryview:
    """Kafka's ProduceRequest.validateRecords: exactly one magic 2 batch (a trailing
    partial batch is dropped, as Kafka's batch iterator drops it); the batch's bytes."""
    view = memoryview(b"") if records is None else memoryview(records)
    size = len(view)
    first_size = (int.from_bytes(view[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True)
                  + LOG_OVERHEAD if size >= HEADER_SIZE_UP_TO_MAGIC else 0)
    if size < HEADER_SIZE_UP_TO_MAGIC or first_size > size or first_size < LOG_OVERHEAD:
        raise InvalidRecordError(
            f"Produce requests with version {version} must have at least one record batch")
    if view[MAGIC_OFFSET] != MAGIC_V2:
        raise InvalidRecordError(
            f"Produce requests with version {version} are only allowed to contain record "
            f"batches with magic version 2")
    # attributes is an int16: the codec bits are in its second (low) byte.
    if (version < 7 and first_size > ATTRIBUTES_OFFSET + 1
            and view[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK == Codec.ZSTD):
        raise UnsupportedCompressionTypeError(
            f"Produce requests with version {version} are not allowed to use ZStandard "
            f"compression")
    rest = size - first_size
    if rest >= HEADER_SIZE_UP_TO_MAGIC:
        second = int.from_bytes(view[first_size + SIZE_OFFSET:first_size + LOG_OVERHEAD],
                                "big", signed=True)
        if second + LOG_OVERHEAD <= rest:
            raise InvalidRecordError(
                f"Produce requests with version {version} are only allowed to contain "
                f"exactly one record batch")
    return view[:first_size] if rest else view


def _is_transactional(entry: memoryview) -> bool:
    # attributes is an int16: the transactional flag is in its second (low) byte.
    return (len(entry) > ATTRIBUTES_OFFSET + 1 and entry[MAGIC_OFFSET] == MAGIC_V2
            and entry[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK != 0)


def _legacy_records(records: Buffer | None) -> memoryview | None:
    """A Produce v0-2 partition's message set as magic 2 (None: no complete entry)."""
    return None if records is None else up_convert(memoryview(records))


def _partition_response(index: int, result: ProducePartitionResult) -> _PartitionResponse:
    if result.error_code != NONE:
        return _PartitionResponse(index=index, error_code=result.error_code, base_offset=-1,
                                  log_append_time_ms=-1, log_start_offset=-1,
                                  record_errors=[], error_message=result.error_message)
    return _PartitionResponse(index=index, error_code=NONE, base_offset=result.base_offset,
                              log_append_time_ms=result.log_append_time_ms,
                              log_start_offset=result.log_start_offset, record_errors=[],
                              error_message=None)


@handler(ApiKey.PRODUCE, versions=(0, 9))
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker: BrokerServices = ctx.broker
    version = ctx.api_version
    cache = broker.metadata_cache
    denied = ctx.unauthorized_names(AclOperation.WRITE, ResourceType.TOPIC,
                                    (topic.name for topic in request.topic_data))
    denied_code = TopicAuthorizationFailedError.code
    if request.transactional_id is not None and not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        denied = frozenset(topic.name for topic in request.topic_data)
        denied_code = TransactionalIdAuthorizationFailedError.code
    order: list[tuple[str, list[tuple[int, TopicPartition]]]] = []
    results: dict[TopicPartition, ProducePartitionResult] = {}
    entries: dict[TopicPartition, memoryview] = {}
    for topic in request.topic_data:
        partitions: list[tuple[int, TopicPartition]] = []
        order.append((topic.name, partitions))
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            partitions.append((data.index, tp))
            if topic.name in denied:
                results[tp] = ProducePartitionResult(denied_code)
                continue
            if cache.partition_state(tp.topic, tp.partition) is None:
                results[tp] = ProducePartitionResult(UnknownTopicOrPartitionError.code)
                continue
            try:
                if version >= 3:
                    entries[tp] = validate_records(version, data.records)
                else:
                    converted = _legacy_records(data.records)
                    if converted is None:
                        results[tp] = ProducePartitionResult(NONE)
                    else:
                        entries[tp] = converted
            except KafkaError as exc:
                results[tp] = ProducePartitionResult(exc.code, error_message=exc.message)

    if request.transactional_id is None and any(map(_is_transactional, entries.values())):
        results = {tp: ProducePartitionResult(TransactionalIdAuthorizationFailedError.code)
                   for tp in results.keys() | entries.keys()}
        entries = {}

    acks = request.acks
    if entries:
        appended = await broker.replica_manager.append_records(
            request.timeout_ms, acks, entries)
        results.update(appended)
    elif acks not in (0, 1, -1):
        results = {tp: ProducePartitionResult(InvalidRequiredAcksError.code) for tp in results}

    throttle_ms = _record_produce_quota(ctx)
    if acks == 0:
        if throttle_ms and ctx.connection.throttle is not None:
            ctx.connection.throttle(throttle_ms)
        failed = [tp for tp, result in results.items() if result.error_code != NONE]
        if failed:
            raise CloseConnection(
                f"Closing connection due to error during produce request with correlation id "
                f"{ctx.correlation_id} from client id {ctx.client_id} with ack=0; errors on "
                f"{', '.join(map(str, failed))}")
        return None
    return ProduceResponse(responses=[
        _TopicResponse(name=name, partition_responses=[
            _partition_response(index, results[tp]) for index, tp in partitions])
        for name, partitions in order
    ], throttle_time_ms=throttle_ms)


def _record_produce_quota(ctx: RequestContext) -> int:
    """The producer's ``producer_byte_rate`` throttle time, recording the request's size as
    Kafka does once the append completed (the request handler mutes the connection for the
    throttle time in the answer)."""
    quota = ctx.quotas.produce
    if not quota.enabled:
        return 0
    return quota.record_and_get_throttle_time_ms(
        ctx.connection.principal.name, ctx.client_id or "", ctx.request_size,
        ctx.broker.reactor.seconds() * 1000)


_REQUEST_START: Final = struct.Struct(">hhii")
"""Produce v3-8 up to the first topic: transactional_id's length (-1: null), acks,
timeout_ms, the number of topics."""
_PARTITION_START: Final = struct.Struct(">iii")
"""The topic's number of partitions, the first's index and its records' length."""
_ACKS_TIMEOUT: Final = struct.Struct(">hi")
_ONE_TOPIC: Final = struct.Struct(">ih")
"""The answer's number of topics (1) and the topic name's length (v3-8)."""
_PARTITION_ANSWER: Final = struct.Struct(">ihqqq")
"""index, error_code, base_offset, log_append_time_ms, log_start_offset (v5+)."""
_V8_TAIL: Final = struct.Struct(">ihi")
"""record_errors (empty), error_message (null), throttle_time_ms."""
_V9_TAIL: Final = b"\x01\x00\x00\x00" + bytes(4) + b"\x00"
"""record_errors (empty), error_message (null), the partition's and the topic's tagged
fields (none), throttle_time_ms (0), the response's tagged fields (none)."""

_OnePartition = tuple[int, int, bytes, int, int, int]
"""What the fast path reads of a request: acks, timeout_ms, the topic name's bytes, the
partition index, and where its records start and end."""


def _read_one_partition(frame: bytearray, position: int) -> _OnePartition | None:
    """Produce v3-8 with no transactional id, one topic, one partition, records, and
    nothing after them; None for anything else."""
    end = len(frame)
    if end - position < _REQUEST_START.size + INT16.size:
        return None
    id_length, acks, timeout_ms, topics = _REQUEST_START.unpack_from(frame, position)
    if id_length != -1 or topics != 1:
        return None
    position += _REQUEST_START.size
    (name_length,) = INT16.unpack_from(frame, position)
    position += INT16.size
    name_end = position + name_length
    if name_length < 0 or name_end + _PARTITION_START.size > end:
        return None
    partitions, index, size = _PARTITION_START.unpack_from(frame, name_end)
    records_start = name_end + _PARTITION_START.size
    if partitions != 1 or size < 0 or records_start + size != end:
        return None
    return acks, timeout_ms, bytes(frame[position:name_end]), index, records_start, end


def _read_uvarint(frame: bytearray, position: int) -> tuple[int, int]:
    """An unsigned varint and the position after it; (-1, position) if it runs past the
    frame or 5 bytes."""
    value = shift = 0
    for index in range(position, min(position + 5, len(frame))):
        byte = frame[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    return -1, position


def _read_one_partition_flexible(frame: bytearray, position: int) -> _OnePartition | None:
    """:func:`_read_one_partition` for Produce v9 (compact strings, arrays and records,
    tagged fields, of which there must be none)."""
    end = len(frame)
    if end - position < 1 + _ACKS_TIMEOUT.size + 2 or frame[position] != 0:
        return None  # transactional_id not null
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, position + 1)
    position += 1 + _ACKS_TIMEOUT.size
    if frame[position] != 2:
        return None  # not one topic
    name_length, position = _read_uvarint(frame, position + 1)
    name_length -= 1
    name_end = position + name_length
    if name_length < 0 or name_end + 1 + INT32.size >= end or frame[name_end] != 2:
        return None  # no name, or not one partition
    (index,) = INT32.unpack_from(frame, name_end + 1)
    size, records_start = _read_uvarint(frame, name_end + 1 + INT32.size)
    size -= 1
    # The records, then no tagged fields for the partition, the topic and the request.
    if size < 0 or records_start + size + 3 != end or frame[end - 3:end] != b"\0\0\0":
        return None
    return acks, timeout_ms, bytes(frame[position:name_end]), index, records_start, end - 3


@fast_path(ApiKey.PRODUCE, versions=(3, 9))
def produce_one_partition(
    ctx: RequestContext, frame: bytearray, position: int
) -> (ProduceResponse | EncodedResponse | Deferred[ProduceResponse | EncodedResponse]
      | FastPathDeclined | None):
    """:func:`handle_produce` for one partition of one topic, acks 0, 1 or -1 (a Deferred
    of the answer then), no
    transactional id and no authorizer (the caller checks that no client quota is on), at
    v3-9; DECLINED for anything else and for what would fail before the append, with
    nothing done. The frame is read in place (the records are a view of it, as the
    decoder's), and a successful answer is written directly."""
    broker = ctx.broker
    if broker.authorizer is not None:
        return DECLINED
    version = ctx.api_version
    read = (_read_one_partition(frame, position) if version < 9
            else _read_one_partition_flexible(frame, position))
    if read is None:
        return DECLINED
    acks, timeout_ms, raw_name, index, records_start, records_end = read
    if not (acks == 1 or acks == -1 or acks == 0):
        return DECLINED
    try:
        topic = raw_name.decode("utf-8")
    except UnicodeDecodeError:
        return DECLINED
    if broker.metadata_cache.partition_state(topic, index) is None:
        return DECLINED
    try:
        entry = validate_records(version, memoryview(frame)[records_start:records_end])
    except KafkaError:
        return DECLINED
    if _is_transactional(entry):
        return DECLINED

    tp = TopicPartition(topic, index)
    replica_manager = broker.replica_manager
    result, required_offset = replica_manager.append_partition_to_local_log(
        tp, entry, required_acks=acks)
    if acks == -1 and result.error_code == NONE:
        waiting = replica_manager.wait_for_replicas(
            timeout_ms, {tp: ProducePartitionStatus(required_offset, result)})
        return waiting.addCallback(lambda results: _one_partition_answer(
            version, topic, raw_name, index, results[tp]))
    if acks == 0:
        if result.error_code != NONE:
            raise CloseConnection(
                f"Closing connection due to error during produce request with correlation id "
                f"{ctx.correlation_id} from client id {ctx.client_id} with ack=0; errors on "
                f"{tp}")
        return None
    return _one_partition_answer(version, topic, raw_name, index, result)


def _one_partition_answer(version: int, topic: str, raw_name: bytes, index: int,
                          result: ProducePartitionResult
                          ) -> ProduceResponse | EncodedResponse:
    """The answer to a one-partition Produce: an error as the handler builds it, a
    success encoded directly."""
    if result.error_code != NONE:
        return ProduceResponse(responses=[_TopicResponse(
            name=topic, partition_responses=[_partition_response(index, result)])],
            throttle_time_ms=0)
    partition = _PARTITION_ANSWER.pack(index, NONE, result.base_offset,
                                       result.log_append_time_ms, result.log_start_offset)
    if version >= 9:
        # One topic, its compact name, one partition (compact lengths are length + 1).
        out = bytearray(b"\x02")
        write_uvarint(out, len(raw_name) + 1)
        out += raw_name
        out += b"\x02"
        out += partition
        out += _V9_TAIL
        return EncodedResponse(version, bytes(out))
    out = bytearray(_ONE_TOPIC.pack(1, len(raw_name)))
    out += raw_name
    out += INT32.pack(1)
    out += partition if version >= 5 else partition[:-8]  # log_start_offset from v5
    out += _V8_TAIL.pack(0, -1, 0) if version >= 8 else INT32.pack(0)  # throttle_time_ms
    return EncodedResponse(version, bytes(out))
