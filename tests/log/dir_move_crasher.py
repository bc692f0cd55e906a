"""The process the log-dir move crash test kills: a LogManager with two directories moves
``move-0`` (RECORDS records, in several segments and two leader epochs) from the first to
the second through a ``-future`` log and kills itself with SIGKILL at ``crash_point``:

- ``mid-copy``: half of the log copied into the future log;
- ``before-rename``: the future log caught up and flushed, nothing renamed yet;
- ``after-current-renamed``: the current log renamed ``-delete``, the future not yet renamed;
- ``after-future-renamed``: both renamed, the old log's files not deleted yet.

Every record's value is its own offset in ASCII.

    python -m tests.log.dir_move_crasher <dir1> <dir2> <crash point>
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import records_bytes
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.records import build_record_batch

TOPIC_PARTITION = TopicPartition("move", 0)
RECORDS = 2_000
PER_BATCH = 20
PROPS = {"log.segment.bytes": "16384", "broker.id": "0"}
CRASH_POINTS = ("mid-copy", "before-rename", "after-current-renamed", "after-future-renamed")


def manager_for(dirs: list[str], clock: Clock) -> LogManager:
    return LogManager(LogManagerConfig.from_props({"log.dirs": ",".join(dirs), **PROPS}),
                      clock=clock)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def copy(current: Log, future: Log, until: int) -> None:
    while future.log_end_offset < until:
        data = current.read(future.log_end_offset, 4096)
        future.append_as_follower(records_bytes(data.records))


def main() -> int:
    first, second, crash_point = sys.argv[1:4]
    clock = Clock()
    manager = manager_for([first, second], clock)
    manager.startup()
    current = manager.get_or_create_log(TOPIC_PARTITION)
    for offset in range(0, RECORDS, PER_BATCH):
        records = [(None, str(offset + i).encode(), None, 1000) for i in range(PER_BATCH)]
        current.append(build_record_batch(records), leader_epoch=0 if offset < RECORDS // 2
                       else 3)
    current.update_high_watermark(RECORDS)
    current.flush()
    manager.checkpoint_recovery_offsets()
    manager.checkpoint_high_watermarks()
    future = manager.create_future_log(TOPIC_PARTITION, second)
    if crash_point == "mid-copy":
        copy(current, future, RECORDS // 2)
        future.flush()
        manager.checkpoint_recovery_offsets()
        die()
    copy(current, future, RECORDS)
    renames = 0
    rename_dir = Log.rename_dir

    def crashing_rename(log: Log, name: str) -> Any:
        nonlocal renames
        if (crash_point, renames) in (("before-rename", 0), ("after-current-renamed", 1)):
            die()
        renames += 1
        return rename_dir(log, name)

    def crashing_delete(log: Log) -> None:
        die()

    Log.rename_dir = crashing_rename  # type: ignore[method-assign]
    Log.delete = crashing_delete  # type: ignore[method-assign]
    manager.replace_current_with_future_log(TOPIC_PARTITION)
    clock.advance(120)  # past file.delete.delay.ms: the deletion of the old log
    print("not killed", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
