"""benchmarks/reactor_floor.py, the floor Twisted sets under the broker's request path: its
relay carries every record through the acks=all hops, and its answerer answers exactly as
the broker does (numbers are the benchmark's business, not this test's)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import reactor_floor  # benchmarks/ is not a package


def test_the_relay_answers_and_delivers_every_record() -> None:
    result = reactor_floor.relay(200, 1.0)
    assert result.sent == 200
    assert result.read == 200
    assert result.cpu_us_per_record > 0
    assert 0 < result.answer_p50 <= result.answer_p99
    assert 0 < result.end_to_end_p50 <= result.end_to_end_p99
    assert not math.isnan(result.end_to_end_p99)


def test_the_answerer_takes_the_rate_benchmarks_load() -> None:
    # answer_floor checks the first and the last answer of each connection decode as a
    # Produce answer with no error (bench_broker's own check).
    answered, used, elapsed = reactor_floor.answer_floor(4_000, 4)
    assert answered == 4_000
    assert used > 0 and elapsed > 0
