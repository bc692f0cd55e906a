"""Log cleaner benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_cleaner.py [--records 2000000] [--live-keys-percent 1]
        [--produce-seconds 5] [--codec none|lz4|...] [--dirty-logs 4]

1. ``clean``: a compacted log of ``--records`` 100-byte records (10-byte key, 80-byte
   value) in batches of 160 (16 KiB, a producer's batch), keys drawn from
   ``records * live%`` keys, 64 MiB segments, is cleaned once by one cleaner thread's
   ``Cleaner`` (offset map, rewrite, swap): records of dirty log per second.
2. ``produce``: the broker's produce path on its owner thread (``Log.append`` of 16 KiB
   producer batches to another log) for ``--produce-seconds``, first with no cleaner, then
   while a cleaner thread, set up as a broker's (``use_process``: the rewriting in a
   process of its own), cleans ``--dirty-logs`` more logs like the first, then without
   again; the ratio is the rate with the cleaner over the mean of the two without.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.cleaner import CleanerConfig, LogCleaner
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.protocol.records.compression import Codec

RECORDS_PER_BATCH = 160
DISTINCT_BATCHES = 256


def make_batches(live_keys: int, codec: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    batches = []
    for b in range(DISTINCT_BATCHES):
        records = [(b"key-%06d" % rng.randrange(live_keys), b"v%07d" % b + b"x" * 72, None, now)
                   for _ in range(RECORDS_PER_BATCH)]
        batches.append(build_record_batch(records, codec=codec))
    return batches


def fill(log: Log, batches: list[bytes], records: int) -> None:
    for i in range(records // RECORDS_PER_BATCH):
        log.append(batches[i % len(batches)], leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--live-keys-percent", type=float, default=1.0)
    parser.add_argument("--produce-seconds", type=float, default=5.0)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--dirty-logs", type=int, default=4)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the logs go (default tmpfs: the disk's write-back "
                        "would otherwise slow whichever produce run comes later)")
    args = parser.parse_args()
    codec = Codec[args.codec.upper()]
    live_keys = max(int(args.records * args.live_keys_percent / 100), 1)
    base = Path(tempfile.mkdtemp(prefix="bench-cleaner-", dir=args.dir))
    clock = Clock()
    clock.advance(time.time())
    compact = LogConfig.from_props({"cleanup.policy": "compact",
                                    "segment.bytes": str(64 * 1024 * 1024),
                                    "min.cleanable.dirty.ratio": "0.01"})
    manager = LogManager(LogManagerConfig.from_props({"log.dir": str(base), "broker.id": "1"}),
                         clock=clock, topic_configs={"compacted": compact})
    manager.startup()
    try:
        batches = make_batches(live_keys, codec, seed=1)
        tp = TopicPartition("compacted", 0)
        log = manager.get_or_create_log(tp)
        started = time.perf_counter()
        fill(log, batches, args.records)
        size = log.size
        print(f"filled {args.records:,} records ({size / 2**20:,.0f} MiB, {live_keys:,} "
              f"keys, codec {args.codec}) in {time.perf_counter() - started:.1f} s")

        cleaner = LogCleaner(CleanerConfig(num_threads=1), manager, clock)
        thread = cleaner.threads[0]
        started = time.perf_counter()
        assert thread.clean_filthiest_log()
        elapsed = time.perf_counter() - started
        print(f"clean: {args.records / elapsed:,.0f} records/s of dirty log "
              f"({size / elapsed / 2**20:,.0f} MiB/s), {elapsed:.2f} s, "
              f"{size / 2**20:,.0f} MiB -> {log.size / 2**20:,.1f} MiB")

        # Produce with and without the cleaner, same run.
        target = manager.get_or_create_log(TopicPartition("produce", 0))
        produce_batches = make_batches(1_000_000, Codec.NONE, seed=2)

        def produce_rate(seconds: float) -> float:
            # Start each run on an empty log (and the old files gone), so that no run
            # pays for the memory or disk the previous one filled.
            target.truncate_fully_and_start_at(0)
            clock.advance(3600)
            count = 0
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                for batch in produce_batches[:32]:
                    target.append(batch, leader_epoch=0)
                count += 32 * RECORDS_PER_BATCH
            return count / seconds

        without = produce_rate(args.produce_seconds)
        # Dirty logs enough to keep a cleaner busy through the whole second run.
        for n in range(args.dirty_logs):
            fill(manager.get_or_create_log(TopicPartition("compacted", n + 1)), batches,
                 args.records)
        process_cleaner = LogCleaner(CleanerConfig(num_threads=1, use_process=True),
                                     manager, clock).threads[0]
        busy = threading.Event()
        busy.set()
        cleaning_seconds = 0.0
        cleanings = 0

        def clean_loop() -> None:
            # Owner calls run inline here: the swaps race nothing in this benchmark (the
            # producer writes another log), and a broker's would be short reactor calls.
            nonlocal cleaning_seconds, cleanings
            while busy.is_set():
                started = time.perf_counter()
                if process_cleaner.clean_filthiest_log():
                    cleanings += 1
                    cleaning_seconds += time.perf_counter() - started
                else:
                    time.sleep(0.01)

        cleaner_thread = threading.Thread(target=clean_loop, daemon=True)
        cleaner_thread.start()
        time.sleep(1.0)  # the cleaner process starts (spawn, imports)
        started = time.perf_counter()
        with_cleaner = produce_rate(args.produce_seconds)
        window = time.perf_counter() - started
        busy.clear()
        cleaner_thread.join()
        process_cleaner.close()
        again = produce_rate(args.produce_seconds)
        baseline = (without + again) / 2
        print(f"produce: {without:,.0f} then {again:,.0f} records/s without the cleaner, "
              f"{with_cleaner:,.0f} with it in between: ratio {with_cleaner / baseline:.2f} "
              f"({cleanings} cleanings of "
              f"{args.records:,} records, {cleaning_seconds:.1f} s of cleaning around a "
              f"{window:.1f} s window)")
        print(f"load: {os.getloadavg()}")
    finally:
        manager.shutdown()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
