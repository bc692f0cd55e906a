"""Protocol hot-path benchmark: prints numbers, asserts nothing (not part of the test suite).

    .venv/bin/python benchmarks/bench_protocol.py [--seconds 2]

1. Decode + validate a 1 MiB Produce v9 request made of 16 KiB record batches: frame
   decode, then per batch the framing checks and the CRC32C (what the broker does before it
   appends; it never inflates records). Goal: CRC-bound, >= 1 GB/s.
2. Encode a Fetch v12 response carrying 1 MiB of record batches.
3. Encode a small Metadata v9 response (3 brokers, 1 topic of 6 partitions): per-request cost.
4. Decode a small Produce v9 request (one 1 KiB batch): per-request cost.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import crc32c

from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch, iter_batches

MiB = 1 << 20


def measure(fn: Callable[[], object], seconds: float) -> tuple[float, int]:
    """Seconds per call (best of several rounds) and the calls made."""
    fn()
    calls = 0
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        batch_calls = 0
        start = time.perf_counter()
        while batch_calls < 20 or time.perf_counter() - start < 0.05:
            fn()
            batch_calls += 1
        best = min(best, (time.perf_counter() - start) / batch_calls)
        calls += batch_calls
    return best, calls


def batches_of(total: int, batch_size: int) -> bytes:
    record_value = b"x" * 100
    per_batch = max(1, (batch_size - 61) // (len(record_value) + 10))
    one = build_record_batch([(None, record_value)] * per_batch, base_timestamp=1_700_000_000_000)
    return one * (total // len(one))


def produce_request(records: bytes) -> bytes:
    produce = api.APIS[ApiKey.PRODUCE].request
    body = produce(acks=-1, timeout_ms=30000, topic_data=[
        produce.structs["TopicProduceData"](name="bench", partition_data=[
            produce.structs["PartitionProduceData"](index=0, records=records)])])
    return api.encode_request(ApiKey.PRODUCE, 9, 1, "bench", body)


def decode_and_validate(frame: bytes) -> int:
    request = api.decode_request(frame)
    count = 0
    for topic in request.body.topic_data:
        for partition in topic.partition_data:
            for batch in iter_batches(partition.records, allow_partial_tail=False):
                batch.ensure_valid()
                count += 1
    return count


def fetch_response(records: bytes) -> object:
    fetch = api.APIS[ApiKey.FETCH].response
    return fetch(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        fetch.structs["FetchableTopicResponse"](topic="bench", partitions=[
            fetch.structs["PartitionData"](partition_index=0, high_watermark=1 << 20,
                                           last_stable_offset=1 << 20, log_start_offset=0,
                                           records=records)])])


def metadata_response() -> object:
    metadata = api.APIS[ApiKey.METADATA].response
    brokers = [metadata.structs["MetadataResponseBroker"](node_id=i, host="127.0.0.1",
                                                          port=9092 + i) for i in range(3)]
    partitions = [metadata.structs["MetadataResponsePartition"](
        partition_index=p, leader_id=p % 3, leader_epoch=0, replica_nodes=[0, 1, 2],
        isr_nodes=[0, 1, 2]) for p in range(6)]
    topic = metadata.structs["MetadataResponseTopic"](name="demo", partitions=partitions)
    return metadata(brokers=brokers, cluster_id="kafkaclone-bench", controller_id=0,
                    topics=[topic])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()
    seconds = args.seconds

    print(f"crc32c backend: hardware={crc32c.hardware_based}")
    records = batches_of(MiB, 16 * 1024)
    frame = produce_request(records)
    n_batches = decode_and_validate(frame)
    per_call, calls = measure(lambda: decode_and_validate(frame), seconds)
    print(f"produce decode+validate  {len(frame) / MiB:.2f} MiB, {n_batches} batches of 16 KiB: "
          f"{per_call * 1e3:.3f} ms/request, {len(frame) / per_call / 1e9:.2f} GB/s "
          f"({calls} runs)")
    crc_only, _ = measure(lambda: crc32c.crc32c(records), seconds)
    print(f"  (CRC32C alone over the same bytes: {len(records) / crc_only / 1e9:.2f} GB/s)")

    response = fetch_response(records)
    per_call, calls = measure(
        lambda: api.encode_response(ApiKey.FETCH, 12, 1, response), seconds)
    print(f"fetch v12 response encode, 1 MiB of batches: {per_call * 1e3:.3f} ms, "
          f"{len(records) / per_call / 1e9:.2f} GB/s ({calls} runs)")

    meta = metadata_response()
    per_call, calls = measure(lambda: api.encode_response(ApiKey.METADATA, 9, 1, meta), seconds)
    print(f"metadata v9 response encode (3 brokers, 6 partitions): {per_call * 1e6:.1f} us "
          f"({calls} runs)")

    small = produce_request(batches_of(1024, 1024))
    per_call, calls = measure(lambda: decode_and_validate(small), seconds)
    print(f"produce v9 decode+validate, one 1 KiB batch: {per_call * 1e6:.1f} us ({calls} runs)")


if __name__ == "__main__":
    main()
