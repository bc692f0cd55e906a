"""The column-wise record encoder against the one-record-at-a-time encoder of the
producer's ``send`` path: byte for byte, batch by batch."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kafkaclone.clients.records import ZERO, encode_record
from kafkaclone.protocol.records.columnar_builder import BinaryColumn, encode_records


def check(values: list[bytes | None], keys: list[bytes | None] | None,
          timestamps: list[int], batch_size: int) -> int:
    ts = np.array(timestamps, dtype=np.int64)
    encoded = encode_records(BinaryColumn.of(values),
                             None if keys is None else BinaryColumn.of(keys), ts, batch_size)
    starts = encoded.starts.tolist()
    assert starts[0] == 0 and starts[-1] == len(values)
    for batch in range(len(starts) - 1):
        first, end = starts[batch], starts[batch + 1]
        expected = b"".join(
            encode_record(i - first, timestamps[i] - timestamps[first],
                          None if keys is None else keys[i], values[i], ZERO)
            for i in range(first, end))
        assert encoded.batch_bytes(batch) == expected
        if end - first > 1:  # a batch of several records stays near batch_size
            assert len(expected) <= batch_size + max(
                len(encode_record(0, 0, None if keys is None else keys[i], values[i], ZERO))
                for i in range(first, end)) + 20
    return len(starts) - 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_variable_widths_nulls_and_timestamps(seed: int) -> None:
    rng = random.Random(seed)
    count = 3000
    values = [None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 5, 70, 200, 9000]))
              for _ in range(count)]
    keys = [None if rng.random() < 0.3 else b"k%d" % i for i in range(count)]
    timestamps = [1_700_000_000_000 + rng.randrange(-5, 100_000) for _ in range(count)]
    assert check(values, keys, timestamps, 16384) > 10


def test_fixed_widths_take_the_run_copy_and_offset_deltas_grow_past_one_byte() -> None:
    count = 20_000  # offset deltas of 1, 2 and 3 bytes in one batch
    values = [b"%08d" % i * 4 for i in range(count)]
    keys = [b"%04d" % (i % 10_000) for i in range(count)]
    assert check(values, keys, [1_700_000_000_000] * count, 1 << 22) == 1
    assert check(values, None, [1_700_000_000_000] * count, 1 << 22) == 1
    assert check(values, None, [1_700_000_000_000] * count, 5000) > 100


def test_one_record_larger_than_the_batch_size_is_a_batch_of_its_own() -> None:
    values = [b"a", b"x" * 50_000, b"b", b"c"]
    assert check(values, None, [5, 6, 7, 8], 1000) >= 2


def test_empty_and_all_null() -> None:
    assert check([], None, [], 1000) == 0
    assert check([None, None], [None, None], [1, 2], 1000) == 1
