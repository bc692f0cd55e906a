"""The transaction state machine: its table of legal transitions, enforced, and the epoch
rules of InitProducerId (Kafka 2.8's TransactionMetadata)."""

from __future__ import annotations

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.metadata import (
    VALID_PREVIOUS_STATES,
    IllegalTransactionStateTransition,
    TransactionMetadata,
    TransactionState,
)

pytestmark = pytest.mark.timeout(30)

S = TransactionState
TP = TopicPartition("t", 0)


def metadata(state: TransactionState, epoch: int = 3) -> TransactionMetadata:
    return TransactionMetadata("tx", 7, -1, epoch, -1, 60_000, state)


def test_the_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert [s.kafka_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
        "CompleteAbort", "Dead", "PrepareEpochFence"]


@pytest.mark.parametrize("state", list(S))
def test_commit_is_refused_outside_ongoing(state: TransactionState) -> None:
    m = metadata(state)
    if state is S.ONGOING:
        transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 10)
        m.complete_transition_to(transit)
        assert m.state is S.PREPARE_COMMIT and m.pending_state is None
    else:
        with pytest.raises(IllegalTransactionStateTransition):
            m.prepare_abort_or_commit(S.PREPARE_COMMIT, 10)
        assert m.state is state and m.pending_state is None


def test_a_full_transaction_and_a_pending_state_blocks_another() -> None:
    m = metadata(S.EMPTY)
    transit = m.prepare_add_partitions([TP], 100)
    with pytest.raises(IllegalTransactionStateTransition):
        m.prepare_add_partitions([TP], 101)
    m.complete_transition_to(transit)
    assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.ONGOING, {TP}, 100)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_ABORT, 200))
    m.complete_transition_to(m.prepare_complete(300))
    assert (m.state, m.topic_partitions, m.txn_last_update_timestamp) == (
        S.COMPLETE_ABORT, set(), 300)


def test_a_failed_write_changes_nothing() -> None:
    m = metadata(S.EMPTY)
    m.prepare_add_partitions([TP], 100)
    m.clear_pending()
    assert (m.state, m.topic_partitions, m.pending_state) == (S.EMPTY, set(), None)


def test_completing_another_state_than_the_pending_one_is_refused() -> None:
    m = metadata(S.ONGOING)
    transit = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    m.clear_pending()
    with pytest.raises(IllegalTransactionStateTransition):
        m.complete_transition_to(transit)


def test_fencing_bumps_the_epoch_in_memory() -> None:
    m = metadata(S.ONGOING, epoch=3)
    m.prepare_fence_producer_epoch()
    assert (m.state, m.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 4)
    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_ABORT, 5))
    assert m.state is S.PREPARE_ABORT
    with pytest.raises(IllegalTransactionStateTransition):
        metadata(S.EMPTY).prepare_fence_producer_epoch()


def test_epoch_rules_of_init_producer_id() -> None:
    m = metadata(S.COMPLETE_COMMIT, epoch=3)
    transit = m.prepare_increment_producer_epoch(1000, None, 9)
    assert transit is not None and (transit.producer_epoch, transit.last_producer_epoch) == (4, -1)
    m.clear_pending()
    transit = m.prepare_increment_producer_epoch(1000, 3, 9)  # KIP-360: current epoch
    assert transit is not None and (transit.producer_epoch, transit.last_producer_epoch) == (4, 3)
    m.complete_transition_to(transit)
    retry = m.prepare_increment_producer_epoch(1000, 3, 9)  # a retry of that bump
    assert retry is not None and (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    m.clear_pending()
    assert m.prepare_increment_producer_epoch(1000, 1, 9) is None  # fenced
    exhausted = metadata(S.EMPTY, epoch=2**15 - 2)
    assert exhausted.is_producer_epoch_exhausted()
    rotated = exhausted.prepare_producer_id_rotation(8, 1000, 9, record_last_epoch=True)
    assert (rotated.producer_id, rotated.last_producer_id, rotated.producer_epoch) == (8, 7, 0)
