"""A history checker for produce/consume runs, in the style of Jepsen's Kafka checker.

A test records every operation it performs against the cluster in a ``History``: each send
(the value, then its acknowledgement with the offset the broker assigned, or its error) and
each poll (the offsets and values a consumer received, per partition). ``History.check()``
then looks for the anomalies a correct log never shows:

``lost``
    an acknowledged value that no poll ever returned (the run must read every partition to
    its end afterwards for this to mean something; that is the caller's final drain).
``duplicates``
    a value read at more than one position (topic, partition, offset).
``inconsistent_offsets``
    one position seen with two different values: two polls disagree, or a poll disagrees
    with the offset an acknowledgement reported for another value.
``nonmonotonic_polls``
    a consumer received, for one partition, an offset at or below the last offset it had
    already received there, without a ``reset`` (seek, rebalance) in between.
``unexpected``
    a value read that no send ever attempted.
``reordered``
    two values one producer sent to one partition, acknowledged in an order of offsets that
    contradicts the order they were sent in.

Failed sends are indeterminate (a timed-out produce may still have been written): they are
neither lost when unread nor unexpected when read; ``CheckResult.failed_but_read`` counts
them. Values are strings; give every send a distinct value. Recording is thread-safe.

Example::

    history = History()
    history.send_invoked("orders", "v1", producer="p1")
    history.send_acked("orders", "v1", partition=0, offset=0)
    history.poll("c1", "orders", 0, [(0, "v1")])
    result = history.check()
    assert result.valid, result.summary()
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Position = tuple[str, int, int]  # topic, partition, offset


@dataclass
class Send:
    """One produce of one value, from invocation to its outcome."""

    topic: str
    value: str
    producer: str
    invoked_at: float
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    completed_at: float | None = None

    @property
    def acked(self) -> bool:
        return self.offset is not None and self.error is None

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class Poll:
    """What one consumer received from one partition in one poll (or a reset marker)."""

    consumer: str
    topic: str
    partition: int
    records: list[tuple[int, str]]
    at: float
    reset: bool = False


@dataclass
class CheckResult:
    """The anomalies found; ``valid`` when there are none of the kinds asked for."""

    sends: int
    acked: int
    failed: int
    read_positions: int
    lost: list[str] = field(default_factory=list)
    duplicates: dict[str, list[Position]] = field(default_factory=dict)
    inconsistent_offsets: dict[Position, list[str]] = field(default_factory=dict)
    nonmonotonic_polls: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    reordered: list[dict[str, Any]] = field(default_factory=list)
    failed_but_read: int = 0
    checked: tuple[str, ...] = ()

    ANOMALIES = ("lost", "duplicates", "inconsistent_offsets", "nonmonotonic_polls",
                 "unexpected", "reordered")

    @property
    def valid(self) -> bool:
        return not any(getattr(self, kind) for kind in self.checked)

    def counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in self.ANOMALIES}

    def summary(self, examples: int = 5) -> str:
        """A few lines for a test failure message: the counts, then examples of each kind."""
        lines = [
            f"sends={self.sends} acked={self.acked} failed={self.failed} "
            f"read_positions={self.read_positions} failed_but_read={self.failed_but_read} "
            f"valid={self.valid} (checked: {', '.join(self.checked)})"
        ]
        for kind in self.ANOMALIES:
            found = getattr(self, kind)
            if not found:
                continue
            items = list(found.items()) if isinstance(found, dict) else list(found)
            lines.append(f"{kind}: {len(found)}, e.g. {items[:examples]!r}")
        return "\n".join(lines)


class History:
    """The record of a run: every send and every poll, in the order they happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sends: list[Send] = []
        self._by_value: dict[str, Send] = {}
        self.polls: list[Poll] = []

    # --- recording -------------------------------------------------------------------------

    def send_invoked(self, topic: str, value: str, *, producer: str = "producer",
                     partition: int | None = None) -> Send:
        """Record that ``value`` is about to be produced. Values must be distinct."""
        send = Send(topic=topic, value=value, producer=producer, invoked_at=time.monotonic(),
                    partition=partition)
        with self._lock:
            if value in self._by_value:
                raise ValueError(f"value {value!r} was already sent; values must be distinct")
            self._by_value[value] = send
            self.sends.append(send)
        return send

    def send_acked(self, topic: str, value: str, partition: int, offset: int) -> None:
        """Record the broker's acknowledgement of ``value`` at ``partition``/``offset``."""
        with self._lock:
            send = self._sent(value)
            send.topic, send.partition, send.offset = topic, partition, offset
            send.error, send.completed_at = None, time.monotonic()

    def send_failed(self, value: str, error: str) -> None:
        """Record that the produce of ``value`` ended in ``error`` (indeterminate)."""
        with self._lock:
            send = self._sent(value)
            send.error, send.completed_at = error, time.monotonic()

    def poll(self, consumer: str, topic: str, partition: int,
             records: Iterable[tuple[int, str]]) -> None:
        """Record the (offset, value) pairs ``consumer`` received from one partition."""
        entry = Poll(consumer=consumer, topic=topic, partition=partition,
                     records=[(int(offset), value) for offset, value in records],
                     at=time.monotonic())
        with self._lock:
            self.polls.append(entry)

    def reset(self, consumer: str, topic: str, partition: int) -> None:
        """``consumer`` legitimately moved its position on this partition (seek, new
        assignment): its next poll there may go backwards."""
        with self._lock:
            self.polls.append(Poll(consumer=consumer, topic=topic, partition=partition,
                                   records=[], at=time.monotonic(), reset=True))

    def _sent(self, value: str) -> Send:
        send = self._by_value.get(value)
        if send is None:
            raise KeyError(f"value {value!r} was never recorded as sent")
        return send

    # --- the checker -----------------------------------------------------------------------

    def acked_values(self) -> list[str]:
        with self._lock:
            return [send.value for send in self.sends if send.acked]

    def check(self, anomalies: Sequence[str] = CheckResult.ANOMALIES) -> CheckResult:
        """Look for every anomaly; ``anomalies`` names the kinds that make it invalid."""
        unknown = set(anomalies) - set(CheckResult.ANOMALIES)
        if unknown:
            raise ValueError(f"unknown anomaly kinds: {sorted(unknown)}")
        with self._lock:
            sends = list(self.sends)
            polls = list(self.polls)
            by_value = dict(self._by_value)

        # Every position read, with the values seen there; every value, with its positions.
        values_at: dict[Position, set[str]] = {}
        positions_of: dict[str, set[Position]] = {}
        for entry in polls:
            for offset, value in entry.records:
                position = (entry.topic, entry.partition, offset)
                values_at.setdefault(position, set()).add(value)
                positions_of.setdefault(value, set()).add(position)

        acked = [send for send in sends if send.acked]
        result = CheckResult(
            sends=len(sends), acked=len(acked),
            failed=sum(1 for send in sends if send.failed),
            read_positions=len(values_at), checked=tuple(anomalies),
        )
        result.lost = [send.value for send in acked if send.value not in positions_of]
        result.duplicates = {
            value: sorted(positions) for value, positions in positions_of.items()
            if len(positions) > 1
        }

        # An acknowledgement also says what is at its position.
        claimed_at = {position: set(values) for position, values in values_at.items()}
        for send in acked:
            assert send.partition is not None and send.offset is not None
            claimed_at.setdefault((send.topic, send.partition, send.offset), set()).add(
                send.value)
        result.inconsistent_offsets = {
            position: sorted(values) for position, values in sorted(claimed_at.items())
            if len(values) > 1
        }

        result.unexpected = sorted(value for value in positions_of if value not in by_value)
        result.failed_but_read = sum(
            1 for send in sends if send.failed and send.value in positions_of)
        result.nonmonotonic_polls = _nonmonotonic(polls)
        result.reordered = _reordered(acked)
        return result

    # --- persistence -----------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the history as JSON lines (sends, then polls) for a post-mortem."""
        with self._lock:
            sends = list(self.sends)
            polls = list(self.polls)
        with open(path, "w", encoding="utf-8") as out:
            for send in sends:
                out.write(json.dumps({"type": "send", **asdict(send)}) + "\n")
            for entry in polls:
                out.write(json.dumps({"type": "poll", **asdict(entry)}) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> History:
        history = cls()
        with open(path, encoding="utf-8") as source:
            for line in source:
                item = json.loads(line)
                kind = item.pop("type")
                if kind == "send":
                    send = Send(**item)
                    history.sends.append(send)
                    history._by_value[send.value] = send
                else:
                    item["records"] = [tuple(record) for record in item["records"]]
                    history.polls.append(Poll(**item))
        return history


def _nonmonotonic(polls: list[Poll]) -> list[dict[str, Any]]:
    """Per consumer and partition, offsets must strictly rise from one record to the next."""
    last: dict[tuple[str, str, int], int] = {}
    found: list[dict[str, Any]] = []
    for entry in polls:
        key = (entry.consumer, entry.topic, entry.partition)
        if entry.reset:
            last.pop(key, None)
            continue
        for offset, value in entry.records:
            previous = last.get(key)
            if previous is not None and offset <= previous:
                found.append({"consumer": entry.consumer, "topic": entry.topic,
                              "partition": entry.partition, "previous_offset": previous,
                              "offset": offset, "value": value})
            last[key] = offset
    return found


def _reordered(acked: list[Send]) -> list[dict[str, Any]]:
    """Per producer and partition, in send order, acknowledged offsets must rise."""
    found: list[dict[str, Any]] = []
    highest: dict[tuple[str, str, int], Send] = {}
    for send in acked:  # already in invocation order
        assert send.partition is not None and send.offset is not None
        key = (send.producer, send.topic, send.partition)
        before = highest.get(key)
        if before is not None and before.offset is not None and send.offset <= before.offset:
            found.append({"producer": send.producer, "topic": send.topic,
                          "partition": send.partition, "earlier": before.value,
                          "earlier_offset": before.offset, "later": send.value,
                          "later_offset": send.offset})
        if before is None or (before.offset is not None and send.offset > before.offset):
            highest[key] = send
    return found
