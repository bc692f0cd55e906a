"""Transactions in the log (issue 15): ongoing transactions, the last stable offset, the
``.txnindex`` aborted-transaction index (Kafka's format), and its recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkaclone.common.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from kafkaclone.log.common import AbortedTransaction, AppendOrigin
from kafkaclone.log.log import Log
from kafkaclone.log.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TransactionIndex,
    transaction_index_file,
)
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.record import ControlRecordType
from tests.log.conftest import START_SECONDS, LogFactory, make_batch

A, B = 1000, 2000


def txn(pid: int, seq: int, records: int = 1, epoch: int = 0) -> bytes:
    return make_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      is_transactional=True)


def marker(log: Log, pid: int, commit: bool, *, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    """Append a COMMIT/ABORT marker as the coordinator would; its offset."""
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_end_transaction_marker_batch(control, producer_id=pid, producer_epoch=epoch,
                                               coordinator_epoch=coordinator_epoch,
                                               timestamp=int(START_SECONDS * 1000))
    return log.append(batch, leader_epoch=0, origin=AppendOrigin.COORDINATOR).first_offset


def replicated(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


# -- the index file ---------------------------------------------------------------------------

def test_aborted_txn_entry_is_kafkas_34_bytes() -> None:
    entry = AbortedTxn(producer_id=5, first_offset=10, last_offset=20, last_stable_offset=21)
    golden = (b"\x00\x00"                                # version 0
              + b"\x00\x00\x00\x00\x00\x00\x00\x05"      # producer id
              + b"\x00\x00\x00\x00\x00\x00\x00\x0a"      # first offset
              + b"\x00\x00\x00\x00\x00\x00\x00\x14"      # last offset (the marker)
              + b"\x00\x00\x00\x00\x00\x00\x00\x15")     # last stable offset
    assert ABORTED_TXN_SIZE == 34
    assert entry.encode() == golden
    assert AbortedTxn.decode(golden) == entry


def test_index_appends_collects_and_truncates(tmp_path: Path) -> None:
    path = transaction_index_file(tmp_path, 0)
    assert path.name == "00000000000000000000.txnindex"
    index = TransactionIndex(0, path)
    assert not path.exists()  # created on the first entry, as Kafka's
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 3, 9, 10))
    with pytest.raises(ValueError, match="increase"):
        index.append(AbortedTxn(3, 4, 9, 10))
    assert path.read_bytes() == AbortedTxn(1, 0, 5, 6).encode() + AbortedTxn(2, 3, 9, 10).encode()
    # Overlap with [6, 8): only the second; complete once an entry's LSO reaches 8.
    result = index.collect_aborted_txns(6, 8)
    assert result.aborted_transactions == [AbortedTxn(2, 3, 9, 10)] and result.is_complete
    result = index.collect_aborted_txns(0, 100)
    assert len(result.aborted_transactions) == 2 and not result.is_complete
    assert TransactionIndex(0, path).all_aborted_txns() == index.all_aborted_txns()
    index.truncate_to(9)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    assert len(path.read_bytes()) == ABORTED_TXN_SIZE


def test_torn_index_fails_the_sanity_check(tmp_path: Path) -> None:
    path = transaction_index_file(tmp_path, 0)
    path.write_bytes(AbortedTxn(1, 0, 5, 6).encode() + b"\x00\x00\x01")
    index = TransactionIndex(0, path)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    with pytest.raises(Exception, match="multiple of 34"):
        index.sanity_check()


# -- the log ----------------------------------------------------------------------------------

def test_lso_stops_at_open_transaction_until_marker_is_replicated(open_log: LogFactory
                                                                   ) -> None:
    log = open_log()
    log.append(make_batch(2), leader_epoch=0)                 # 0-1, plain
    log.append(txn(A, 0, 2), leader_epoch=0)                  # 2-3, A's transaction
    log.append(txn(B, 0, 1), leader_epoch=0)                  # 4, B's transaction
    replicated(log)
    assert log.high_watermark == 5 and log.last_stable_offset == 2
    assert log.first_unstable_offset == 2
    commit_offset = marker(log, A, commit=True)               # 5
    assert commit_offset == 5
    assert log.last_stable_offset == 2  # the marker is not replicated yet
    replicated(log)
    assert log.last_stable_offset == 4  # B is still open
    marker(log, B, commit=False)                              # 6
    replicated(log)
    assert log.last_stable_offset == log.log_end_offset == 7
    assert log.first_unstable_offset is None


def test_aborted_transactions_are_indexed_and_collected(open_log: LogFactory,
                                                        log_dir: Path) -> None:
    log = open_log()
    log.append(txn(A, 0, 2), leader_epoch=0)                  # 0-1
    log.append(txn(B, 0, 1), leader_epoch=0)                  # 2
    marker(log, A, commit=False)                              # 3: A aborted, B open
    marker(log, B, commit=True)                               # 4
    log.append(txn(A, 2, 1), leader_epoch=0)                  # 5: A's next transaction
    marker(log, A, commit=False)                              # 6
    replicated(log)
    index = log.active_segment.txn_index
    # The LSO recorded for A's first abort is B's first offset (2), still open then.
    assert index.all_aborted_txns() == [AbortedTxn(A, 0, 3, 2), AbortedTxn(A, 5, 6, 7)]
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == 2 * ABORTED_TXN_SIZE
    data = log.read(0, 1 << 20, log.last_stable_offset)
    assert log.with_aborted_transactions(data).aborted_transactions == [
        AbortedTransaction(A, 0), AbortedTransaction(A, 5)]
    later = log.read(4, 1 << 20, log.last_stable_offset)
    assert log.with_aborted_transactions(later).aborted_transactions == [
        AbortedTransaction(A, 5)]
    assert log.collect_aborted_transactions(4, 5) == []


def test_markers_check_epochs(open_log: LogFactory) -> None:
    log = open_log()
    log.append(txn(A, 0, 1, epoch=3), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        marker(log, A, commit=True, epoch=2)
    marker(log, A, commit=True, epoch=3, coordinator_epoch=7)
    log.append(txn(A, 1, 1, epoch=3), leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, A, commit=False, epoch=3, coordinator_epoch=6)
    with pytest.raises(InvalidTxnStateError):
        log.append(make_batch(1, producer_id=A, producer_epoch=3, base_sequence=2),
                   leader_epoch=0)
    assert log.log_end_offset == 3


def test_follower_builds_the_same_transactions(open_log: LogFactory, tmp_path: Path) -> None:
    leader = open_log()
    leader.append(txn(A, 0, 2), leader_epoch=0)
    marker(leader, A, commit=False)
    leader.append(txn(B, 0, 1), leader_epoch=0)
    follower = open_log(directory=tmp_path / "topic-1")
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    replicated(follower)
    assert follower.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(A, 0, 2, 3)]
    assert follower.last_stable_offset == 3


def test_recovery_rebuilds_the_index(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log({"segment.bytes": 300})
    for seq in range(6):
        log.append(txn(A, seq, 1), leader_epoch=0)
        marker(log, A, commit=seq % 2 == 0)
    log.append(txn(B, 0, 1), leader_epoch=0)
    assert log.num_segments > 2
    expected = [entry for segment in log.log_segments
                for entry in segment.txn_index.all_aborted_txns()]
    assert [entry.last_offset for entry in expected] == [3, 7, 11]
    log.flush()
    for path in log_dir.glob("*.txnindex"):
        path.unlink()
    recovered = open_log({"segment.bytes": 300}, directory=log_dir, had_clean_shutdown=False,
                         recovery_point=0)
    assert [entry for segment in recovered.log_segments
            for entry in segment.txn_index.all_aborted_txns()] == expected
    replicated(recovered)
    assert recovered.last_stable_offset == 12  # B's transaction is still open


def test_truncation_and_log_start_keep_state_right(open_log: LogFactory) -> None:
    log = open_log()
    log.append(txn(A, 0, 2), leader_epoch=0)                  # 0-1
    marker(log, A, commit=False)                              # 2
    log.append(txn(B, 0, 1), leader_epoch=0)                  # 3
    log.truncate_to(2)
    assert log.active_segment.txn_index.all_aborted_txns() == []
    replicated(log)
    assert log.last_stable_offset == 0  # A's transaction is open again
    marker(log, A, commit=True)                               # 2 again
    replicated(log)
    assert log.last_stable_offset == 3
    log.append(txn(B, 0, 1), leader_epoch=0)                  # 3
    replicated(log)
    log.delete_records_before(3)
    assert log.last_stable_offset == 3
    assert struct.calcsize(">hqqqq") == ABORTED_TXN_SIZE
