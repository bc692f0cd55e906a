"""The idempotent producer's bookkeeping without a network: the config rules, sequence
arithmetic, drain gating, in-sequence re-enqueueing and the epoch bump."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from kafkaclone.clients import ConfigException, Producer
from kafkaclone.clients.config import ProducerConfig
from kafkaclone.clients.producer import ProducerBatch
from kafkaclone.clients.transaction_manager import (
    NO_SEQUENCE,
    TransactionManager,
    increment_sequence,
    insert_in_sequence_order,
    resolve_idempotence,
)
from kafkaclone.common.config_def import INT_MAX
from kafkaclone.common.errors import (
    NetworkExceptionError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

pytestmark = pytest.mark.timeout(30)

BOOTSTRAP = "127.0.0.1:1"
TP = ("t", 0)


def resolved(**given: Any) -> tuple[bool, ProducerConfig]:
    config = ProducerConfig({"bootstrap.servers": BOOTSTRAP,
                             **{k.replace("_", "."): v for k, v in given.items()}})
    return resolve_idempotence(config), config


# --- config ---------------------------------------------------------------------------------


def test_idempotence_is_on_by_default_with_acks_all() -> None:
    enabled, config = resolved()
    assert enabled and config.get_bool("enable.idempotence")
    assert config.get_str("acks") == "all"


@pytest.mark.parametrize(("key", "value"), [("acks", "1"), ("acks", "0"), ("retries", 0),
                                            ("max.in.flight.requests.per.connection", 6)])
def test_a_conflicting_setting_turns_default_idempotence_off(key: str, value: Any) -> None:
    enabled, _ = resolved(**{key: value})
    assert not enabled


@pytest.mark.parametrize(("key", "value", "message"), [
    ("acks", "1", "Must set acks to all in order to use the idempotent producer."),
    ("retries", 0, "Must set retries to non-zero when using the idempotent producer."),
    ("max.in.flight.requests.per.connection", 6,
     "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent "
     "producer."),
])
def test_a_conflicting_setting_with_explicit_idempotence_raises(key: str, value: Any,
                                                                message: str) -> None:
    with pytest.raises(ConfigException) as info:
        resolved(**{key: value, "enable.idempotence": "true"})
    assert str(info.value).startswith(message)
    with pytest.raises(ConfigException, match="Must set acks to all"):
        Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": 1})


def test_explicitly_off_allows_anything() -> None:
    enabled, _ = resolved(enable_idempotence=False, acks="1", retries=0)
    assert not enabled
    enabled, _ = resolved(enable_idempotence=True, acks="-1",
                          max_in_flight_requests_per_connection=5)
    assert enabled


def test_producer_reports_its_idempotence_in_its_config() -> None:
    with Producer({"bootstrap.servers": BOOTSTRAP}) as producer:
        assert producer.enable_idempotence is True
        assert producer.acks == -1
    with Producer({"bootstrap.servers": BOOTSTRAP, "acks": "1"}) as producer:
        assert producer.enable_idempotence is False
        assert producer.acks == 1


# --- sequences ------------------------------------------------------------------------------


def test_increment_sequence_wraps_at_int32_max() -> None:
    assert increment_sequence(0, 5) == 5
    assert increment_sequence(INT_MAX - 5, 5) == INT_MAX
    assert increment_sequence(INT_MAX - 1, 5) == 3
    assert increment_sequence(INT_MAX, 1) == 0


def ready_manager() -> TransactionManager:
    tm = TransactionManager(retry_backoff_s=0.01)
    assert tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    tm.init_producer_id_started()
    response = api.APIS[ApiKey.INIT_PRODUCER_ID].response(
        error_code=0, producer_id=7, producer_epoch=0)
    tm.handle_init_producer_id_response(response, None, 0.0)
    assert tm.has_producer_id
    return tm


def batch(records: int, tp: tuple[str, int] = TP) -> ProducerBatch:
    b = ProducerBatch(tp[0], tp[1], 0.0, 0)
    b.records.extend((None, str(i).encode(), None, 0) for i in range(records))
    return b


def test_sequences_are_per_partition_and_advance_by_record_count() -> None:
    tm = ready_manager()
    a1, a2, b1 = batch(3), batch(2), batch(4, ("t", 1))
    for b in (a1, b1, a2):
        assert not tm.should_stop_drain(b, (b.topic, b.partition))
        tm.set_producer_state(b)
    assert (a1.base_sequence, a2.base_sequence, b1.base_sequence) == (0, 3, 0)
    assert (a1.producer_id, a1.producer_epoch) == (7, 0)
    assert a1.last_sequence == 2 and b1.last_sequence == 3
    assert tm.sequence_number(TP) == 5 and tm.sequence_number(("t", 1)) == 4


def test_a_sequence_near_the_limit_wraps_for_the_next_batch() -> None:
    tm = ready_manager()
    tm._partition(TP).next_sequence = INT_MAX - 1
    first, second = batch(3), batch(1)
    tm.set_producer_state(first)
    tm.set_producer_state(second)
    assert first.base_sequence == INT_MAX - 1 and first.last_sequence == 0
    assert second.base_sequence == 1


def test_nothing_is_drained_without_a_producer_id_or_beyond_five_in_flight() -> None:
    tm = TransactionManager(retry_backoff_s=0.01)
    assert tm.should_stop_drain(batch(1), TP)
    tm = ready_manager()
    for _ in range(5):
        b = batch(1)
        assert not tm.should_stop_drain(b, TP)
        tm.set_producer_state(b)
    assert tm.should_stop_drain(batch(1), TP)


def test_a_retried_batch_goes_out_only_as_the_oldest_in_flight() -> None:
    tm = ready_manager()
    first, second = batch(1), batch(1)
    tm.set_producer_state(first)
    tm.set_producer_state(second)
    assert tm.should_stop_drain(second, TP)  # has a sequence, but first is still in flight
    assert not tm.should_stop_drain(first, TP)
    tm.handle_completed_batch(first)
    assert not tm.should_stop_drain(second, TP)


def test_retried_batches_go_back_at_their_sequence_position() -> None:
    tm = ready_manager()
    b0, b1, b2 = batch(1), batch(1), batch(1)
    for b in (b0, b1, b2):
        tm.set_producer_state(b)
    fresh = batch(1)
    queue: deque[ProducerBatch] = deque([fresh])
    for b in (b2, b0, b1):  # answers may come back in any order across brokers
        insert_in_sequence_order(queue, b)
    assert [b.base_sequence for b in queue] == [0, 1, 2, NO_SEQUENCE]


def test_unknown_producer_id_bumps_the_epoch_and_resequences_in_flight_batches() -> None:
    tm = ready_manager()
    acked, lost, later = batch(2), batch(3), batch(1)
    for b in (acked, lost, later):
        tm.set_producer_state(b)
    tm.handle_completed_batch(acked)
    assert tm.can_retry(lost, UnknownProducerIdError(), log_start_offset=0)
    assert not tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)  # a local bump
    assert tm.producer_id_and_epoch.epoch == 1 and tm.producer_id_and_epoch.producer_id == 7
    assert (lost.producer_epoch, lost.base_sequence) == (1, 0)
    assert (later.producer_epoch, later.base_sequence) == (1, 3)
    assert lost.sequence_has_been_reset
    assert tm.sequence_number(TP) == 4
    # The old-epoch answer of the next batch is retried without another bump.
    assert tm.can_retry(later, UnknownProducerIdError(), log_start_offset=0)
    assert tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0) is False
    assert tm.producer_id_and_epoch.epoch == 1


def test_out_of_order_for_the_next_sequence_bumps_but_a_later_batch_just_retries() -> None:
    tm = ready_manager()
    first, second = batch(1), batch(1)
    tm.set_producer_state(first)
    tm.set_producer_state(second)
    assert tm.can_retry(second, OutOfOrderSequenceNumberError(), -1)
    tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    assert tm.producer_id_and_epoch.epoch == 0  # second is not the next sequence: wait
    assert tm.can_retry(first, OutOfOrderSequenceNumberError(), -1)
    tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    assert tm.producer_id_and_epoch.epoch == 1
    assert (first.base_sequence, second.base_sequence) == (0, 1)


def test_other_partitions_restart_at_zero_once_their_old_epoch_batches_complete() -> None:
    tm = ready_manager()
    other = batch(2, ("t", 1))
    tm.set_producer_state(other)
    failing = batch(1)
    tm.set_producer_state(failing)
    tm.can_retry(failing, UnknownProducerIdError(), 0)
    tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    waiting = batch(1, ("t", 1))
    assert tm.should_stop_drain(waiting, ("t", 1))  # an epoch-0 batch is still in flight
    tm.handle_completed_batch(other)
    assert not tm.should_stop_drain(waiting, ("t", 1))
    tm.set_producer_state(waiting)
    assert (waiting.producer_epoch, waiting.base_sequence) == (1, 0)


def test_an_exhausted_epoch_asks_for_a_new_producer_id() -> None:
    tm = ready_manager()
    b = batch(1)
    tm.set_producer_state(b)
    tm.producer_id_and_epoch = type(tm.producer_id_and_epoch)(7, 2**15 - 1)
    tm.can_retry(b, UnknownProducerIdError(), 0)
    assert tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    assert not tm.has_producer_id
    assert tm.should_stop_drain(b, TP)
    tm.init_producer_id_started()
    response = api.APIS[ApiKey.INIT_PRODUCER_ID].response(
        error_code=0, producer_id=8, producer_epoch=0)
    tm.handle_init_producer_id_response(response, None, 0.0)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (8, 0, 0)
    assert not tm.should_stop_drain(b, TP)


def test_init_producer_id_retries_retriable_errors_and_fails_on_fencing() -> None:
    tm = TransactionManager(retry_backoff_s=0.5)
    assert tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    tm.init_producer_id_started()
    assert not tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)  # one at a time
    tm.handle_init_producer_id_response(None, NetworkExceptionError("gone"), 1.0)
    assert not tm.bump_idempotent_epoch_and_reset_id_if_needed(1.2)  # retry.backoff.ms
    assert tm.bump_idempotent_epoch_and_reset_id_if_needed(1.6)
    tm.init_producer_id_started()
    response = api.APIS[ApiKey.INIT_PRODUCER_ID].response(
        error_code=ProducerFencedError.code, producer_id=-1, producer_epoch=-1)
    tm.handle_init_producer_id_response(response, None, 2.0)
    assert tm.has_fatal_error
    with pytest.raises(ProducerFencedError, match="cannot send any more"):
        tm.maybe_fail_with_error()


def test_an_expired_batch_blocks_the_partition_until_its_sequence_resolves() -> None:
    tm = ready_manager()
    sent, queued = batch(1), batch(1)
    tm.set_producer_state(sent)
    tm.handle_failed_batch(sent, NetworkExceptionError(), adjust_sequence_numbers=False)
    tm.mark_sequence_unresolved(sent)
    assert tm.should_stop_drain(queued, TP)
    tm.maybe_resolve_sequences()  # nothing in flight and sequence 0 never acknowledged
    tm.bump_idempotent_epoch_and_reset_id_if_needed(0.0)
    assert tm.producer_id_and_epoch.epoch == 1
    assert not tm.should_stop_drain(queued, TP)
    tm.set_producer_state(queued)
    assert queued.base_sequence == 0
