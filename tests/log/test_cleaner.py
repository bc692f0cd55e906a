"""The log cleaner: offset map, cleaning rules, crash safety of the swap, the checkpoint."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import OffsetCheckpointFile
from kafkaclone.log.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    CleanerThread,
    LogCleaner,
    SkimpyOffsetMap,
)
from kafkaclone.log.common import AbortedTransaction, AppendOrigin
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.manager import LogManager
from kafkaclone.log.record_scan import ScannedBatch, hash_keys, scan_records
from kafkaclone.log.transaction_index import AbortedTxn
from kafkaclone.protocol.records import RecordBatch, build_record_batch, iter_batches
from kafkaclone.protocol.records.batch import build_end_transaction_marker_batch
from kafkaclone.protocol.records.compression import Codec
from kafkaclone.protocol.records.record import ControlRecordType
from tests.log.conftest import START_SECONDS

TP = TopicPartition("compacted", 0)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048",
           "min.cleanable.dirty.ratio": "0.01"}
NOW_MS = int(START_SECONDS * 1000)


def records_of(log: Log, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from ``start``, read as a consumer does: fetch, move past the last
    batch, fetch again."""
    out = []
    position = max(start, log.log_start_offset)
    while position < log.log_end_offset:
        data = log.read(position, 10**8).records
        batches = list(iter_batches(data, allow_partial_tail=False))
        assert batches, f"no batch served at {position}"
        for batch in batches:
            assert isinstance(batch, RecordBatch)
            batch.ensure_valid()
            for record in batch.records():
                out.append((batch.offset_of(record), record.key, record.value))
            position = batch.last_offset + 1
    return out


def latest_by_key(records: list[tuple[int, bytes | None, bytes | None]]
                  ) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for _, key, value in records:
        latest[key] = value
    return latest


@pytest.fixture
def manager(tmp_path: Path, clock: Clock) -> Iterator[Callable[[], LogManager]]:
    started: list[LogManager] = []

    def factory() -> LogManager:
        config = LogManagerConfig.from_props({"log.dir": str(tmp_path / "logs"),
                                              "broker.id": "1"})
        m = LogManager(config, clock=clock,
                       topic_configs={TP.topic: LogConfig.from_props(COMPACT)})
        m.startup()
        started.append(m)
        return m

    yield factory
    for m in started:
        m.shutdown()


def cleaner_thread(manager: LogManager, clock: Clock, **config: int) -> CleanerThread:
    cleaner = LogCleaner(CleanerConfig(num_threads=1, **config), manager, clock)
    return cleaner.threads[0]


def produce(log: Log, updates: list[tuple[bytes, bytes | None]], *, per_batch: int = 5,
            codec: int = Codec.NONE) -> None:
    for i in range(0, len(updates), per_batch):
        chunk = updates[i : i + per_batch]
        log.append(build_record_batch([(k, v, None, NOW_MS) for k, v in chunk], codec=codec),
                   leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


def updates_over(keys: int, rounds: int) -> list[tuple[bytes, bytes | None]]:
    return [(b"key-%d" % k, b"value-%d-%d" % (k, r)) for r in range(rounds) for k in range(keys)]


# -- the offset map and key scanning --


def test_offset_map_keeps_the_last_offset_per_hash() -> None:
    offset_map = SkimpyOffsetMap(1024 * 1024)
    hashes = np.asarray([5, 7, 5, 9, 7], dtype=np.uint64)
    assert offset_map.put_all(hashes, np.asarray([10, 11, 12, 13, 14], dtype=np.int64)) == 5
    assert offset_map.size == 3
    assert offset_map.get(5) == 12
    assert offset_map.get(7) == 14
    assert offset_map.get(8) == -1
    offset_map.put_all(np.asarray([9], dtype=np.uint64), np.asarray([20], dtype=np.int64))
    assert offset_map.get(9) == 20


def test_offset_map_stops_when_full() -> None:
    offset_map = SkimpyOffsetMap(16 * 4, load_factor=0.75)  # 4 slots, 3 keys
    hashes = np.asarray([1, 2, 1, 3, 4, 5], dtype=np.uint64)
    taken = offset_map.put_all(hashes, np.arange(6, dtype=np.int64))
    assert taken == 4  # the fourth distinct key (at index 4) does not fit
    assert offset_map.size == 3
    assert offset_map.get(1) == 2


def test_scan_records_reads_keys_values_and_offsets() -> None:
    raw = build_record_batch([(b"a", b"1"), (None, b"2"), (b"a-long-key-over-8", None)],
                             base_offset=100, codec=Codec.GZIP)
    batch = RecordBatch(raw)
    scan = scan_records([ScannedBatch(100, batch.attributes, batch.base_timestamp,
                                      batch.max_timestamp, 3, memoryview(raw))])
    assert scan.offsets.tolist() == [100, 101, 102]
    assert scan.key_lengths.tolist() == [1, -1, 17]
    assert scan.value_lengths.tolist() == [1, 1, -1]
    hashes = scan.key_hashes()
    again = hash_keys(b"xa-long-key-over-8" + bytes(16), np.asarray([1, 0]), np.asarray([17, 1]))
    assert hashes[2] == again[0]
    assert hashes[0] != hashes[2]


# -- cleaning --


def test_cleaning_keeps_the_latest_value_per_key_at_its_offset(
        manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    updates = updates_over(keys=10, rounds=20)
    produce(log, updates)
    log.roll()
    before = records_of(log)
    size_before = log.size
    thread = cleaner_thread(m, clock)
    assert thread.clean_filthiest_log()
    after = records_of(log)
    assert latest_by_key(after) == latest_by_key(before)
    assert len(after) == 10
    expected_offsets = {key: offset for offset, key, _ in before}
    assert {key: offset for offset, key, _ in after} == expected_offsets
    assert log.size < size_before / 10
    checkpoint = OffsetCheckpointFile(log.dir.parent / CLEANER_OFFSET_CHECKPOINT).read()
    assert checkpoint[TP] == log.active_segment.base_offset
    # Reading at a removed offset serves the next batch.
    first_kept = after[0][0]
    assert first_kept > 0
    assert records_of(log, start=0)[0][0] == first_kept
    assert not thread.clean_filthiest_log()  # nothing dirty left


def test_compression_and_timestamps_are_kept(manager: Callable[[], LogManager],
                                             clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    produce(log, updates_over(keys=4, rounds=10), per_batch=8, codec=Codec.LZ4)
    log.roll()
    cleaner_thread(m, clock).clean_filthiest_log()
    batches = [b for segment in log.log_segments
               for b in iter_batches(segment.log.read(0, segment.size), allow_partial_tail=False)]
    assert batches
    for batch in batches:
        assert isinstance(batch, RecordBatch)
        batch.ensure_valid()
        assert batch.compression is Codec.LZ4
        assert batch.max_timestamp == NOW_MS
        assert batch.base_timestamp == NOW_MS
    assert len(records_of(log)) == 4


def test_tombstones_stay_for_delete_retention_then_go(manager: Callable[[], LogManager],
                                                      clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    m.update_topic_config(TP.topic, LogConfig.from_props({**COMPACT,
                                                          "delete.retention.ms": "1000"}))
    produce(log, updates_over(keys=5, rounds=4))
    produce(log, [(b"key-0", None), (b"key-1", None)])
    produce(log, [(b"other-%d" % i, b"x" * 50) for i in range(100)])
    log.roll()
    thread = cleaner_thread(m, clock)
    assert thread.clean_filthiest_log()
    latest = latest_by_key(records_of(log))
    assert latest[b"key-0"] is None and latest[b"key-1"] is None  # tombstones kept
    # Age everything but the clean section's last segment past delete.retention.ms: the
    # delete horizon is that segment's modification time minus delete.retention.ms.
    wall_ms = int(time.time() * 1000)
    non_active = log.log_segments[:-1]
    assert len(non_active) >= 2
    for segment in non_active[:-1]:
        segment.log.set_last_modified_ms(wall_ms - 100_000)
    non_active[-1].log.set_last_modified_ms(wall_ms)
    produce(log, [(b"key-4", b"new")] * 30)
    log.roll()
    assert thread.clean_filthiest_log()
    keys = {key for _, key, _ in records_of(log)}
    assert b"key-0" not in keys and b"key-1" not in keys
    assert latest_by_key(records_of(log))[b"key-4"] == b"new"


def test_keyless_records_on_the_clean_path_are_dropped_and_control_kept(
        manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    # A follower can hold keyless records written before the topic became compacted.
    log.append_as_follower(build_record_batch([(None, b"x"), (b"k", b"v")], base_offset=0))
    log.append_as_follower(build_record_batch([(b"k", b"w")], base_offset=2))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner_thread(m, clock).clean_filthiest_log()
    assert records_of(log) == [(2, b"k", b"w")]


def test_min_compaction_lag_holds_young_segments(manager: Callable[[], LogManager],
                                                 clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    m.update_topic_config(TP.topic, LogConfig.from_props({**COMPACT,
                                                          "min.compaction.lag.ms": "60000"}))
    produce(log, updates_over(keys=3, rounds=10))
    log.roll()
    assert not cleaner_thread(m, clock).clean_filthiest_log()
    clock.advance(61)
    assert cleaner_thread(m, clock).clean_filthiest_log()
    assert len(records_of(log)) == 3


def test_last_batch_of_a_producer_is_kept_empty(manager: Callable[[], LogManager],
                                                clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    log.append(build_record_batch([(b"k", b"1")], producer_id=7, producer_epoch=0,
                                  base_sequence=0), leader_epoch=0)
    log.append(build_record_batch([(b"k", b"2")]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner_thread(m, clock).clean_filthiest_log()
    batches = [b for segment in log.log_segments
               for b in iter_batches(segment.log.read(0, segment.size), allow_partial_tail=False)]
    assert [(b.base_offset, b.records_count, b.producer_id) for b in batches
            if isinstance(b, RecordBatch)] == [(0, 0, 7), (1, 1, -1)]


# -- crash safety --


class InjectedCrash(BaseException):
    """A crash at a chosen step: like kill -9, nothing after it runs (no cleanup)."""


def test_crash_while_writing_cleaned_files_keeps_the_old_segments(
        manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    produce(log, updates_over(keys=5, rounds=20))
    log.roll()
    before = records_of(log)
    thread = cleaner_thread(m, clock)

    def crash(base_offset: int) -> None:
        # Leave a .cleaned file behind as a crash would.
        (log.dir / f"{base_offset:020d}.log.cleaned").write_bytes(b"partial")
        raise InjectedCrash

    thread.cleaner.fail_before_swap = crash
    with pytest.raises(InjectedCrash):
        thread.clean_filthiest_log()
    (log.dir / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    assert records_of(log) == before
    directory = log.dir
    m.shutdown()
    m2 = manager()
    log2 = m2.get_log(TP)
    assert log2 is not None
    assert not [p for p in os.listdir(directory) if p.endswith(".cleaned")]
    assert records_of(log2) == before
    assert cleaner_thread(m2, clock).clean_filthiest_log()
    assert latest_by_key(records_of(log2)) == latest_by_key(before)


def _crash_mid_swap(log: Log, step: str) -> None:
    """Make the next replace_segments stop at ``step``, as kill -9 would."""
    original = log._swap_in

    def swap_in(new_segment, old_segments, *, renamed_to_swap):  # type: ignore[no-untyped-def]
        from kafkaclone.log.common import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
        new_segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        if step == "after-swap-rename":
            raise InjectedCrash
        # mid-delete: the first old segment renamed .deleted, the rest still live
        old_segments[0].change_file_suffixes("", ".deleted")
        raise InjectedCrash

    log._swap_in = swap_in  # type: ignore[method-assign]
    del original


@pytest.mark.parametrize("step", ["after-swap-rename", "mid-delete"])
def test_crash_during_the_swap_is_completed_on_load(
        manager: Callable[[], LogManager], clock: Clock, step: str) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    produce(log, updates_over(keys=5, rounds=20))
    log.roll()
    before = records_of(log)
    directory = log.dir
    _crash_mid_swap(log, step)
    with pytest.raises(InjectedCrash):
        cleaner_thread(m, clock).clean_filthiest_log()
    # kill -9: nothing more is written; drop the files without closing them cleanly.
    for segment in log.log_segments:
        segment.close_handlers()
    assert [p for p in os.listdir(directory) if p.endswith(".swap")]
    m._logs.clear()
    m.shutdown()
    os.unlink(directory.parent / ".kafka_cleanshutdown")
    m2 = manager()
    log2 = m2.get_log(TP)
    assert log2 is not None
    assert not [p for p in os.listdir(directory) if p.endswith((".swap", ".cleaned"))]
    after = records_of(log2)
    assert latest_by_key(after) == latest_by_key(before)
    assert len(after) < len(before)  # the first group's swap completed
    offsets = [offset for offset, _, _ in after]
    assert offsets == sorted(offsets)
    produce(log2, [(b"key-0", b"after-restart")])
    assert latest_by_key(records_of(log2))[b"key-0"] == b"after-restart"


def test_swap_refused_when_the_log_was_truncated(manager: Callable[[], LogManager],
                                                 clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    produce(log, updates_over(keys=5, rounds=20))
    log.roll()
    thread = cleaner_thread(m, clock)
    thread.cleaner.fail_before_swap = lambda base: log.truncate_to(log.log_end_offset - 1)
    assert not thread.clean_filthiest_log()
    assert not [p for p in os.listdir(log.dir) if p.endswith((".swap", ".cleaned"))]
    assert len(records_of(log)) == 5 * 20 - 5  # the truncated batch held 5 records


def test_keyless_records_to_a_compacted_topic_are_refused(open_log: Callable[..., Log]
                                                          ) -> None:
    from kafkaclone.common.errors import InvalidRecordError

    log = open_log(COMPACT, topic_partition=TP)
    log.append(build_record_batch([(b"k", b"v")]), leader_epoch=0)
    with pytest.raises(InvalidRecordError) as caught:
        log.append(build_record_batch([(b"k", b"v"), (None, b"no key")], codec=Codec.GZIP),
                   leader_epoch=0)
    assert caught.value.message == ("Compacted topic cannot accept message without key in "
                                    "topic partition compacted-0.")
    many = [(b"k%d" % i, b"v") for i in range(100)]
    with pytest.raises(InvalidRecordError):  # the columnar path, past 64 records
        log.append(build_record_batch([*many, (None, b"no key")]), leader_epoch=0)
    assert log.log_end_offset == 1
    log.append(build_record_batch(many), leader_epoch=0)
    assert log.log_end_offset == 101


def test_dump_log_shows_the_gaps_of_a_cleaned_segment(manager: Callable[[], LogManager],
                                                      clock: Clock) -> None:
    import io

    from kafkaclone.tools.dump_log import DumpErrors, dump_log

    m = manager()
    log = m.get_or_create_log(TP)
    log.append(build_record_batch([(b"k", b"1"), (b"j", b"1"), (b"k", b"2")]), leader_epoch=0)
    log.append(build_record_batch([(b"k", b"3")], producer_id=3, producer_epoch=0,
                                  base_sequence=0), leader_epoch=0)
    log.append(build_record_batch([(b"j", b"2")]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner_thread(m, clock).clean_filthiest_log()
    out = io.StringIO()
    errors = DumpErrors()
    dump_log(log.log_segments[0].log.path, out, errors, print_contents=True,
             deep_iteration=True)
    text = out.getvalue()
    assert "baseOffset: 0 lastOffset: 2 count: 0" not in text
    assert "baseOffset: 3 lastOffset: 3 count: 1" in text
    assert "baseOffset: 4 lastOffset: 4 count: 1" in text
    assert "offset: 3 " in text and "offset: 4 " in text and "offset: 0 " not in text
    assert "Found" not in text and "Error" not in text


def test_compact_delete_applies_both(manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    m.update_topic_config(TP.topic, LogConfig.from_props({
        **COMPACT, "cleanup.policy": "compact,delete", "retention.bytes": "4000"}))
    produce(log, updates_over(keys=5, rounds=40))
    log.roll()
    assert cleaner_thread(m, clock).clean_filthiest_log()  # compaction
    assert len(records_of(log)) == 5
    produce(log, [(b"key-%d" % (i % 50), b"v" * 40) for i in range(400)])
    log.roll()
    assert log.size > 4000
    assert m.cleanup_logs() > 0  # retention by size, as for cleanup.policy=delete
    assert log.log_start_offset > 0
    assert log.size <= 4000 + log.log_segments[0].size


def test_rewriting_in_a_cleaner_process(manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    produce(log, updates_over(keys=7, rounds=30), codec=Codec.ZSTD)
    log.roll()
    before = records_of(log)
    thread = LogCleaner(CleanerConfig(num_threads=1, use_process=True), m, clock).threads[0]
    try:
        assert thread.clean_filthiest_log()
    finally:
        thread.close()
    after = records_of(log)
    assert latest_by_key(after) == latest_by_key(before)
    assert len(after) == 7


# -- transactions -----------------------------------------------------------------------------

def all_batches(log: Log) -> list[RecordBatch]:
    """Every v2 batch of the log, segment after segment."""
    batches: list[RecordBatch] = []
    offset = 0
    while offset < log.log_end_offset:
        records = log.read(offset, 10**8).records
        read = [b for b in iter_batches(records, allow_partial_tail=False)
                if isinstance(b, RecordBatch)]
        if not read:
            break
        batches.extend(read)
        offset = read[-1].last_offset + 1
    return batches


def _txn_batch(pid: int, seq: int, updates: list[tuple[bytes, bytes | None]]) -> bytes:
    return build_record_batch([(k, v, None, NOW_MS) for k, v in updates], producer_id=pid,
                              producer_epoch=0, base_sequence=seq, is_transactional=True)


def _marker(log: Log, pid: int, commit: bool) -> None:
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    log.append(build_end_transaction_marker_batch(control, producer_id=pid, producer_epoch=0,
                                                  coordinator_epoch=0, timestamp=NOW_MS),
               leader_epoch=0, origin=AppendOrigin.COORDINATOR)


def test_transactions_aborted_records_removed_then_markers(
        manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    m.update_topic_config(TP.topic, LogConfig.from_props({**COMPACT,
                                                          "delete.retention.ms": "1000"}))
    produce(log, [(b"k", b"committed"), (b"j", b"old")], per_batch=2)          # 0-1
    log.append(_txn_batch(7, 0, [(b"k", b"aborted"), (b"j", b"aborted")]),
               leader_epoch=0)                                                  # 2-3
    _marker(log, 7, commit=False)                                               # 4
    log.append(_txn_batch(8, 0, [(b"j", b"new")]), leader_epoch=0)              # 5
    _marker(log, 8, commit=True)                                                # 6
    log.append(_txn_batch(9, 0, [(b"k", b"ongoing")]), leader_epoch=0)          # 7: open
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == 7
    assert [e for s in log.log_segments for e in s.txn_index.all_aborted_txns()] == [
        AbortedTxn(7, 2, 4, 5)]
    thread = cleaner_thread(m, clock)
    assert thread.clean_filthiest_log()
    after = records_of(log)
    # The aborted records go (producer 7's last data batch stays, empty, for its sequence);
    # they never hid the committed value of k; the open transaction is untouched.
    assert (0, b"k", b"committed") in after
    assert not [r for r in after if r[2] == b"aborted"]
    assert (5, b"j", b"new") in after
    assert (7, b"k", b"ongoing") in after
    assert not [r for r in after if r[1] == b"j" and r[0] != 5]
    served = all_batches(log)
    assert [(b.base_offset, b.last_offset, b.records_count) for b in served
            if b.producer_id == 7 and not b.is_control] == [(2, 3, 0)]
    # Markers stay while the segment is younger than the delete horizon; the abort marker
    # keeps its .txnindex entry while a batch of its transaction is left.
    assert [b.last_offset for b in served if b.is_control] == [4, 6]
    entries = [e for s in log.log_segments for e in s.txn_index.all_aborted_txns()]
    assert entries == [AbortedTxn(7, 2, 4, 5)]
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))

    # Producer 7 writes again, the open transaction commits; once the markers' segment is
    # past delete.retention.ms (older than the clean section's last segment by more), the
    # next cleaning removes them (nothing needs them).
    m.update_topic_config(TP.topic, LogConfig.from_props({
        **COMPACT, "delete.retention.ms": "1000", "segment.bytes": "1024"}))
    log.append(_txn_batch(7, 2, [(b"p7", b"later")]), leader_epoch=0)           # 8
    _marker(log, 7, commit=True)                                                # 9
    _marker(log, 9, commit=True)                                                # 10
    produce(log, [(b"other-%d" % i, b"x" * 50) for i in range(50)])
    log.roll()
    assert thread.clean_filthiest_log()
    served = all_batches(log)
    assert [b.last_offset for b in served if b.is_control][:2] == [4, 6]
    wall_ms = int(time.time() * 1000)
    non_active = log.log_segments[:-1]
    assert len(non_active) >= 2
    non_active[0].log.set_last_modified_ms(wall_ms - 100_000)
    for segment in non_active[1:]:
        segment.log.set_last_modified_ms(wall_ms)
    produce(log, [(b"other-%d" % i, b"y" * 50) for i in range(50)])
    log.roll()
    assert thread.clean_filthiest_log()
    served = all_batches(log)
    # The abort marker goes with the last batch of its transaction; a commit marker stays
    # while a record of its transaction does (j's latest value is offset 5).
    assert [b.last_offset for b in served if b.is_control] == [6, 9, 10]
    assert not [b for b in served if b.base_offset == 2]
    assert [e for s in log.log_segments for e in s.txn_index.all_aborted_txns()] == []
    latest = latest_by_key(records_of(log))
    assert latest[b"k"] == b"ongoing" and latest[b"j"] == b"new"
    assert latest[b"p7"] == b"later"
    m.shutdown()
    reopened = manager().get_or_create_log(TP)
    assert latest_by_key(records_of(reopened)) == latest
    assert reopened.first_unstable_offset is None


def test_swap_completed_on_load_rebuilds_the_aborted_transactions(
        manager: Callable[[], LogManager], clock: Clock) -> None:
    m = manager()
    log = m.get_or_create_log(TP)
    log.append(_txn_batch(7, 0, [(b"only-aborted", b"x")]), leader_epoch=0)   # 0
    _marker(log, 7, commit=False)                                              # 1
    produce(log, updates_over(keys=5, rounds=20))
    log.roll()
    assert log.collect_aborted_transactions(0, 2) == [AbortedTransaction(7, 0)]
    directory = log.dir
    _crash_mid_swap(log, "after-swap-rename")
    with pytest.raises(InjectedCrash):
        cleaner_thread(m, clock).clean_filthiest_log()
    for segment in log.log_segments:
        segment.close_handlers()
    m._logs.clear()
    m.shutdown()  # the swap is completed on load even after a clean shutdown
    log2 = manager().get_log(TP)
    assert log2 is not None
    assert not [p for p in os.listdir(directory) if p.endswith((".swap", ".cleaned"))]
    # the aborted record is gone, its batch kept empty (producer 7's last), its marker and
    # .txnindex entry kept (the segment is younger than the delete horizon)
    assert b"only-aborted" not in {key for _, key, _ in records_of(log2)}
    assert log2.collect_aborted_transactions(0, 2) == [AbortedTransaction(7, 0)]
