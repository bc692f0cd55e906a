"""Throughput of the record formats: a script that prints numbers (not a test).

    python benchmarks/bench_records.py [--seconds 1.0]

1. iterate + CRC-validate 1 MiB made of 16 KiB batches (the broker's produce path:
   framing checks and one CRC32C per batch, no per-record work), in GB/s;
2. build batches (records/s and MB/s) per codec;
3. decode records (records/s) per codec, decompression included.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from kafkaclone.protocol.records import (
    Codec,
    RecordBatch,
    build_record_batch,
    iter_batches,
)

BATCH_TARGET = 16 * 1024
BUFFER_SIZE = 1024 * 1024


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


def sample_records(count: int, value_size: int) -> list[tuple[bytes, bytes, None, int]]:
    return [
        (b"key-%08d" % i, (b"value %d " % i * value_size)[:value_size], None, 1_700_000_000_000 + i)
        for i in range(count)
    ]


def one_mib_of_16k_batches() -> bytes:
    """64 uncompressed batches of just under 16 KiB each."""
    count = 200
    while len(build_record_batch(sample_records(count, 90))) > BATCH_TARGET:
        count -= 1
    records = sample_records(count, 90)
    return b"".join(
        build_record_batch(records, base_offset=i * count)
        for i in range(BUFFER_SIZE // BATCH_TARGET)
    )


def bench_validate(seconds: float) -> None:
    buf = bytearray(one_mib_of_16k_batches())

    def validate() -> int:
        count = 0
        for batch in iter_batches(buf, allow_partial_tail=False):
            batch.ensure_valid()
            count += 1
        return count

    batches = validate()
    calls, elapsed = timed(validate, seconds)
    per_call = elapsed / calls
    print(
        f"iterate + CRC-validate: {len(buf) / 1024:.0f} KiB in {batches} batches: "
        f"{len(buf) * calls / elapsed / 1e9:.2f} GB/s ({per_call * 1e6:.0f} us per MiB, "
        f"{per_call / batches * 1e6:.2f} us per batch)"
    )

    def iterate_only() -> None:
        for _ in iter_batches(buf, allow_partial_tail=False):
            pass

    calls, elapsed = timed(iterate_only, seconds)
    print(f"iterate only (framing):  {len(buf) * calls / elapsed / 1e9:.2f} GB/s")

    def rewrite() -> None:
        for offset, batch in enumerate(iter_batches(buf, allow_partial_tail=False)):
            assert isinstance(batch, RecordBatch)
            batch.ensure_valid()
            batch.set_base_offset(offset * 1000)
            batch.set_partition_leader_epoch(7)

    calls, elapsed = timed(rewrite, seconds)
    print(
        "validate + set_base_offset + set_partition_leader_epoch: "
        f"{len(buf) * calls / elapsed / 1e9:.2f} GB/s"
    )


def bench_codecs(seconds: float) -> None:
    records = sample_records(500, 100)
    print()
    columns = ("batch bytes", "build rec/s", "build MB/s", "decode rec/s")
    print(f"{'codec':8} {columns[0]:>12} {columns[1]:>12} {columns[2]:>11} {columns[3]:>13}")
    for codec in Codec:
        built = build_record_batch(records, codec=codec)
        raw_size = len(build_record_batch(records))

        calls, elapsed = timed(partial(build_record_batch, records, codec=codec), seconds)
        build_rate = calls * len(records) / elapsed
        build_mb = calls * raw_size / elapsed / 1e6

        calls, elapsed = timed(partial(decode_all, RecordBatch(built)), seconds)
        decode_rate = calls * len(records) / elapsed
        print(
            f"{codec.name:8} {len(built):>12} {build_rate:>12,.0f} {build_mb:>11.1f} "
            f"{decode_rate:>13,.0f}"
        )


def decode_all(batch: RecordBatch) -> None:
    for _ in batch.records():
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    bench_validate(args.seconds)
    bench_codecs(args.seconds)


if __name__ == "__main__":
    main()
