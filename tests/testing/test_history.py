"""The history checker finds each anomaly it claims to, and passes a clean history."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkaclone.testing.history import CheckResult, History

TOPIC = "t"


def clean_history() -> History:
    """Two producers, two partitions, one consumer reading everything once, in order."""
    history = History()
    for index in range(10):
        partition = index % 2
        value = f"v{index}"
        history.send_invoked(TOPIC, value, producer=f"p{partition}")
        history.send_acked(TOPIC, value, partition, index // 2)
    history.poll("c1", TOPIC, 0, [(0, "v0"), (1, "v2"), (2, "v4")])
    history.poll("c1", TOPIC, 1, [(0, "v1"), (1, "v3")])
    history.poll("c1", TOPIC, 0, [(3, "v6"), (4, "v8")])
    history.poll("c1", TOPIC, 1, [(2, "v5"), (3, "v7"), (4, "v9")])
    return history


def test_a_clean_history_passes() -> None:
    result = clean_history().check()
    assert result.valid, result.summary()
    assert result.counts() == dict.fromkeys(CheckResult.ANOMALIES, 0)
    assert (result.sends, result.acked, result.failed, result.read_positions) == (10, 10, 0, 10)


def test_an_acknowledged_value_never_read_is_lost() -> None:
    history = clean_history()
    history.send_invoked(TOPIC, "late")
    history.send_acked(TOPIC, "late", 0, 5)
    result = history.check()
    assert not result.valid
    assert result.lost == ["late"]
    assert "lost: 1" in result.summary()


def test_a_failed_send_is_indeterminate_read_or_not() -> None:
    history = clean_history()
    history.send_invoked(TOPIC, "timed-out")
    history.send_failed("timed-out", "KafkaError{code=_MSG_TIMED_OUT}")
    history.send_invoked(TOPIC, "written-anyway")
    history.send_failed("written-anyway", "KafkaError{code=NOT_ENOUGH_REPLICAS}")
    history.poll("c1", TOPIC, 0, [(5, "written-anyway")])
    result = history.check()
    assert result.valid, result.summary()
    assert (result.failed, result.failed_but_read) == (2, 1)


def test_a_value_read_at_two_offsets_is_a_duplicate() -> None:
    history = clean_history()
    history.poll("c1", TOPIC, 1, [(5, "v3")])  # a retried produce written twice
    result = history.check()
    assert not result.valid
    assert result.duplicates == {"v3": [(TOPIC, 1, 1), (TOPIC, 1, 5)]}
    assert not result.lost and not result.inconsistent_offsets and not result.nonmonotonic_polls


def test_two_values_at_one_offset_are_inconsistent() -> None:
    history = clean_history()
    # A second consumer reads another value at partition 0 offset 2 (divergent replicas).
    history.send_invoked(TOPIC, "other")
    history.send_failed("other", "timeout")
    history.poll("c2", TOPIC, 0, [(2, "other")])
    result = history.check()
    assert not result.valid
    assert result.inconsistent_offsets == {(TOPIC, 0, 2): ["other", "v4"]}


def test_an_ack_contradicted_by_a_read_is_inconsistent() -> None:
    history = History()
    history.send_invoked(TOPIC, "a")
    history.send_acked(TOPIC, "a", 0, 0)
    history.send_invoked(TOPIC, "b")
    history.send_acked(TOPIC, "b", 0, 0)  # the broker handed out offset 0 twice
    history.poll("c1", TOPIC, 0, [(0, "b")])
    result = history.check()
    assert result.inconsistent_offsets == {(TOPIC, 0, 0): ["a", "b"]}
    assert result.lost == ["a"]


def test_a_poll_going_backwards_is_nonmonotonic_unless_reset() -> None:
    history = clean_history()
    history.poll("c1", TOPIC, 0, [(1, "v2")])
    result = history.check()
    assert not result.valid
    assert result.nonmonotonic_polls == [{
        "consumer": "c1", "topic": TOPIC, "partition": 0, "previous_offset": 4,
        "offset": 1, "value": "v2",
    }]

    after_seek = clean_history()
    after_seek.reset("c1", TOPIC, 0)
    after_seek.poll("c1", TOPIC, 0, [(1, "v2")])
    assert after_seek.check().nonmonotonic_polls == []


def test_the_same_offset_twice_in_a_row_is_nonmonotonic() -> None:
    history = History()
    history.send_invoked(TOPIC, "a")
    history.send_acked(TOPIC, "a", 0, 0)
    history.poll("c1", TOPIC, 0, [(0, "a"), (0, "a")])
    assert len(history.check().nonmonotonic_polls) == 1


def test_other_consumers_have_their_own_positions() -> None:
    history = clean_history()
    history.poll("c2", TOPIC, 0, [(0, "v0")])
    assert history.check().valid


def test_a_value_nobody_sent_is_unexpected() -> None:
    history = clean_history()
    history.poll("c1", TOPIC, 0, [(5, "ghost")])
    result = history.check()
    assert not result.valid
    assert result.unexpected == ["ghost"]


def test_acks_out_of_send_order_are_reordered() -> None:
    history = History()
    for value in ("a", "b", "c"):
        history.send_invoked(TOPIC, value, producer="p")
    history.send_acked(TOPIC, "b", 0, 0)  # a retried "a" landed after "b"
    history.send_acked(TOPIC, "a", 0, 1)
    history.send_acked(TOPIC, "c", 0, 2)
    history.poll("c1", TOPIC, 0, [(0, "b"), (1, "a"), (2, "c")])
    result = history.check()
    assert not result.valid
    assert result.reordered == [{
        "producer": "p", "topic": TOPIC, "partition": 0, "earlier": "a",
        "earlier_offset": 1, "later": "b", "later_offset": 0,
    }]


def test_different_producers_are_not_ordered_against_each_other() -> None:
    history = History()
    history.send_invoked(TOPIC, "a", producer="p1")
    history.send_invoked(TOPIC, "b", producer="p2")
    history.send_acked(TOPIC, "b", 0, 0)
    history.send_acked(TOPIC, "a", 0, 1)
    history.poll("c1", TOPIC, 0, [(0, "b"), (1, "a")])
    assert history.check().valid


def test_only_the_kinds_asked_for_decide_validity() -> None:
    history = clean_history()
    history.poll("c1", TOPIC, 1, [(5, "v3")])
    assert not history.check().valid
    relaxed = history.check(anomalies=("lost", "inconsistent_offsets", "unexpected"))
    assert relaxed.valid and relaxed.duplicates
    with pytest.raises(ValueError, match="unknown anomaly"):
        history.check(anomalies=("lost", "bogus"))


def test_values_must_be_distinct_and_known() -> None:
    history = History()
    history.send_invoked(TOPIC, "a")
    with pytest.raises(ValueError, match="distinct"):
        history.send_invoked(TOPIC, "a")
    with pytest.raises(KeyError):
        history.send_acked(TOPIC, "never-sent", 0, 0)


def test_concurrent_recording_loses_nothing() -> None:
    history = History()

    def produce(name: str) -> None:
        for index in range(500):
            value = f"{name}-{index}"
            history.send_invoked(TOPIC, value, producer=name)
            history.send_acked(TOPIC, value, 0 if name == "a" else 1, index)

    threads = [threading.Thread(target=produce, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    result = history.check()
    assert (result.sends, result.acked) == (1000, 1000)
    assert len(result.lost) == 1000  # nothing was read


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    history = clean_history()
    history.send_invoked(TOPIC, "x")
    history.send_failed("x", "boom")
    history.reset("c1", TOPIC, 0)
    history.poll("c1", TOPIC, 0, [(0, "v0")])
    path = tmp_path / "history.jsonl"
    history.save(path)
    loaded = History.load(path)
    assert loaded.check() == history.check()
    assert len(loaded.sends) == 11 and len(loaded.polls) == len(history.polls)
