"""Issue 15's acceptance run: exactly-once consume-transform-produce under kill -9.

    .venv/bin/python benchmarks/acceptance_transactions.py [--count 100000]
        [--scenario processor|brokers|all] [--batch N]

On a local cluster of three broker processes (input and output topics of 3 partitions,
RF 3, min.insync.replicas=2; ``__transaction_state`` and ``__consumer_offsets`` RF 3), a
plain producer writes ``--count`` input records. A separate Python process (this file run
with ``processor``) consumes them in a group with a read_committed confluent-kafka
consumer and, per batch, in one transaction of a confluent-kafka transactional producer,
writes one output record per input record (to the same partition number) and sends the
batch's offsets with ``send_offsets_to_transaction``.

Faults, spread evenly over the run by the group's progress (its committed offsets in
ZooKeeper): ``processor`` kills the processing process with SIGKILL and starts a new one
(same transactional id: the new one fences the old and aborts its open transaction; same
group: it resumes from the committed offsets); ``coordinator`` kills -9 the broker leading
the transactional id's ``__transaction_state`` partition, ``leader`` the leader of an output
partition (another broker if one leads any); a killed broker comes back once the processor
has made progress without it. Scenario ``processor`` kills the processor three times,
``brokers`` the coordinator's broker, then a leader.

At the end a read_committed consumer reads the output: every input record must be there
exactly once, each output partition in input offset order, and the group's committed
offsets under ``/consumers/<group>/offsets/<input>/<p>`` must equal the number of output
records of each input partition (the input's end). Prints the result; exits 1 on any
anomaly. tests/server/test_transactions_acceptance.py runs the same code at 3,000 records.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 3
SOURCE, SINK, GROUP, TRANSACTIONAL_ID = "ctp-in", "ctp-out", "ctp-group", "ctp-processor"
TXN_STATE_PARTITIONS = 5
SESSION_TIMEOUT_MS = 6000
SCENARIOS: dict[str, tuple[str, ...]] = {
    "processor": ("processor", "processor", "processor"),
    "brokers": ("coordinator", "leader"),
}
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "4000",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}


# -- the processing process -------------------------------------------------------------------

def process(bootstrap: str, batch: int, lifetime: float) -> int:
    """The consume-transform-produce loop; returns the process's exit code."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka import TopicPartition as CkTopicPartition

    parent = os.getppid()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID,
                         "transaction.timeout.ms": 60_000, "linger.ms": 5})
    producer.init_transactions(120)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest",
                         "session.timeout.ms": SESSION_TIMEOUT_MS,
                         "max.poll.interval.ms": 60_000})
    consumer.subscribe([SOURCE])
    commits = aborts = 0

    def say(line: str) -> None:
        print(line, flush=True)

    def rewind() -> None:
        """After an abort: back to the group's committed offsets (Confluent's EOS example)."""
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, 60):
            offset = tp.offset if tp.offset >= 0 else -2  # OFFSET_BEGINNING
            consumer.seek(CkTopicPartition(tp.topic, tp.partition, offset))

    def commit() -> None:
        for _ in range(20):
            try:
                producer.commit_transaction(60)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                say(f"commit retried: {exc.args[0]}")
        raise RuntimeError("commit did not succeed in 20 retries")

    deadline = time.monotonic() + lifetime
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline and os.getppid() == parent:
            if time.monotonic() - idle_since > 10:
                # Nothing to do for a while: say where the consumer is, for a stalled run.
                assignment = consumer.assignment()
                say(f"idle: assigned {[tp.partition for tp in assignment]}, positions "
                    f"{[tp.offset for tp in consumer.position(assignment)]}")
                idle_since = time.monotonic()
            messages = []
            for message in consumer.consume(batch, 0.5):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    say(f"consume error: {message.error()}")
            if not messages:
                continue
            idle_since = time.monotonic()
            ends: dict[int, int] = {}
            producer.begin_transaction()
            try:
                for message in messages:
                    partition, offset = message.partition(), message.offset()
                    value = b"%d:%d:%s" % (partition, offset, message.value())
                    while True:
                        try:
                            producer.produce(SINK, value=value, partition=partition)
                            break
                        except BufferError:
                            producer.poll(0.05)
                    ends[partition] = offset + 1
                producer.send_offsets_to_transaction(
                    [CkTopicPartition(SOURCE, p, o) for p, o in sorted(ends.items())],
                    consumer.consumer_group_metadata(), 60)
                commit()
                commits += 1
                say(f"commit {commits} {len(messages)}")
            except KafkaException as exc:
                if not exc.args[0].txn_requires_abort():
                    raise
                say(f"abort: {exc.args[0]}")
                producer.abort_transaction(60)
                aborts += 1
                rewind()
    except KafkaException as exc:
        say(f"fatal: {exc.args[0]}")
        return 2
    finally:
        say(f"exit after {commits} commits, {aborts} aborts")
    return 0


# -- the run ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one run measured and found."""

    count: int
    faults: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    processors_started: int = 0
    unplanned_exits: int = 0
    commits: int = 0
    aborts: int = 0
    aborted_records: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def report(self) -> str:
        lines = [f"{self.count} input records, faults: {', '.join(self.faults) or 'none'}",
                 f"  processed in {self.seconds:.1f}s ({self.count / self.seconds:.0f} records/s"
                 f" including restarts), {self.processors_started} processor processes, "
                 f"{self.unplanned_exits} unplanned exits, {self.commits} transactions "
                 f"committed, {self.aborts} aborted by the processor",
                 f"  {self.aborted_records} output records of aborted transactions (seen by "
                 "read_uncommitted only)"]
        lines += [f"  ANOMALY: {a}" for a in self.anomalies]
        lines.append(f"  {'PASS' if self.ok else 'FAIL'}")
        return "\n".join(lines)


class Processor:
    """The processing process: started, killed -9 and restarted; its output in a file."""

    def __init__(self, bootstrap: str, batch: int, log_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.batch = batch
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.unplanned_exits = 0

    def start(self) -> None:
        self.started += 1
        log = (self.log_dir / f"processor-{self.started}.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "processor", "--bootstrap",
             self.bootstrap, "--batch", str(self.batch)],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
        log.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def keep_running(self) -> None:
        """Restart the processor if it exited on its own (a fatal client error)."""
        if self.process is not None and self.process.poll() is not None:
            self.unplanned_exits += 1
            print(f"  processor {self.started} exited with {self.process.returncode}; "
                  "starting another")
            self.start()

    def log_lines(self) -> list[str]:
        lines: list[str] = []
        for path in sorted(self.log_dir.glob("processor-*.log")):
            lines += path.read_text(errors="replace").splitlines()
        return lines


class ZooKeeperView:
    """The znodes the run watches: committed offsets, partition states."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=connect, timeout=10)
        self.zk.start(timeout=30)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def committed(self) -> dict[int, int]:
        offsets: dict[int, int] = {}
        for p in range(PARTITIONS):
            path = f"/consumers/{GROUP}/offsets/{SOURCE}/{p}"
            if self.zk.exists(path):
                offsets[p] = int(self.zk.get(path)[0].decode())
        return offsets

    def progress(self) -> int:
        return sum(self.committed().values())

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        state: dict[str, Any] = json.loads(data)
        return state

    def wait_for_full_isr(self, topics: Sequence[tuple[str, int]], brokers: int,
                          timeout: float = 120.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(len(self.state(t, p)["isr"]) == brokers and self.state(t, p)["leader"] >= 0
                   for t, n in topics for p in range(n)):
                return True
            time.sleep(0.5)
        return False


def create_topic(bootstrap: str, topic: str) -> None:
    subprocess.run([str(REPO / "scripts" / "kafka-topics.sh"), "--bootstrap-server", bootstrap,
                    "--create", "--topic", topic, "--partitions", str(PARTITIONS),
                    "--replication-factor", "3", "--config", "min.insync.replicas=2"],
                   check=True, capture_output=True, timeout=120, cwd="/")


def produce_input(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
    failed = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal failed
        failed += err is not None

    for i in range(count):
        while True:
            try:
                producer.produce(SOURCE, value=b"%d" % i, partition=i % PARTITIONS,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) or failed:
        raise RuntimeError(f"the input was not written: {failed} failed deliveries")


def read_output(bootstrap: str, count: int, timeout: float,
                isolation: str = "read_committed") -> dict[int, list[bytes]]:
    """Every output record a consumer sees, per partition: until each
    partition is at its end and ``count`` records arrived (or ``timeout``), then a while
    longer, so that records past ``count`` (duplicates) show."""
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-check",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([CkTopicPartition(SINK, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    drain_until = float("inf")
    try:
        while time.monotonic() < min(deadline, drain_until):
            for message in consumer.consume(1000, 0.5):
                error, partition = message.error(), message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(partition)
                        continue
                    raise RuntimeError(str(error))
                at_end.discard(partition)
                got[partition].append(message.value())
            total = sum(map(len, got.values()))
            if drain_until == float("inf") and len(at_end) == PARTITIONS and total >= count:
                drain_until = time.monotonic() + 3.0
    finally:
        consumer.close()
    return got


def check(count: int, got: dict[int, list[bytes]], committed: dict[int, int],
          input_ends: dict[int, int]) -> list[str]:
    anomalies: list[str] = []
    seen: dict[int, int] = {}
    for out_partition, values in got.items():
        last: dict[int, int] = {}
        for value in values:
            in_partition, in_offset, number = (int(x) for x in value.split(b":"))
            if in_partition != out_partition:
                anomalies.append(f"input partition {in_partition} in output {out_partition}")
            if in_offset <= last.get(in_partition, -1):
                anomalies.append(f"output partition {out_partition}: input offset {in_offset} "
                                 f"after {last[in_partition]}")
            last[in_partition] = in_offset
            seen[number] = seen.get(number, 0) + 1
    duplicates = sorted(n for n, times in seen.items() if times > 1)
    missing = sorted(set(range(count)) - set(seen))
    if duplicates:
        anomalies.append(f"{len(duplicates)} inputs seen more than once, e.g. {duplicates[:5]}")
    if missing:
        anomalies.append(f"{len(missing)} inputs missing, e.g. {missing[:5]}")
    strays = sorted(set(seen) - set(range(count)))
    if strays:
        anomalies.append(f"{len(strays)} outputs of no input, e.g. {strays[:5]}")
    outputs_per_input = {p: len(got[p]) for p in range(PARTITIONS)}
    if committed != outputs_per_input or committed != input_ends:
        anomalies.append(f"committed offsets {committed} != outputs per input partition "
                         f"{outputs_per_input} (input ends {input_ends})")
    return anomalies


def leader_to_kill(zk: ZooKeeperView, fault: str) -> int:
    from kafkaclone.coordinator.transaction.state_manager import partition_for

    coordinator = int(zk.state("__transaction_state",
                               partition_for(TRANSACTIONAL_ID, TXN_STATE_PARTITIONS))["leader"])
    if fault == "coordinator":
        return coordinator
    leaders = [int(zk.state(SINK, p)["leader"]) for p in range(PARTITIONS)]
    others = [b for b in leaders if b != coordinator]
    return others[0] if others else leaders[0]


def run(count: int, faults: Sequence[str], *, batch: int = 500,
        stall_timeout: float = 240.0, say: Callable[[str], None] = print,
        base_dir: Path | None = None) -> Outcome:
    """One run on a new cluster; ``faults`` ("processor", "coordinator", "leader") in the
    order they strike. ``base_dir`` keeps the cluster's files (logs included) after it."""
    from kafkaclone.testing.cluster import LocalCluster

    outcome = Outcome(count, list(faults))
    with LocalCluster(3, overrides=CLUSTER_OVERRIDES, base_dir=base_dir) as cluster:
        bootstrap = cluster.bootstrap_servers
        for topic in (SOURCE, SINK):
            create_topic(bootstrap, topic)
        zk = ZooKeeperView(cluster.zookeeper_connect)
        processor = Processor(bootstrap, batch, cluster.base_dir)
        try:
            zk.wait_for_full_isr([(SOURCE, PARTITIONS), (SINK, PARTITIONS)], 3)
            produce_input(bootstrap, count)
            input_ends = {p: count // PARTITIONS + (p < count % PARTITIONS)
                          for p in range(PARTITIONS)}
            say(f"  {count} input records written")
            started = time.monotonic()
            processor.start()

            def wait_for_progress(target: int) -> bool:
                last, last_change = -1, time.monotonic()
                while True:
                    processor.keep_running()
                    done = zk.progress()
                    if done >= target:
                        return True
                    if done != last:
                        last, last_change = done, time.monotonic()
                    if time.monotonic() - last_change > stall_timeout:
                        outcome.anomalies.append(f"no progress for {stall_timeout:.0f}s at "
                                                 f"{done} of {count}")
                        return False
                    time.sleep(0.1)

            for i, fault in enumerate(faults):
                if not wait_for_progress(count * (i + 1) // (len(faults) + 1)):
                    break
                if zk.progress() >= count:
                    outcome.anomalies.append(f"the run ended before fault {i + 1} ({fault}); "
                                             "more records or a smaller --batch")
                    break
                if fault == "processor":
                    processor.kill()
                    say(f"  killed processor {processor.started} at {zk.progress()} committed")
                    processor.start()
                    continue
                victim = leader_to_kill(zk, fault)
                at = zk.progress()
                cluster.broker(victim).kill()
                say(f"  killed broker {victim} ({fault}) at {at} committed")
                # Back once the processor made progress without it.
                wait_for_progress(min(count, at + max(batch * 2, count // 20)))
                say(f"  {zk.progress()} committed with broker {victim} down; restarting it")
                cluster.restart_broker(victim)
                if not zk.wait_for_full_isr([(SOURCE, PARTITIONS), (SINK, PARTITIONS)], 3):
                    outcome.anomalies.append(f"broker {victim} did not rejoin every ISR")
            if not outcome.anomalies:
                wait_for_progress(count)
            outcome.seconds = time.monotonic() - started
            processor.stop()
            outcome.processors_started = processor.started
            outcome.unplanned_exits = processor.unplanned_exits
            lines = processor.log_lines()
            outcome.commits = sum(1 for line in lines if line.startswith("commit "))
            outcome.aborts = sum(1 for line in lines if line.startswith("abort"))
            if outcome.anomalies:
                say("\n".join(lines[-20:]))
                return outcome
            got = read_output(bootstrap, count, timeout=180)
            outcome.anomalies += check(count, got, zk.committed(), input_ends)
            everything = read_output(bootstrap, count, timeout=180,
                                     isolation="read_uncommitted")
            outcome.aborted_records = (sum(map(len, everything.values()))
                                       - sum(map(len, got.values())))
        finally:
            processor.kill()
            zk.close()
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="role")
    child = sub.add_parser("processor", help="the processing process (started by the run)")
    child.add_argument("--bootstrap", required=True)
    child.add_argument("--batch", type=int, default=500)
    child.add_argument("--lifetime", type=float, default=3600.0)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--batch", type=int, default=500,
                        help="most input records per transaction")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each run's cluster files (broker and processor logs) "
                             "under this directory")
    args = parser.parse_args()
    if args.role == "processor":
        return process(args.bootstrap, args.batch, args.lifetime)
    ok = True
    for name in SCENARIOS if args.scenario == "all" else [args.scenario]:
        print(f"scenario {name}:", flush=True)
        outcome = run(args.count, SCENARIOS[name], batch=args.batch,
                      say=lambda line: print(line, flush=True),
                      base_dir=None if args.keep is None else args.keep / name)
        print(outcome.report(), flush=True)
        ok = ok and outcome.ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
