"""Assertions every fault scenario ends with, and the checker of transactional histories."""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkaclone.testing.history import CheckResult, History

from . import zktxn
from .cluster import ContainerCluster, progress


def check_controller_history(cluster: ContainerCluster) -> list[zktxn.Txn]:
    """On ZooKeeper's transaction log: ``/controller_epoch`` only ever rose and ends at the
    current epoch; no leader election under a stale controller epoch, no two leaders in one
    leader epoch; no controller write from a session other than the current controller's."""
    txns = cluster.transactions()
    epochs = [value for _, value in zktxn.controller_epoch_writes(txns)]
    assert epochs and epochs == sorted(set(epochs)), f"/controller_epoch writes: {epochs}"
    assert epochs[-1] == cluster.controller_epoch(), epochs
    assert zktxn.partition_state_anomalies(txns) == []
    assert zktxn.foreign_controller_writes(txns) == []
    progress(f"ZooKeeper's log: {len(txns)} transactions, controller epochs {epochs}, no "
             f"stale or foreign controller write")
    return txns


# Without idempotence (the brokers do not serve InitProducerId yet) a value may be written
# twice although the producer runs with retries=0: librdkafka re-sends a batch the old leader
# appended, that the followers copied, but that it then answered NOT_LEADER_OR_FOLLOWER
# (seen in the clean leader bounces: the second copy acknowledged retry.backoff.ms later).
# Kafka 2.8 answers the same way, so duplicates are allowed. The re-sent copy is the one
# acknowledged, at a later offset than values sent after the first copy, so acknowledged
# offsets can go back in send order ("reordered", seen once in a controller hard bounce:
# the value's first copy sat among its neighbours): allowed for the same reason. Lost
# writes, inconsistent offsets, non-monotonic polls and unexpected values are checked.
NON_IDEMPOTENT = tuple(kind for kind in CheckResult.ANOMALIES
                       if kind not in ("duplicates", "reordered"))


def check_history(history: History, *, min_acked: int,
                  anomalies: Sequence[str] = NON_IDEMPOTENT) -> CheckResult:
    """The History shows none of ``anomalies`` and at least ``min_acked`` acknowledgements."""
    result = history.check(anomalies)
    progress(result.summary())
    assert result.valid, result.summary()
    assert result.acked >= min_acked, result.summary()
    return result


# --- transactions ---------------------------------------------------------------------------


@dataclass
class Transaction:
    """One transaction of one transactional producer, from ``begin_transaction`` to its
    outcome: ``committed`` (commit_transaction returned), ``aborted`` (abort_transaction
    returned), ``unknown`` (the producer failed fatally on the way: the broker may have
    committed it or will abort it), or ``open`` (not ended yet)."""

    producer: str
    number: int
    began_at: float
    values: list[str] = field(default_factory=list)
    ending_at: float | None = None  # the first commit or abort call (or the fatal error)
    outcome: str = "open"


@dataclass
class TransactionCheckResult:
    """The anomalies a read_committed history can show; ``valid`` when there are none."""

    transactions: dict[str, int]
    read_positions: int
    aborted_reads: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicates: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    reads_past_open: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    ANOMALIES = ("aborted_reads", "lost", "duplicates", "reads_past_open", "unexpected")

    @property
    def valid(self) -> bool:
        return not any(getattr(self, kind) for kind in self.ANOMALIES)

    def summary(self, examples: int = 5) -> str:
        lines = [f"transactions={self.transactions} read_positions={self.read_positions} "
                 f"valid={self.valid}"]
        for kind in self.ANOMALIES:
            found = getattr(self, kind)
            if found:
                items = list(found.items()) if isinstance(found, dict) else list(found)
                lines.append(f"{kind}: {len(found)}, e.g. {items[:examples]!r}")
        return "\n".join(lines)


class TransactionHistory:
    """What transactional producers did and what read_committed consumers saw, for
    :meth:`check`:

    ``aborted_reads``
        a value of a transaction that was aborted, read by a read_committed consumer.
    ``lost``
        a value of a committed transaction that no read_committed poll returned (the run
        ends with a drain of every partition to its end).
    ``duplicates``
        one value read at two positions (partition, offset).
    ``reads_past_open``
        a record read at offset o of a partition while a transaction with a record at an
        offset <= o of that partition (the record's own transaction included) had not even
        been asked to commit or abort yet, at the time the poll returned: the consumer read
        past the last stable offset.
    ``unexpected``
        a value no producer sent.

    Transactions with an ``unknown`` outcome may be read or not; their end is taken as the
    moment the producer failed (the earliest the broker could have ended them).
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._lock = threading.Lock()
        self.transactions: list[Transaction] = []
        self._txn_of: dict[str, Transaction] = {}
        self._acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        self.polls: list[tuple[str, int, list[tuple[int, str]], float]] = []

    def begin(self, producer: str, number: int) -> Transaction:
        txn = Transaction(producer, number, time.monotonic())
        with self._lock:
            self.transactions.append(txn)
        return txn

    def sent(self, txn: Transaction, value: str) -> None:
        with self._lock:
            if value in self._txn_of:
                raise ValueError(f"value {value!r} was already sent; values must be distinct")
            txn.values.append(value)
            self._txn_of[value] = txn

    def acked(self, value: str, partition: int, offset: int) -> None:
        with self._lock:
            self._acked[value] = (partition, offset)

    def ending(self, txn: Transaction) -> None:
        """Called right before the first commit_transaction or abort_transaction."""
        if txn.ending_at is None:
            txn.ending_at = time.monotonic()

    def ended(self, txn: Transaction, outcome: str) -> None:
        assert outcome in ("committed", "aborted", "unknown"), outcome
        self.ending(txn)
        txn.outcome = outcome

    def poll(self, consumer: str, partition: int, records: list[tuple[int, str]],
             at: float | None = None) -> None:
        """What a read_committed consumer received from one partition, recorded once the
        poll returned (``at``: that moment, for tests)."""
        with self._lock:
            self.polls.append((consumer, partition, list(records),
                               time.monotonic() if at is None else at))

    def outcomes(self) -> dict[str, int]:
        with self._lock:
            return dict(Counter(txn.outcome for txn in self.transactions))

    def check(self) -> TransactionCheckResult:
        with self._lock:
            polls = list(self.polls)
            txn_of = dict(self._txn_of)
            acked = dict(self._acked)
            transactions = list(self.transactions)
        positions_of: dict[str, set[tuple[int, int]]] = {}
        for _, partition, records, _ in polls:
            for offset, value in records:
                positions_of.setdefault(value, set()).add((partition, offset))
        result = TransactionCheckResult(
            transactions=dict(Counter(txn.outcome for txn in transactions)),
            read_positions=len({position for positions in positions_of.values()
                                for position in positions}))
        result.unexpected = sorted(value for value in positions_of if value not in txn_of)
        result.aborted_reads = sorted(value for value in positions_of
                                      if value in txn_of and txn_of[value].outcome == "aborted")
        result.lost = [value for txn in transactions if txn.outcome == "committed"
                       for value in txn.values if value not in positions_of]
        result.duplicates = {value: sorted(positions) for value, positions in positions_of.items()
                             if len(positions) > 1}

        # Per partition, the acknowledged offsets in order with the latest end of any
        # transaction holding a record at or below each (a running maximum): a read at
        # offset o polled at t is past an open transaction when that maximum exceeds t.
        ends_by_partition: dict[int, list[tuple[int, float]]] = {}
        for value, (partition, offset) in acked.items():
            ending_at = txn_of[value].ending_at
            if ending_at is not None:
                ends_by_partition.setdefault(partition, []).append((offset, ending_at))
        offsets: dict[int, list[int]] = {}
        latest_end: dict[int, list[float]] = {}
        for partition, entries in ends_by_partition.items():
            entries.sort()
            offsets[partition] = [offset for offset, _ in entries]
            latest_end[partition] = list(itertools.accumulate(
                (end for _, end in entries), max))
        for consumer, partition, records, at in polls:
            for offset, value in records:
                index = bisect.bisect_right(offsets.get(partition, []), offset) - 1
                if index >= 0 and latest_end[partition][index] > at:
                    result.reads_past_open.append(
                        {"consumer": consumer, "partition": partition, "offset": offset,
                         "value": value, "open_until": latest_end[partition][index],
                         "polled_at": at})
        return result


def check_transactions(history: TransactionHistory, *, min_committed: int,
                       min_aborted: int) -> TransactionCheckResult:
    """No anomaly, and at least so many transactions committed and aborted."""
    result = history.check()
    progress(result.summary())
    assert result.valid, result.summary()
    assert result.transactions.get("committed", 0) >= min_committed, result.summary()
    assert result.transactions.get("aborted", 0) >= min_aborted, result.summary()
    return result
