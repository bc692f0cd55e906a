"""What the scenarios do to the cluster from the test process, recorded in a History.

``Writer`` produces distinct values (``<writer>-<n>``) with confluent-kafka from a thread,
bounded in count and in time, and records each send and its outcome; ``drain`` reads every
partition of a topic from the start to its high watermark and records every poll. The
scenarios then ask ``History.check()`` what went wrong.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkaclone.testing.history import History

from .checks import Transaction, TransactionHistory
from .cluster import ContainerCluster, progress, wait_until

# librdkafka logs every connection a fault breaks; the test only wants the outcomes.
QUIET = {"log_level": 3}
IDEMPOTENT = {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}
"""A Writer's config for a producer whose values keep their order in each partition
through retries (a plain producer's keep it only while no request fails)."""


def create_topic(cluster: ContainerCluster, topic: str, partitions: int,
                 replication_factor: int, config: Mapping[str, str] | None = None,
                 timeout: float = 60,
                 assignment: list[list[int]] | None = None) -> None:
    """CreateTopics through the brokers (``assignment``: the replicas of each partition,
    else the brokers place them), then wait until every partition has a leader and its
    full ISR in ZooKeeper."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
    if assignment is not None:
        new_topic = NewTopic(topic, len(assignment), replica_assignment=assignment,
                             config=dict(config or {}))
    else:
        new_topic = NewTopic(topic, partitions, replication_factor, config=dict(config or {}))
    try:
        admin.create_topics([new_topic], request_timeout=30)[topic].result(timeout=40)
    except KafkaException as exc:
        # Seen once in 22 fresh clusters (2026-11-25): librdkafka's admin client gave up
        # "waiting for controller" 30 s after start. Likely cause: one Metadata answer with
        # controller id -1 (a broker before the controller's first UpdateMetadata), after
        # which librdkafka asks again only on a connection state change; ContainerCluster
        # now starts only once every broker names the controller. One more try, said out
        # loud, in case; a topic the first try created is fine.
        if exc.args[0].code() != KafkaError._TIMED_OUT:
            raise
        progress(f"CreateTopics {topic} timed out ({exc}); trying once more")
        retry = admin.create_topics([new_topic], request_timeout=30)[topic]
        try:
            retry.result(timeout=40)
        except KafkaException as again:
            if again.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def ready() -> bool:
        for partition in range(partitions):
            state = cluster.partition_state(topic, partition)
            if state["leader"] < 0 or len(state["isr"]) < replication_factor:
                return False
        return True

    wait_until(ready, timeout, f"every partition of {topic} with a leader and a full ISR")
    progress(f"topic {topic}: {partitions} partitions, replication factor {replication_factor}")


class Writer:
    """A producer thread sending ``<name>-<n>`` values round robin over the partitions.

    Stops after ``count`` values, after ``seconds``, or at ``stop()``; then waits (bounded by
    the producer's own message timeout) for every outstanding acknowledgement. ``rate`` caps
    the values sent per second (None: as fast as the producer's queue takes them)."""

    def __init__(self, cluster: ContainerCluster, topic: str, partitions: int,
                 history: History, *, name: str = "w1", count: int = 10_000,
                 seconds: float = 60.0, rate: float | None = None,
                 config: Mapping[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.name = name
        self.count = count
        self.seconds = seconds
        self.rate = rate
        self.config: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            # One request in flight per connection. A request librdkafka retries can still
            # be overtaken by later values (seen in CI, 2026-11-28), so a scenario that
            # checks the order ("reordered") uses an idempotent writer.
            "max.in.flight.requests.per.connection": 1,
            "enable.idempotence": False,
            "message.timeout.ms": 30_000,
            "request.timeout.ms": 10_000,
            "retry.backoff.ms": 200,
            **QUIET,
            **(config or {}),
        }
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{name}", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float = 120.0) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"writer {self.name} did not finish within {timeout:.0f}s")
        if self._failure is not None:
            raise RuntimeError(f"writer {self.name} failed") from self._failure

    def acked(self) -> int:
        return sum(1 for send in self.history.sends if send.producer == self.name and send.acked)

    def wait_for_sent(self, at_least: int, timeout: float) -> None:
        wait_until(lambda: self.sent >= at_least or not self._thread.is_alive(), timeout,
                   f"{at_least} values sent by {self.name}")
        if self.sent < at_least:
            raise AssertionError(f"writer {self.name} ended after {self.sent} values")

    def wait_for_acks(self, at_least: int, timeout: float) -> None:
        wait_until(lambda: self.acked() >= at_least, timeout,
                   f"{at_least} acknowledged values from {self.name}")

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        raw = message.value()
        assert raw is not None
        value = raw.decode()
        if error is not None:
            self.history.send_failed(value, error.str())
            if len(self.errors) < 1000:
                self.errors.append(error.name())
        else:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            self.history.send_acked(topic, value, partition, offset)

    def _run(self) -> None:
        try:
            producer = Producer(self.config)
            deadline = time.monotonic() + self.seconds
            started = time.monotonic()
            while (self.sent < self.count and not self._stop.is_set()
                   and time.monotonic() < deadline):
                if self.rate is not None:
                    due = started + self.sent / self.rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(min(pause, 0.5))
                        continue
                value = f"{self.name}-{self.sent}"
                partition = self.sent % self.partitions
                self.history.send_invoked(self.topic, value, producer=self.name,
                                          partition=partition)
                while True:
                    try:
                        producer.produce(self.topic, value.encode(), partition=partition,
                                         on_delivery=self._delivered)
                        break
                    except BufferError:  # the local queue is full: serve callbacks first
                        producer.poll(0.1)
                self.sent += 1
                producer.poll(0)
            # Every message either completes or times out within message.timeout.ms.
            left = producer.flush(self.config["message.timeout.ms"] / 1000 + 15)
            if left:
                raise RuntimeError(f"{left} messages still undelivered after the flush")
        except BaseException as exc:
            self._failure = exc


def high_watermarks(cluster: ContainerCluster, topic: str, partitions: int,
                    timeout: float = 60) -> dict[int, int]:
    """Each partition's high watermark, asked of its current leader."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "hwm",
                         "enable.auto.commit": False, **QUIET})
    try:
        marks: dict[int, int] = {}
        for partition in range(partitions):
            def ask(p: int = partition) -> tuple[int, int]:
                low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p),
                                                           timeout=5)
                return low, high
            _, marks[partition] = wait_until(ask, timeout,
                                             f"the high watermark of {topic}-{partition}")
        return marks
    finally:
        consumer.close()


def records_by_partition(messages: list[Message], *, raise_fatal: bool = False,
                         errors: list[str] | None = None) -> dict[int, list[tuple[int, str]]]:
    """The records of one ``consume()`` call as ``(offset, value)`` lists per partition,
    what ``History.poll`` takes. Error events are skipped (named in ``errors``, up to
    1000, when given); a fatal one is raised with ``raise_fatal``."""
    by_partition: dict[int, list[tuple[int, str]]] = {}
    for message in messages:
        error = message.error()
        if error is not None:
            if raise_fatal and error.fatal():
                raise KafkaException(error)
            if errors is not None and len(errors) < 1000:
                errors.append(error.name())
            continue
        partition, offset, value = message.partition(), message.offset(), message.value()
        assert partition is not None and offset is not None and value is not None
        by_partition.setdefault(partition, []).append((offset, value.decode()))
    return by_partition


def drain(cluster: ContainerCluster, topic: str, partitions: int, history: History, *,
          name: str = "drain", timeout: float = 120) -> int:
    """Read every partition from offset 0 up to its high watermark (asked once, after the
    writers stopped), recording each poll. Returns the number of records read."""
    targets = high_watermarks(cluster, topic, partitions)
    progress(f"draining {topic} up to the high watermarks {targets}")
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": name,
        "enable.auto.commit": False, "enable.partition.eof": False,
        "fetch.wait.max.ms": 100, **QUIET,
    })
    next_offset = dict.fromkeys(range(partitions), 0)
    read = 0
    try:
        consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < targets[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"drain of {topic} stuck at {next_offset} (targets {targets})")
            by_partition = records_by_partition(consumer.consume(1000, timeout=1.0),
                                                raise_fatal=True)
            for partition, records in by_partition.items():
                history.poll(name, topic, partition, records)
                next_offset[partition] = records[-1][0] + 1
                read += len(records)
    finally:
        consumer.close()
    progress(f"drained {read} records from {topic}")
    return read


# --- transactions ---------------------------------------------------------------------------


class TransactionalWriter:
    """A transactional producer thread (``transactional.id`` = ``name``): transactions of
    ``per_transaction`` values (``<name>-<n>``) round robin over the partitions, every
    ``abort_every``-th one aborted on purpose once its values are written, the others
    committed; each recorded in a
    ``TransactionHistory`` with its outcome.

    The error handling is librdkafka's documented one: a retriable error from commit or abort
    is retried, an abortable one aborts the transaction, a fatal one (fenced, say) ends the
    producer, whose transaction is then of unknown outcome, and a new producer with the same
    transactional id takes over (its InitProducerId fences the old epoch). Bounded by
    ``seconds`` and by ``stop()``."""

    def __init__(self, cluster: ContainerCluster, topic: str, partitions: int,
                 history: TransactionHistory, *, name: str, per_transaction: int = 20,
                 abort_every: int = 4, seconds: float = 240.0, rate: float = 8.0) -> None:
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.name = name
        self.per_transaction = per_transaction
        self.abort_every = abort_every
        self.seconds = seconds
        self.rate = rate
        self.config: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": name,
            # A send outlives a leader's or a coordinator's failover (ZooKeeper session
            # timeout, election, metadata refresh) before it times out; a transaction the
            # broker times out fences the producer.
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
            "message.timeout.ms": 45_000,
            "request.timeout.ms": 10_000,
            "retry.backoff.ms": 200,
            **QUIET,
        }
        self.producers = 0
        self.fatal_errors: list[str] = []
        self.retried: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"txn-{name}", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> TransactionalWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float = 180.0) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"transactional writer {self.name} did not finish "
                               f"within {timeout:.0f}s")
        if self._failure is not None:
            raise RuntimeError(f"transactional writer {self.name} failed") from self._failure

    def committed(self) -> int:
        return sum(1 for txn in self.history.transactions
                   if txn.producer == self.name and txn.outcome == "committed")

    def wait_for_commits(self, more_than: int, timeout: float) -> None:
        wait_until(lambda: self.committed() > more_than or not self._thread.is_alive(),
                   timeout, f"{self.name} to commit more than {more_than} transactions")
        if self.committed() <= more_than:
            raise AssertionError(f"transactional writer {self.name} ended "
                                 f"after {self.committed()} commits")

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            raw, partition, offset = message.value(), message.partition(), message.offset()
            assert raw is not None and partition is not None and offset is not None
            self.history.acked(raw.decode(), partition, offset)

    def _end(self, producer: Producer, txn: Transaction, commit: bool, deadline: float) -> str:
        """Commit (or abort) ``txn``; its outcome. Raises the fatal KafkaException."""
        self.history.ending(txn)
        while True:
            try:
                if commit:
                    producer.commit_transaction(30)
                    return "committed"
                producer.abort_transaction(30)
                return "aborted"
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or time.monotonic() > deadline:
                    raise
                if commit and error.txn_requires_abort():
                    commit = False
                elif not error.retriable():
                    raise
                if len(self.retried) < 1000:
                    self.retried.append(error.name())

    def _run(self) -> None:
        try:
            deadline = time.monotonic() + self.seconds
            started = time.monotonic()
            number = sent = 0
            while not self._stop.is_set() and time.monotonic() < deadline:
                producer = Producer(self.config)
                self.producers += 1
                try:
                    producer.init_transactions(60)
                except KafkaException as exc:
                    if len(self.fatal_errors) < 100:
                        self.fatal_errors.append(f"init: {exc.args[0].name()}")
                    continue
                txn: Transaction | None = None
                try:
                    while not self._stop.is_set() and time.monotonic() < deadline:
                        pause = started + number / self.rate - time.monotonic()
                        if pause > 0:
                            time.sleep(min(pause, 0.5))
                            continue
                        producer.begin_transaction()
                        txn = self.history.begin(self.name, number)
                        for _ in range(self.per_transaction):
                            value = f"{self.name}-{sent}"
                            self.history.sent(txn, value)
                            producer.produce(self.topic, value.encode(),
                                             partition=sent % self.partitions,
                                             on_delivery=self._delivered)
                            sent += 1
                        producer.poll(0)
                        commit = (number + 1) % self.abort_every != 0
                        if not commit:
                            # The values are written before the abort, so that readers must
                            # skip them. Also, an abort sent while the partitions are still
                            # being added (the coordinator finishing the previous commit)
                            # is refused with INVALID_TXN_STATE, fatal: librdkafka sends
                            # EndTxn once AddPartitionsToTxn went out, answered or not
                            # (confluentinc/librdkafka#4849; Kafka answers the same).
                            producer.flush(30)
                        outcome = self._end(producer, txn, commit, deadline + 60)
                        self.history.ended(txn, outcome)
                        txn = None
                        number += 1
                except KafkaException as exc:
                    # Fatal: this producer is done; what its open transaction became is
                    # unknown. The next producer's InitProducerId fences it.
                    if txn is not None:
                        self.history.ended(txn, "unknown")
                        number += 1
                    if len(self.fatal_errors) < 100:
                        self.fatal_errors.append(exc.args[0].name())
                finally:
                    with contextlib.suppress(KafkaException):  # a fatal producer raises here
                        producer.flush(5)
        except BaseException as exc:
            self._failure = exc


class ReadCommittedReader:
    """A read_committed consumer thread reading every partition from the start, recording
    each poll (with the moment it returned) in a ``TransactionHistory``; errors that are not
    fatal (a broker gone) are counted and polling goes on. ``drain_to`` reads on until each
    partition's position reaches a given offset."""

    def __init__(self, cluster: ContainerCluster, topic: str, partitions: int,
                 history: TransactionHistory, *, name: str) -> None:
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.name = name
        self.read = 0
        self.errors: list[str] = []
        self._consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": name,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "enable.partition.eof": False, "fetch.wait.max.ms": 100, **QUIET,
        })
        self._consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING)
                               for p in range(partitions)])
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def poll_once(self) -> None:
        by_partition = records_by_partition(self._consumer.consume(1000, timeout=0.5),
                                            raise_fatal=True, errors=self.errors)
        for partition, records in by_partition.items():
            self.history.poll(self.name, partition, records)
            self.read += len(records)

    def start(self) -> ReadCommittedReader:
        def run() -> None:
            try:
                while not self._stop.is_set():
                    self.poll_once()
            except BaseException as exc:
                self._failure = exc
        self._thread = threading.Thread(target=run, name=f"reader-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            if self._thread.is_alive():
                raise TimeoutError(f"reader {self.name} did not stop")
        if self._failure is not None:
            raise RuntimeError(f"reader {self.name} failed") from self._failure

    def drain_to(self, targets: Mapping[int, int], timeout: float = 120) -> None:
        """Poll (in this thread) until every partition's position reaches its target."""
        deadline = time.monotonic() + timeout
        while True:
            positions = {tp.partition: tp.offset for tp in self._consumer.position(
                [CkTopicPartition(self.topic, p) for p in range(self.partitions)])}
            if all(positions[p] >= targets[p] for p in targets):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} stuck at {positions} (targets {targets})")
            self.poll_once()

    def close(self) -> None:
        self._consumer.close()


def stable_ends(cluster: ContainerCluster, topic: str, partitions: int,
                timeout: float = 90) -> dict[int, int]:
    """Each partition's end once no transaction is open in it: the last stable offset (what a
    read_committed consumer's ListOffsets answers) equals the high watermark."""
    committed = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "lso",
                          "isolation.level": "read_committed", **QUIET})
    try:
        def settled() -> dict[int, int] | None:
            lso = {p: committed.get_watermark_offsets(CkTopicPartition(topic, p), timeout=5)[1]
                   for p in range(partitions)}
            hwm = high_watermarks(cluster, topic, partitions, timeout=10)
            return hwm if lso == hwm else None
        return wait_until(settled, timeout, f"no open transaction in {topic}", interval=1.0)
    finally:
        committed.close()
