"""Storage engine benchmark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_log.py [--size-mb 1024] [--dir /tmp] [--flush-every 16]

Measures, on a fresh log in a temporary directory under ``--dir``:

1. append of 16 KiB batches (page cache only; the log never fsyncs unless asked), beside a
   bare ``pwrite`` loop of the same bytes in the same run (the ceiling this machine allows);
2. append with ``flush()`` (fsync) every N batches;
3. sequential reads of 1 MiB chunks from the middle of the log to its end;
4. offset lookup and timestamp lookup latency (random targets);
5. recovery time of the whole log, unflushed, as after a crash (page cache warm).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from twisted.internet.task import Clock

from kafkaclone.log.config import LogConfig
from kafkaclone.log.log import Log
from kafkaclone.protocol.records import build_record_batch, iter_batches

MIB = 1024 * 1024


def batch_of(size: int, timestamp: int, records: int = 16) -> bytes:
    """One uncompressed batch of ``records`` records totalling about ``size`` bytes."""
    value = b"x" * (size // records - 16)
    return build_record_batch([(b"key", value, None, timestamp) for _ in range(records)])


def report(name: str, seconds: float, nbytes: int, operations: int) -> None:
    print(f"{name:<44} {nbytes / seconds / 1e9:7.2f} GB/s  "
          f"{seconds / operations * 1e6:8.1f} us/op  ({operations} ops, {nbytes / MIB:.0f} MiB, "
          f"{seconds:.2f} s)")


def latency(name: str, samples: list[float]) -> None:
    samples.sort()
    p50 = statistics.median(samples) * 1e6
    p99 = samples[int(len(samples) * 0.99)] * 1e6
    mean = statistics.fmean(samples) * 1e6
    print(f"{name:<44} p50 {p50:6.1f} us  p99 {p99:6.1f} us  mean {mean:6.1f} us "
          f"({len(samples)} lookups)")


def fill(log: Log, batch: bytes, count: int, clock: Clock,
         flush_every: int = 0) -> float:
    start = time.perf_counter()
    for i in range(count):
        log.append(batch, leader_epoch=0)
        if flush_every and (i + 1) % flush_every == 0:
            log.flush()
    return time.perf_counter() - start


def timed(function: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024, help="log size (default 1 GiB)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to put the log")
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--flush-every", type=int, default=16,
                        help="batches between fsyncs in the flushing run")
    parser.add_argument("--lookups", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="append runs; the best is reported (the first run in a fresh "
                        "VM pays for first-touch memory, and a shared VM adds +-30%% noise)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    clock = Clock()
    clock.advance(time.time())
    now = int(clock.seconds() * 1000)
    config = LogConfig()  # Kafka's defaults: 1 GiB segments, an index entry per 4 KiB
    batch = batch_of(args.batch_kb * 1024, now)
    count = args.size_mb * MIB // len(batch)
    print(f"log in {root}: {count} batches of {len(batch)} bytes, "
          f"{count * len(batch) / MIB:.0f} MiB")
    try:
        # 1. append to the page cache (best of --repeat runs; the last log is kept)
        best = float("inf")
        log = Log(root / "append-0", config, clock=clock)
        for run in range(args.repeat):
            if run:
                log.close()
                shutil.rmtree(root / "append-0")
                log = Log(root / "append-0", config, clock=clock)
            best = min(best, fill(log, batch, count, clock))
        report(f"append {args.batch_kb} KiB batches", best, count * len(batch), count)
        appended = best
        # The reference from the same run: the same bytes written by a bare pwrite loop to
        # a new file (what the kernel and the page cache allow here; no validation, offsets,
        # index or segment). The goal (>= 1 GB/s) was set on a machine where this loop
        # reached 1.7 GB/s.
        def pwrite_all() -> None:
            path = root / "pwrite"
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                position = 0
                for _ in range(count):
                    position += os.pwrite(fd, batch, position)
            finally:
                os.close(fd)
                path.unlink()

        best = min(timed(pwrite_all, args.repeat))
        report("  reference: bare pwrite loop, same bytes", best, count * len(batch), count)
        print(f"  append / bare pwrite: {best / appended:.2f} of its rate")
        # What the broker hands the log: a writable buffer per request (the socket server's
        # bytearray frame, its one copy out of the receive buffer), whose offsets the log
        # rewrites in place instead of copying the batch first. Made before the clock starts.
        best = float("inf")
        for run in range(args.repeat):
            frames = [bytearray(batch) for _ in range(count)]
            writable_log = Log(root / f"writable-{run}", config, clock=clock)
            start = time.perf_counter()
            for frame in frames:
                writable_log.append(frame, leader_epoch=0)
            best = min(best, time.perf_counter() - start)
            writable_log.close()
            del frames
            shutil.rmtree(root / f"writable-{run}")
        report(f"append {args.batch_kb} KiB batches, writable", best, count * len(batch),
               count)
        preallocated = Log(root / "prealloc-0", LogConfig.from_props({"preallocate": "true"}),
                           clock=clock)
        prealloc_count = min(count, 1024 * MIB // len(batch) // 4)
        seconds = fill(preallocated, batch, prealloc_count, clock)
        report(f"append {args.batch_kb} KiB batches, preallocate=true", seconds,
               prealloc_count * len(batch), prealloc_count)
        preallocated.close()
        shutil.rmtree(root / "prealloc-0")

        # 2. append with a flush every N batches (a smaller log: fsync is slow)
        flushed = Log(root / "flushed-0", config, clock=clock)
        flushed_count = max(count // 8, args.flush_every)
        seconds = fill(flushed, batch, flushed_count, clock, flush_every=args.flush_every)
        report(f"append, flush every {args.flush_every} batches", seconds,
               flushed_count * len(batch), flushed_count)
        flushed.close()

        # 3. sequential 1 MiB reads from the middle to the end
        end = log.log_end_offset
        offset = end // 2
        read_bytes = 0
        reads = 0
        start = time.perf_counter()
        while offset < end:
            fetched = log.read(offset, MIB)
            records = fetched.records
            read_bytes += len(records)
            reads += 1
            offset = _next_offset(records)
        seconds = time.perf_counter() - start
        report("sequential 1 MiB reads from the middle", seconds, read_bytes, reads)

        # 4. lookups
        rng = random.Random(1)
        segment = log.active_segment
        targets = [rng.randrange(segment.base_offset, end) for _ in range(args.lookups)]
        it = iter(targets)
        latency("offset index lookup (bisect)", timed(
            lambda: segment.offset_index.lookup(next(it)), args.lookups))
        it = iter(targets)
        latency("offset -> batch position (index + scan)", timed(
            lambda: segment.translate_offset(next(it)), args.lookups))
        timestamps = [now + rng.randrange(0, 1000) for _ in range(args.lookups)]
        stamped = Log(root / "timestamps-0", config, clock=clock)
        ts_batches = min(count, 20000)
        for i in range(ts_batches):
            stamped.append(batch_of(args.batch_kb * 1024, now + i * 1000 // ts_batches),
                           leader_epoch=0)
        tt = iter(timestamps)
        latency("timestamp lookup (time index + scan)", timed(
            lambda: stamped.fetch_offset_by_timestamp(next(tt)), args.lookups))
        stamped.close()

        # 5. recovery of the whole log, unflushed (as after kill -9: page cache warm)
        log.close()
        start = time.perf_counter()
        recovered = Log(root / "append-0", config, clock=clock, recovery_point=0,
                        had_clean_shutdown=False)
        seconds = time.perf_counter() - start
        assert recovered.log_end_offset == end
        report("recovery of the unflushed log", seconds, recovered.size, count)
        recovered.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _next_offset(records: memoryview) -> int:
    """The offset after the last batch in ``records`` (a consumer's next fetch offset)."""
    last = -1
    for batch in iter_batches(records, allow_partial_tail=False):
        last = batch.last_offset
    return last + 1


if __name__ == "__main__":
    main()
