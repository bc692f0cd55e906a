"""The transactional Producer against a fake broker that is its own transaction and group
coordinator (tests/clients/fake_broker.py): the requests in Kafka's order, the configs'
constraints, retriable coordinator errors retried, fatal errors fatal, abortable errors
leaving only abort (which bumps the epoch, KIP-360)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkaclone.clients import (
    ConfigException,
    ConsumerGroupMetadata,
    Producer,
    TopicPartition,
    TransactionAbortableError,
)
from kafkaclone.common.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    MessageTooLargeError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
)
from kafkaclone.protocol.api_keys import ApiKey
from tests.clients.fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(60)

TOPIC = "t"
FIND, INIT, ADD_PARTITIONS, ADD_OFFSETS, TXN_COMMIT, END = (
    ApiKey.FIND_COORDINATOR, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN)


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    with FakeBroker({TOPIC: 2}) as fake:
        yield fake


def producer(broker: FakeBroker, **conf: Any) -> Producer:
    settings: dict[str, Any] = {"bootstrap.servers": broker.bootstrap_servers,
                                "transactional.id": "tx", "retry.backoff.ms": 10,
                                "max.block.ms": 10_000}
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(settings)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_transactional_id_implies_idempotence_and_its_constraints() -> None:
    with pytest.raises(ConfigException, match="without also enabling idempotence"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "x",
                  "enable.idempotence": False})
    with pytest.raises(ConfigException, match="acks to all"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "x", "acks": "1"})
    plain = Producer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        with pytest.raises(InvalidTxnStateError, match=r"transactional\.id"):
            plain.begin_transaction()
    finally:
        plain.close(0)


def test_a_transaction_goes_out_in_kafkas_order(broker: FakeBroker) -> None:
    with producer(broker, transaction_timeout_ms=12_345) as p:
        with pytest.raises(InvalidTxnStateError, match="initTransactions"):
            p.send(TOPIC, b"too early")
        p.init_transactions(10)
        p.begin_transaction()
        p.send(TOPIC, b"a", partition=0)
        p.send(TOPIC, b"b", partition=1)
        p.send_offsets_to_transaction([TopicPartition("in", 0, 42)],
                                      ConsumerGroupMetadata("g", 7, "member-1"), 10)
        p.commit_transaction(10)
    keys = broker.txn_request_keys()
    assert keys[:2] == [FIND, INIT]
    assert keys[-1] == END and keys.count(END) == 1
    assert ADD_PARTITIONS in keys and keys.index(ADD_OFFSETS) < keys.index(TXN_COMMIT)
    bodies = dict(reversed(broker.txn_requests))  # the first of each
    assert bodies[FIND].key_type == 1 and bodies[FIND].key == "tx"
    assert bodies[INIT].transactional_id == "tx"
    assert bodies[INIT].transaction_timeout_ms == 12_345
    group_lookup = [b for k, b in broker.txn_requests if k == FIND and b.key_type == 0]
    assert [b.key for b in group_lookup] == ["g"]
    added = {(t.name, p) for k, b in broker.txn_requests if k == ADD_PARTITIONS
             for t in b.topics for p in t.partitions}
    assert added == {(TOPIC, 0), (TOPIC, 1)}
    commit = bodies[TXN_COMMIT]
    assert (commit.group_id, commit.generation_id, commit.member_id) == ("g", 7, "member-1")
    assert [(t.name, p.partition_index, p.committed_offset) for t in commit.topics
            for p in t.partitions] == [("in", 0, 42)]
    assert bodies[END].committed is True
    for partition in (0, 1):
        (seen,) = broker.seen_for(TOPIC, partition)
        assert seen.transactional and seen.transactional_id == "tx"
        assert (seen.producer_id, seen.producer_epoch, seen.base_sequence) == (1000, 0, 0)


def test_retriable_coordinator_errors_are_retried(broker: FakeBroker) -> None:
    broker.txn_errors[FIND].append(CoordinatorNotAvailableError.code)
    broker.txn_errors[INIT].extend([CoordinatorLoadInProgressError.code,
                                    ConcurrentTransactionsError.code])
    broker.txn_errors[ADD_PARTITIONS].append(NotCoordinatorError.code)
    broker.txn_errors[END].extend([ConcurrentTransactionsError.code,
                                   CoordinatorNotAvailableError.code])
    with producer(broker) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send(TOPIC, b"a", partition=0)
        p.commit_transaction(10)
    keys = broker.txn_request_keys()
    assert keys.count(INIT) == 3 and keys.count(END) == 3 and keys.count(ADD_PARTITIONS) == 2
    # NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE send a new lookup before the retry.
    assert keys[keys.index(ADD_PARTITIONS) + 1] == FIND
    assert broker.values(TOPIC, 0) == [b"a"]


@pytest.mark.parametrize(("key", "code", "error"), [
    (END, ProducerFencedError.code, ProducerFencedError),
    (END, InvalidProducerEpochError.code, ProducerFencedError),
    (ADD_PARTITIONS, ProducerFencedError.code, ProducerFencedError),
    (ADD_PARTITIONS, TransactionalIdAuthorizationFailedError.code,
     TransactionalIdAuthorizationFailedError),
])
def test_fencing_and_authorization_errors_are_fatal(broker: FakeBroker, key: ApiKey,
                                                    code: int, error: type) -> None:
    broker.txn_errors[key].append(code)
    with producer(broker) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.send(TOPIC, b"a", partition=0)
        with pytest.raises(error):
            p.commit_transaction(10)
        with pytest.raises(error):
            p.abort_transaction(10)
        with pytest.raises(error):
            p.begin_transaction()


def test_an_abortable_error_leaves_only_abort_which_bumps_the_epoch(
        broker: FakeBroker) -> None:
    broker.fail_next(TOPIC, 0, MessageTooLargeError.code)
    with producer(broker) as p:
        p.init_transactions(10)
        p.begin_transaction()
        failed = p.send(TOPIC, b"a", partition=0)
        assert isinstance(failed.exception(10), MessageTooLargeError)
        with pytest.raises(TransactionAbortableError):
            p.send(TOPIC, b"b", partition=0)
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction(10)
        p.abort_transaction(10)
        # KIP-360: the abort is followed by InitProducerId with the current id and epoch.
        inits = [b for k, b in broker.txn_requests if k == INIT]
        assert [(b.producer_id, b.producer_epoch) for b in inits] == [(-1, -1), (1000, 0)]
        p.begin_transaction()
        p.send(TOPIC, b"c", partition=0)
        p.commit_transaction(10)
    ends = [b.committed for k, b in broker.txn_requests if k == END]
    assert ends == [False, True]
    last = broker.seen_for(TOPIC, 0)[-1]
    assert (last.values, last.producer_epoch, last.base_sequence) == ((b"c",), 1, 0)


def test_a_txn_offset_commit_of_an_old_generation_is_abortable(broker: FakeBroker) -> None:
    broker.txn_errors[TXN_COMMIT].append(UnknownMemberIdError.code)
    with producer(broker) as p:
        p.init_transactions(10)
        p.begin_transaction()
        with pytest.raises(TransactionAbortableError):
            p.send_offsets_to_transaction({("in", 0): 5}, ConsumerGroupMetadata("g", 3, "m"),
                                          10)
        p.abort_transaction(10)
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "g", 10)
        p.commit_transaction(10)
    assert [b.committed for k, b in broker.txn_requests if k == END] == [False, True]


def test_an_empty_transaction_sends_no_end_txn(broker: FakeBroker) -> None:
    with producer(broker) as p:
        p.init_transactions(10)
        p.begin_transaction()
        p.commit_transaction(10)
        p.begin_transaction()
        p.abort_transaction(10)
    assert END not in broker.txn_request_keys()


def test_commit_waits_for_queued_records(broker: FakeBroker) -> None:
    with producer(broker, linger_ms=60_000) as p:  # only the commit's flush sends them
        p.init_transactions(10)
        p.begin_transaction()
        futures = [p.send(TOPIC, b"v%d" % i, partition=0) for i in range(5)]
        p.commit_transaction(10)
        assert all(f.done() and f.exception(0) is None for f in futures)
    assert broker.values(TOPIC, 0) == [b"v%d" % i for i in range(5)]
    wait_for(lambda: broker.txn_request_keys()[-1] == END)
