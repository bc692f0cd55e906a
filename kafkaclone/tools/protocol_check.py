"""A self-check of the protocol layer on this machine: the main job until the broker lands.

    python -m kafkaclone.tools.protocol_check

It encodes and decodes every version of every declared API's request and response, builds
a record batch with every codec and reads it back, then prints the compatibility matrix.
Exits non-zero, naming what failed, if anything does.
"""

from __future__ import annotations

import sys
import time

from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.records import Codec, RecordBatch, build_record_batch, iter_batches
from kafkaclone.tools.protocol_matrix import render_matrix


def check_messages() -> tuple[int, list[str]]:
    checked = 0
    failures: list[str] = []
    for target in APIS.values():
        for message in (target.request, target.response):
            for version in range(message.min_version, message.max_version + 1):
                value = message.cls()
                wire = message.encode(value, version)
                again = message.encode(message.decode_exact(wire, version), version)
                if again != wire:
                    failures.append(f"{message.name} v{version} does not round-trip")
                checked += 1
    return checked, failures


def check_codecs() -> tuple[int, list[str]]:
    records = [(f"key-{i}".encode(), f"value-{i}".encode() * 10, [("h", b"v")])
               for i in range(100)]
    failures: list[str] = []
    for codec in Codec:
        batch_bytes = build_record_batch(records, base_offset=42, codec=codec)
        (batch,) = iter_batches(batch_bytes, allow_partial_tail=False)
        if not isinstance(batch, RecordBatch):
            failures.append(f"{codec.name} batch was not read as a v2 record batch")
            continue
        batch.ensure_valid()
        decoded = [(r.key, r.value) for r in batch.records()]
        if decoded != [(k, v) for k, v, _ in records] or batch.base_offset != 42:
            failures.append(f"{codec.name} batch does not read back")
    return len(Codec), failures


def main() -> int:
    start = time.perf_counter()
    messages, message_failures = check_messages()
    codecs, codec_failures = check_codecs()
    print(render_matrix())
    print()
    failures = message_failures + codec_failures
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    status = "FAILED" if failures else "ok"
    print(f"protocol check {status}: {len(APIS)} APIs, {messages} message versions "
          f"round-tripped, {codecs} codecs ({', '.join(c.name.lower() for c in Codec)}) "
          f"built and read back, in {time.perf_counter() - start:.2f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
