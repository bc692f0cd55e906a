"""The floor Twisted sets on this machine: processes that do only the network part of a
broker's work, for the two request-path goals of issue 19 measured in the same run.

    .venv/bin/python benchmarks/reactor_floor.py [--rates 50,500,1000,5000] [--seconds 10]
        [--requests 200000] [--connections 8]

Issue 19 keeps Twisted as the network layer. What a request costs below everything a broker
does with it (decoding, the log, the purgatory, encoding) is set by Twisted's reactor and the
system calls: a wake-up from ``epoll``, a ``recv``, the protocol's ``dataReceived``, a
``send``. Two benchmarks measure that floor with the broker's work taken out:

1. ``relay``: the acks=all flow of ``bench_broker.py --only latency`` (RF 3, one 100-byte
   record per request, a consumer reading along) between three bare Twisted processes, a
   "leader" and two "followers", and a client process (the producer and the consumer).
   The followers long-poll the leader as Kafka's replica fetchers do. A record goes
   producer → leader (appended to a list, the parked follower fetches answered with it) →
   followers (appended, the next fetch sent at once) → leader (the high watermark, the
   minimum of the followers' positions, moves; the producer's answer and the consumer's
   parked fetch are sent) → producer and consumer (the consumer's next fetch). The same
   hops as Kafka's, with nothing in them: no request header, no codec, no file, no
   follower high watermark. Printed per rate: the three server processes' CPU per record
   (user + system from ``/proc``), the producer's answer latency and the end-to-end
   latency (p50 / p99), and the records sent and read.
2. ``answer``: one bare Twisted process answering every length-prefixed frame with a fixed
   answer that carries the request's correlation id, loaded exactly as ``bench_broker.py
   --only rate`` loads a broker (``--connections`` connections pipelining up to 32
   one-record Produce v8 requests); printed: its CPU per request.

The servers frame with a plain loop over the receive buffer and write with
:func:`kafkaclone.network.direct_write.write_sequence` (one ``sendmsg`` now, as the broker
does), the cheapest way to use Twisted found so far. The clients are Python too; their
CPU is not counted, but on two cores they share the machine with the servers, as
librdkafka's threads do with the brokers.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from twisted.internet import protocol

from kafkaclone.network.direct_write import direct_socket, write_sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proc_stat import cpu_seconds  # benchmarks/ is not a package

RECORD_SIZE = 100
"""The records' size, as ``bench_broker.py``'s (the first 8 bytes carry the send time)."""
FOLLOWERS = (2, 3)
HEADER = struct.Struct(">i")
OFFSET = struct.Struct(">q")
FOLLOWER_FETCH = struct.Struct(">bq")
"""A follower's fetch after its ``F``: its id and its next offset."""


# --- the processes --------------------------------------------------------------------------

class _Framed(protocol.Protocol):
    """Length-prefixed frames in, ``write_sequence`` out: what every process here shares."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._socket: Any = None

    def makeConnection(self, transport: Any) -> None:
        self._socket = direct_socket(transport)
        transport.setTcpNoDelay(True)  # as the broker's connections
        super().makeConnection(transport)  # type: ignore[no-untyped-call]

    def dataReceived(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        position = 0
        end = len(buffer)
        while end - position >= 4:
            stop = position + 4 + HEADER.unpack_from(buffer, position)[0]
            if stop > end:
                break
            self.frame_received(bytes(buffer[position + 4:stop]))
            position = stop
        del buffer[:position]

    def frame_received(self, frame: bytes) -> None:
        raise NotImplementedError

    def send(self, *parts: bytes) -> None:
        write_sequence(self.transport, self._socket,
                       [HEADER.pack(sum(len(p) for p in parts)), *parts])


class _Leader:
    """The leader's state: the log, the followers' positions, the parked requests."""

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.high_watermark = 0
        self.positions = dict.fromkeys(FOLLOWERS, 0)
        self.parked_fetches: dict[int, tuple[_Framed, int]] = {}
        self.unanswered: collections.deque[tuple[_Framed, int]] = collections.deque()
        self.parked_consumer: tuple[_Framed, int] | None = None

    def produce(self, connection: _Framed, record: bytes) -> None:
        self.log.append(record)
        self.unanswered.append((connection, len(self.log)))
        parked, self.parked_fetches = self.parked_fetches, {}
        for follower, offset in parked.values():
            follower.send(b"D", *self.log[offset:])

    def follower_fetch(self, connection: _Framed, follower: int, offset: int) -> None:
        self.positions[follower] = offset
        high_watermark = min(self.positions.values())
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            while self.unanswered and self.unanswered[0][1] <= high_watermark:
                producer, end = self.unanswered.popleft()
                producer.send(b"A", OFFSET.pack(end - 1))
            if self.parked_consumer is not None:
                consumer, position = self.parked_consumer
                self.parked_consumer = None
                self.consumer_fetch(consumer, position)
        if offset < len(self.log):
            connection.send(b"D", *self.log[offset:])
        else:
            self.parked_fetches[follower] = (connection, offset)

    def consumer_fetch(self, connection: _Framed, offset: int) -> None:
        if offset < self.high_watermark:
            connection.send(b"D", *self.log[offset:self.high_watermark])
        else:
            self.parked_consumer = (connection, offset)


class _LeaderConnection(_Framed):
    def __init__(self, leader: _Leader) -> None:
        super().__init__()
        self.leader = leader

    def frame_received(self, frame: bytes) -> None:
        kind = frame[0]
        if kind == 0x50:  # P: a record
            self.leader.produce(self, frame[1:])
        elif kind == 0x46:  # F: a follower's fetch
            follower, offset = FOLLOWER_FETCH.unpack_from(frame, 1)
            self.leader.follower_fetch(self, follower, offset)
        else:  # C: the consumer's fetch
            self.leader.consumer_fetch(self, OFFSET.unpack_from(frame, 1)[0])


class _Follower(_Framed):
    def __init__(self, follower: int) -> None:
        super().__init__()
        self.follower = follower
        self.log: list[bytes] = []

    def connectionMade(self) -> None:
        self.fetch()

    def fetch(self) -> None:
        self.send(b"F", FOLLOWER_FETCH.pack(self.follower, len(self.log)))

    def frame_received(self, frame: bytes) -> None:
        self.log.extend(frame[i:i + RECORD_SIZE] for i in range(1, len(frame), RECORD_SIZE))
        self.fetch()


class _Answerer(_Framed):
    """Answers every request with ``answer``, the request's correlation id in front."""

    def __init__(self, answer: bytes) -> None:
        super().__init__()
        self.answer = answer

    def frame_received(self, frame: bytes) -> None:
        self.send(frame[4:8], self.answer)


class _Producer(_Framed):
    """Sends one record at a time at the rate, times each answer."""

    def __init__(self, client: _Client) -> None:
        super().__init__()
        self.client = client
        self.sent: collections.deque[int] = collections.deque()

    def produce(self) -> None:
        now = time.perf_counter_ns()
        self.sent.append(now)
        self.send(b"P", OFFSET.pack(now), b"x" * (RECORD_SIZE - 8))

    def frame_received(self, frame: bytes) -> None:
        self.client.answered(self.sent.popleft())


class _Consumer(_Framed):
    def __init__(self, client: _Client) -> None:
        super().__init__()
        self.client = client
        self.offset = 0

    def connectionMade(self) -> None:
        self.fetch()

    def fetch(self) -> None:
        self.send(b"C", OFFSET.pack(self.offset))

    def frame_received(self, frame: bytes) -> None:
        for i in range(1, len(frame), RECORD_SIZE):
            self.client.read(OFFSET.unpack_from(frame, i)[0])
            self.offset += 1
        self.fetch()


class _Client:
    """The producer and the consumer, in one process as librdkafka's are."""

    def __init__(self, reactor: Any, rate: int, seconds: float) -> None:
        self.reactor = reactor
        self.rate = rate
        self.total = int(rate * seconds)
        self.producer = _Producer(self)
        self.consumer = _Consumer(self)
        self.answers: list[float] = []
        self.end_to_end: list[float] = []
        self.started = 0.0
        self.produced = 0
        self.measuring = False

    def start(self) -> None:
        self.started = time.perf_counter()
        self.measuring = True
        print("go", flush=True)
        self.tick()

    def tick(self) -> None:
        interval = 1.0 / self.rate
        now = time.perf_counter()
        while self.produced < self.total and self.started + self.produced * interval <= now:
            self.producer.produce()
            self.produced += 1
        if self.produced < self.total:
            self.reactor.callLater(max(0.0, self.started + self.produced * interval
                                       - time.perf_counter()), self.tick)
        else:
            self.reactor.callLater(2.0, self.finish)  # the last answers, bounded

    def answered(self, sent_ns: int) -> None:
        if self.measuring:
            self.answers.append((time.perf_counter_ns() - sent_ns) / 1e6)

    def read(self, sent_ns: int) -> None:
        if self.measuring:
            self.end_to_end.append((time.perf_counter_ns() - sent_ns) / 1e6)
            if len(self.end_to_end) == self.total:
                self.finish()

    def finish(self) -> None:
        if not self.measuring:
            return
        self.measuring = False
        print(json.dumps({"sent": self.produced, "answers": self.answers,
                          "end_to_end": self.end_to_end,
                          "elapsed": time.perf_counter() - self.started}), flush=True)
        self.reactor.stop()


class _Factory(protocol.ClientFactory):
    """Builds each connection with ``build`` (server and client side alike)."""

    def __init__(self, build: Callable[[], _Framed]) -> None:
        self.build = build

    def buildProtocol(self, addr: Any) -> _Framed:
        return self.build()


class _Parent(protocol.Protocol):
    """The process's standard input: when the benchmark goes, so does the process."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    def connectionLost(self, reason: Any = None) -> None:
        if self.reactor.running:
            self.reactor.stop()


def serve(role: str, arguments: list[str]) -> None:
    """Run one process of a benchmark (``python reactor_floor.py --serve ROLE ...``)."""
    from twisted.internet import epollreactor
    epollreactor.install()  # type: ignore[no-untyped-call]
    from twisted.internet import reactor as installed
    from twisted.internet import stdio
    reactor: Any = installed

    if role == "leader":
        leader = _Leader()
        listening = reactor.listenTCP(0, _Factory(lambda: _LeaderConnection(leader)),
                                      interface="127.0.0.1")
        print(listening.getHost().port, flush=True)
    elif role == "answer":
        answer = bytes.fromhex(arguments[0])
        listening = reactor.listenTCP(0, _Factory(lambda: _Answerer(answer)),
                                      interface="127.0.0.1")
        print(listening.getHost().port, flush=True)
    elif role == "follower":
        follower = _Follower(int(arguments[1]))
        reactor.connectTCP("127.0.0.1", int(arguments[0]), _Factory(lambda: follower))
        print("fetching", flush=True)
    else:  # client
        port, rate, seconds = int(arguments[0]), int(arguments[1]), float(arguments[2])
        client = _Client(reactor, rate, seconds)
        reactor.connectTCP("127.0.0.1", port, _Factory(lambda: client.producer))
        reactor.connectTCP("127.0.0.1", port, _Factory(lambda: client.consumer))
        # The first record connects everything; measuring starts a second after it.
        reactor.callLater(0.5, client.producer.produce)
        reactor.callLater(1.5, client.start)
    # Every process stops by itself: at the latest after 15 minutes; the servers when the
    # benchmark closes their standard input (it goes, or is killed).
    reactor.callLater(900, reactor.stop)
    if role != "client":
        stdio.StandardIO(_Parent(reactor))  # type: ignore[no-untyped-call]
    reactor.run()


# --- the benchmark side ---------------------------------------------------------------------

@contextmanager
def _process(role: str, *arguments: object) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, __file__, "--serve", role,
                                *map(str, arguments)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with process:  # closes its pipes
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"a floor process exited (status {process.wait()})")
    return line.strip()


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """p50, p99 and the maximum of ``samples`` (sorted in place); NaN for none."""
    if not samples:
        return float("nan"), float("nan"), float("nan")
    samples.sort()
    return (statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            samples[-1])


class Relay(NamedTuple):
    rate: int
    cpu_us_per_record: float
    """The leader's and both followers' CPU (user + system) per record sent."""
    answer_p50: float
    answer_p99: float
    end_to_end_p50: float
    end_to_end_p99: float
    sent: int
    read: int


def relay(rate: int, seconds: float) -> Relay:
    """The acks=all flow at ``rate`` records/s for ``seconds`` between bare Twisted
    processes."""
    with _process("leader") as leader:
        port = int(_line(leader))
        with _process("follower", port, FOLLOWERS[0]) as first, \
                _process("follower", port, FOLLOWERS[1]) as second:
            _line(first)
            _line(second)
            with _process("client", port, rate, seconds) as client:
                pids = [leader.pid, first.pid, second.pid]
                if _line(client) != "go":
                    raise RuntimeError("the floor client did not start")
                before = cpu_seconds(pids)
                result = json.loads(_line(client))
                used = cpu_seconds(pids) - before
    answer = percentiles(result["answers"])[:2]
    end_to_end = percentiles(result["end_to_end"])[:2]
    return Relay(rate, used / result["sent"] * 1e6, *answer, *end_to_end, result["sent"],
                 len(result["end_to_end"]))


@contextmanager
def answerer(answer: bytes) -> Iterator[tuple[int, int]]:
    """A bare Twisted process answering every frame with ``answer`` (after the request's
    correlation id): its port and pid."""
    with _process("answer", answer.hex()) as process:
        yield int(_line(process)), process.pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--rates", default="50,500,1000,5000")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1:])
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
          flush=True)
    for rate in map(int, args.rates.split(",")):
        print(format_relay(relay(rate, args.seconds)), flush=True)
    print(format_answer(*answer_floor(args.requests, args.connections)), flush=True)


def format_relay(result: Relay) -> str:
    return (f"bare Twisted relay, RF 3 acks=all, {result.rate:,} rec/s: "
            f"{result.cpu_us_per_record:.0f} µs CPU per record (3 processes); answer p50 "
            f"{result.answer_p50:.2f} p99 {result.answer_p99:.2f} ms; end to end p50 "
            f"{result.end_to_end_p50:.2f} p99 {result.end_to_end_p99:.2f} ms "
            f"({result.read:,} of {result.sent:,} read)")


def answer_floor(requests: int, connections: int) -> tuple[int, float, float]:
    """``bench_broker.py --only rate``'s load against :func:`answerer`: the requests
    answered, the answerer's CPU seconds, the wall seconds."""
    # Imported here, not above: every floor process imports this module, and the broker's
    # modules (request_path's) would add over a second to each one's start.
    import request_path

    from kafkaclone.protocol import api
    from kafkaclone.protocol.api_keys import ApiKey

    # A Produce v8 answer as the broker gives one to these requests (one partition, no
    # error), less its length and correlation id.
    response = api.APIS[ApiKey.PRODUCE].response
    structs = response.structs
    body = response.cls(throttle_time_ms=0, responses=[structs["TopicProduceResponse"](
        name="rate", partition_responses=[structs["PartitionProduceResponse"](
            index=0, error_code=0, base_offset=123_456, log_append_time_ms=-1,
            log_start_offset=0, record_errors=[], error_message=None)])])
    answer = api.encode_response(ApiKey.PRODUCE, request_path.PRODUCE_VERSION, 0, body)
    with answerer(answer[4:]) as (port, pid):
        return request_path.rate_run("127.0.0.1", port, pid, requests, connections)


def format_answer(answered: int, used: float, elapsed: float) -> str:
    return (f"bare Twisted answerer, {answered:,} pipelined requests in {elapsed:.2f} s: "
            f"{used / answered * 1e6:.1f} µs CPU per request, {answered / used:,.0f} per "
            f"CPU s")


if __name__ == "__main__":
    main()
