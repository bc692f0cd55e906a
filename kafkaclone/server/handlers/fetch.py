"""Fetch (key 1): consumers and followers read partitions (Kafka 2.8's
``KafkaApis.handleFetchRequest``).

Versions 4-12. Versions 0-3 need down-conversion to message format 0/1, which this broker
does not do yet; they are not advertised.

- ``replica_id >= 0``: a follower. It reads up to the log end offset, and its fetch offset
  tells the leader how far it got (ISR expand, high watermark). ``replica_id = -1``: a
  consumer, up to the high watermark (read_committed: the last stable offset, which is the
  high watermark until transactions exist). ``-2`` (a debugging consumer) may read a
  follower's replica.
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

from typing import Any, Final

from kafkaclone.cluster.partition import FetchIsolation
from kafkaclone.log.common import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.errors import NONE
from kafkaclone.server.delayed.fetch import FetchParams, LogReadResult, PartitionFetchInfo
from kafkaclone.server.fetch_session import new_context
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

_RESPONSE = APIS[ApiKey.FETCH].response
_TopicResponse = _RESPONSE.structs["FetchableTopicResponse"]
_PartitionData = _RESPONSE.structs["PartitionData"]
_EpochEndOffset = _RESPONSE.structs["EpochEndOffset"]

CONSUMER_REPLICA_ID: Final = -1
DEBUGGING_CONSUMER_ID: Final = -2
READ_COMMITTED: Final = 1
INVALID_SESSION_ID: Final = 0
_EMPTY: Final = b""


def fetch_params(request: Any, broker: BrokerServices) -> FetchParams:
    replica_id = request.replica_id
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    else:
        isolation = (FetchIsolation.TXN_COMMITTED if request.isolation_level == READ_COMMITTED
                     else FetchIsolation.HIGH_WATERMARK)
    max_bytes = min(request.max_bytes, broker.config.fetch_max_bytes)
    return FetchParams(
        replica_id=replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=min(request.min_bytes, max_bytes),
        max_bytes=max_bytes,
        isolation=isolation,
        fetch_only_from_leader=replica_id != DEBUGGING_CONSUMER_ID,
    )


def _partition_data(index: int, result: LogReadResult, isolation: FetchIsolation) -> Any:
    data = _PartitionData(
        partition_index=index,
        error_code=result.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=[] if isolation is FetchIsolation.TXN_COMMITTED else None,
        preferred_read_replica=-1,
        records=result.records if result.records is not None else _EMPTY,
    )
    if result.diverging_epoch is not None:
        epoch, end_offset = result.diverging_epoch
        data.diverging_epoch = _EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return data


@handler(ApiKey.FETCH, versions=(4, 12))
async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    broker: BrokerServices = ctx.broker
    params = fetch_params(request, broker)
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
        return _RESPONSE(throttle_time_ms=0, error_code=context.error_code,
                         session_id=INVALID_SESSION_ID, responses=[])
    results = await broker.replica_manager.fetch_messages(params, context.partitions)
    session_id, results = context.respond(sessions, results)
    responses: list[Any] = []
    current_topic: str | None = None
    partitions: list[Any] = []
    for tp, result in results:
        if tp.topic != current_topic:
            partitions = []
            responses.append(_TopicResponse(topic=tp.topic, partitions=partitions))
            current_topic = tp.topic
        partitions.append(_partition_data(tp.partition, result, params.isolation))
    return _RESPONSE(throttle_time_ms=0, error_code=NONE, session_id=session_id,
                     responses=responses)
