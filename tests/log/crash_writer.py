"""The process the crash test kills: appends to a log through a LogManager until told to
stop (or for at most ``--seconds``), flushing and checkpointing now and then.

Every record's value is its own offset in ASCII, so a reader can tell that each offset
holds exactly what was written there.

    python -m tests.log.crash_writer <log-dir> <seed> [--seconds N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.records import build_record_batch

TOPIC_PARTITION = TopicPartition("crash", 0)
PROPS = {
    "log.segment.bytes": "65536",
    "log.index.interval.bytes": "512",
    "broker.id": "0",
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_dir")
    parser.add_argument("seed", type=int)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    clock = Clock()
    clock.advance(time.time())
    manager = LogManager(LogManagerConfig.from_props({"log.dirs": args.log_dir, **PROPS}),
                         clock=clock)
    manager.startup()
    log = manager.get_or_create_log(TOPIC_PARTITION)
    print("ready", log.log_end_offset, flush=True)
    deadline = time.monotonic() + args.seconds
    appends = 0
    while time.monotonic() < deadline:
        size = rng.choice((1, 10, 200, 3000))
        count = rng.randint(1, min(40, 30_000 // size))
        first = log.log_end_offset
        records = [
            (None, str(first + i).encode().ljust(size, b"."), None, int(clock.seconds() * 1000))
            for i in range(count)
        ]
        log.append(build_record_batch(records), leader_epoch=appends // 500)
        appends += 1
        clock.advance(0.001)
        if appends % 50 == 0:
            log.flush()
            manager.checkpoint_recovery_offsets()
        if appends % 80 == 0:
            log.update_high_watermark(log.log_end_offset)
            manager.checkpoint_high_watermarks()
    manager.shutdown()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
