"""The transaction coordinator on a task.Clock with an in-memory __transaction_state and a
recording markers channel: init, add partitions, commit, abort, fencing, timeouts,
expiration, loading and emigration."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from twisted.internet.defer import Deferred

from kafkaclone.common.errors import (
    NONE,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.coordinator import InitProducerIdResult
from kafkaclone.coordinator.transaction.metadata import TransactionState
from tests.coordinator.txn_helpers import (
    ABORT_INTERVAL_MS,
    EXPIRATION_MS,
    MAX_TIMEOUT_MS,
    REMOVE_INTERVAL_MS,
    Harness,
    make_harness,
)

pytestmark = pytest.mark.timeout(30)

S = TransactionState
T = TypeVar("T")
TX = "tx"
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def run(coro: Coroutine[Any, Any, T]) -> T:
    box: list[Any] = []
    Deferred.fromCoroutine(coro).addBoth(box.append)
    assert box, "did not complete"
    if isinstance(box[0], BaseException):
        raise box[0]
    result: T = box[0]
    return result


def init(h: Harness, timeout_ms: int = 60_000, expected: tuple[int, int] | None = None
         ) -> InitProducerIdResult:
    return run(h.coordinator.handle_init_producer_id(TX, timeout_ms, expected))


def add(h: Harness, pid: int, epoch: int, *partitions: TopicPartition) -> int:
    return run(h.coordinator.handle_add_partitions_to_transaction(TX, pid, epoch,
                                                                  partitions or (TP0,)))


def end(h: Harness, pid: int, epoch: int, commit: bool) -> int:
    return run(h.coordinator.handle_end_transaction(TX, pid, epoch, commit))


def state(h: Harness) -> Any:
    entry = h.state_manager.get_transaction_state(TX)
    assert entry is not None
    return entry.metadata


def statuses(h: Harness) -> list[S | None]:
    partition = h.state_manager.partition_for(TX)
    return [None if r.value is None else r.value.txn_state for r in h.log.records(partition)]


def test_init_gives_a_new_id_then_bumps_the_epoch() -> None:
    h = make_harness()
    assert init(h) == InitProducerIdResult(NONE, 1000, 0)
    assert init(h) == InitProducerIdResult(NONE, 1000, 1)
    assert statuses(h) == [S.EMPTY, S.EMPTY]
    assert init(h, timeout_ms=MAX_TIMEOUT_MS + 1).error_code == \
        InvalidTransactionTimeoutError.code
    assert init(h, timeout_ms=0).error_code == InvalidTransactionTimeoutError.code
    assert run(h.coordinator.handle_init_producer_id("", 1000, None)).error_code == \
        InvalidRequestError.code


def test_kip_360_expected_epoch() -> None:
    h = make_harness()
    init(h)
    assert init(h, expected=(1000, 0)) == InitProducerIdResult(NONE, 1000, 1)
    assert init(h, expected=(999, 1)).error_code == ProducerFencedError.code
    assert init(h, expected=(1000, 0)) == InitProducerIdResult(NONE, 1000, 1)  # a retry


def test_commit() -> None:
    h = make_harness()
    init(h)
    assert add(h, 1000, 0, TP0) == NONE
    assert add(h, 1000, 0, TP0, TP1) == NONE
    assert add(h, 1000, 0, TP1) == NONE  # already in: nothing written
    assert state(h).state is S.ONGOING and state(h).topic_partitions == {TP0, TP1}
    assert end(h, 1000, 0, commit=True) == NONE
    assert state(h).state is S.PREPARE_COMMIT
    [entry] = h.markers.sent
    assert (entry.producer_id, entry.producer_epoch, entry.commit, entry.partitions,
            entry.coordinator_epoch) == (1000, 0, True, frozenset({TP0, TP1}), 0)
    # Markers outstanding: the producer waits.
    assert add(h, 1000, 0, TP0) == ConcurrentTransactionsError.code
    assert init(h).error_code == ConcurrentTransactionsError.code
    assert end(h, 1000, 0, commit=True) == ConcurrentTransactionsError.code
    assert end(h, 1000, 0, commit=False) == InvalidTxnStateError.code
    h.markers.write_all()
    assert state(h).state is S.COMPLETE_COMMIT and state(h).topic_partitions == set()
    assert statuses(h) == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert end(h, 1000, 0, commit=True) == NONE  # a retry
    assert end(h, 1000, 0, commit=False) == InvalidTxnStateError.code
    assert add(h, 1000, 0, TP1) == NONE  # the next transaction
    assert state(h).topic_partitions == {TP1}


def test_abort() -> None:
    h = make_harness()
    init(h)
    add(h, 1000, 0)
    assert end(h, 1000, 0, commit=False) == NONE
    assert h.markers.sent[0].commit is False
    h.markers.write_all()
    assert state(h).state is S.COMPLETE_ABORT


def test_bad_input_changes_nothing() -> None:
    h = make_harness()
    assert end(h, 1000, 0, commit=True) == InvalidProducerIdMappingError.code
    init(h)
    assert end(h, 1000, 0, commit=True) == InvalidTxnStateError.code  # no transaction
    assert add(h, 1000, 1) == ProducerFencedError.code
    assert add(h, 1001, 0) == InvalidProducerIdMappingError.code
    assert end(h, 1001, 0, commit=True) == InvalidProducerIdMappingError.code
    assert state(h).state is S.EMPTY and statuses(h) == [S.EMPTY]


def test_a_new_producer_fences_the_ongoing_transaction() -> None:
    h = make_harness()
    init(h)
    add(h, 1000, 0)
    assert init(h).error_code == ConcurrentTransactionsError.code
    [entry] = h.markers.sent
    assert (entry.commit, entry.producer_epoch) == (False, 1)  # the abort fences epoch 0
    assert add(h, 1000, 0) == ProducerFencedError.code
    assert end(h, 1000, 0, commit=True) == ProducerFencedError.code
    assert init(h).error_code == ConcurrentTransactionsError.code
    h.markers.write_all()
    assert state(h).state is S.COMPLETE_ABORT
    assert init(h) == InitProducerIdResult(NONE, 1000, 2)
    assert statuses(h) == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY]


def test_timed_out_transactions_are_aborted_and_the_producer_fenced() -> None:
    h = make_harness()
    init(h, timeout_ms=5_000)
    add(h, 1000, 0)
    h.clock.advance(ABORT_INTERVAL_MS / 1000)
    [entry] = h.markers.sent
    assert (entry.commit, entry.producer_epoch) == (False, 1)
    h.markers.write_all()
    assert state(h).state is S.COMPLETE_ABORT and state(h).producer_epoch == 1
    assert end(h, 1000, 0, commit=True) == ProducerFencedError.code


def test_a_failed_write_answers_coordinator_not_available_and_changes_nothing() -> None:
    h = make_harness()
    init(h)
    h.log.error = NotEnoughReplicasError.code
    assert add(h, 1000, 0) == CoordinatorNotAvailableError.code
    assert state(h).state is S.EMPTY and state(h).pending_state is None


def test_idle_ids_expire() -> None:
    h = make_harness()
    init(h)
    h.clock.advance((EXPIRATION_MS + REMOVE_INTERVAL_MS) / 1000)
    assert statuses(h) == [S.EMPTY, None]
    assert h.state_manager.get_transaction_state(TX) is None


def test_a_new_coordinator_finishes_a_prepared_commit() -> None:
    old = make_harness()
    init(old)
    add(old, 1000, 0, TP0, TP1)
    end(old, 1000, 0, commit=True)
    partition = old.state_manager.partition_for(TX)
    new = make_harness(owned=())
    new.log.partitions = {p: list(r) for p, r in old.log.partitions.items()}
    new.coordinator.on_election(partition, 5)
    [entry] = new.markers.sent
    assert (entry.commit, entry.partitions, entry.coordinator_epoch) == (
        True, frozenset({TP0, TP1}), 5)
    new.markers.write_all()
    assert state(new).state is S.COMPLETE_COMMIT
    # The old coordinator lost the partition: NOT_COORDINATOR, its markers dropped.
    old.coordinator.on_resignation(partition)
    assert partition in old.markers.removed
    assert end(old, 1000, 0, commit=True) == NotCoordinatorError.code
    assert statuses(old)[-1] is S.PREPARE_COMMIT  # nothing written after resigning


def test_requests_while_loading() -> None:
    h = make_harness(owned=())
    assert init(h).error_code == NotCoordinatorError.code
    hold: Deferred[None] = Deferred()
    read = h.log.read

    async def slow_read(partition: int) -> Any:
        await hold
        return await read(partition)

    h.log.read = slow_read  # type: ignore[method-assign]
    h.coordinator.on_election(h.state_manager.partition_for(TX), 1)
    assert init(h).error_code == CoordinatorLoadInProgressError.code
    hold.callback(None)
    assert init(h).error_code == NONE
