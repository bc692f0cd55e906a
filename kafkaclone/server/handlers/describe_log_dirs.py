"""DescribeLogDirs (key 35), v0-2: each log directory of this broker with its partitions,
their sizes and offset lags (Kafka 2.8's ``KafkaApis.handleDescribeLogDirsRequest`` and
``ReplicaManager.describeLogDirs``).

Null topics mean every log this broker holds. An offline directory is answered with
KAFKA_STORAGE_ERROR and no topics. Without Describe on the cluster the answer lists no
directory at all, as Kafka's.
"""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = DescribeLogDirsResponse.DescribeLogDirsResult.DescribeLogDirsTopic
_Partition = _Topic.DescribeLogDirsPartition


@handler(ApiKey.DESCRIBE_LOG_DIRS, versions=(0, 2))
async def handle_describe_log_dirs(
        ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0, results=[])
    partitions = None if request.topics is None else {
        TopicPartition(topic.topic, index)
        for topic in request.topics for index in topic.partitions}
    results = []
    for description in ctx.broker.replica_manager.describe_log_dirs(partitions):
        by_topic: dict[str, list[_Partition]] = {}
        for replica in description.replicas:
            by_topic.setdefault(replica.topic_partition.topic, []).append(_Partition(
                partition_index=replica.topic_partition.partition,
                partition_size=replica.size, offset_lag=replica.offset_lag,
                is_future_key=replica.is_future))
        results.append(_Result(
            error_code=description.error_code, log_dir=description.path,
            topics=[_Topic(name=topic, partitions=found)
                    for topic, found in sorted(by_topic.items())]))
    return DescribeLogDirsResponse(throttle_time_ms=0, results=results)
