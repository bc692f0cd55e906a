"""The consumer group assignors (Kafka 2.8's range, roundrobin and sticky)."""

from __future__ import annotations

import pytest

from kafkaclone.clients.assignors import (
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    assignor_names,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kafkaclone.clients.config import ConfigException


def test_range_gives_the_first_members_one_more_per_topic() -> None:
    # Kafka's RangeAssignor javadoc: C0 and C1, t0 and t1 with 3 partitions each.
    members = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, members)
    assert result == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}
    # Members subscribed to different topics share only their own topics.
    members = {"a": Subscription(["x"]), "b": Subscription(["x", "y"]), "c": Subscription(["y"])}
    result = RangeAssignor().assign({"x": 5, "y": 1}, members)
    assert result == {"a": {"x": [0, 1, 2]}, "b": {"x": [3, 4], "y": [0]}, "c": {}}


def test_round_robin_deals_sorted_partitions_in_turn() -> None:
    members = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, members)
    assert result == {"C0": {"t0": [0, 2], "t1": [1]}, "C1": {"t0": [1], "t1": [0, 2]}}
    # Kafka's javadoc example with unequal subscriptions.
    members = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
               "C2": Subscription(["t0", "t1", "t2"])}
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, members)
    assert result == {"C0": {"t0": [0]}, "C1": {"t1": [0]},
                      "C2": {"t1": [1], "t2": [0, 1, 2]}}


def test_sticky_balances_and_keeps_what_members_owned() -> None:
    topics = {"t": 6}
    first = StickyAssignor().assign(topics, {m: Subscription(["t"]) for m in "abc"})
    assert sorted(len(a.get("t", [])) for a in first.values()) == [2, 2, 2]
    # A fourth member joins: the others keep what they had except what must move.
    members = {m: Subscription(["t"], first[m], 1) for m in "abc"}
    members["d"] = Subscription(["t"])
    second = StickyAssignor().assign(topics, members)
    counts = sorted(len(a.get("t", [])) for a in second.values())
    assert counts == [1, 1, 2, 2]
    kept = sum(len(set(second[m].get("t", [])) & set(first[m]["t"])) for m in "abc")
    assert kept == 5  # only the partition the new member takes moved
    assert sorted(p for a in second.values() for p in a.get("t", [])) == list(range(6))
    # A member leaves: its partitions are spread, nothing else moves.
    members = {m: Subscription(["t"], second[m], 2) for m in "abd"}
    third = StickyAssignor().assign(topics, members)
    assert sorted(len(a["t"]) for a in third.values()) == [2, 2, 2]
    for m in "abd":
        assert set(second[m].get("t", [])) <= set(third[m]["t"])


def test_sticky_user_data_round_trip_and_names() -> None:
    data = encode_sticky_user_data({"t": [0, 3], "u": [1]}, 7)
    assert decode_sticky_user_data(data) == ({"t": [0, 3], "u": [1]}, 7)
    assert decode_sticky_user_data(b"\x00") == ({}, -1)
    assert assignor_names(["org.apache.kafka.clients.consumer.RangeAssignor", "sticky"]) == \
        ["range", "sticky"]
    with pytest.raises(ConfigException, match=r"partition.assignment.strategy"):
        assignor_names(["cooperative-magic"])
