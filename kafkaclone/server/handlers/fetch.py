"""Fetch (key 1): consumers and followers read partitions (Kafka 2.8's
``KafkaApis.handleFetchRequest``).

Versions 0-12. Versions 0-3 (clients older than 0.11) read message format 0 (v0-1) or 1
(v2-3): the stored magic 2 batches are down-converted (kafkaclone.log.conversion), unless
the topic has ``message.downconversion.enable=false`` (UNSUPPORTED_VERSION) or is zstd
compressed (UNSUPPORTED_COMPRESSION_TYPE). Versions 0-2 predate KIP-74: their limits are
hard, so of a first batch above ``partition_max_bytes`` only the first bytes are sent, as
they are (as Kafka does; those clients report a message too large). As in Kafka, up to v5
KAFKA_STORAGE_ERROR is NOT_LEADER_OR_FOLLOWER, and before v10 (the first that may carry
zstd) a topic with ``compression.type=zstd`` is UNSUPPORTED_COMPRESSION_TYPE.

- ``replica_id >= 0``: a follower. It reads up to the log end offset, and its fetch offset
  tells the leader how far it got (ISR expand, high watermark). ``replica_id = -1``: a
  consumer, up to the high watermark (read_committed: the last stable offset, which is the
  high watermark until transactions exist); ``-2`` (a debugging consumer) the same.
- Follower fetching (KIP-392), as Kafka 2.8: a consumer's Fetch v11+ (which carries its
  ``rack_id``) may read a follower's replica, up to the follower's high watermark (an
  offset between that and its log end offset reads nothing; beyond its log end offset is
  OFFSET_OUT_OF_RANGE, on which the client goes back to the leader); older versions read
  only from the leader. With ``replica.selector.class`` set, the leader may answer a v11+
  consumer with no records and ``preferred_read_replica``, the follower in the client's
  rack to fetch from (ReplicaManager.find_preferred_read_replica).
- KIP-74: the first batch is returned whole even above the limits; otherwise each partition
  gets at most its ``partition_max_bytes`` and the response at most ``max_bytes`` (capped
  by ``fetch.max.bytes``).
- Long polls: fewer than ``min_bytes`` readable waits up to ``max_wait_ms``
  (DelayedFetch), woken by appends and high watermark moves.
- Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, KAFKA_STORAGE_ERROR.
- Fetch sessions (KIP-227, kafkaclone.server.fetch_session): a full fetch at epoch 0
  creates a session when the cache has room; incremental fetches name only what changed
  and get only partitions with news. An unknown session is FETCH_SESSION_ID_NOT_FOUND, a
  wrong epoch INVALID_FETCH_SESSION_EPOCH (top-level errors, no partitions).
"""

from __future__ import annotations

from typing import Final

from kafkaclone.cluster.partition import FetchIsolation
from kafkaclone.common.acl import AclOperation, ResourceType
from kafkaclone.common.errors import (
    NONE,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import records_bytes
from kafkaclone.log.conversion import down_convert, fetch_magic
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import FetchRequest, FetchResponse
from kafkaclone.protocol.records.common import LOG_OVERHEAD, SIZE_OFFSET
from kafkaclone.server.delayed.fetch import (
    UNKNOWN_OFFSET_METADATA,
    FetchParams,
    LogReadResult,
    PartitionFetchInfo,
)
from kafkaclone.server.fetch_session import FetchContext, new_context
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.replica_selector import ClientMetadata
from kafkaclone.server.services import BrokerServices

_TopicResponse = FetchResponse.FetchableTopicResponse
_PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
_EpochEndOffset = FetchResponse.FetchableTopicResponse.PartitionData.EpochEndOffset
_AbortedTransaction = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction

CONSUMER_REPLICA_ID: Final = -1
DEBUGGING_CONSUMER_ID: Final = -2
FUTURE_LOCAL_REPLICA_ID: Final = -3
"""Kafka's Request.FutureLocalReplicaId (a log moving between log dirs): not a consumer."""
READ_COMMITTED: Final = 1
INVALID_SESSION_ID: Final = 0
_EMPTY: Final = b""
_LAST_UNCONVERTED_VERSION: Final = 3
_LAST_HARD_LIMIT_VERSION: Final = 2
_FIRST_ZSTD_VERSION: Final = 10
_FIRST_CLIENT_METADATA_VERSION: Final = 11
_LAST_STORAGE_ERROR_HIDDEN: Final = 5
FILE_REGIONS = True
"""Whether answers that are not down-converted read their records as ranges of the segment
files (sent with sendfile where the connection allows). Kafka has no switch for this; off,
the records are read as bytes and encoded into the frame, which is the path before zero-copy
fetch, for benchmarks/copied_fetch_broker.py to measure."""


def fetch_params(ctx: RequestContext, request: FetchRequest) -> FetchParams:
    """Kafka 2.8's KafkaApis.handleFetchRequest and the head of ReplicaManager.fetchMessages:
    the isolation, and whether only the leader may answer (followers, and consumers before
    v11, which carries the client metadata)."""
    broker: BrokerServices = ctx.broker
    replica_id = request.replica_id
    is_from_follower = replica_id >= 0
    is_from_consumer = not (is_from_follower or replica_id == FUTURE_LOCAL_REPLICA_ID)
    if not is_from_consumer:
        isolation = FetchIsolation.LOG_END
    else:
        isolation = (FetchIsolation.TXN_COMMITTED if request.isolation_level == READ_COMMITTED
                     else FetchIsolation.HIGH_WATERMARK)
    client_metadata = None
    if ctx.api_version >= _FIRST_CLIENT_METADATA_VERSION:
        client_metadata = ClientMetadata(
            rack_id=request.rack_id or "", client_id=ctx.client_id or "",
            client_address=ctx.connection.client_host,
            listener_name=ctx.connection.listener_name)
    max_bytes = min(request.max_bytes, broker.config.fetch_max_bytes)
    if is_from_consumer and ctx.quotas.fetch.enabled:
        # Never more than the consumer quota allows over its window (Kafka's
        # getMaxValueInQuotaWindow), or one fetch would throttle it for many windows.
        max_bytes = int(min(max_bytes, ctx.quotas.fetch.max_value_in_quota_window(
            ctx.connection.principal.name, ctx.client_id or "")))
    return FetchParams(
        replica_id=replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=min(request.min_bytes, max_bytes),
        max_bytes=max_bytes,
        isolation=isolation,
        fetch_only_from_leader=is_from_follower or (is_from_consumer
                                                    and client_metadata is None),
        client_metadata=client_metadata,
        file_regions=FILE_REGIONS and ctx.api_version > _LAST_UNCONVERTED_VERSION,
    )


def _partition_data(index: int, result: LogReadResult,
                    isolation: FetchIsolation) -> _PartitionData:
    data = _PartitionData(
        partition_index=index,
        error_code=result.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=(
            [_AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
             for txn in result.aborted_transactions or ()]
            if isolation is FetchIsolation.TXN_COMMITTED else None),
        preferred_read_replica=result.preferred_read_replica,
        records=result.records if result.records is not None else _EMPTY,
    )
    if result.diverging_epoch is not None:
        epoch, end_offset = result.diverging_epoch
        data.diverging_epoch = _EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return data


def _whole_batches(records: memoryview, limit: int) -> memoryview:
    """The complete batches of ``records`` that fit in ``limit`` bytes."""
    size = 0
    end = len(records)
    while size + LOG_OVERHEAD <= end:
        batch_size = LOG_OVERHEAD + int.from_bytes(
            records[size + SIZE_OFFSET:size + LOG_OVERHEAD], "big", signed=True)
        if size + batch_size > min(limit, end):
            break
        size += batch_size
    return records[:size]


def _hard_limited(records: memoryview, limit: int) -> memoryview:
    """What Fetch v0-2 read: the complete batches within ``limit``, or, if the first batch
    is larger, its first ``limit`` bytes as they are (Kafka's read without KIP-74 sends
    that slice unconverted, and a pre-KIP-74 client reports a message too large)."""
    whole = _whole_batches(records, limit)
    return whole if whole else records[:max(limit, 0)]


def _older_version_errors(version: int, broker: BrokerServices, tp: TopicPartition,
                          result: LogReadResult) -> LogReadResult:
    """Fetch before v10: KAFKA_STORAGE_ERROR is NOT_LEADER_OR_FOLLOWER up to v5 (older
    clients do not know it as retriable), and a topic with ``compression.type=zstd``
    answers UNSUPPORTED_COMPRESSION_TYPE (Kafka checks the topic's config, not the
    batches)."""
    if result.error_code == KafkaStorageError.code and version <= _LAST_STORAGE_ERROR_HIDDEN:
        result = result._replace(error_code=NotLeaderOrFollowerError.code)
    log = broker.replica_manager.log_manager.get_log(tp)
    if log is not None and log.config.compression_type == "zstd":
        return result._replace(error_code=UnsupportedCompressionTypeError.code, records=None)
    return result


def _down_converted(version: int, broker: BrokerServices, tp: TopicPartition,
                    result: LogReadResult, fetch_offset: int, limit: int,
                    from_follower: bool) -> LogReadResult:
    """Fetch v0-3: the partition's read in the message format of ``version`` (Kafka's
    KafkaApis.maybeConvertFetchedData); ``limit``: the hard byte limit of v0-2. A follower
    gets converted data even where message.downconversion.enable is false."""
    result = _older_version_errors(version, broker, tp, result)
    if result.error_code != NONE or not result.records:
        return result
    fetched = records_bytes(result.records)
    records = _hard_limited(fetched, limit) if version <= _LAST_HARD_LIMIT_VERSION \
        else fetched
    if len(records) < LOG_OVERHEAD or LOG_OVERHEAD + int.from_bytes(
            records[SIZE_OFFSET:LOG_OVERHEAD], "big", signed=True) > len(records):
        return result._replace(records=records)  # no complete batch: nothing to convert
    log = broker.replica_manager.log_manager.get_log(tp)
    if (not from_follower and log is not None
            and not log.config.message_downconversion_enable):
        return result._replace(error_code=UnsupportedVersionError.code, records=None)
    try:
        converted = down_convert(records, fetch_magic(version), fetch_offset)
    except KafkaError as exc:
        return result._replace(error_code=exc.code, records=None)
    return result._replace(records=memoryview(converted))


def _convert_results(version: int, broker: BrokerServices, params: FetchParams,
                     infos: list[tuple[TopicPartition, PartitionFetchInfo]],
                     results: list[tuple[TopicPartition, LogReadResult]]
                     ) -> list[tuple[TopicPartition, LogReadResult]]:
    """Fetch v0-3 results, down-converted; v0-2 keep within their hard limits: each
    partition its ``partition_max_bytes``, all together the request's ``max_bytes``."""
    requested = dict(infos)
    remaining = params.max_bytes
    converted = []
    for tp, result in results:
        info = requested[tp]
        limit = min(info.max_bytes, remaining)
        data = _down_converted(version, broker, tp, result, info.fetch_offset, limit,
                               params.is_from_follower)
        if version <= _LAST_HARD_LIMIT_VERSION and result.records is not None:
            remaining -= len(_hard_limited(records_bytes(result.records), limit))
        converted.append((tp, data))
    return converted


_TOPIC_AUTHORIZATION_FAILED: Final = LogReadResult(
    TopicAuthorizationFailedError.code, None, UNKNOWN_OFFSET_METADATA, -1, -1, -1, -1, -1, -1)


def _unauthorized_topics(ctx: RequestContext, params: FetchParams,
                         partitions: list[tuple[TopicPartition, PartitionFetchInfo]],
                         ) -> frozenset[str]:
    """A follower needs ClusterAction on the cluster, a consumer Read on each topic
    (KafkaApis.handleFetchRequest); the topics refused TOPIC_AUTHORIZATION_FAILED."""
    if params.is_from_follower:
        if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            return frozenset()
        return frozenset(tp.topic for tp, _ in partitions)
    return ctx.unauthorized_names(AclOperation.READ, ResourceType.TOPIC,
                                  (tp.topic for tp, _ in partitions))


def _record_fetch_quota(ctx: RequestContext, params: FetchParams,
                        results: list[tuple[TopicPartition, LogReadResult]]) -> int:
    """The consumer's ``consumer_byte_rate`` throttle time for this answer (0: within its
    quota, or a follower's fetch, which client quotas do not govern); a throttled answer's
    bytes are taken back, since they are not sent."""
    quota = ctx.quotas.fetch
    if not quota.enabled or params.is_from_follower:
        return 0
    size = sum(len(result.records) for _, result in results if result.records is not None)
    user, client_id = ctx.connection.principal.name, ctx.client_id or ""
    now_ms = ctx.broker.reactor.seconds() * 1000
    throttle_ms = quota.record_and_get_throttle_time_ms(user, client_id, size, now_ms)
    if throttle_ms:
        quota.unrecord(user, client_id, size, now_ms)
    return throttle_ms


def _throttled_session_id(context: FetchContext) -> int:
    return INVALID_SESSION_ID if context.session is None else context.session.id


@handler(ApiKey.FETCH, versions=(0, 12))
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    broker: BrokerServices = ctx.broker
    params = fetch_params(ctx, request)
    infos = [
        (TopicPartition(topic.topic, p.partition),
         PartitionFetchInfo(p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                            p.current_leader_epoch, p.last_fetched_epoch))
        for topic in request.topics for p in topic.partitions
    ]
    forgotten = [TopicPartition(topic.topic, p) for topic in request.forgotten_topics_data or ()
                 for p in topic.partitions]
    sessions = broker.replica_manager.fetch_sessions
    context = new_context(sessions, request.session_id, request.session_epoch, infos,
                          forgotten, params.is_from_follower)
    if context.error_code != NONE:
        return FetchResponse(throttle_time_ms=0, error_code=context.error_code,
                         session_id=INVALID_SESSION_ID, responses=[])
    denied = _unauthorized_topics(ctx, params, context.partitions)
    if denied:
        read = dict(await broker.replica_manager.fetch_messages(
            params, [(tp, info) for tp, info in context.partitions if tp.topic not in denied]))
        results = [(tp, read.get(tp, _TOPIC_AUTHORIZATION_FAILED))
                   for tp, _ in context.partitions]
    else:
        results = await broker.replica_manager.fetch_messages(params, context.partitions)
    throttle_ms = _record_fetch_quota(ctx, params, results)
    if throttle_ms:
        # Over the quota: an empty answer (the session untouched), as Kafka's
        # getThrottledResponse, and the connection muted for the throttle time.
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=NONE,
                             session_id=_throttled_session_id(context), responses=[])
    session_id, results = context.respond(sessions, results)
    if ctx.api_version <= _LAST_UNCONVERTED_VERSION:
        results = _convert_results(ctx.api_version, broker, params, infos, results)
    elif ctx.api_version < _FIRST_ZSTD_VERSION:
        results = [(tp, _older_version_errors(ctx.api_version, broker, tp, result))
                   for tp, result in results]
    responses: list[_TopicResponse] = []
    current_topic: str | None = None
    partitions: list[_PartitionData] = []
    for tp, result in results:
        if tp.topic != current_topic:
            partitions = []
            responses.append(_TopicResponse(topic=tp.topic, partitions=partitions))
            current_topic = tp.topic
        partitions.append(_partition_data(tp.partition, result, params.isolation))
    return FetchResponse(throttle_time_ms=0, error_code=NONE, session_id=session_id,
                     responses=responses)
