"""The transactional history checker on made-up histories (no containers), so the
transactional scenario's assertions are known to fail when a history shows an anomaly."""

from __future__ import annotations

import pytest

from .checks import TransactionHistory

pytestmark = pytest.mark.timeout(30)


def committed_and_aborted() -> TransactionHistory:
    """p1 commits a (offsets 0, 1 of partition 0) and ends it at t=10; p2 aborts b (offset
    2) at t=20; p1 commits c (offset 4, after b's abort marker) at t=30."""
    history = TransactionHistory("t")
    for producer, number, values, offsets, outcome, end in (
            ("p1", 0, ["a0", "a1"], [0, 1], "committed", 10.0),
            ("p2", 0, ["b0"], [2], "aborted", 20.0),
            ("p1", 1, ["c0"], [4], "committed", 30.0)):
        txn = history.begin(producer, number)
        for value, offset in zip(values, offsets, strict=True):
            history.sent(txn, value)
            history.acked(value, 0, offset)
        history.ended(txn, outcome)
        txn.ending_at = end
    return history


def test_a_correct_history_is_valid() -> None:
    history = committed_and_aborted()
    history.poll("c", 0, [(0, "a0"), (1, "a1")], at=11.0)
    history.poll("c", 0, [(4, "c0")], at=31.0)
    result = history.check()
    assert result.valid, result.summary()
    assert result.transactions == {"committed": 2, "aborted": 1}
    assert result.read_positions == 3


def test_each_anomaly_is_reported() -> None:
    history = committed_and_aborted()
    history.poll("c", 0, [(0, "a0")], at=9.0)  # before a's commit was asked: past open
    history.poll("c", 0, [(2, "b0")], at=25.0)  # aborted read
    history.poll("c", 0, [(5, "a0")], at=40.0)  # a0 at a second position
    history.poll("c", 0, [(7, "zz")], at=40.0)  # never sent
    # a1 and c0 never read: lost (aborted b0 is not expected to be read).
    result = history.check()
    assert not result.valid
    assert result.aborted_reads == ["b0"]
    assert result.lost == ["a1", "c0"]
    assert result.duplicates == {"a0": [(0, 0), (0, 5)]}
    assert result.unexpected == ["zz"]
    assert [(r["offset"], r["value"]) for r in result.reads_past_open] == [(0, "a0")]


def test_a_read_past_another_open_transaction_is_reported() -> None:
    history = committed_and_aborted()
    # c0 (offset 4) read at t=15: c's own commit was not asked yet, nor b's abort (offset 2).
    history.poll("c", 0, [(0, "a0"), (1, "a1"), (4, "c0")], at=15.0)
    result = history.check()
    assert [(r["offset"], r["open_until"]) for r in result.reads_past_open] == [(4, 30.0)]
    # Read at t=25 (after b's abort, before c's commit), c0 is still past its own open txn.
    history = committed_and_aborted()
    history.poll("c", 0, [(0, "a0"), (1, "a1")], at=25.0)
    history.poll("c", 0, [(4, "c0")], at=29.0)
    assert [r["offset"] for r in history.check().reads_past_open] == [4]


def test_an_unknown_outcome_may_be_read_or_not() -> None:
    history = TransactionHistory("t")
    txn = history.begin("p1", 0)
    history.sent(txn, "u0")
    history.acked("u0", 0, 0)
    history.ended(txn, "unknown")
    txn.ending_at = 5.0
    assert history.check().valid
    history.poll("c", 0, [(0, "u0")], at=6.0)
    assert history.check().valid
    history.poll("c", 0, [(0, "u0")], at=4.0)  # before the producer even failed
    assert len(history.check().reads_past_open) == 1
