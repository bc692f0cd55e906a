"""AlterReplicaLogDirs (key 34), v0-1: move replicas of this broker to other log
directories (Kafka 2.8's ``KafkaApis.handleAlterReplicaLogDirsRequest``).

Needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition otherwise). A
partition named in several directories goes to the last one. Each partition's error comes
from ``ReplicaManager.alter_replica_log_dirs``: LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR (an
offline directory or replica, or any move while a directory is offline),
REPLICA_NOT_AVAILABLE (not hosted here yet: it will be created in that directory),
INVALID_TOPIC_EXCEPTION (a name too long for the future log's directory), NONE (the move
started: a ``-future`` log copied in the background, then swapped in).
"""

from __future__ import annotations

from kafkaclone.common.acl import AclOperation
from kafkaclone.common.errors import ClusterAuthorizationFailedError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler

_TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
_PartitionResult = (
    AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult.AlterReplicaLogDirPartitionResult)


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(0, 1))
async def handle_alter_replica_log_dirs(
        ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    partition_dirs: dict[TopicPartition, str] = {}
    for directory in request.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                partition_dirs[TopicPartition(topic.name, index)] = directory.path
    if ctx.authorize_cluster(AclOperation.ALTER):
        errors = ctx.broker.replica_manager.alter_replica_log_dirs(partition_dirs)
    else:
        errors = dict.fromkeys(partition_dirs, ClusterAuthorizationFailedError.code)
    by_topic: dict[str, list[_PartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_index=tp.partition, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        _TopicResult(topic_name=topic, partitions=results)
        for topic, results in by_topic.items()])
