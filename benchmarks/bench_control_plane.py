"""Control plane at scale: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_control_plane.py [--partitions 1000,10000]
        [--timeout 300] [--py-spy DIR | --logs DIR] [--stalls DIR]

For each partition count N, on a fresh 3-broker LocalCluster:

1. ``create``: CreateTopics of N partitions at RF 3, timed until the metadata of every
   broker still up shows a leader for every partition;
2. ``failover``: kill -9 the controller, timed until a new controller is elected and every
   partition has a leader on a live broker (includes the 6 s test session timeout: the dead
   broker's znode goes only when its session expires);
3. ``shutdown``: SIGTERM a surviving broker (leading about half of them now), timed until
   the process exits (a controlled shutdown moves its leaderships first).

``--create-only`` stops after step 1.

Meanwhile a producer (acks=1, one record every 10 ms) and a consumer on another topic, led
by the broker that is neither killed nor stopped, record their worst wait: the longest
delivery time and the longest gap between two received records. Goals (issue 17, at
10,000): create 60 s, failover 15 s, shutdown 30 s, worst wait 1 s.

``--py-spy DIR`` records each phase of each live broker with py-spy (the venv's) as
collapsed stacks (``DIR/<N>-<phase>-broker<id>[-controller].txt``, 50 Hz, idle time left
out), for reading where the brokers' time goes; the brokers' logs are copied there too.
``--logs DIR`` only copies the logs (``DIR/<N>-broker<id>.log``): their timestamps show
when each broker applied each of the new controller's requests, without py-spy's load.
``--stalls DIR`` loads a watchdog into each broker (``benchmarks/reactor_stalls``): every
stretch of over 0.3 s in which its reactor took no turn goes to ``DIR/stall-<pid>.txt``
with the reactor thread's stacks meanwhile and its CPU time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkaclone.testing.cluster import LocalCluster

PY_SPY = os.path.join(os.path.dirname(sys.executable), "py-spy")

TOPIC = "scale"
OTHER = "other"


@dataclass
class Watcher:
    """A producer and a consumer on ``OTHER`` in background threads, keeping worst waits."""

    bootstrap: str
    worst_delivery: float = 0.0
    worst_gap: float = 0.0
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for target in (self._produce, self._consume):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)

    def reset(self) -> tuple[float, float, int]:
        worst = (self.worst_delivery, self.worst_gap, self.errors)
        self.worst_delivery = self.worst_gap = 0.0
        self.errors = 0
        return worst

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": 1, "linger.ms": 0,
                             "message.timeout.ms": 120_000})

        def delivered(err: object, msg: object, sent: float) -> None:
            if err is not None:
                self.errors += 1
            self.worst_delivery = max(self.worst_delivery, time.monotonic() - sent)

        while not self.stop.is_set():
            sent = time.monotonic()
            producer.produce(OTHER, b"x", on_delivery=lambda e, m, s=sent: delivered(e, m, s))
            producer.poll(0.01)
        producer.flush(10)

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-watch",
                             "auto.offset.reset": "latest", "enable.auto.commit": False})
        consumer.subscribe([OTHER])
        last: float | None = None
        while not self.stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error() is not None:
                continue
            now = time.monotonic()
            if last is not None:
                self.worst_gap = max(self.worst_gap, now - last)
            last = now
        consumer.close()


def leaders(admin: AdminClient, topic: str, live: set[int]) -> tuple[int, int, int]:
    """(controller id, partitions known, partitions led by a live broker) per metadata."""
    md = admin.list_topics(topic=topic, timeout=30)
    found = md.topics.get(topic)
    if found is None or found.error is not None:
        return md.controller_id, 0, 0
    led = sum(1 for p in found.partitions.values() if p.leader in live)
    return md.controller_id, len(found.partitions), led


def wait_all_led(admin: AdminClient, n: int, live: set[int], timeout: float,
                 not_controller: int | None = None) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            controller, known, led = leaders(admin, TOPIC, live)
        except Exception:  # a broker going away mid-request
            time.sleep(0.5)
            continue
        if known == n and led == n and controller in live and controller != not_controller:
            return time.monotonic() - start
        time.sleep(1.0)  # a 10,000-partition Metadata answer is work for the broker too
    return float("nan")


@dataclass
class Profiler:
    """py-spy on each live broker for one phase, or nothing without a directory."""

    directory: str | None
    record: bool = True
    """py-spy too; without it only the brokers' logs are kept."""
    spies: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, cluster: LocalCluster, n: int, phase: str, controller: int) -> None:
        if self.directory is None or not self.record:
            return
        os.makedirs(self.directory, exist_ok=True)
        for broker_id, broker in cluster.brokers.items():
            if not broker.running:
                continue
            role = "-controller" if broker_id == controller else ""
            output = os.path.join(self.directory, f"{n}-{phase}-broker{broker_id}{role}.txt")
            self.spies.append(subprocess.Popen(
                [PY_SPY, "record", "-p", str(broker.pid), "-f", "raw", "-r", "50",
                 "--nonblocking", "-o", output],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for spy in self.spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)
        for spy in self.spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
        self.spies.clear()

    def keep_logs(self, cluster: LocalCluster, n: int) -> None:
        if self.directory is None:
            return
        os.makedirs(self.directory, exist_ok=True)
        for broker_id, broker in cluster.brokers.items():
            shutil.copy(broker.log_path, os.path.join(self.directory, f"{n}-broker{broker_id}.log"))


def run(n: int, timeout: float, profiler: Profiler, create_only: bool = False
        ) -> dict[str, float]:
    with LocalCluster(3, overrides={"auto.create.topics.enable": "false"}) as cluster:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers,
                             # librdkafka's upper bound for this setting
                             "socket.timeout.ms": min(int(timeout * 1000), 300_000)})
        controller = admin.list_topics(timeout=30).controller_id
        survivors = sorted(set(cluster.brokers) - {controller})
        stopped, watched = survivors
        admin.create_topics([NewTopic(OTHER, 1, replica_assignment=[[watched]])])[OTHER].result()
        watcher = Watcher(cluster.bootstrap_servers)
        watcher.start()
        time.sleep(3)
        watcher.reset()
        results: dict[str, float] = {}

        profiler.start(cluster, n, "create", controller)
        start = time.monotonic()
        admin.create_topics([NewTopic(TOPIC, n, 3)], request_timeout=timeout)[TOPIC].result()
        results["create_call"] = time.monotonic() - start
        single = AdminClient({"bootstrap.servers": cluster.broker(watched).bootstrap_server})
        waited = wait_all_led(single, n, set(cluster.brokers), timeout)
        results["create"] = time.monotonic() - start if waited == waited else waited
        profiler.stop()
        results["create_worst_delivery"], results["create_worst_gap"], _ = watcher.reset()
        if create_only:
            profiler.keep_logs(cluster, n)
            watcher.close()
            return results

        profiler.start(cluster, n, "failover", controller)
        start = time.monotonic()
        cluster.broker(controller).kill()
        results["failover"] = wait_all_led(single, n, set(survivors), timeout,
                                           not_controller=controller)
        profiler.stop()
        results["failover_worst_delivery"], results["failover_worst_gap"], _ = watcher.reset()

        _, _, led_by_stopped = leaders(single, TOPIC, {stopped})
        results["shutdown_led"] = led_by_stopped
        profiler.start(cluster, n, "shutdown", single.list_topics(timeout=30).controller_id)
        start = time.monotonic()
        cluster.broker(stopped).stop(timeout)
        results["shutdown"] = time.monotonic() - start
        profiler.stop()
        profiler.keep_logs(cluster, n)
        results["shutdown_worst_delivery"], results["shutdown_worst_gap"], _ = watcher.reset()
        watcher.close()
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1000,10000")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--py-spy", dest="py_spy", metavar="DIR",
                        help="record each phase of each broker with py-spy into DIR")
    parser.add_argument("--logs", metavar="DIR",
                        help="keep the brokers' logs in DIR (no py-spy)")
    parser.add_argument("--stalls", metavar="DIR",
                        help="record the brokers' reactor stalls in DIR")
    parser.add_argument("--create-only", action="store_true",
                        help="only the create phase (no failover, no shutdown)")
    args = parser.parse_args()
    if args.stalls is not None:
        # The brokers are this process's children: they load the watchdog at start.
        os.makedirs(args.stalls, exist_ok=True)
        watchdog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reactor_stalls")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (watchdog, os.environ.get("PYTHONPATH")) if p)
        os.environ["KAFKACLONE_STALL_DIR"] = os.path.abspath(args.stalls)
    print(f"load: {os.getloadavg()}")
    for n in (int(p) for p in args.partitions.split(",")):
        profiler = (Profiler(args.logs, record=False) if args.py_spy is None
                    else Profiler(args.py_spy))
        results = run(n, args.timeout, profiler, args.create_only)
        print(f"partitions={n} " + " ".join(f"{k}={v:.2f}" for k, v in results.items()),
              flush=True)
        print(f"load: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
