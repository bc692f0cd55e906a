"""The consumer's SubscriptionState, without a cluster."""

from __future__ import annotations

import re

import pytest

from kafkaclone.clients.common import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition
from kafkaclone.clients.subscription_state import (
    EARLIEST,
    LATEST,
    RebalanceListener,
    SubscriptionState,
)


def test_assign_keeps_the_state_of_kept_partitions_and_bumps_the_id() -> None:
    subscriptions = SubscriptionState("latest")
    subscriptions.assign([TopicPartition("t", 0, 5), TopicPartition("t", 1)])
    kept = subscriptions.assignment[("t", 0)]
    first_id = subscriptions.assignment_id
    subscriptions.assign([TopicPartition("t", 0, 5), TopicPartition("u", 0, OFFSET_BEGINNING)])
    assert subscriptions.assignment[("t", 0)] is kept and kept.position == 5
    assert subscriptions.assignment[("u", 0)].reset_to == EARLIEST
    assert subscriptions.assignment_id == first_id + 1
    assert subscriptions.assigned_with_positions() == [
        TopicPartition("t", 0, 5), TopicPartition("u", 0, OFFSET_INVALID)]
    assert subscriptions.all_consumed() == {("t", 0): 5}
    subscriptions.move_partition_to_end(("t", 0))
    assert subscriptions.assigned() == [TopicPartition("u", 0), TopicPartition("t", 0)]
    with pytest.raises(ValueError, match="Invalid offset"):
        subscriptions.assign([TopicPartition("t", 0, -7)])


def test_seek_pause_and_the_reset_policy() -> None:
    subscriptions = SubscriptionState("latest")
    tp = TopicPartition("t", 0)
    subscriptions.assign([tp])
    subscriptions.seek(tp, OFFSET_INVALID)
    assert subscriptions.state(tp).reset_to == LATEST
    subscriptions.seek(tp, 42)
    assert (subscriptions.state(tp).position, subscriptions.state(tp).reset_to) == (42, None)
    subscriptions.pause(tp)
    assert subscriptions.paused() == [tp]
    subscriptions.resume(tp)
    assert subscriptions.paused() == []
    assert SubscriptionState("none").reset_target() is None
    with pytest.raises(ValueError, match="No current assignment"):
        subscriptions.seek(TopicPartition("t", 9), 0)


def test_subscribe_to_names_and_patterns() -> None:
    subscriptions = SubscriptionState("earliest")
    subscriptions.subscribe(["a", "^b.*"], RebalanceListener())
    assert subscriptions.subscribed and subscriptions.topics == ["a"]
    assert subscriptions.pattern is not None and subscriptions.pattern.fullmatch("bx")
    subscriptions.subscribe(re.compile("c"), RebalanceListener())
    assert subscriptions.topics == []
    subscriptions.unsubscribe()
    assert not subscriptions.subscribed and subscriptions.pattern is None
    with pytest.raises(ValueError, match="at least one topic"):
        subscriptions.subscribe([], RebalanceListener())


def test_the_rebalance_listener_forms() -> None:
    calls: list[tuple[str, list[TopicPartition]]] = []
    tps = [TopicPartition("t", 0)]

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            calls.append(("assigned", partitions))

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            raise RuntimeError("a listener that fails is logged")

    listener = RebalanceListener(Listener())
    listener.on_partitions_assigned(tps)
    listener.on_partitions_revoked(tps)
    # Kafka's default on_partitions_lost is on_partitions_revoked.
    RebalanceListener(on_revoke=lambda p: calls.append(("revoked", p))).on_partitions_lost(tps)
    RebalanceListener(on_lost=lambda p: calls.append(("lost", p))).on_partitions_lost(tps)
    assert calls == [("assigned", tps), ("revoked", tps), ("lost", tps)]
