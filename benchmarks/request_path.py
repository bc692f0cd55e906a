"""The broker's per-request cost in process: no sockets, no other process, CPU time only.

    .venv/bin/python benchmarks/request_path.py [--requests 5000] [--rounds 20] [--profile]

One-record Produce v8 requests with acks=1 (raw frames, encoded once with the project's
protocol encoders) fed one at a time into a :class:`KafkaServerProtocol` on a
``StringTransport``, through the request timing (:class:`RequestMetrics`), the broker's
request dispatcher and its Produce handler into a :class:`ReplicaManager` leading one
partition on a temporary log directory; the responses are read from the transport. What it
prints is the process CPU time per request, the best of ``--rounds``: the broker's work on
the request path minus the reactor's poll and the socket system calls (``bench_broker.py
--only rate`` measures those too, against a broker process). ``--profile`` runs one more
round under cProfile and prints its hottest functions.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from proc_stat import cpu_seconds  # benchmarks/ is on the path
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.network.request_metrics import RequestMetrics
from kafkaclone.network.socket_server import KafkaServerProtocol, RequestQueue
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.replica_manager import ReplicaManager
from kafkaclone.server.request_handler import RequestHandler

TOPIC = "rate"
BROKER_ID = 1
PRODUCE_VERSION = 8
VALUE = b"x" * 100


def produce_frame(correlation_id: int, topic: str = TOPIC, partition: int = 0,
                  acks: int = 1, value: bytes = VALUE) -> bytes:
    """A Produce v8 request of one record, with its 4-byte length prefix."""
    request = api.APIS[ApiKey.PRODUCE].request
    structs = request.structs
    body = request.cls(transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        structs["TopicProduceData"](name=topic, partition_data=[
            structs["PartitionProduceData"](
                index=partition,
                records=build_record_batch([(None, value, None, int(time.time() * 1000))]))])])
    frame = api.encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id,
                               "bench-rate", body)
    return framed(frame)


def framed(frame: bytes) -> bytes:
    """A request frame with its 4-byte length prefix, as a socket delivers it."""
    return len(frame).to_bytes(4, "big") + frame


class _MetadataCache:
    """The one partition the cluster has."""

    def partition_state(self, topic: str, partition: int) -> object | None:
        return object() if (topic, partition) == (TOPIC, 0) else None


class _TopicConfigs:
    async def get_topic_configs(self, topics: Any) -> dict[str, dict[str, str]]:
        return {t: {} for t in topics}


class _Broker:
    """What the Produce handler uses of a broker."""

    broker_id = BROKER_ID
    authorizer = None

    def __init__(self, log_dir: Path) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.config = KafkaConfig({"zookeeper.connect": "127.0.0.1:2181"})
        self.log_manager = LogManager(LogManagerConfig.from_props(
            {"log.dirs": str(log_dir), "broker.id": str(BROKER_ID)}), clock=self.clock)
        self.log_manager.startup()
        self.metadata_cache: Any = _MetadataCache()
        self.replica_manager = ReplicaManager(BROKER_ID, self.log_manager, _TopicConfigs(),
                                              clock=self.clock)
        self.replica_manager.startup()
        state = LeaderAndIsrPartitionState(TOPIC, 0, controller_epoch=1, leader=BROKER_ID,
                                           leader_epoch=0, isr=(BROKER_ID,), zk_version=0,
                                           replicas=(BROKER_ID,), is_new=True)
        done: list[Any] = []
        Deferred.fromCoroutine(self.replica_manager.become_leader_or_follower(
            2, 1, [state])).addBoth(done.append)
        if not done or isinstance(done[0], Failure):
            raise RuntimeError(f"the partition did not become leader: {done}")
        if done[0].error_code != 0:
            raise RuntimeError(f"the partition did not become leader: {done[0]}")

    @property
    def reactor(self) -> Clock:
        return self.clock

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def produce_round(broker: _Broker, requests: int) -> float:
    """CPU seconds for ``requests`` one-record acks=1 Produce requests through a new
    connection (checks every request was answered)."""
    frames = [produce_frame(i) for i in range(64)]
    metrics = RequestMetrics()
    protocol = KafkaServerProtocol(RequestHandler(broker), 100 << 20, "bench-1",
                                   request_queue=RequestQueue(), request_metrics=metrics,
                                   clock=broker.clock)
    transport = StringTransport()
    protocol.makeConnection(transport)
    answered = 0
    started = time.process_time()
    for i in range(requests):
        protocol.dataReceived(frames[i & 63])
        if i & 1023 == 1023:
            answered += _count_frames(transport)
    elapsed = time.process_time() - started
    answered += _count_frames(transport)
    protocol.connectionLost()
    if answered != requests:
        raise RuntimeError(f"{answered} of {requests} requests answered")
    return elapsed


def _count_frames(transport: StringTransport) -> int:
    data = transport.value()
    transport.clear()
    count = position = 0
    while position < len(data):
        position += 4 + int.from_bytes(data[position:position + 4], "big")
        count += 1
    return count


def produce_us_per_request(requests: int = 5_000, rounds: int = 20) -> float:
    """The best of ``rounds``: CPU µs per one-record acks=1 Produce v8 request in process."""
    with tempfile.TemporaryDirectory(prefix="bench-request-path-") as directory:
        broker = _Broker(Path(directory))
        try:
            produce_round(broker, 2_000)  # warm up
            return min(produce_round(broker, requests) for _ in range(rounds)) / requests * 1e6
        finally:
            broker.close()


def profile(requests: int, top: int = 30) -> str:
    """One round under cProfile: the hottest functions by their own time."""
    with tempfile.TemporaryDirectory(prefix="bench-request-path-") as directory:
        broker = _Broker(Path(directory))
        try:
            produce_round(broker, 2_000)
            profiler = cProfile.Profile()
            profiler.enable()
            produce_round(broker, requests)
            profiler.disable()
        finally:
            broker.close()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    us = produce_us_per_request(args.requests, args.rounds)
    print(f"in process, one-record Produce v8 acks=1: {us:.1f} µs CPU per request "
          f"(best of {args.rounds} x {args.requests:,})", flush=True)
    if args.profile:
        print(profile(args.requests))



# -- the same requests over sockets (bench_broker.py --only rate, reactor_floor.py) ---------

RATE_WINDOW = 32
"""Unanswered requests per connection in the rate benchmark (librdkafka's default
max.in.flight is 1,000,000; the broker reads at most 100 ahead of its answers)."""
RATE_SECONDS = 120.0


def rate_run(host: str, port: int, pid: int, requests: int, connections: int,
             partitions: int = 6, measured: Callable[[], ContextManager[object]] = nullcontext
             ) -> tuple[int, float, float]:
    """``requests`` one-record acks=1 Produce requests to the server at ``host:port`` (pid
    ``pid``), over ``connections`` pipelining connections spread over ``partitions``, after
    a warm-up round of 1,000 per connection (connections, the partitions' first segments):
    the requests answered, the server's CPU seconds and the wall seconds, the measured part
    inside ``measured()`` (a profiler, say)."""
    frames = [produce_frame(c, TOPIC, c % partitions) for c in range(connections)]
    counts = [requests // connections + (c < requests % connections)
              for c in range(connections)]
    asyncio.run(rate_load(host, port, frames, [1_000] * connections))
    with measured():
        before, started = cpu_seconds([pid]), time.perf_counter()
        answered = asyncio.run(rate_load(host, port, frames, counts))
        return answered, cpu_seconds([pid]) - before, time.perf_counter() - started


async def rate_load(host: str, port: int, frames: list[bytes], counts: list[int]) -> int:
    """Run one pipelining connection per frame, each until ``counts`` of its requests are
    answered (or :data:`RATE_SECONDS`); the requests answered."""
    deadline = time.monotonic() + RATE_SECONDS
    answered = await asyncio.gather(*(_load_connection(host, port, frame, count, deadline)
                                      for frame, count in zip(frames, counts, strict=True)))
    return sum(answered)


async def _load_connection(host: str, port: int, frame: bytes, count: int,
                           deadline: float) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    sent = answered = 0
    buffer = bytearray()
    last = b""
    try:
        while answered < count:
            window = min(RATE_WINDOW - (sent - answered), count - sent)
            if window > 0:
                writer.write(frame * window)
                sent += window
            try:
                data = await asyncio.wait_for(reader.read(1 << 16),
                                              max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                print(f"    (a connection stopped after {RATE_SECONDS} s, {answered:,} "
                      f"answered)", flush=True)
                break
            if not data:
                raise RuntimeError("the broker closed the connection")
            buffer += data
            position = 0
            while len(buffer) - position >= 4:
                end = position + 4 + int.from_bytes(buffer[position:position + 4], "big")
                if end > len(buffer):
                    break
                if answered == 0 or answered == count - 1:
                    last = bytes(buffer[position + 4:end])
                    _check_produce_answer(last)
                answered += 1
                position = end
            del buffer[:position]
    finally:
        writer.close()
        await writer.wait_closed()
    return answered


def _check_produce_answer(frame: bytes) -> None:
    _, response = api.decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame)
    errors = {p.error_code for t in response.responses for p in t.partition_responses}
    if errors != {0}:
        raise RuntimeError(f"produce answered with errors {errors}")


if __name__ == "__main__":
    main()
