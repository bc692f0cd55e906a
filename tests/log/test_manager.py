from __future__ import annotations

import os
import queue
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.errors import (
    InconsistentClusterIdError,
    KafkaError,
    KafkaStorageError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogConfig, LogManagerConfig
from kafkaclone.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    FD_HEADROOM,
    InconsistentBrokerMetadataError,
    LogIoThreads,
    LogManager,
)
from tests.log.conftest import START_SECONDS, make_batch, values_of

T0 = int(START_SECONDS * 1000)
TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)

ManagerFactory = Callable[..., LogManager]


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def manager(dirs: list[Path], clock: Clock) -> Iterator[ManagerFactory]:
    started: list[LogManager] = []

    def factory(props: dict[str, str] | None = None, **kwargs: object) -> LogManager:
        all_props = {"log.dirs": ",".join(str(d) for d in dirs), "broker.id": "1"}
        all_props.update(props or {})
        m = LogManager(LogManagerConfig.from_props(all_props), clock=clock,
                       **kwargs)  # type: ignore[arg-type]
        m.startup()
        started.append(m)
        return m

    yield factory
    for m in started:
        m.shutdown()


def read_all(manager: LogManager, tp: TopicPartition) -> list[tuple[int, bytes | None]]:
    log = manager.get_log(tp)
    assert log is not None
    return values_of(log.read(log.log_start_offset, 10**7).records)


def test_new_partitions_go_to_the_dir_with_fewest(manager: ManagerFactory,
                                                  dirs: list[Path]) -> None:
    m = manager()
    placed = [m.get_or_create_log(TopicPartition("t", p)).dir.parent for p in range(5)]
    assert placed == [dirs[0], dirs[1], dirs[0], dirs[1], dirs[0]]
    assert m.get_or_create_log(TopicPartition("t", 0)).dir == dirs[0] / "t-0"


def test_meta_properties_and_lock(manager: ManagerFactory, dirs: list[Path],
                                  clock: Clock) -> None:
    manager(cluster_id="clusterA")
    for d in dirs:
        lines = (d / "meta.properties").read_text().splitlines()
        assert lines[2:] == ["version=0", "broker.id=1", "cluster.id=clusterA"]
    second = LogManager(LogManagerConfig.from_props({"log.dirs": str(dirs[0])}), clock=clock)
    with pytest.raises(KafkaStorageError, match="can be created or validated"):
        second.startup()  # the first manager holds the lock


def test_inconsistent_broker_metadata(manager: ManagerFactory, dirs: list[Path]) -> None:
    manager(cluster_id="clusterA").shutdown()
    with pytest.raises(InconsistentBrokerMetadataError, match=r"broker\.id"):
        manager({"broker.id": "2"})
    with pytest.raises(InconsistentClusterIdError):
        manager(cluster_id="clusterB")
    m = manager()
    assert m.cluster_id == "clusterA"


def test_shutdown_writes_checkpoints_and_marker(manager: ManagerFactory,
                                                dirs: list[Path]) -> None:
    m = manager()
    log0 = m.get_or_create_log(TP0)
    log1 = m.get_or_create_log(TP1)
    for _ in range(3):
        log0.append(make_batch(2), leader_epoch=0)
        log1.append(make_batch(1), leader_epoch=0)
    log0.update_high_watermark(6)
    log0.delete_records_before(2)
    log1.update_high_watermark(2)
    m.shutdown()
    d1, d2 = dirs
    assert (d1 / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 6\n"
    assert (d2 / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 1 3\n"
    assert (d1 / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 2\n"
    assert (d2 / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    assert (d1 / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 6\n"
    assert (d2 / "replication-offset-checkpoint").read_text() == "0\n1\norders 1 2\n"
    assert (d1 / CLEAN_SHUTDOWN_FILE).exists() and (d2 / CLEAN_SHUTDOWN_FILE).exists()


def test_restart_loads_logs_and_offsets(manager: ManagerFactory, dirs: list[Path]) -> None:
    m = manager()
    log = m.get_or_create_log(TP0)
    for _ in range(3):
        log.append(make_batch(2), leader_epoch=0)
    log.update_high_watermark(4)
    log.delete_records_before(2)
    before = read_all(m, TP0)
    m.shutdown()
    m = manager()
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    log = m.get_log(TP0)
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (2, 6, 4)
    assert log.recovery_point == 6
    assert read_all(m, TP0) == before


def test_unclean_restart_recovers_from_recovery_point(
    manager: ManagerFactory, dirs: list[Path], clock: Clock
) -> None:
    m = manager()
    log = m.get_or_create_log(TP0)
    log.append(make_batch(2), leader_epoch=0)
    m.checkpoint_recovery_offsets()
    log.flush()
    log.append(make_batch(2), leader_epoch=0)
    # simulate a crash: files are left as they are, no marker, no final checkpoints
    log.close()
    m._started = False
    m._unlock_dirs()
    with open(log.active_segment.log.path, "ab") as f:
        f.write(b"\x00" * 30)
    m2 = manager()
    recovered = m2.get_log(TP0)
    assert recovered is not None and recovered.log_end_offset == 4
    assert recovered.recovery_point == 0  # from the checkpoint, written before the flush


def test_retention_runs_on_schedule(manager: ManagerFactory, clock: Clock) -> None:
    m = manager({"log.retention.check.interval.ms": "60000"})
    config = LogConfig.from_props({"retention.ms": "1000", "segment.bytes": "200",
                                   "file.delete.delay.ms": "0"})
    log = m.get_or_create_log(TP0, config)
    for _ in range(4):
        log.append(make_batch(1, timestamp=T0), leader_epoch=0)
    log.update_high_watermark(4)
    segments = log.num_segments
    assert segments > 1
    clock.advance(29)
    assert log.num_segments == segments
    clock.advance(2)  # the first run is 30 s after startup
    assert log.log_start_offset == 4 and log.num_segments == 1


def test_flush_scheduler_honours_flush_ms(manager: ManagerFactory, clock: Clock) -> None:
    m = manager({"log.flush.scheduler.interval.ms": "1000"})
    log = m.get_or_create_log(TP0, LogConfig.from_props({"flush.ms": "5000"}))
    log.append(make_batch(1), leader_epoch=0)
    clock.advance(1)
    assert log.recovery_point == 0
    clock.advance(5)
    assert log.recovery_point == 1


def test_flush_scheduler_flushes_future_logs_too(manager: ManagerFactory,
                                                 dirs: list[Path], clock: Clock) -> None:
    # Kafka's flushDirtyLogs goes over the future logs of moves between directories too.
    m = manager({"log.flush.scheduler.interval.ms": "1000", "log.flush.interval.ms": "2000"})
    m.get_or_create_log(TP0).append(make_batch(2), leader_epoch=0)
    future_dir = next(d for d in dirs if d != m.get_log(TP0).dir.parent)  # type: ignore[union-attr]
    future = m.create_future_log(TP0, str(future_dir))
    future.append(make_batch(1), leader_epoch=0)
    assert future.recovery_point == 0
    clock.advance(3)
    assert future.recovery_point == 1


def test_checkpoints_on_schedule(manager: ManagerFactory, dirs: list[Path],
                                 clock: Clock) -> None:
    m = manager({"log.flush.offset.checkpoint.interval.ms": "10000"})
    log = m.get_or_create_log(TP0)
    log.append(make_batch(1), leader_epoch=0)
    log.flush()
    clock.advance(10)
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 1\n"
    log.update_high_watermark(1)
    clock.advance(5)
    assert (dirs[0] / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 1\n"


def test_async_delete_renames_then_removes(manager: ManagerFactory, dirs: list[Path],
                                           clock: Clock) -> None:
    m = manager()
    m.get_or_create_log(TP0, LogConfig.from_props({"file.delete.delay.ms": "5000"}))
    m.get_or_create_log(TP1).append(make_batch(1), leader_epoch=0)
    deleted = m.async_delete(TP0)
    assert deleted is not None and m.get_log(TP0) is None
    names = os.listdir(dirs[0])
    doomed = [n for n in names if n.endswith("-delete")]
    assert len(doomed) == 1 and re.fullmatch(r"orders-0\.[0-9a-f]{32}-delete", doomed[0])
    assert "orders" not in (dirs[0] / "recovery-point-offset-checkpoint").read_text()
    clock.advance(5)
    assert not [n for n in os.listdir(dirs[0]) if n.endswith("-delete")]
    assert m.async_delete(TP0) is None


def test_leftover_delete_dirs_are_removed_after_startup(
    manager: ManagerFactory, dirs: list[Path], clock: Clock
) -> None:
    manager().shutdown()
    leftover = dirs[1] / ("orders-3." + "a" * 32 + "-delete")
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    m = manager()
    assert m.get_log(TopicPartition("orders", 3)) is None
    clock.advance(60)
    assert not leftover.exists()


def test_truncate_checkpoints_recovery_point(manager: ManagerFactory, dirs: list[Path]) -> None:
    m = manager()
    log = m.get_or_create_log(TP0)
    for _ in range(4):
        log.append(make_batch(1), leader_epoch=0)
    log.flush()
    m.truncate_to({TP0: 2})
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 2\n"
    m.truncate_fully_and_start_at(TP0, 10)
    assert (dirs[0] / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    assert log.log_end_offset == 10


def test_offline_dir_is_skipped(manager: ManagerFactory, dirs: list[Path]) -> None:
    dirs[1].parent.mkdir(parents=True, exist_ok=True)
    dirs[1].write_text("not a directory")
    m = manager()
    assert m.live_log_dirs == [dirs[0]]
    assert m.offline_log_dirs == [dirs[1]]
    assert m.get_or_create_log(TP0).dir.parent == dirs[0]
    with pytest.raises(KafkaStorageError, match="offline"):
        m.get_or_create_log(TP1, is_new=False)


def test_corrupt_checkpoint_means_full_recovery(manager: ManagerFactory,
                                                dirs: list[Path]) -> None:
    m = manager()
    log = m.get_or_create_log(TP0)
    log.append(make_batch(3), leader_epoch=0)
    m.shutdown()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    (dirs[0] / CLEAN_SHUTDOWN_FILE).unlink()
    m = manager()
    log = m.get_log(TP0)
    assert log is not None and log.log_end_offset == 3


def test_recovery_threads_load_and_close_every_log_of_each_dir(
        manager: ManagerFactory, dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    props = {"num.recovery.threads.per.data.dir": "4"}
    m = manager(props)
    partitions = [TopicPartition("orders", p) for p in range(12)]
    for p, tp in enumerate(partitions):
        m.get_or_create_log(tp).append(make_batch(p + 1), leader_epoch=0)
    closed_on: list[str] = []
    real_close = m.get_log(TP0).__class__.close  # type: ignore[union-attr]

    def close(log: object) -> None:
        closed_on.append(threading.current_thread().name)
        real_close(log)  # type: ignore[arg-type]

    monkeypatch.setattr("kafkaclone.log.log.Log.close", close)
    m.shutdown()
    assert len(closed_on) == 12
    assert all(name.startswith("log-recovery") for name in closed_on)
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    monkeypatch.undo()
    m = manager(props)
    for p, tp in enumerate(partitions):
        log = m.get_log(tp)
        assert log is not None and log.log_end_offset == p + 1


def test_a_log_that_fails_on_a_recovery_thread_takes_its_dir_offline(
        manager: ManagerFactory, dirs: list[Path]) -> None:
    props = {"num.recovery.threads.per.data.dir": "3"}
    m = manager(props)
    partitions = [TopicPartition("orders", p) for p in range(8)]
    for tp in partitions:
        m.get_or_create_log(tp).append(make_batch(1), leader_epoch=0)
    in_first = [tp for tp in partitions if m.get_log(tp).dir.parent == dirs[0]]  # type: ignore[union-attr]
    m.shutdown()
    (dirs[0] / f"{in_first[0].topic}-{in_first[0].partition}" / "leader-epoch-checkpoint"
     ).write_text("7\n1\n0 0\n")
    m = manager(props)
    assert m.offline_log_dirs == [dirs[0]]
    assert all(m.get_log(tp) is None for tp in in_first)
    others = [tp for tp in partitions if tp not in in_first]
    assert others and all(m.get_log(tp) is not None for tp in others)
    m.set_recovery_threads(1)
    assert m.config.num_recovery_threads_per_data_dir == 1


def test_topic_config_update_reaches_logs(manager: ManagerFactory) -> None:
    m = manager()
    log = m.get_or_create_log(TP0)
    new = LogConfig.from_props({"retention.ms": "5"})
    m.update_topic_config("orders", new)
    assert log.config == new
    assert m.get_or_create_log(TP1).config == new


def test_a_dir_whose_logs_fail_to_load_goes_offline(manager: ManagerFactory,
                                                    dirs: list[Path]) -> None:
    m = manager()
    m.get_or_create_log(TP0).append(make_batch(1), leader_epoch=0)
    m.get_or_create_log(TP1).append(make_batch(1), leader_epoch=0)
    m.shutdown()
    (dirs[0] / "orders-0" / "leader-epoch-checkpoint").write_text("7\n1\n0 0\n")
    m = manager()
    assert m.offline_log_dirs == [dirs[0]]
    assert m.get_log(TP0) is None
    log1 = m.get_log(TP1)
    assert log1 is not None and log1.log_end_offset == 1


def test_producers_expire_on_schedule(manager: ManagerFactory, clock: Clock) -> None:
    m = manager({"transactional.id.expiration.ms": "100000",
                 "producer.id.expiration.check.interval.ms": "60000"})
    log = m.get_or_create_log(TP0, LogConfig())
    log.append(make_batch(1, timestamp=T0, producer_id=7, producer_epoch=0, base_sequence=0),
               leader_epoch=0)
    assert 7 in log.producer_state_manager.producers
    clock.advance(31)  # the first check, 30 s after startup: not yet 100 s old
    assert 7 in log.producer_state_manager.producers
    clock.advance(60)
    assert 7 in log.producer_state_manager.producers
    clock.advance(60)
    assert 7 not in log.producer_state_manager.producers


class ManualBackground:
    """A background runner the test drives: the work and its completion run when asked,
    recording the thread-side work separately from the reactor-side completion."""

    def __init__(self) -> None:
        self.queued: list[tuple[Callable[[], None], Callable[[], None]]] = []

    def __call__(self, work: Callable[[], None], done: Callable[[], None]) -> None:
        self.queued.append((work, done))

    def run_all(self) -> None:
        while self.queued:
            work, done = self.queued.pop(0)
            work()
            done()


def test_periodic_checkpoints_are_written_by_the_background_runner(
        manager: ManagerFactory, dirs: list[Path], clock: Clock) -> None:
    background = ManualBackground()
    m = manager({"log.flush.offset.checkpoint.interval.ms": "10000",
                 "replica.high.watermark.checkpoint.interval.ms": "1000000000"},
                background=background)
    checkpoint = dirs[0] / "recovery-point-offset-checkpoint"
    log = m.get_or_create_log(TP0)
    log.append(make_batch(1), leader_epoch=0)
    log.flush()
    before = checkpoint.read_text()
    clock.advance(10)
    # The offsets were read on the clock's thread; the file is untouched until the worker runs.
    assert checkpoint.read_text() == before
    assert len(background.queued) == 2  # one per log dir
    log.append(make_batch(1), leader_epoch=0)
    log.flush()
    clock.advance(10)
    assert len(background.queued) == 2  # coalesced: the running drains take the newest
    background.run_all()
    assert checkpoint.read_text() == "0\n1\norders 0 2\n"


def test_a_periodic_snapshot_never_overwrites_a_newer_truncation_checkpoint(
        manager: ManagerFactory, dirs: list[Path], clock: Clock) -> None:
    background = ManualBackground()
    m = manager({"log.flush.offset.checkpoint.interval.ms": "10000"}, background=background)
    log = m.get_or_create_log(TP0)
    for _ in range(4):
        log.append(make_batch(1), leader_epoch=0)
    log.flush()
    clock.advance(10)  # a snapshot with recovery point 4 waits for the worker
    m.truncate_to({TP0: 2})  # written at once, and newer
    background.run_all()
    assert (dirs[0] / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 2\n"


def test_background_checkpoint_writes_on_real_threads_do_not_interleave(tmp_path: Path) -> None:
    """Many writes of one file from worker threads and the caller's thread: every read
    sees a whole checkpoint, and the last one taken wins."""
    import threading

    from kafkaclone.log.checkpoints import OffsetCheckpointFile
    from kafkaclone.log.manager import CheckpointWriter

    threads: list[threading.Thread] = []

    def background(work: Callable[[], None], done: Callable[[], None]) -> None:
        thread = threading.Thread(target=work)
        threads.append(thread)
        thread.start()

    writer = CheckpointWriter(background)
    path = tmp_path / "replication-offset-checkpoint"
    for i in range(200):
        offsets = {TopicPartition("t", p): i for p in range(50)}
        if i % 7 == 0:
            writer.write_now(path, offsets)
        else:
            writer.write_later(path, offsets)
        assert set(OffsetCheckpointFile(path).read().values()) <= set(range(i + 1))
    for thread in threads:
        thread.join(timeout=10)
    assert set(OffsetCheckpointFile(path).read().values()) == {199}


@pytest.fixture
def io_threads() -> Iterator[tuple[LogIoThreads, queue.Queue[Callable[[], None]]]]:
    """I/O threads whose completions come back through a queue the test drains (the
    reactor's callFromThread in a broker)."""
    calls: queue.Queue[Callable[[], None]] = queue.Queue()
    threads = LogIoThreads(4, calls.put, "test-io")
    yield threads, calls
    threads.shutdown()


@pytest.mark.timeout(60)
def test_create_logs_opens_new_logs_on_the_io_threads(
        manager: ManagerFactory, dirs: list[Path],
        io_threads: tuple[LogIoThreads, queue.Queue[Callable[[], None]]]) -> None:
    threads, calls = io_threads
    m = manager(io_threads=threads)
    existing = m.get_or_create_log(TopicPartition("t", 0))
    compacted = LogConfig.from_topic_overrides({"cleanup.policy": "compact"}, m.default_config)
    wanted = {TopicPartition("t", p): (compacted, True) for p in range(40)}
    results: list[dict[TopicPartition, object]] = []
    m.create_logs(wanted, results.append)
    assert results == []  # opening on the I/O threads, nothing registered yet
    assert len(m.all_logs()) == 1
    calls.get(timeout=30)()
    assert results == [{}]
    assert m.get_log(TopicPartition("t", 0)) is existing
    created = [m.get_log(tp) for tp in wanted]
    assert all(log is not None and log.config.compact for log in created[1:])
    placed = [log.dir.parent for log in created if log is not None]
    assert placed.count(dirs[0]) == 20 and placed.count(dirs[1]) == 20
    assert (dirs[1] / "t-39" / "00000000000000000000.log").is_file()


@pytest.mark.timeout(60)
def test_create_logs_reports_what_could_not_be_created(
        manager: ManagerFactory, dirs: list[Path],
        io_threads: tuple[LogIoThreads, queue.Queue[Callable[[], None]]]) -> None:
    threads, calls = io_threads
    dirs[1].parent.mkdir(parents=True, exist_ok=True)
    dirs[1].write_text("not a directory")
    m = manager(io_threads=threads)
    (dirs[0] / "t-1").write_text("a file where the log's directory goes")
    results: list[dict[TopicPartition, object]] = []
    m.create_logs({TopicPartition("t", 0): (None, True), TopicPartition("t", 1): (None, True),
                   TopicPartition("t", 2): (None, False)}, results.append)
    while not results:
        calls.get(timeout=30)()
    failures = results[0]
    assert set(failures) == {TopicPartition("t", 1), TopicPartition("t", 2)}
    assert "offline" in str(failures[TopicPartition("t", 2)])  # a replica that existed
    assert m.get_log(TopicPartition("t", 0)) is not None
    assert m.get_log(TopicPartition("t", 1)) is None


@pytest.mark.timeout(60)
def test_create_logs_fails_alone_what_the_file_descriptor_limit_has_no_room_for(
        manager: ManagerFactory, dirs: list[Path]) -> None:
    m = manager()
    in_use = len(os.listdir("/proc/self/fd"))
    # A limit that leaves room for five more logs past the headroom (a quarter of a limit
    # this low).
    m.max_open_files = next(limit for limit in range(in_use, 4 * FD_HEADROOM)
                            if limit - min(FD_HEADROOM, limit // 4) - in_use == 5)
    wanted = {TopicPartition("t", p): (None, True) for p in range(40)}
    results: list[dict[TopicPartition, KafkaError]] = []
    m.create_logs(wanted, results.append)
    failures = results[0]
    # Five (a descriptor opened meanwhile by another thread of this process may take one).
    assert 35 <= len(failures) <= 37
    assert all(isinstance(e, KafkaStorageError) and "ulimit -n" in str(e)
               for e in failures.values())
    assert sum(m.get_log(tp) is not None for tp in wanted) == 40 - len(failures)
    # Not a disk failure: both directories stay online and take logs again once the
    # limit is raised.
    assert m.live_log_dirs == dirs and m.offline_log_dirs == []
    m.max_open_files = None
    results.clear()
    m.create_logs({tp: (None, True) for tp in failures}, results.append)
    assert results == [{}]
    assert all(m.get_log(tp) is not None for tp in wanted)


@pytest.mark.timeout(60)
def test_flush_leader_epochs_writes_what_assignments_left(
        manager: ManagerFactory,
        io_threads: tuple[LogIoThreads, queue.Queue[Callable[[], None]]]) -> None:
    threads, _ = io_threads
    m = manager(io_threads=threads)
    logs = {TopicPartition("t", p): m.get_or_create_log(TopicPartition("t", p))
            for p in range(10)}
    for epoch, log in enumerate(logs.values()):
        log.assign_epoch_start_offset(epoch + 1, 0, flush=False)
    checkpoint = logs[TopicPartition("t", 3)].dir / "leader-epoch-checkpoint"
    assert not checkpoint.exists()  # in memory only (a new log has no checkpoint file yet)
    assert m.flush_leader_epochs(logs) == {}
    assert checkpoint.read_text() == "0\n1\n4 0\n"
    assert not any(log.leader_epoch_cache_unflushed for log in logs.values())


@pytest.mark.timeout(60)
def test_io_threads_resize_keeps_the_work_already_given(
        io_threads: tuple[LogIoThreads, queue.Queue[Callable[[], None]]]) -> None:
    """The dynamic num.io.threads: work given before a resize finishes on the old threads,
    work given after runs on the new pool of the new size."""
    threads, calls = io_threads
    release = threading.Event()
    ran: list[str] = []

    def held() -> None:
        release.wait(30)
        ran.append("before")

    threads.run_all_then([held], lambda: ran.append("before done"))
    threads.resize(2)
    assert threads.threads == 2
    threads.run_all([lambda: ran.append("after")] * 4)
    assert ran == ["after"] * 4  # the new pool is not held up by the old one's work
    release.set()
    calls.get(timeout=30)()
    assert ran[-2:] == ["before", "before done"]
    threads.resize(2)  # the same size: nothing changes
    assert threads.threads == 2
