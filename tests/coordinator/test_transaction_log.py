"""The records of __transaction_state, against bytes written by hand from Kafka 2.8's
TransactionLogKey / TransactionLogValue schemas (version 0)."""

from __future__ import annotations

import pytest

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.log import (
    TransactionLogFormatError,
    key_to_bytes,
    read_txn_record,
    read_txn_record_key,
    read_txn_record_value,
    value_to_bytes,
)
from kafkaclone.coordinator.transaction.metadata import TransactionState, TxnTransitMetadata

pytestmark = pytest.mark.timeout(30)

KEY = bytes.fromhex("0000" "0002" "7478")  # version 0, "tx"

ONGOING = TxnTransitMetadata(
    producer_id=5, last_producer_id=-1, producer_epoch=1, last_producer_epoch=-1,
    txn_timeout_ms=60_000, txn_state=TransactionState.ONGOING,
    topic_partitions=frozenset({TopicPartition("t", 1), TopicPartition("t", 0)}),
    txn_start_timestamp=900, txn_last_update_timestamp=1000)
ONGOING_BYTES = bytes.fromhex(
    "0000"                  # version 0
    "0000000000000005"      # producer_id
    "0001"                  # producer_epoch
    "0000ea60"              # transaction_timeout_ms 60000
    "01"                    # transaction_status Ongoing
    "00000001"              # one topic
    "000174"                # "t"
    "00000002" "00000000" "00000001"  # partitions [0, 1]
    "00000000000003e8"      # last update 1000
    "0000000000000384")     # start 900

EMPTY = TxnTransitMetadata(5, -1, 0, -1, 60_000, TransactionState.EMPTY, frozenset(), -1, 1000)
EMPTY_BYTES = bytes.fromhex(
    "0000" "0000000000000005" "0000" "0000ea60" "00"
    "ffffffff"              # transaction_partitions null in state Empty
    "00000000000003e8" "ffffffffffffffff")


def test_key() -> None:
    assert key_to_bytes("tx") == KEY
    assert read_txn_record_key(KEY) == "tx"


def test_values_match_kafkas_bytes() -> None:
    assert value_to_bytes(ONGOING) == ONGOING_BYTES
    assert value_to_bytes(EMPTY) == EMPTY_BYTES
    assert read_txn_record_value(ONGOING_BYTES) == ONGOING
    assert read_txn_record_value(EMPTY_BYTES) == EMPTY


def test_a_tombstone_and_bad_records() -> None:
    assert read_txn_record(KEY, None).value is None
    with pytest.raises(TransactionLogFormatError):
        read_txn_record_key(bytes.fromhex("0001" "0002" "7478"))
    with pytest.raises(TransactionLogFormatError):
        read_txn_record_value(ONGOING_BYTES[:-1])
    with pytest.raises(TransactionLogFormatError):
        read_txn_record_value(ONGOING_BYTES[:16] + b"\x09" + ONGOING_BYTES[17:])
    with pytest.raises(ValueError, match="Empty"):
        value_to_bytes(TxnTransitMetadata(5, -1, 0, -1, 1, TransactionState.EMPTY,
                                          frozenset({TopicPartition("t", 0)}), -1, 1))
