"""Mutated golden frames against every decoder: only KafkaError may come out.

The seeds are the golden request frames (tests/protocol/golden/) and the responses the
capture harness's pretend broker gives to them. Mutations: byte flips, inserted and deleted
bytes, lengths and varints overwritten with absurd values, truncation. Whatever the bytes,
``decode_request``, ``decode_response`` (every API, every version) and the consumer-protocol
decoders must either decode or raise a ``KafkaError`` subclass, quickly (the per-test timeout
catches a hang), and without a huge allocation (tracemalloc watches the peak).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api import APIS, decode_request, decode_response, peek_request_header
from kafkaclone.protocol.messages.consumer_protocol import (
    decode_assignment,
    decode_subscription,
)
from tests.protocol.golden import capture

REQUESTS: list[bytes] = [path.read_bytes() for path in capture.fixture_paths()]


def _responses() -> list[tuple[int, int, bytes]]:
    """(api key, response version, response frame) the pretend broker gives each request."""
    state = capture.ClusterState("127.0.0.1", 9092)
    state.stopping.set()  # no long-poll waits
    out = []
    for frame in REQUESTS:
        key, version, _ = peek_request_header(frame)
        response = capture.respond(state, frame)
        if response is not None:
            out.append((key, 0 if capture.is_kip511_probe(frame) else version, response))
    return out


RESPONSES = _responses()
SEEDS: list[bytes] = REQUESTS + [frame for _key, _version, frame in RESPONSES]
DECODERS: list[tuple[int, int]] = [
    (key, version)
    for key, api in APIS.items()
    for version in range(api.min_version, api.max_version + 1)
]
# A decode of a frame of a few hundred bytes needs kilobytes; anything near this is a bug.
MAX_PEAK_BYTES = 8 * 1024 * 1024

FUZZ_SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module", autouse=True)
def _trace_allocations() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _guarded(decode: Callable[[], Any]) -> bool:
    """Run one decode; True if it decoded, False if it raised a KafkaError."""
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        decode()
        decoded = True
    except KafkaError:
        decoded = False
    _, peak = tracemalloc.get_traced_memory()
    assert peak - base < MAX_PEAK_BYTES, f"decoding allocated {peak - base} bytes"
    return decoded


def _feed_everything(data: bytes) -> None:
    _guarded(lambda: decode_request(data))
    for key, version in DECODERS:
        _guarded(lambda key=key, version=version: decode_response(key, version, data))
    _guarded(lambda: decode_subscription(data))
    _guarded(lambda: decode_assignment(data))


# --- mutations -----------------------------------------------------------------------------

ABSURD = [
    b"\x7f\xff", b"\xff\xff", b"\x80\x00", b"\xff\xfe",  # int16 lengths
    b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe",
    b"\x00\xff\xff\xff", b"\x0f\xff\xff\xff", b"\x00\x01\x00\x00",  # int32 lengths
    b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x80\x01",
    b"\xfe\xff\xff\xff\x07", b"\x80\x80\x04", b"\x81\x80\x80\x80\x00",  # uvarints
]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "absurd", "truncate"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "flip" and pos < len(data):
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif kind == "absurd":
            value = draw(st.sampled_from(ABSURD))
            data[pos:pos + len(value)] = value
        elif kind == "truncate":
            del data[pos:]
    return bytes(data)


# --- the tests -----------------------------------------------------------------------------


def test_seeds() -> None:
    assert len(REQUESTS) >= 40
    assert len(RESPONSES) >= 40
    for key, version, frame in RESPONSES:
        decode_response(key, version, frame)


@pytest.mark.timeout(90)
@FUZZ_SETTINGS
@given(mutated(REQUESTS))
def test_mutated_requests(data: bytes) -> None:
    _feed_everything(data)


@pytest.mark.timeout(90)
@FUZZ_SETTINGS
@given(mutated(SEEDS))
def test_mutated_responses(data: bytes) -> None:
    _feed_everything(data)


@pytest.mark.timeout(90)
@FUZZ_SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    _feed_everything(data)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("index", range(len(REQUESTS)),
                         ids=[p.stem for p in capture.fixture_paths()])
def test_request_truncated_at_every_cut(index: int) -> None:
    frame = REQUESTS[index]
    for cut in range(len(frame)):
        assert not _guarded(lambda cut=cut: decode_request(frame[:cut])), cut


@pytest.mark.timeout(60)
def test_responses_truncated_at_every_cut() -> None:
    for key, version, frame in RESPONSES:
        for cut in range(len(frame)):
            assert not _guarded(
                lambda key=key, version=version, cut=cut, frame=frame:
                    decode_response(key, version, frame[:cut])), (key, version, cut)
