"""Small types shared by the log modules: file names, offsets metadata, append and fetch
results. (TopicPartition and the clock live on the common floor.)"""

from __future__ import annotations

import enum
import logging
import multiprocessing
import os
import re
import signal
import uuid
from typing import Final, NamedTuple

from kafkaclone.common.errors import KafkaStorageError
from kafkaclone.common.file_region import FileRegion
from kafkaclone.common.topic_partition import TopicPartition

NO_TIMESTAMP: Final = -1
UNKNOWN_OFFSET: Final = -1
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1

# ListOffsets' special timestamps.
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2

LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
DELETED_FILE_SUFFIX: Final = ".deleted"
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"
DELETE_DIR_SUFFIX: Final = "-delete"
FUTURE_DIR_SUFFIX: Final = "-future"


_DELETE_DIR = re.compile(r"^(\S+)-(\d+)\.([0-9a-f]{32})-delete$")
_FUTURE_DIR = re.compile(r"^(\S+)-(\d+)\.([0-9a-f]{32})-future$")


def log_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def log_future_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<32 hex digits>-future`` (Kafka's Log.logFutureDirName)."""
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_topic_partition_name(name: str) -> TopicPartition:
    """``my-topic-3`` -> TopicPartition("my-topic", 3); also accepts the ``.<id>-delete``
    and ``.<id>-future`` forms. KafkaStorageError for a name that is neither."""
    for pattern in (_DELETE_DIR, _FUTURE_DIR):
        match = pattern.match(name)
        if match:
            return TopicPartition(match.group(1), int(match.group(2)))
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise KafkaStorageError(
            f"Found directory {name}, '{name}' is not in the form of topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion).\n"
            "Kafka's log directories (and children) should only contain Kafka topic data."
        )
    return TopicPartition(topic, int(partition))


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded base offset that names a segment's files."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int:
    """The base offset from ``00000000000000001234.log`` (or ``.index``, ``.log.deleted``)."""
    return int(name.split(".", 1)[0])


class AppendOrigin(enum.Enum):
    """Who is appending: Kafka makes some checks only for clients."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class LogOffsetMetadata(NamedTuple):
    """An offset and where its batch starts: the segment and the byte position in it."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = -1


class AbortedTransaction(NamedTuple):
    """What a read_committed Fetch answer carries of an aborted transaction."""

    producer_id: int
    first_offset: int


class FetchDataInfo(NamedTuple):
    """What a read returns: whole batches (``records``, possibly empty) and where the read
    started. ``records`` is bytes, or with ``file_region`` reads a range of the segment
    file (sent with sendfile). ``first_entry_incomplete`` is never set: reads return whole
    batches only. ``aborted_transactions``: for a read_committed read, the aborted
    transactions that overlap the records (None for other reads). ``next_offset``: one past
    the last offset of the records, when a file region read knows it (-1 otherwise)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: memoryview | FileRegion
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTransaction] | None = None
    next_offset: int = -1


def records_bytes(records: memoryview | FileRegion) -> memoryview:
    """Records as bytes: a file region is read (a read without ``file_region`` returns
    bytes already)."""
    return memoryview(records.read()) if isinstance(records, FileRegion) else records


class LogAppendInfo(NamedTuple):
    """The outcome of an append, as Kafka's LogAppendInfo reports it. (The result types
    are NamedTuples: one is made per append or read, and they are the cheapest.)"""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    """The time assigned under LogAppendTime; -1 under CreateTime."""
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
    last_leader_epoch: int


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the first record at or after a timestamp."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


# -- test-only crash points --------------------------------------------------------------------

CRASH_POINT_ENV: Final = "KAFKACLONE_TEST_CRASH_POINT_FILE"
"""Test hook, off unless this environment variable is set: the path of a file that names
one crash point (e.g. ``cleaner.writing-cleaned``). When the broker reaches that point it
deletes the file (so the crash happens once) and kills itself with SIGKILL, so a test can
kill -9 a real broker process at a precise step of a cleaning. Unset in production."""

CRASH_POINTS: Final = ("cleaner.writing-cleaned", "cleaner.after-swap-rename",
                       "cleaner.mid-delete")
"""While a ``.log.cleaned`` file is being written (in the cleaner process; the broker it
belongs to dies with it); once the cleaned files were renamed ``.swap``; once the first of
the replaced segments was renamed ``.deleted``, the others not yet."""


def crash_point(name: str) -> None:
    """SIGKILL this broker here if the file named by ``KAFKACLONE_TEST_CRASH_POINT_FILE``
    holds ``name`` (see CRASH_POINT_ENV). In a cleaner process the broker that started it
    is killed first, then the cleaner process."""
    path = os.environ.get(CRASH_POINT_ENV)
    if not path:
        return
    try:
        with open(path) as file:
            wanted = file.read().strip()
    except OSError:
        return
    if wanted != name:
        return
    os.unlink(path)
    logging.getLogger(__name__).warning("Test crash point %s reached: kill -9", name)
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None:
        os.kill(parent.pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
