"""Cost of the message format conversions for clients older than 0.11: a script that
prints numbers (not a test).

    python benchmarks/bench_conversion.py [--seconds 1.0]

1. down-conversion (Fetch v0-3): 1 MiB-ish of magic 2 batches of 500 records, 100-byte
   values, converted to magic 0 and to magic 1, per codec, in records/s of the messages
   that come out (the answer is capped at the size read, as in Kafka, so compressed sets
   whose legacy form is larger stop early);
2. up-conversion (Produce v0-2): magic 1 message sets of 500 messages to one magic 2
   batch, per codec, in records/s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from kafkaclone.log.conversion import down_convert, up_convert
from kafkaclone.protocol.records import (
    Codec,
    build_legacy_message_set,
    build_record_batch,
    iter_legacy_records,
)

RECORDS_PER_BATCH = 500
BATCHES = 20
VALUE = b"v" * 100
T0 = 1_700_000_000_000
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def timed(fn: Callable[[], object], seconds: float) -> tuple[int, float]:
    """Run ``fn`` repeatedly for about ``seconds``; return (calls, elapsed)."""
    fn()  # warm up
    calls = 0
    started = time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        fn()
        calls += 1
        elapsed = time.perf_counter() - started
    return calls, elapsed


def stored_batches(codec: Codec) -> memoryview:
    return memoryview(b"".join(
        build_record_batch([(b"key%d" % i, VALUE, None, T0 + i)
                            for i in range(start, start + RECORDS_PER_BATCH)],
                           base_offset=start, codec=codec)
        for start in range(0, RECORDS_PER_BATCH * BATCHES, RECORDS_PER_BATCH)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()

    print("| codec | down to magic 0 records/s | down to magic 1 records/s | "
          "up from magic 1 records/s |")
    print("|---|---:|---:|---:|")
    for codec in CODECS:
        batches = stored_batches(codec)
        down: list[str] = []
        for magic in (0, 1):
            converted = down_convert(batches, magic, 0)
            count = sum(1 for _ in iter_legacy_records(converted))
            calls, elapsed = timed(partial(down_convert, batches, magic, 0), args.seconds)
            down.append(f"{count * calls / elapsed:,.0f}")
        message_set = memoryview(build_legacy_message_set(
            [(b"key%d" % i, VALUE, T0 + i) for i in range(RECORDS_PER_BATCH)],
            magic=1, codec=codec))
        calls, elapsed = timed(partial(up_convert, message_set), args.seconds)
        up = f"{RECORDS_PER_BATCH * calls / elapsed:,.0f}"
        print(f"| {codec.name.lower()} | {down[0]} | {down[1]} | {up} |")


if __name__ == "__main__":
    main()
