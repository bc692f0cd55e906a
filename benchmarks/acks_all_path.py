"""The leader's side of the acks=all round trip, in process: CPU time per record.

    .venv/bin/python benchmarks/acks_all_path.py [--records 2000] [--rounds 5] [--profile]
        [--sort tottime]

A ReplicaManager leading one partition (replicas 1, 2, 3, all in the ISR) on a temporary log
directory, on a ``task.Clock``, behind four connections (:class:`KafkaServerProtocol` on a
``StringTransport``, with request timing, as :mod:`request_path` has): a producer, the two
followers (Fetch v12, an incremental session each) and a consumer (Fetch v11, no session).
For each record, in the order a quiet cluster sees them (``bench_broker.py --only latency``
at a low rate, one record per request):

1. the producer's one-record Produce v8 with acks=-1: appended, the followers' parked fetches
   answered with it, the Produce parked for the followers;
2. follower 2's next fetch, one offset further: its position recorded, parked again;
3. follower 3's: the high watermark moves, which answers the Produce and the consumer's
   parked fetch; parked again;
4. the consumer's next fetch: parked.

That is four requests and four answers per record: the work a leader does for every record
of a producer that sends one at a time. What is printed is the process CPU time per record
(``time.process_time``, best of ``--rounds``; the frames are encoded before the clock
starts), and the same divided by the eight steps. It leaves out the followers' own side
(decoding the answer, appending, the next request) and the socket system calls, which
``bench_broker.py --only latency`` includes. ``--profile`` runs one round under cProfile
and prints the hottest functions (``--sort cumulative`` for the call tree's view).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from fetch_path import CONSUMER_VERSION, FOLLOWER_VERSION, TOPIC, WAIT_MS, _Broker, _fetch_frame
from request_path import _count_frames, framed, produce_frame
from twisted.internet.testing import StringTransport

from kafkaclone.network.request_metrics import RequestMetrics
from kafkaclone.network.socket_server import KafkaServerProtocol, RequestQueue
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

FOLLOWERS = (2, 3)
STEPS_PER_RECORD = 8
"""Four requests and four answers."""


class _Connection:
    """One client's connection to the leader."""

    def __init__(self, broker: _Broker, metrics: RequestMetrics, name: str) -> None:
        self.protocol = KafkaServerProtocol(broker.handler, 100 << 20, name,
                                            request_queue=RequestQueue(),
                                            request_metrics=metrics, clock=broker.clock)
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)

    def send(self, frame: bytes) -> None:
        self.protocol.dataReceived(frame)

    def answers(self) -> int:
        return _count_frames(self.transport)

    def last_answer(self) -> bytes:
        data = self.transport.value()
        self.transport.clear()
        return data[4:]


def _session(connection: _Connection, follower: int) -> int:
    """A full fetch at epoch 0 from offset 0 (answered at once): the session's id."""
    connection.send(framed(_fetch_frame(FOLLOWER_VERSION, follower, {0: 0}, 0, 0, 0)))
    _, answer = api.decode_response(ApiKey.FETCH, FOLLOWER_VERSION, connection.last_answer())
    if answer.error_code != 0 or answer.session_id == 0:
        raise RuntimeError(f"no fetch session: {answer}")
    session_id: int = answer.session_id
    return session_id


def run(directory: Path, records: int, rounds: int,
        profiler: cProfile.Profile | None = None) -> float:
    """CPU seconds per record, the best of ``rounds`` of ``records`` each."""
    broker = _Broker(directory, 1)
    try:
        metrics = RequestMetrics()
        producer = _Connection(broker, metrics, "producer")
        consumer = _Connection(broker, metrics, "consumer")
        followers = {f: _Connection(broker, metrics, f"replica-{f}") for f in FOLLOWERS}
        sessions = {f: _session(connection, f) for f, connection in followers.items()}
        # Each follower's session is at epoch 0 after its full fetch; its fetch for the record
        # at offset n (asking for n + 1) is its (n + 2)th incremental one.
        offset = 0
        for follower, connection in followers.items():  # parked at the log end
            connection.send(framed(_fetch_frame(FOLLOWER_VERSION, follower, {}, sessions[follower],
                                                1, WAIT_MS)))
        consumer.send(framed(_fetch_frame(CONSUMER_VERSION, -1, {0: 0}, 0, -1, WAIT_MS,
                                           leader_epoch=-1)))
        best = float("inf")
        for _ in range(rounds):
            frames = []
            for i in range(records):
                step = [produce_frame(offset + i, topic=TOPIC, acks=-1)]
                for follower in FOLLOWERS:
                    step.append(framed(_fetch_frame(
                        FOLLOWER_VERSION, follower, {0: offset + i + 1}, sessions[follower],
                        offset + i + 2, WAIT_MS)))
                step.append(framed(_fetch_frame(CONSUMER_VERSION, -1, {0: offset + i + 1}, 0,
                                                 -1, WAIT_MS, leader_epoch=-1)))
                frames.append(step)
            if profiler is not None:
                profiler.enable()
            started = time.process_time()
            for step in frames:
                producer.send(step[0])
                for connection, frame in zip(followers.values(), step[1:3], strict=True):
                    connection.send(frame)
                consumer.send(step[3])
            elapsed = time.process_time() - started
            if profiler is not None:
                profiler.disable()
            answered = {name: connection.answers() for name, connection in (
                ("producer", producer), ("consumer", consumer),
                *((f"replica-{f}", c) for f, c in followers.items()))}
            if set(answered.values()) != {records}:
                raise RuntimeError(f"answers per connection for {records} records: {answered}")
            offset += records
            best = min(best, elapsed / records)
        return best
    finally:
        broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="tottime",
                        help="the profile's order (pstats keys: tottime, cumulative, ...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-acks-all-") as directory:
        seconds = run(Path(directory), args.records, args.rounds)
    print(f"in process, the leader's side of acks=all, one record per Produce: "
          f"{seconds * 1e6:.1f} µs CPU per record, {seconds * 1e6 / STEPS_PER_RECORD:.1f} µs "
          f"per request or answer (best of {args.rounds} x {args.records:,})", flush=True)
    if args.profile:
        profiler = cProfile.Profile()
        with tempfile.TemporaryDirectory(prefix="bench-acks-all-") as directory:
            run(Path(directory), args.records, 1, profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(35)
        print(out.getvalue())


if __name__ == "__main__":
    main()
