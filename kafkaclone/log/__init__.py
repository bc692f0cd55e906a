"""The storage engine: partition logs of segments with Kafka's on-disk formats.

See docs/storage.md for the file formats, recovery, and where this differs from Kafka.
"""

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.epoch_cache import LeaderEpochFileCache
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.log.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AppendOrigin",
    "FetchDataInfo",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogManagerConfig",
    "LogOffsetMetadata",
    "LogSegment",
    "TimestampAndOffset",
    "TopicPartition",
]
