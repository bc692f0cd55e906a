"""A follower's fetch over many idle partitions, in process: CPU time per partition per pass.

    .venv/bin/python benchmarks/fetch_path.py [--partitions 3000] [--rounds 5] [--profile]

A ReplicaManager leading ``--partitions`` partitions (replicas 1, 2, 3, all in the ISR) on a
temporary log directory, on a ``task.Clock``; broker 2's replica fetcher's Fetch v12
requests (raw frames, encoded once) go through the broker's request dispatcher and the Fetch
handler, as they would from a socket. What is measured, each the best of ``--rounds``:

- **full**: a full fetch at epoch 0 that opens a session (every partition read and
  answered; ``max_wait_ms`` 0);
- **incremental, arrival**: an incremental fetch naming nothing, all partitions idle (fetch
  offset at the log end): the pass that reads the session's partitions, records the
  follower's position and parks the request in the purgatory (``replica.fetch.wait.max.ms``,
  500 ms);
- **incremental, expiry**: the same request's expiry (the clock moved 500 ms), up to its
  answer;
- **consumer, full**: a consumer's Fetch v11 of every partition without a session, at the
  high watermark, ``max_wait_ms`` 0.

Each pass is one block of the broker's reactor; what is printed is CPU µs per partition
(``time.process_time``: the machine's load shows less in it than in wall time, but not not
at all). ``--profile`` runs an incremental arrival and expiry under cProfile and prints the
hottest functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogManager
from kafkaclone.network.socket_server import ConnectionInfo, Response, response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkaclone.server.request_handler import RequestHandler

TOPIC = "idle"
LEADER, FOLLOWER = 1, 2
REPLICAS = (1, 2, 3)
FETCH = api.APIS[ApiKey.FETCH].request
FOLLOWER_VERSION, CONSUMER_VERSION = 12, 11
WAIT_MS = 500
CONNECTION = ConnectionInfo("bench-fetch", "127.0.0.1", 50000)


class _MetadataCache:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def partition_state(self, topic: str, partition: int) -> object | None:
        return object() if topic == TOPIC and partition < self.partitions else None

    def is_alive(self, broker_id: int) -> bool:
        return True


class _TopicConfigs:
    async def get_topic_configs(self, topics: Any) -> dict[str, dict[str, str]]:
        return {t: {} for t in topics}


class _Broker:
    """What the Fetch handler uses of a broker."""

    broker_id = LEADER
    authorizer = None

    def __init__(self, log_dir: Path, partitions: int) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.config = KafkaConfig({"zookeeper.connect": "127.0.0.1:2181"})
        self.log_manager = LogManager(LogManagerConfig.from_props(
            {"log.dirs": str(log_dir), "broker.id": str(LEADER)}), clock=self.clock)
        self.log_manager.startup()
        self.metadata_cache: Any = _MetadataCache(partitions)
        self.replica_manager = ReplicaManager(
            LEADER, self.log_manager, _TopicConfigs(), clock=self.clock,
            config=ReplicaManagerConfig(replica_lag_time_max_ms=30_000),
            metadata_cache=self.metadata_cache)
        self.replica_manager.startup()
        states = [LeaderAndIsrPartitionState(TOPIC, p, controller_epoch=1, leader=LEADER,
                                             leader_epoch=0, isr=REPLICAS, zk_version=0,
                                             replicas=REPLICAS, is_new=True)
                  for p in range(partitions)]
        applied = Deferred.fromCoroutine(
            self.replica_manager.become_leader_or_follower(2, 1, states))
        deadline = time.monotonic() + 600
        while not applied.called and time.monotonic() < deadline:
            self.clock.advance(0)  # the LeaderAndIsr's slices, one reactor turn each
        result = _settled(applied)
        if result.error_code != 0:
            raise RuntimeError(f"the partitions did not become leaders: {result}")
        self.handler = RequestHandler(self)

    @property
    def reactor(self) -> Clock:
        return self.clock

    def produce_one(self, partitions: range) -> None:
        """One record in each of ``partitions`` (so a read has something to find)."""
        batch = build_record_batch([(None, b"x" * 100, None, int(time.time() * 1000))])
        for p in partitions:
            partition = self.replica_manager.get_partition(_tp(p))
            assert partition is not None
            partition.append_records_to_leader(batch)

    def close(self) -> None:
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


def _tp(partition: int) -> Any:
    from kafkaclone.common.topic_partition import TopicPartition
    return TopicPartition(TOPIC, partition)


def _settled(d: Deferred[Any]) -> Any:
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    if not outcome:
        raise RuntimeError("the request is still waiting")
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def _fetch_frame(version: int, replica_id: int, offsets: dict[int, int], session_id: int,
                 epoch: int, max_wait_ms: int, leader_epoch: int = 0) -> bytes:
    structs = FETCH.structs
    partitions = [structs["FetchPartition"](
        partition=p, current_leader_epoch=leader_epoch, fetch_offset=offset,
        last_fetched_epoch=leader_epoch if replica_id >= 0 else -1, log_start_offset=0,
        partition_max_bytes=1 << 20) for p, offset in offsets.items()]
    body = FETCH(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1,
                 max_bytes=10 << 20, isolation_level=0, session_id=session_id,
                 session_epoch=epoch,
                 topics=[structs["FetchTopic"](topic=TOPIC, partitions=partitions)]
                 if partitions else [],
                 forgotten_topics_data=[], rack_id="")
    return api.encode_request(ApiKey.FETCH, version, 7, "bench-fetch", body)


def _answer(version: int, data: Response | None) -> Any:
    assert data is not None
    _, response = api.decode_response(ApiKey.FETCH, version, response_bytes(data))
    return response


def _timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.process_time()
    result = function()
    return time.process_time() - started, result


def measure(partitions: int, rounds: int,
            profiler: cProfile.Profile | None = None) -> dict[str, float]:
    """CPU µs per partition of each pass (the best of ``rounds``)."""
    with tempfile.TemporaryDirectory(prefix="bench-fetch-path-") as directory:
        broker = _Broker(Path(directory), partitions)
        try:
            broker.produce_one(range(partitions))
            offsets = dict.fromkeys(range(partitions), 1)
            # Both followers caught up: the high watermark is at the log end.
            for follower in (3, FOLLOWER):
                frame = _fetch_frame(FOLLOWER_VERSION, follower, offsets, 0, -1, 0)
                _settled(broker.handler.dispatch(CONNECTION, bytearray(frame)))
            best: dict[str, float] = {}

            def keep(name: str, seconds: float) -> None:
                best[name] = min(best.get(name, seconds), seconds)

            for _ in range(rounds):
                # A full fetch at epoch 0: opens a session.
                frame = _fetch_frame(FOLLOWER_VERSION, FOLLOWER, offsets, 0, 0, 0)
                seconds, d = _timed(lambda frame=frame: broker.handler.dispatch(
                    CONNECTION, bytearray(frame)))
                full = _answer(FOLLOWER_VERSION, _settled(d))
                keep("full", seconds)
                session_id = full.session_id
                if session_id == 0 or full.error_code != 0:
                    raise RuntimeError(f"no session: {full.error_code}")
                # Incremental fetches naming nothing, every partition idle.
                for epoch in (1, 2):
                    frame = _fetch_frame(FOLLOWER_VERSION, FOLLOWER, {}, session_id, epoch,
                                         WAIT_MS)
                    if profiler is not None:
                        profiler.enable()
                    arrival, d = _timed(lambda frame=frame: broker.handler.dispatch(
                        CONNECTION, bytearray(frame)))
                    if d.called:
                        raise RuntimeError("an idle incremental fetch was answered at once")
                    expiry, _ = _timed(lambda: broker.clock.advance(WAIT_MS / 1000.0))
                    if profiler is not None:
                        profiler.disable()
                    answer = _answer(FOLLOWER_VERSION, _settled(d))
                    if answer.error_code != 0 or answer.responses:
                        raise RuntimeError(f"unexpected answer: {answer}")
                    keep("incremental, arrival", arrival)
                    keep("incremental, expiry", expiry)
                frame = _fetch_frame(CONSUMER_VERSION, -1, offsets, 0, -1, 0, leader_epoch=-1)
                seconds, d = _timed(lambda frame=frame: broker.handler.dispatch(
                    CONNECTION, bytearray(frame)))
                _answer(CONSUMER_VERSION, _settled(d))
                keep("consumer, full", seconds)
            return {name: seconds / partitions * 1e6 for name, seconds in best.items()}
        finally:
            broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    results = measure(args.partitions, args.rounds)
    print(f"{args.partitions:,} idle partitions led, follower fetch v{FOLLOWER_VERSION}: "
          f"CPU µs per partition per pass (best of {args.rounds})")
    for name, us in results.items():
        print(f"  {name:<22} {us:7.2f} µs   ({us * args.partitions / 1000:7.1f} ms a pass)")
    if args.profile:
        profiler = cProfile.Profile()
        measure(args.partitions, 1, profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
        print(out.getvalue())


if __name__ == "__main__":
    main()
