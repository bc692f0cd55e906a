"""WriteTxnMarkers (key 27), v0-1: the transaction coordinator has this broker, the leader
of the partitions, write its COMMIT or ABORT markers (Kafka 2.8's
KafkaApis.handleWriteTxnMarkersRequest).

For each marker, every partition hosted here gets a control batch holding Kafka's
EndTransactionMarker (key: version 0 + type; value: version 0 + coordinator epoch), appended
as the leader with AppendOrigin.COORDINATOR and acks=-1: the answer waits for the ISR
(DelayedProduce) or request.timeout.ms. A partition not hosted here is
UNKNOWN_TOPIC_OR_PARTITION; the append's errors (NOT_LEADER_OR_FOLLOWER,
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS, ...) are
answered per partition.

A ``__consumer_offsets`` partition holds the transactional offset commits of its groups
(TxnOffsetCommit). Before its COMMIT marker is appended, the offsets the producer's open
transaction holds in the partition's log are written under ``/consumers`` (the group
store); if that fails, the marker is not written (UNKNOWN_SERVER_ERROR: the coordinator
retries it, and the offsets are written again, unchanged). Reading them from the log, not
from memory, makes them survive the failover of the group coordinator. Once a marker is
written, the producer's offsets stop being pending.

WriteTxnMarkers is an inter-broker API: without ClusterAction on the cluster every partition
is CLUSTER_AUTHORIZATION_FAILED and nothing is written.
"""

from __future__ import annotations

import logging

from twisted.internet.defer import Deferred, gatherResults

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.clock import now_ms
from kafkaclone.common.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from kafkaclone.common.topic import GROUP_METADATA_TOPIC_NAME
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import AppendOrigin
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.record import ControlRecordType
from kafkaclone.server.group_metadata_log import open_txn_offsets
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.services import BrokerServices

logger = logging.getLogger(__name__)

_MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
_PartitionResult = (
    WriteTxnMarkersResponse.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
    .WritableTxnMarkerPartitionResult)
_Marker = WriteTxnMarkersRequest.WritableTxnMarker


async def commit_txn_offsets(broker: BrokerServices, marker: _Marker, tp: TopicPartition
                             ) -> int:
    """Before a COMMIT marker goes to a __consumer_offsets partition: its transaction's
    offsets under /consumers; the error code."""
    partition = broker.replica_manager.get_partition(tp)
    if partition is None or partition.log is None or not partition.is_leader:
        return NONE  # the append answers NOT_LEADER_OR_FOLLOWER
    offsets = open_txn_offsets(partition.log, marker.producer_id, marker.producer_epoch)
    try:
        await broker.group_coordinator.commit_txn_offsets(offsets)
    except Exception as exc:
        logger.error("Writing the transactional offsets of producer %d in %s failed: %s",
                     marker.producer_id, tp, exc)
        return UnknownServerError.code
    return NONE


async def write_marker(broker: BrokerServices, marker: _Marker) -> dict[TopicPartition, int]:
    """Append one marker to its partitions; each partition's error code."""
    errors: dict[TopicPartition, int] = {}
    entries: dict[TopicPartition, bytes] = {}
    control_type = ControlRecordType.COMMIT if marker.transaction_result else (
        ControlRecordType.ABORT)
    now = now_ms(broker.reactor)
    for topic in marker.topics:
        for index in topic.partition_indexes:
            tp = TopicPartition(topic.name, index)
            partition = broker.replica_manager.get_partition(tp)
            if partition is None or partition.log is None:
                errors[tp] = UnknownTopicOrPartitionError.code
                continue
            entries[tp] = build_end_transaction_marker_batch(
                control_type, producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                coordinator_epoch=marker.coordinator_epoch, timestamp=now)
    if marker.transaction_result:
        for tp in [tp for tp in entries if tp.topic == GROUP_METADATA_TOPIC_NAME]:
            code = await commit_txn_offsets(broker, marker, tp)
            if code != NONE:
                errors[tp] = code
                del entries[tp]
    if entries:
        appended = await broker.replica_manager.append_records(
            broker.config.request_timeout_ms, -1, entries, origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True)
        errors.update({tp: result.error_code for tp, result in appended.items()})
    offsets_partitions = [tp.partition for tp, code in errors.items()
                          if tp.topic == GROUP_METADATA_TOPIC_NAME and code == NONE]
    if offsets_partitions:
        broker.group_coordinator.complete_txn_offsets(marker.producer_id, offsets_partitions)
    return errors


@handler(ApiKey.WRITE_TXN_MARKERS, versions=(0, 1))
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest
                                   ) -> WriteTxnMarkersResponse:
    all_errors: list[dict[TopicPartition, int]]
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        all_errors = [{TopicPartition(topic.name, index): ClusterAuthorizationFailedError.code
                       for topic in marker.topics for index in topic.partition_indexes}
                      for marker in request.markers]
    else:
        # The markers are written concurrently, each waiting for its ISR (as Kafka's appends).
        all_errors = await gatherResults(
            [Deferred.fromCoroutine(write_marker(ctx.broker, marker))
             for marker in request.markers],
            consumeErrors=True)
    results = []
    for marker, errors in zip(request.markers, all_errors, strict=True):
        results.append(_MarkerResult(producer_id=marker.producer_id, topics=[
            _TopicResult(name=topic.name, partitions=[
                _PartitionResult(partition_index=index,
                                 error_code=errors[TopicPartition(topic.name, index)])
                for index in topic.partition_indexes])
            for topic in marker.topics]))
    return WriteTxnMarkersResponse(markers=results)
