"""A broker applying a controller failover's LeaderAndIsr requests, in process.

    .venv/bin/python benchmarks/lair_apply.py [--partitions 3000] [--profile] [--log-file F]

Broker 2 of three hosts one topic of ``--partitions`` partitions at RF 3 (partition p's
replicas are (1, 2, 3) turned by p, the first replica leading) on a temporary log
directory, with the broker's LogManager I/O threads (``num.io.threads``, 8), replica
fetchers whose connections never answer, and INFO logging to a file as a broker logs. On
the real reactor, as the broker runs it, it applies what a new controller sends after
broker 1 (the old controller) died:

- **create**: the topic's first LeaderAndIsr (every log created; not the failover, for
  reference);
- **(a) startup**: the replica state machine's startup request, every partition at the
  epochs the broker has (all answered STALE_CONTROLLER_EPOCH, nothing changes);
- **(b) ISR removals**: every partition loses replica 1 from its ISR, leader epoch + 1: a
  third stays led by broker 2 (a new epoch, same leader), a third stays followed (leader
  3), and the third broker 1 led is left without a leader (-1) until its election;
- **(c) elections**: that third gets broker 2 as leader, leader epoch + 1 again.

For each: wall time, CPU time of the process (the I/O threads' included), µs per partition
of each, and the reactor's longest stretch without a turn (a 5 ms LoopingCall records the
largest gap between its calls while the request is applied: what the data path would
wait). ``--profile`` runs the reactor thread's work under cProfile and prints the hottest
functions; for py-spy, run this under ``py-spy record``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall

from kafkaclone.cluster.partition import LeaderAndIsrPartitionState
from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.manager import LogIoThreads, LogManager
from kafkaclone.server import heap
from kafkaclone.server.metadata_cache import LiveBroker
from kafkaclone.server.replica_fetcher import BrokerEndPoint, ReplicaFetcherConfig
from kafkaclone.server.replica_manager import ReplicaManager, ReplicaManagerConfig

TOPIC = "lair"
BROKER = 2
DEAD = 1
NO_LEADER = -1
IO_THREADS = 8
CONTROLLER_EPOCH = 1
HEARTBEAT_S = 0.005
reactor: Any = global_reactor


class _MetadataCache:
    """The brokers alive (what the ReplicaManager asks of a metadata cache)."""

    def __init__(self) -> None:
        self.alive = {1, 2, 3}

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.alive

    def alive_endpoints(self, listener: str) -> list[tuple[LiveBroker, EndPoint]]:
        result = []
        for broker_id in sorted(self.alive):
            endpoint = EndPoint(listener, SecurityProtocol.PLAINTEXT, "127.0.0.1",
                                9000 + broker_id)
            result.append((LiveBroker(broker_id, None, {listener: endpoint}), endpoint))
        return result


class _SilentConnection:
    """A connection to a leader that never answers (the fetchers wait; nothing else)."""

    def __init__(self) -> None:
        self._waiting: list[Deferred[Any]] = []

    def send(self, api_key: int, api_version: int, body: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self._waiting.append(d)
        return d

    def close(self) -> None:
        for d in self._waiting:
            if not d.called:
                d.errback(ConnectionError("closed"))
        self._waiting.clear()


class _TopicConfigs:
    async def get_topic_configs(self, topics: Any) -> dict[str, dict[str, str]]:
        return {t: {} for t in topics}


def _replicas(p: int) -> tuple[int, ...]:
    order = (1, 2, 3)
    return order[p % 3:] + order[:p % 3]


def _state(p: int, leader: int, epoch: int, isr: tuple[int, ...], zk_version: int,
           is_new: bool = False) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(TOPIC, p, CONTROLLER_EPOCH, leader, epoch, isr,
                                      zk_version, _replicas(p), is_new=is_new)


def failover_requests(partitions: int) -> list[tuple[str, list[LeaderAndIsrPartitionState]]]:
    """The create, then (a), (b), (c) of the module docstring."""
    create = [_state(p, _replicas(p)[0], 0, _replicas(p), 0, is_new=True)
              for p in range(partitions)]
    startup = [_state(p, _replicas(p)[0], 0, _replicas(p), 0) for p in range(partitions)]
    removals = []
    elections = []
    for p in range(partitions):
        replicas = _replicas(p)
        isr = tuple(r for r in replicas if r != DEAD)
        if replicas[0] == DEAD:
            removals.append(_state(p, NO_LEADER, 1, isr, 1))
            elections.append(_state(p, isr[0], 2, isr, 2))
        else:
            removals.append(_state(p, replicas[0], 1, isr, 1))
    return [("create", create), ("(a) startup", startup), ("(b) ISR removals", removals),
            ("(c) elections", elections)]


class _Broker:
    def __init__(self, log_dir: Path, log_file: Path) -> None:
        handler = logging.FileHandler(log_file, mode="w")
        handler.setFormatter(logging.Formatter(
            "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.INFO)
        self.io_threads = LogIoThreads(IO_THREADS, reactor.callFromThread, "kafka-io-bench")
        self.scheduler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-scheduler")
        self.log_manager = LogManager(LogManagerConfig.from_props(
            {"log.dirs": str(log_dir), "broker.id": str(BROKER)}), clock=reactor,
            io_threads=self.io_threads, background=self._in_thread)
        self.log_manager.startup()
        self.metadata_cache = _MetadataCache()
        self.replica_manager = ReplicaManager(
            BROKER, self.log_manager, _TopicConfigs(), clock=reactor,
            config=ReplicaManagerConfig(),
            metadata_cache=self.metadata_cache,  # type: ignore[arg-type]
            fetcher_config=ReplicaFetcherConfig(broker_id=BROKER),
            fetcher_connection_factory=self._connect)
        self.replica_manager.startup()

    def _in_thread(self, work: Callable[[], None], done: Callable[[], None]) -> None:
        """The periodic checkpoint writes on a scheduler thread, as the broker runs them."""
        self.scheduler.submit(work).add_done_callback(
            lambda _: reactor.callFromThread(done))

    def _connect(self, source: BrokerEndPoint, client_id: str) -> _SilentConnection:
        return _SilentConnection()

    async def close(self) -> None:
        await self.replica_manager.shutdown()
        self.io_threads.shutdown()
        self.scheduler.shutdown(wait=True)
        self.log_manager.shutdown()


async def _apply(broker: _Broker, states: Sequence[LeaderAndIsrPartitionState],
                 profiler: cProfile.Profile | None) -> dict[str, float]:
    gaps = [0.0]
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        gaps[0] = max(gaps[0], now - last[0])
        last[0] = now

    heartbeat = LoopingCall(beat)
    heartbeat.start(HEARTBEAT_S, now=True)
    wall, cpu = time.monotonic(), time.process_time()
    if profiler is not None:
        profiler.enable()
    result = await broker.replica_manager.become_leader_or_follower(
        0, CONTROLLER_EPOCH, states)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    beat()
    heartbeat.stop()
    errors: dict[int, int] = {}
    for code in result.partition_errors.values():
        errors[code] = errors.get(code, 0) + 1
    return {"wall": wall, "cpu": cpu, "gap": gaps[0], "errors": errors}  # type: ignore[dict-item]


Row = tuple[str, int, dict[str, Any]]


async def measure(partitions: int, log_file: Path,
                  profiler: cProfile.Profile | None = None) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-lair-") as directory:
        broker = _Broker(Path(directory), log_file)
        try:
            for name, states in failover_requests(partitions):
                if name == "(b) ISR removals":
                    broker.metadata_cache.alive.discard(DEAD)
                measured = await _apply(broker, states,
                                        profiler if name != "create" else None)
                rows.append((name, len(states), measured))
        finally:
            await broker.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=3_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--log-file", type=Path, default=Path("/tmp/bench-lair-apply.log"))
    parser.add_argument("--plain-gc", action="store_true",
                        help="without kafkaclone.server.heap (the broker process enables it)")
    args = parser.parse_args()
    if not args.plain_gc:
        heap.enable()
    profiler = cProfile.Profile() if args.profile else None
    outcome: list[Any] = []

    async def run() -> None:
        try:
            outcome.append(await measure(args.partitions, args.log_file, profiler))
        finally:
            reactor.stop()

    reactor.callWhenRunning(lambda: ensureDeferred(run()).addErrback(outcome.append))
    reactor.run()
    if not outcome or not isinstance(outcome[0], list):
        raise SystemExit(f"failed: {outcome}")
    print(f"broker {BROKER} of 3, {args.partitions:,} partitions at RF 3, "
          f"{IO_THREADS} I/O threads")
    print(f"  {'request':<18} {'partitions':>10} {'wall s':>8} {'CPU s':>8} "
          f"{'wall µs/p':>10} {'CPU µs/p':>9} {'max block ms':>13}  errors")
    for name, count, m in outcome[0]:
        print(f"  {name:<18} {count:>10,} {m['wall']:8.2f} {m['cpu']:8.2f} "
              f"{m['wall'] / count * 1e6:10.0f} {m['cpu'] / count * 1e6:9.0f} "
              f"{m['gap'] * 1000:13.0f}  {m['errors']}")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(35)
        profiler.dump_stats(str(args.log_file.with_suffix(".prof")))
        print(out.getvalue())


if __name__ == "__main__":
    main()
