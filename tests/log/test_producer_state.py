"""The producer state of a partition: Kafka 2.8's sequence and epoch rules, duplicates,
snapshots, and the state surviving restarts, truncation and retention."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from twisted.internet.task import Clock

from kafkaclone.common.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.common import AppendOrigin
from kafkaclone.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ContinuingBatch,
    CorruptSnapshotError,
    ProducerBatch,
    ProducerStateEntry,
    ProducerStateManager,
    decrement_sequence,
    increment_sequence,
    read_snapshot,
    write_snapshot,
)
from tests.log.conftest import START_SECONDS, LogFactory, make_batch, values_of

T0 = int(START_SECONDS * 1000)
PID = 1000
TP = TopicPartition("topic", 0)


def idempotent(seq: int, records: int = 1, *, pid: int = PID, epoch: int = 0,
               timestamp: int = T0) -> bytes:
    return make_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      timestamp=timestamp)


def snapshot_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".snapshot"))


# -- sequence arithmetic and the state machine ----------------------------------------------


def test_sequences_wrap_after_int_max() -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert BatchMetadata(1, 100, 3, T0).first_seq == INT32_MAX - 1


def batch(seq: int, first_offset: int, records: int = 1, epoch: int = 0) -> ProducerBatch:
    return ProducerBatch(PID, epoch, seq, records - 1, first_offset, T0, False, False)


def test_manager_rules_follow_kafka(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path)
    # An unknown producer may start at sequence 0 only.
    with pytest.raises(UnknownProducerIdError):
        manager.analyze_and_validate([batch(5, 0)], AppendOrigin.CLIENT)
    updates, duplicate = manager.analyze_and_validate([batch(0, 0, 2)], AppendOrigin.CLIENT)
    assert duplicate is None
    manager.update(updates[PID])
    assert manager.last_entry(PID) is not None
    # The same range again is the batch already written.
    _, duplicate = manager.analyze_and_validate([batch(0, 7, 2)], AppendOrigin.CLIENT)
    assert duplicate == BatchMetadata(1, 1, 1, T0)
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.analyze_and_validate([batch(3, 2)], AppendOrigin.CLIENT)
    # A new epoch starts at 0; an old epoch is refused.
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.analyze_and_validate([batch(2, 2, epoch=1)], AppendOrigin.CLIENT)
    updates, _ = manager.analyze_and_validate([batch(0, 2, epoch=1)], AppendOrigin.CLIENT)
    manager.update(updates[PID])
    with pytest.raises(InvalidProducerEpochError):
        manager.analyze_and_validate([batch(2, 3, epoch=0)], AppendOrigin.CLIENT)
    # Replication takes the leader's word for it.
    updates, _ = manager.analyze_and_validate([batch(9, 3, epoch=1)], AppendOrigin.REPLICATION)
    manager.update(updates[PID])
    assert manager.producers[PID].last_seq == 9


def continuing(manager: ProducerStateManager, seq: int, first_offset: int, records: int = 1,
               epoch: int = 0, attributes: int = 0) -> ContinuingBatch | None:
    return manager.continuing_batch(PID, epoch, seq, attributes, records - 1, first_offset, T0,
                                    check_sequence=True)


def test_continuing_batch_takes_only_what_every_check_passes(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path)
    assert continuing(manager, 0, 0) is None  # a producer not known yet
    updates, _ = manager.analyze_and_validate([batch(0, 0, 2)], AppendOrigin.CLIENT)
    manager.update(updates[PID])
    assert continuing(manager, 0, 2, 2) is None  # the retry of the batch written
    assert continuing(manager, 5, 2) is None  # a gap
    assert continuing(manager, 0, 2, epoch=1) is None  # a new epoch
    assert continuing(manager, 2, 2, attributes=0x10) is None  # transactional
    assert continuing(manager, 2, 2, attributes=0x20) is None  # a control batch
    assert manager.continuing_batch(PID, 0, 9, 0, 0, 2, T0, check_sequence=False) is not None
    assert continuing(manager, 2, 2, 3) == ContinuingBatch(manager.producers[PID], 4, 4, 2, T0)


def test_continuing_batches_change_the_state_as_the_full_check(tmp_path: Path) -> None:
    shortcut = ProducerStateManager(TP, tmp_path / "a")
    full = ProducerStateManager(TP, tmp_path / "b")
    for manager in (shortcut, full):
        manager.load_batches([batch(INT32_MAX - 3, 0, 2)])
    offset = 2
    for seq, records in [(INT32_MAX - 1, 3), (1, 1), (2, 4), (6, 1), (7, 2), (9, 1)]:
        found = continuing(shortcut, seq, offset, records)
        assert found is not None
        shortcut.apply_continuing([found])
        updates, duplicate = full.analyze_and_validate([batch(seq, offset, records)],
                                                       AppendOrigin.CLIENT)
        assert duplicate is None
        full.update(updates[PID])
        offset += records
    assert shortcut.producers == full.producers
    assert [b.last_seq for b in shortcut.producers[PID].batch_metadata] == [1, 5, 6, 8, 9]


def test_last_five_batches_are_remembered(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path)
    for seq in range(7):
        updates, _ = manager.analyze_and_validate([batch(seq, seq)], AppendOrigin.CLIENT)
        manager.update(updates[PID])
    entry = manager.producers[PID]
    assert [b.last_seq for b in entry.batch_metadata] == [2, 3, 4, 5, 6]
    assert manager.analyze_and_validate([batch(2, 99)], AppendOrigin.CLIENT)[1] is not None
    with pytest.raises(OutOfOrderSequenceNumberError):  # forgotten: a gap now
        manager.analyze_and_validate([batch(1, 99)], AppendOrigin.CLIENT)




@pytest.mark.timeout(10)
def test_duplicate_needs_the_same_first_and_last_sequence(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path)
    updates, _ = manager.analyze_and_validate([batch(0, 0, 3)], AppendOrigin.CLIENT)
    manager.update(updates[PID])  # sequences 0-2 at offsets 0-2
    # Same last sequence, another first one: not the batch written, and out of order.
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.analyze_and_validate([batch(1, 9, 2)], AppendOrigin.CLIENT)
    # Same first sequence, another last one: the same.
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.analyze_and_validate([batch(0, 9, 2)], AppendOrigin.CLIENT)
    assert manager.analyze_and_validate([batch(0, 9, 3)], AppendOrigin.CLIENT)[1] == (
        BatchMetadata(2, 2, 2, T0))
def test_sequence_wraps_in_the_log(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path)
    manager.load_batches([batch(INT32_MAX - 1, 0, 2)])
    updates, _ = manager.analyze_and_validate([batch(0, 2)], AppendOrigin.CLIENT)
    assert updates[PID].updated_entry.last_seq == 0


def test_expiry(tmp_path: Path) -> None:
    manager = ProducerStateManager(TP, tmp_path, max_producer_id_expiration_ms=1000)
    manager.load_batches([batch(0, 0)])
    assert manager.remove_expired_producers(T0 + 999) == 0
    assert manager.remove_expired_producers(T0 + 1000) == 1
    assert manager.is_empty


# -- snapshot files ------------------------------------------------------------------------


def test_snapshot_format_is_kafkas(tmp_path: Path) -> None:
    entry = ProducerStateEntry(PID, producer_epoch=3, coordinator_epoch=-1, last_timestamp=T0)
    entry.add_batch(3, 41, 500, 9, T0)
    path = tmp_path / "00000000000000000501.snapshot"
    write_snapshot(path, [entry])
    data = path.read_bytes()
    assert struct.unpack_from(">h", data) == (1,)
    assert struct.unpack_from(">I", data, 2) == (crc32c(data[6:]),)
    assert struct.unpack_from(">iqhiqiqiq", data, 6) == (1, PID, 3, 41, 500, 9, T0, -1, -1)
    assert len(data) == 6 + 4 + 46
    (loaded,) = read_snapshot(path)
    assert (loaded.producer_id, loaded.producer_epoch, loaded.last_seq, loaded.first_seq,
            loaded.last_data_offset) == (PID, 3, 41, 32, 500)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CorruptSnapshotError):
        list(read_snapshot(path))


# -- through the log -------------------------------------------------------------------------


def test_duplicate_is_answered_with_its_offsets_and_not_appended(open_log: LogFactory) -> None:
    log = open_log()
    log.append(make_batch(2), leader_epoch=0)
    first = log.append(idempotent(0, 3), leader_epoch=0)
    log.append(idempotent(3, 1), leader_epoch=0)
    end = log.log_end_offset
    again = log.append(idempotent(0, 3), leader_epoch=0)
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == end


@pytest.mark.parametrize(("records", "error"), [
    (idempotent(5), OutOfOrderSequenceNumberError),
    (idempotent(2, epoch=1), OutOfOrderSequenceNumberError),  # a new epoch starts at 0
    (idempotent(7, pid=PID + 5), UnknownProducerIdError),
])
def test_bad_sequences_append_nothing(open_log: LogFactory, records: bytes,
                                      error: type[Exception]) -> None:
    log = open_log()
    log.append(idempotent(0, 2), leader_epoch=0)
    with pytest.raises(error):
        log.append(records, leader_epoch=0)
    assert log.log_end_offset == 2


def test_old_epoch_is_refused(open_log: LogFactory) -> None:
    log = open_log()
    log.append(idempotent(0, epoch=2), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(idempotent(1, epoch=1), leader_epoch=0)
    assert log.log_end_offset == 1


def test_followers_build_the_same_state(open_log: LogFactory, tmp_path: Path) -> None:
    leader = open_log()
    leader.append(idempotent(0, 2), leader_epoch=0)
    leader.append(idempotent(2, 2), leader_epoch=0)
    follower = open_log(directory=tmp_path / "follower-0")
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert follower.producer_state_manager.producers[PID].last_seq == 3
    duplicate = follower.append(idempotent(2, 2), leader_epoch=1)
    assert (duplicate.first_offset, follower.log_end_offset) == (2, 4)
    # The producer's next batches (the shortcut of a known producer): four in one fetch,
    # then one.
    for seq in range(4, 12, 2):
        leader.append(idempotent(seq, 2), leader_epoch=1)
    follower.append_as_follower(leader.read(4, 1 << 20).records)
    leader.append(idempotent(12, 1), leader_epoch=1)
    follower.append_as_follower(leader.read(12, 1 << 20).records)
    assert follower.producer_state_manager.producers == leader.producer_state_manager.producers
    assert [b.last_seq for b in leader.producer_state_manager.producers[PID].batch_metadata] == [
        5, 7, 9, 11, 12]


def test_state_survives_clean_restart(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log({"segment.bytes": 400})
    for seq in range(0, 20, 2):
        log.append(idempotent(seq, 2), leader_epoch=0)
    assert log.num_segments > 2
    rolled = snapshot_names(log_dir)
    assert rolled and all(name[:20].isdigit() for name in rolled)
    log.close()
    assert f"{20:020d}.snapshot" in snapshot_names(log_dir)
    reopened = open_log({"segment.bytes": 400})
    assert reopened.append(idempotent(18, 2), leader_epoch=0).first_offset == 18
    assert reopened.log_end_offset == 20
    with pytest.raises(OutOfOrderSequenceNumberError):
        reopened.append(idempotent(21), leader_epoch=0)


def test_state_rebuilt_from_log_after_unclean_shutdown(open_log: LogFactory, log_dir: Path
                                                       ) -> None:
    log = open_log({"segment.bytes": 400})
    for seq in range(0, 20, 2):
        log.append(idempotent(seq, 2), leader_epoch=0)
    log.flush()
    # kill -9: no snapshot at the log end; only those of the rolls.
    assert f"{20:020d}.snapshot" not in snapshot_names(log_dir)
    crashed = open_log({"segment.bytes": 400}, had_clean_shutdown=False, recovery_point=0)
    assert crashed.append(idempotent(18, 2), leader_epoch=0).first_offset == 18
    assert crashed.log_end_offset == 20
    # Even with every snapshot lost, the log alone tells.
    for name in snapshot_names(log_dir):
        (log_dir / name).unlink()
    rebuilt = open_log({"segment.bytes": 400}, directory=log_dir, had_clean_shutdown=False,
                       recovery_point=20)
    assert rebuilt.append(idempotent(16, 2), leader_epoch=0).first_offset == 16


def test_truncation_forgets_truncated_batches(open_log: LogFactory, log_dir: Path) -> None:
    log = open_log({"segment.bytes": 400})
    for seq in range(0, 20, 2):
        log.append(idempotent(seq, 2), leader_epoch=0)
    log.truncate_to(10)
    assert log.producer_state_manager.producers[PID].last_seq == 9
    assert all(int(name[:20]) <= 10 for name in snapshot_names(log_dir))
    assert log.append(idempotent(10, 2), leader_epoch=0).first_offset == 10
    log.truncate_fully_and_start_at(50)
    assert log.producer_state_manager.is_empty
    assert snapshot_names(log_dir) == []


def test_retention_keeps_producers_and_deletes_snapshots(open_log: LogFactory, log_dir: Path,
                                                         clock: Clock) -> None:
    log = open_log({"segment.bytes": 400, "file.delete.delay.ms": 0})
    for seq in range(0, 20, 2):
        log.append(idempotent(seq, 2), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    segment_bases = [segment.base_offset for segment in log.log_segments]
    log.delete_records_before(segment_bases[-1])
    log.delete_old_segments()
    clock.advance(1)
    assert all(int(name[:20]) >= segment_bases[-1] for name in snapshot_names(log_dir))
    # Kafka 2.8 keeps the producer until it expires: its next batch follows on.
    assert log.append(idempotent(20), leader_epoch=0).first_offset == 20
    assert values_of(log.read(20, 1 << 20).records)[0][0] == 20


def test_recovery_checkpoint_keeps_recent_snapshots(open_log: LogFactory, log_dir: Path
                                                    ) -> None:
    log = open_log({"segment.bytes": 400})
    for seq in range(0, 30, 2):
        log.append(idempotent(seq, 2), leader_epoch=0)
    bases = [segment.base_offset for segment in log.log_segments]
    assert len(bases) >= 4 and len(snapshot_names(log_dir)) == len(bases) - 1
    log.flush()
    kept_from = log.delete_snapshots_after_recovery_point_checkpoint()
    assert kept_from == bases[-2]  # the second-to-last segment (the recovery point is the end)
    assert [int(name[:20]) for name in snapshot_names(log_dir)] == [bases[-2], bases[-1]]


def test_expiry_through_the_log(open_log: LogFactory, clock: Clock) -> None:
    log = open_log(max_producer_id_expiration_ms=60_000)
    log.append(idempotent(0), leader_epoch=0)
    clock.advance(59)
    assert log.remove_expired_producers() == 0
    clock.advance(1)
    assert log.remove_expired_producers() == 1
    with pytest.raises(UnknownProducerIdError):  # forgotten: only sequence 0 may start it
        log.append(idempotent(1), leader_epoch=0)
