"""The producer's incremental record encoding makes the same bytes as the protocol
layer's build_record_batch, for every codec."""

from __future__ import annotations

import random

import pytest

from kafkaclone.clients.records import encode_headers, encode_record, finish_batch, varint
from kafkaclone.protocol.records import Codec, build_record_batch, iter_batches
from kafkaclone.protocol.types import write_varlong


@pytest.mark.parametrize("codec", list(Codec))
def test_same_bytes_as_build_record_batch(codec: Codec) -> None:
    rng = random.Random(7)
    records = []
    for i in range(300):
        key = None if i % 5 == 0 else rng.randbytes(rng.choice([0, 3, 200, 20000]))
        value = None if i % 17 == 0 else rng.randbytes(rng.choice([0, 1, 100, 70000]))
        headers = [] if i % 3 else [("h", b"v"), ("empty", None), ("ü", b"x" * 300)]
        records.append((key, value, headers, 1_700_000_000_000 + rng.randint(-90000, 90000)))
    base = records[0][3]
    buf = bytearray()
    for index, (key, value, headers, ts) in enumerate(records):
        buf += encode_record(index, ts - base, key, value, encode_headers(headers))
    built = finish_batch(buf, len(records), base, max(r[3] for r in records), codec)
    assert built == build_record_batch(records, codec=codec, base_timestamp=base)
    (batch,) = iter_batches(built, allow_partial_tail=False)
    batch.ensure_valid()
    assert [r.value for r in batch.records()] == [r[1] for r in records]


@pytest.mark.parametrize("n", [-(2**40), -65, -2, -1, 0, 1, 63, 64, 16383, 16384, 2**40])
def test_varints(n: int) -> None:
    expected = bytearray()
    write_varlong(expected, n)
    assert varint(n) == bytes(expected)
