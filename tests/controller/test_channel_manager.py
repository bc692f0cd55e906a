"""ControllerBrokerRequestBatch: what one batch sends each broker."""

from __future__ import annotations

import uuid

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.channel_manager import ControllerBrokerRequestBatch
from kafkaclone.controller.context import ControllerContext
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.zk.znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from tests.controller.helpers import FakeChannel, Sent, broker_info, of_kind


def context_of(live: tuple[int, ...]) -> ControllerContext:
    context = ControllerContext()
    context.set_live_brokers({b: (broker_info(b), 100 + b) for b in live})
    context.topic_ids["t"] = uuid.UUID(int=7)
    context.all_topics = {"t"}
    context.partition_assignments["t"] = {
        p: ReplicaAssignment((1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3)) for p in range(6)}
    for p in range(6):
        context.partition_leadership_info[TopicPartition("t", p)] = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1 + p % 3, 4, (1, 2, 3), 9), 2)
    return context


def partition_states(sent: Sent) -> dict[int, tuple[int, list[int], list[int], bool]]:
    (topic,) = sent.body.topic_states
    return {s.partition_index: (s.leader, s.isr, s.replicas, s.is_new)
            for s in topic.partition_states}


@pytest.mark.timeout(30)
def test_each_replica_gets_the_partition_state_and_keeps_is_new_once_set() -> None:
    context = context_of((1, 2, 3))
    context.replicas_on_offline_dirs[2] = {TopicPartition("t", 1)}
    sent: list[Sent] = []
    batch = ControllerBrokerRequestBatch(1, context, FakeChannel(sent, {1, 2, 3}))
    batch.new_batch()
    for p in range(6):
        tp = TopicPartition("t", p)
        state = context.partition_leadership_info[tp]
        replicas = context.partition_replica_assignment(tp)
        batch.add_leader_and_isr_request_for_brokers(replicas[:2], tp, state, is_new=True)
        batch.add_leader_and_isr_request_for_brokers(replicas, tp, state, is_new=False)
    batch.send_requests_to_brokers(2)
    batch.clear()

    for broker in (1, 2, 3):
        (request,) = of_kind(sent, ApiKey.LEADER_AND_ISR, broker)
        assert request.body.broker_epoch == 100 + broker
        states = partition_states(request)
        assert sorted(states) == list(range(6))  # every partition has a replica on each
        for p, (leader, isr, replicas, is_new) in states.items():
            assigned = list(context.partition_replica_assignment(TopicPartition("t", p)))
            assert (leader, isr, replicas) == (1 + p % 3, [1, 2, 3], assigned)
            # new for the two replicas first named with is_new, not for the third
            assert is_new == (broker in assigned[:2]), (broker, p)
        (update,) = of_kind(sent, ApiKey.UPDATE_METADATA, broker)
        (topic,) = update.body.topic_states
        offline = {s.partition_index: s.offline_replicas for s in topic.partition_states}
        assert offline == {p: [2] if p == 1 else [] for p in range(6)}


@pytest.mark.timeout(30)
def test_dead_brokers_get_nothing_and_are_offline_replicas() -> None:
    context = context_of((1, 3))
    sent: list[Sent] = []
    batch = ControllerBrokerRequestBatch(1, context, FakeChannel(sent, {1, 3}))
    batch.new_batch()
    tp = TopicPartition("t", 0)
    batch.add_leader_and_isr_request_for_brokers(
        (1, 2, 3), tp, context.partition_leadership_info[tp], is_new=False)
    batch.send_requests_to_brokers(2)
    batch.clear()
    assert sorted(s.broker_id for s in of_kind(sent, ApiKey.LEADER_AND_ISR)) == [1, 3]
    updates = of_kind(sent, ApiKey.UPDATE_METADATA)
    assert sorted(s.broker_id for s in updates) == [1, 3]
    for update in updates:
        (topic,) = update.body.topic_states
        assert [s.offline_replicas for s in topic.partition_states] == [[2]]


@pytest.mark.timeout(30)
def test_a_shutting_down_broker_gets_requests_and_is_an_offline_replica() -> None:
    context = context_of((1, 2, 3))
    context.shutting_down_broker_ids.add(3)
    assert context.offline_replicas(TopicPartition("t", 0), (1, 2, 3, 4)) == [3, 4]
    sent: list[Sent] = []
    batch = ControllerBrokerRequestBatch(1, context, FakeChannel(sent, {1, 2, 3}))
    batch.new_batch()
    tp = TopicPartition("t", 0)
    batch.add_leader_and_isr_request_for_brokers(
        (1, 2, 3, 4), tp, context.partition_leadership_info[tp], is_new=False)
    batch.send_requests_to_brokers(2)
    batch.clear()
    assert sorted(s.broker_id for s in of_kind(sent, ApiKey.LEADER_AND_ISR)) == [1, 2, 3]
    updates = of_kind(sent, ApiKey.UPDATE_METADATA)
    assert sorted(s.broker_id for s in updates) == [1, 2, 3]
    for update in updates:
        (topic,) = update.body.topic_states
        assert [s.offline_replicas for s in topic.partition_states] == [[3]]
