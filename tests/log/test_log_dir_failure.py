"""LogDirFailureChannel and the LogManager's side of a failed log directory: the first I/O
error of a directory reports it once, the directory's logs are closed and forgotten, new
logs go to the live directories only."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.errors import KafkaStorageError, LogDirNotFoundError
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.config import LogManagerConfig
from kafkaclone.log.log_dir_failure_channel import LogDirFailureChannel
from kafkaclone.log.manager import LogManager
from kafkaclone.log.segment import LogSegment
from tests.log.conftest import make_batch

pytestmark = pytest.mark.timeout(60)


def test_channel_reports_each_directory_once(tmp_path: Path) -> None:
    seen: list[Path] = []
    channel = LogDirFailureChannel(seen.append)
    error = OSError(errno.ENOSPC, "No space left on device")
    channel.maybe_add_offline_log_dir(tmp_path / "a", "append failed", error)
    channel.maybe_add_offline_log_dir(tmp_path / "a", "flush failed", error)
    channel.maybe_add_offline_log_dir(tmp_path / "b", "checkpoint failed", error)
    assert seen == [tmp_path / "a", tmp_path / "b"]
    assert channel.has_offline_log_dir(tmp_path / "a")
    assert not channel.has_offline_log_dir(tmp_path / "c")
    assert channel.offline_log_dirs == {tmp_path / "a", tmp_path / "b"}


def test_channel_keeps_reports_until_a_listener_is_set(tmp_path: Path) -> None:
    channel = LogDirFailureChannel()
    channel.maybe_add_offline_log_dir(tmp_path / "a", "failed at startup", None)
    seen: list[Path] = []
    channel.set_listener(seen.append)
    assert seen == [tmp_path / "a"]
    channel.maybe_add_offline_log_dir(tmp_path / "a", "again", None)
    assert seen == [tmp_path / "a"]


def test_channel_reports_from_many_threads_once(tmp_path: Path) -> None:
    seen: list[Path] = []
    channel = LogDirFailureChannel(seen.append)
    threads = [threading.Thread(target=channel.maybe_add_offline_log_dir,
                                args=(tmp_path / "a", "failed", None)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert seen == [tmp_path / "a"]


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def reported() -> list[Path]:
    return []


@pytest.fixture
def manager(dirs: list[Path], clock: Clock, reported: list[Path]) -> Iterator[LogManager]:
    channel = LogDirFailureChannel(reported.append)
    m = LogManager(LogManagerConfig.from_props({"log.dirs": ",".join(map(str, dirs)),
                                                "broker.id": "1"}),
                   clock=clock, log_dir_failure_channel=channel)
    m.startup()
    yield m
    m.shutdown()


def _fail_appends_in(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under ``directory``: appends to its segments fail with ENOSPC."""
    original = LogSegment.append

    def append(self: LogSegment, *args: object, **kwargs: object) -> None:
        if directory in Path(self.log.path).parents:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LogSegment, "append", append)


def test_an_append_error_takes_its_directory_offline(
        manager: LogManager, dirs: list[Path], reported: list[Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    full = manager.get_or_create_log(TopicPartition("t", 0))
    healthy = manager.get_or_create_log(TopicPartition("t", 1))
    assert (full.dir.parent, healthy.dir.parent) == (dirs[0], dirs[1])
    full.append(make_batch([b"kept"]), leader_epoch=0)
    _fail_appends_in(dirs[0], monkeypatch)
    with pytest.raises(KafkaStorageError, match="No space left"):
        full.append(make_batch([b"lost"]), leader_epoch=0)
    with pytest.raises(KafkaStorageError):
        full.append(make_batch([b"again"]), leader_epoch=0)
    assert reported == [dirs[0]]
    healthy.append(make_batch([b"fine"]), leader_epoch=0)

    assert manager.handle_log_dir_failure(dirs[0]) == [TopicPartition("t", 0)]
    assert full.closed
    assert manager.get_log(TopicPartition("t", 0)) is None
    assert manager.live_log_dirs == [dirs[1]]
    assert manager.offline_log_dirs == [dirs[0]]
    assert not manager.is_log_dir_online(str(dirs[0]))
    # New replicas land on the live directory only, even where d1 held fewer.
    placed = {manager.get_or_create_log(TopicPartition("new", p)).dir.parent for p in range(3)}
    assert placed == {dirs[1]}
    # A replica the controller says existed may have its data on the failed directory.
    with pytest.raises(KafkaStorageError, match="are offline"):
        manager.get_or_create_log(TopicPartition("t", 0), is_new=False)


def test_the_failed_directory_is_unlocked_and_keeps_its_data(
        manager: LogManager, dirs: list[Path], clock: Clock) -> None:
    log = manager.get_or_create_log(TopicPartition("t", 0))
    log.append(make_batch([b"a"]), leader_epoch=0)
    log.flush()
    manager.handle_log_dir_failure(dirs[0])
    # Another manager can lock d1 now: the lock was released with the directory.
    other = LogManager(LogManagerConfig.from_props({"log.dirs": str(dirs[0]),
                                                    "broker.id": "1"}), clock=clock)
    other.startup()
    try:
        recovered = other.get_log(TopicPartition("t", 0))
        assert recovered is not None and recovered.log_end_offset == 1
    finally:
        other.shutdown()


def test_a_checkpoint_write_error_takes_its_directory_offline(
        manager: LogManager, dirs: list[Path], reported: list[Path]) -> None:
    manager.get_or_create_log(TopicPartition("t", 1))
    manager.get_or_create_log(TopicPartition("t", 0))
    # The temp file the checkpoint is written through cannot be created (even as root).
    (dirs[1] / "replication-offset-checkpoint.tmp").mkdir()
    manager.checkpoint_high_watermarks()
    assert reported == [dirs[1]]


def test_a_log_creation_error_takes_its_directory_offline(
        manager: LogManager, dirs: list[Path], reported: list[Path]) -> None:
    (dirs[0] / "t-0").write_text("a file where the log directory goes")
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log(TopicPartition("t", 0))
    assert reported == [dirs[0]]


def test_an_unusable_directory_at_startup_is_reported(
        tmp_path: Path, clock: Clock) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    seen: list[Path] = []
    m = LogManager(LogManagerConfig.from_props({"log.dirs": f"{blocked},{tmp_path / 'ok'}",
                                                "broker.id": "1"}),
                   clock=clock, log_dir_failure_channel=LogDirFailureChannel(seen.append))
    m.startup()
    try:
        assert seen == [blocked]
        assert m.live_log_dirs == [tmp_path / "ok"]
    finally:
        m.shutdown()


def test_configured_directories_and_the_preferred_one(manager: LogManager,
                                                      dirs: list[Path]) -> None:
    with pytest.raises(LogDirNotFoundError):
        manager.is_log_dir_online("/not/configured")
    assert manager.is_log_dir_online(str(dirs[1]))
    tp = TopicPartition("moved", 0)
    manager.get_or_create_log(TopicPartition("t", 0))  # d1 has one, d2 none
    manager.maybe_update_preferred_log_dir(tp, str(dirs[0]))
    assert manager.get_or_create_log(tp).dir.parent == dirs[0]


def test_a_future_log_left_by_a_restart_is_loaded_as_future(tmp_path: Path,
                                                             clock: Clock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    props = {"log.dirs": ",".join(map(str, dirs)), "broker.id": "1"}
    m = LogManager(LogManagerConfig.from_props(props), clock=clock)
    m.startup()
    tp = TopicPartition("t", 0)
    m.get_or_create_log(tp).append(make_batch([b"a", b"b"]), leader_epoch=0)
    m.create_future_log(tp, str(dirs[1])).append(make_batch([b"a"]), leader_epoch=0)
    m.shutdown()
    again = LogManager(LogManagerConfig.from_props(props), clock=clock)
    again.startup()
    try:
        current, future = again.get_log(tp), again.future_logs[tp]
        assert current is not None and current.dir == dirs[0] / "t-0"
        assert current.log_end_offset == 2
        assert future.dir.parent == dirs[1] and future.log_end_offset == 1
    finally:
        again.shutdown()


def test_a_future_log_without_its_current_log_completes_the_swap(tmp_path: Path,
                                                                 clock: Clock) -> None:
    # replace_current_with_future_log renames the current log -delete first: a future log
    # found without one was caught up and was being swapped in.
    props = {"log.dirs": str(tmp_path / "d1"), "broker.id": "1"}
    m = LogManager(LogManagerConfig.from_props(props), clock=clock)
    m.startup()
    m.get_or_create_log(TopicPartition("t", 0)).append(make_batch([b"a"]), leader_epoch=0)
    m.shutdown()
    (tmp_path / "d1" / "t-0").rename(tmp_path / "d1" / f"t-0.{'ab' * 16}-future")
    again = LogManager(LogManagerConfig.from_props(props), clock=clock)
    again.startup()
    try:
        log = again.get_log(TopicPartition("t", 0))
        assert log is not None and log.dir == tmp_path / "d1" / "t-0"
        assert log.log_end_offset == 1 and again.future_logs == {}
    finally:
        again.shutdown()
