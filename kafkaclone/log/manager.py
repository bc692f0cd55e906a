"""LogManager: every partition log of a broker, across its ``log.dirs``.

Per log directory it keeps Kafka's bookkeeping files:

* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (the high watermarks);
* ``meta.properties`` (version, broker.id, cluster.id);
* ``.kafka_cleanshutdown``, created at the end of a clean shutdown and removed once the
  logs are loaded: without it, every log is recovered from its recovery point;
* ``.lock``, held while the broker runs so that two brokers cannot share a directory.

Periodic work runs on the given clock/scheduler (the reactor, or ``task.Clock`` in tests):
retention every ``log.retention.check.interval.ms``, time-based flushes, and the
checkpoints. The periodic checkpoint writes, with their file and directory fsyncs, run on a
worker thread when the manager is given a ``background`` runner (Kafka runs them on its
scheduler threads): the offsets are read on the reactor thread, only the file I/O moves
(:class:`CheckpointWriter`). Deleted partitions are renamed ``<topic>-<p>.<uuid>-delete``
at once and removed after ``file.delete.delay.ms``.

Thousands of partitions at once (a LeaderAndIsr creating a big topic, or making a broker
the leader of thousands after a failover) cost mostly file work, most of it waiting on the
disk: a new log's directory and files, a new leader's fsynced ``leader-epoch-checkpoint``.
Given :class:`LogIoThreads` (the broker's ``num.io.threads``), the manager runs that work
in parallel, where the disk takes concurrent fsyncs for little more than one:
:meth:`LogManager.create_logs` opens new logs on the I/O threads while the reactor goes on
(a log is registered, and visible, only once open), and
:meth:`LogManager.flush_leader_epochs` writes the checkpoints of many logs at once and
returns when all are on disk (:meth:`LogManager.flush_leader_epochs_then` calls back
instead, the reactor going on), so a leader still accepts nothing before its epoch is
durable.

An I/O error in a directory (a log's append, roll, flush or index write, a checkpoint, a
log's creation) is reported to the :class:`LogDirFailureChannel`; its handler (the
ReplicaManager) calls :meth:`LogManager.handle_log_dir_failure`, which takes the directory
offline: its logs are closed without writing and forgotten, new logs go only to the live
directories (the one holding the fewest partitions).
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import logging
import os
import resource
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from kafkaclone.common.clock import Scheduler, now_ms
from kafkaclone.common.errors import (
    InconsistentClusterIdError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    UnknownServerError,
)
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    BrokerMetadataCheckpoint,
    OffsetCheckpointFile,
)
from kafkaclone.log.common import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    log_dir_name,
    log_future_dir_name,
    parse_topic_partition_name,
)
from kafkaclone.log.config import LONG_MAX, LogConfig, LogManagerConfig
from kafkaclone.log.log import Log
from kafkaclone.log.log_dir_failure_channel import LogDirFailureChannel

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
LOCK_FILE: Final = ".lock"
INITIAL_TASK_DELAY_MS: Final = 30_000
META_PROPERTIES_VERSION: Final = "0"


class InconsistentBrokerMetadataError(KafkaStorageError):
    """meta.properties disagrees with the configuration or between log directories."""


def log_delete_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<32 hex digits>-delete``, the topic cut to fit 255 bytes."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: 255 - len(suffix)] + suffix


BackgroundRunner = Callable[[Callable[[], None], Callable[[], None]], None]
"""Runs its first argument on a worker thread, then its second on the clock's thread."""


class LogIoThreads:
    """A pool of threads for file work run in parallel (the broker's ``num.io.threads``).
    The work given must not raise (each item keeps its own outcome)."""

    def __init__(self, threads: int, call_from_thread: Callable[[Callable[[], None]], None],
                 name: str = "kafka-io") -> None:
        """``call_from_thread``: runs a function on the clock's thread (the reactor's
        ``callFromThread``)."""
        self._name = name
        self.threads = max(1, threads)
        self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=name)
        self._retired: list[ThreadPoolExecutor] = []
        self._call_from_thread = call_from_thread

    def resize(self, threads: int) -> None:
        """A new pool of ``threads`` for the work given from now on (the dynamic
        ``num.io.threads``, as Kafka's KafkaRequestHandlerPool.resizeThreadPool); the work
        already given finishes on the old pool's threads, which then end."""
        threads = max(1, threads)
        if threads == self.threads:
            return
        self._executor.shutdown(wait=False)
        self._retired.append(self._executor)
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=self._name)

    def _chunks(self, work: Sequence[Callable[[], None]]) -> list[Callable[[], None]]:
        """``work`` as at most one task per thread, each running its share in order: one
        submission per thread instead of per item (each costs the submitting thread, the
        reactor, a lock and a wake-up)."""
        if len(work) <= self.threads:
            return list(work)
        return [functools.partial(_run_each, work[i::self.threads])
                for i in range(self.threads)]

    def run_all(self, work: Sequence[Callable[[], None]]) -> None:
        """Run every item, in parallel, and return once all are done."""
        futures = [self._executor.submit(item) for item in self._chunks(work)]
        wait(futures)
        for future in futures:
            future.result()

    def run_all_then(self, work: Sequence[Callable[[], None]],
                     done: Callable[[], None]) -> None:
        """Run every item, in parallel, then ``done`` on the clock's thread; return now."""
        if not work:
            done()
            return
        work = self._chunks(work)
        remaining = [len(work)]
        lock = threading.Lock()

        def finished(_: Future[None]) -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._call_from_thread(done)

        for item in work:
            self._executor.submit(item).add_done_callback(finished)

    def shutdown(self) -> None:
        """Wait for the work started (on this pool and on those a resize replaced), start
        no more."""
        for executor in (*self._retired, self._executor):
            executor.shutdown(wait=True)


def _run_each(work: Sequence[Callable[[], None]]) -> None:
    for item in work:
        item()


@dataclass
class _NewLog:
    """A log being opened on an I/O thread: what it needs, then what came of it."""

    tp: TopicPartition
    directory: Path
    config: LogConfig
    max_producer_id_expiration_ms: int
    clock: Scheduler
    log: Log | None = None
    error: KafkaError | None = None

    def open(self) -> None:
        try:
            self.log = Log(self.directory, self.config, clock=self.clock,
                           topic_partition=self.tp,
                           max_producer_id_expiration_ms=self.max_producer_id_expiration_ms,
                           new_dir=True)
        except KafkaError as exc:
            self.error = exc
        except Exception as exc:  # on a worker thread: kept for the clock's thread to tell
            logger.exception("Error while creating log for %s in dir %s", self.tp,
                             self.directory.parent)
            self.error = UnknownServerError(f"Error while creating log for {self.tp}: {exc}")


class CheckpointWriter:
    """Writes the offset checkpoint files, synchronously (``write_now``) or on a worker
    thread (``write_later``, with a ``background`` runner). One file is never written by two
    threads at once, and a snapshot never replaces a newer one: each snapshot is numbered on
    the reactor thread when taken, and a write older than the file's last is skipped (a
    periodic recovery-point write must not undo the lower recovery point a truncation just
    wrote). Periodic writes of a file coalesce: while one runs, only the newest snapshot
    waits."""

    def __init__(self, background: BackgroundRunner | None = None,
                 on_error: Callable[[Path, KafkaStorageError], None] | None = None) -> None:
        """``on_error``: told of a failed write (from the thread that wrote)."""
        self._background = background
        self._on_error = on_error
        self._io_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._sequence = 0
        self._written: dict[Path, int] = {}
        self._pending: dict[Path, tuple[int, dict[TopicPartition, int]]] = {}
        self._running: set[Path] = set()

    def write_now(self, path: Path, offsets: dict[TopicPartition, int]) -> None:
        """Write at once; a failure is logged and reported to ``on_error``."""
        self._sequence += 1
        try:
            self._write(path, self._sequence, offsets)
        except KafkaStorageError as exc:
            self._failed(path, exc)

    def write_later(self, path: Path, offsets: dict[TopicPartition, int],
                    done: Callable[[], None] | None = None) -> None:
        """Write ``offsets`` on the worker thread (at once without a runner); ``done`` then
        runs on the clock's thread."""
        if self._background is None:
            self.write_now(path, offsets)
            if done is not None:
                done()
            return
        self._sequence += 1
        with self._state_lock:
            self._pending[path] = (self._sequence, offsets)
            if path in self._running:
                return  # the running drain writes this snapshot next
            self._running.add(path)
        self._background(lambda: self._drain(path), done or _nothing)

    def _drain(self, path: Path) -> None:
        while True:
            with self._state_lock:
                item = self._pending.pop(path, None)
                if item is None:
                    self._running.discard(path)
                    return
            sequence, offsets = item
            try:
                self._write(path, sequence, offsets)
            except KafkaStorageError as exc:
                self._failed(path, exc)

    def _failed(self, path: Path, exc: KafkaStorageError) -> None:
        logger.error("Error writing checkpoint %s: %s", path, exc)
        if self._on_error is not None:
            self._on_error(path, exc)

    def _write(self, path: Path, sequence: int, offsets: dict[TopicPartition, int]) -> None:
        with self._io_lock:
            if self._written.get(path, 0) > sequence:
                return
            OffsetCheckpointFile(path).write(offsets)
            self._written[path] = sequence


def _nothing() -> None:
    pass


@dataclass
class _Periodic:
    """A task rescheduled every ``period`` seconds on the clock."""

    name: str
    function: Callable[[], Any]
    period: float
    call: Any = None


FD_HEADROOM: Final = 1024
"""File descriptors a broker keeps free of new logs (a quarter of a lower limit): its
connections, and the segment each log opens when it rolls."""


OPEN_FILES_RECOUNT_S: Final = 5.0
"""How long a count of the open descriptors stands in for a new one (plus the logs added)."""


def open_files_limit() -> int | None:
    """The soft RLIMIT_NOFILE of this process, None when unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


class LogManager:
    """Creates, loads, checkpoints, cleans and deletes the logs of one broker."""

    def __init__(
        self,
        config: LogManagerConfig,
        *,
        clock: Scheduler,
        topic_configs: Mapping[str, LogConfig] | None = None,
        cluster_id: str | None = None,
        background: BackgroundRunner | None = None,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
        io_threads: LogIoThreads | None = None,
    ) -> None:
        """``background``: where the periodic checkpoint writes run (inline without it);
        ``log_dir_failure_channel``: where I/O errors are reported (a new one without it);
        ``io_threads``: where many logs' file work runs in parallel (one after the other on
        the calling thread without it)."""
        self.config = config
        self._clock = clock
        self._io_threads = io_threads
        self.log_dir_failure_channel = log_dir_failure_channel or LogDirFailureChannel()
        self.checkpoints = CheckpointWriter(background, self._checkpoint_failed)
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.cluster_id = cluster_id
        self.flush_time_listener: Callable[[float], None] | None = None
        """Given to every log this manager opens (LogFlushStats, when metrics are on)."""
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dirs = [Path(d).absolute() for d in config.log_dirs]
        self._live_dirs: list[Path] = []
        self._offline_dirs: list[Path] = []
        self._lock_fds: dict[Path, int] = {}
        self._periodic: list[_Periodic] = []
        self._pending_deletions: list[Any] = []
        self._future_logs: dict[TopicPartition, Log] = {}
        """Logs being copied to another directory (AlterReplicaLogDirs): ``-future``."""
        self._preferred_log_dirs: dict[TopicPartition, Path] = {}
        """Where AlterReplicaLogDirs asked a replica not hosted yet to be created."""
        self._started = False
        self.max_open_files = open_files_limit()
        """The process's file descriptor limit (``ulimit -n``; None: unlimited). Each
        segment keeps its ``.log`` open, as Kafka's FileChannel does."""
        self._open_files_measured: tuple[int, int, float] | None = None
        """The last count of open descriptors: (count, logs hosted then, clock seconds)."""

    # -- configuration -------------------------------------------------------------------

    @property
    def default_config(self) -> LogConfig:
        return self.config.default_log_config

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def update_default_config(self, config: LogConfig) -> None:
        """The broker's log defaults changed (dynamic broker configs): new logs get them;
        the caller re-applies each topic's overrides on top (``update_topic_config``)."""
        self.config = dataclasses.replace(self.config, default_log_config=config)

    def set_recovery_threads(self, threads: int) -> None:
        """The dynamic ``num.recovery.threads.per.data.dir``: used from the next shutdown
        (and load) on, as Kafka's LogManager.reconfigure."""
        self.config = dataclasses.replace(self.config,
                                          num_recovery_threads_per_data_dir=threads)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic's configs changed: apply them to its live logs."""
        self._topic_configs[topic] = config
        for tp, log in self._logs.items():
            if tp.topic == topic:
                log.update_config(config)

    # -- directories ---------------------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[Path]:
        return list(self._live_dirs)

    @property
    def offline_log_dirs(self) -> list[Path]:
        return list(self._offline_dirs)

    def _create_and_validate_log_dirs(self) -> None:
        """Create missing directories and lock them; a directory that fails is offline."""
        seen: set[Path] = set()
        for directory in self._log_dirs:
            resolved = directory.resolve()
            if resolved in seen:
                raise KafkaStorageError(f"Duplicate log directory found: {directory}")
            seen.add(resolved)
            try:
                directory.mkdir(parents=True, exist_ok=True)
                if not os.access(directory, os.W_OK):
                    raise OSError(f"{directory} is not a writable directory")
                self._lock_dir(directory)
                self._live_dirs.append(directory)
            except OSError as exc:
                self._offline_dirs.append(directory)
                self.log_dir_failure_channel.maybe_add_offline_log_dir(
                    directory, f"Failed to create or validate data directory {directory}", exc)
        if not self._live_dirs:
            raise KafkaStorageError(
                f"None of the specified log dirs from {[str(d) for d in self._log_dirs]} "
                "can be created or validated"
            )

    def _lock_dir(self, directory: Path) -> None:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OSError(
                f"Failed to acquire lock on file .lock in {directory}. A Kafka instance in "
                "another process or thread is using this directory."
            ) from None
        self._lock_fds[directory] = fd

    def _unlock_dirs(self) -> None:
        for fd in self._lock_fds.values():
            os.close(fd)
        self._lock_fds.clear()

    def _check_broker_metadata(self) -> None:
        """Verify meta.properties against broker.id / cluster.id and between directories,
        then write it where it is missing."""
        stored: dict[Path, dict[str, str]] = {}
        for directory in self._live_dirs:
            props = BrokerMetadataCheckpoint(directory / META_PROPERTIES).read()
            if props is not None:
                stored[directory] = props
        broker_ids = {props["broker.id"] for props in stored.values() if "broker.id" in props}
        cluster_ids = {props["cluster.id"] for props in stored.values() if "cluster.id" in props}
        if len(broker_ids) > 1:
            raise InconsistentBrokerMetadataError(
                f"BrokerMetadata is not consistent across log.dirs: broker.id {broker_ids}"
            )
        if len(cluster_ids) > 1:
            raise InconsistentClusterIdError(
                f"BrokerMetadata is not consistent across log.dirs: cluster.id {cluster_ids}"
            )
        configured = self.config.broker_id
        if broker_ids and configured >= 0 and int(next(iter(broker_ids))) != configured:
            raise InconsistentBrokerMetadataError(
                f"Configured broker.id {configured} doesn't match stored broker.id "
                f"{next(iter(broker_ids))} in meta.properties. If you moved your data, make "
                "sure your configured broker.id matches. If you intend to create a new broker, "
                "you should remove all data in your data directories (log.dirs)."
            )
        if cluster_ids and self.cluster_id is not None and self.cluster_id not in cluster_ids:
            raise InconsistentClusterIdError(
                f"The Cluster ID {self.cluster_id} doesn't match stored clusterId "
                f"{next(iter(cluster_ids))} in meta.properties. The broker is trying to join "
                "the wrong cluster. Configured zookeeper.connect may be wrong."
            )
        if self.cluster_id is None and cluster_ids:
            self.cluster_id = next(iter(cluster_ids))
        if configured < 0 and not broker_ids:
            return
        broker_id = str(configured) if configured >= 0 else next(iter(broker_ids))
        properties = {"version": META_PROPERTIES_VERSION, "broker.id": broker_id}
        if self.cluster_id is not None:
            properties["cluster.id"] = self.cluster_id
        for directory in self._live_dirs:
            if stored.get(directory) != properties:
                BrokerMetadataCheckpoint(directory / META_PROPERTIES).write(properties)

    # -- startup and shutdown ------------------------------------------------------------

    def startup(self) -> None:
        """Validate and lock the directories, load every log (recovering those of a
        directory without the clean shutdown marker) and schedule the periodic tasks."""
        if self._started:
            return
        self._create_and_validate_log_dirs()
        try:
            self._check_broker_metadata()
            for directory in list(self._live_dirs):
                try:
                    self._load_logs_in_dir(directory)
                except (OSError, KafkaStorageError) as exc:
                    self._mark_offline(directory)
                    self.log_dir_failure_channel.maybe_add_offline_log_dir(
                        directory, f"Error while loading log dir {directory}", exc)
            self._complete_interrupted_swaps()
        except BaseException:
            for log in [*self._logs.values(), *self._future_logs.values()]:
                log.close()
            self._logs.clear()
            self._future_logs.clear()
            self._unlock_dirs()
            raise
        self._started = True
        self._schedule_tasks()

    def _load_logs_in_dir(self, directory: Path) -> None:
        for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                     REPLICATION_OFFSET_CHECKPOINT):
            OffsetCheckpointFile(directory / name).create_if_missing()
        clean_marker = directory / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = clean_marker.exists()
        if not had_clean_shutdown:
            logger.info("Attempting recovery for all logs in %s since no clean shutdown file "
                        "was found", directory)
        recovery_points = self._read_checkpoint(directory, RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(directory, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(directory, REPLICATION_OFFSET_CHECKPOINT)
        found: list[tuple[Path, TopicPartition, bool]] = []
        names: dict[tuple[TopicPartition, bool], Path] = {}
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("Found log directory %s marked for deletion", child)
                self._schedule_dir_deletion(child)
                continue
            # A -future log (a move between directories cut short by the restart) is
            # loaded and recovered like any log; the ReplicaManager resumes the move once
            # the partition's LeaderAndIsr arrives (Kafka's loadLog, isFuture).
            is_future = child.name.endswith(FUTURE_DIR_SUFFIX)
            tp = parse_topic_partition_name(child.name)
            loaded = self._future_logs if is_future else self._logs
            earlier = loaded[tp].dir if tp in loaded else names.get((tp, is_future))
            if earlier is not None:
                raise KafkaStorageError(
                    f"Duplicate log directories for {tp} are found in both "
                    f"{earlier} and {child}. It is likely because log directory "
                    "failure happened while broker was replacing current replica with future "
                    "replica."
                )
            names[(tp, is_future)] = child
            found.append((child, tp, is_future))

        def load(entry: tuple[Path, TopicPartition, bool]) -> Log:
            child, tp, _ = entry
            log = Log(
                child,
                self.config_for(tp.topic),
                clock=self._clock,
                log_start_offset=log_start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                had_clean_shutdown=had_clean_shutdown,
                topic_partition=tp,
                max_producer_id_expiration_ms=self.config.transactional_id_expiration_ms,
            )
            log.flush_time_listener = self.flush_time_listener
            log.log_dir_failure_channel = self.log_dir_failure_channel
            return log

        # Kafka's loadLogs: a pool of num.recovery.threads.per.data.dir threads per
        # directory opens (and, after an unclean shutdown, recovers) its logs.
        logs = run_on_threads(load, found, self.config.num_recovery_threads_per_data_dir,
                              undo=Log.close)
        for (_, tp, is_future), log in zip(found, logs, strict=True):
            (self._future_logs if is_future else self._logs)[tp] = log
            if is_future:
                logger.info("Loaded future log of partition %s in %s: its move resumes",
                            tp, directory)
        if had_clean_shutdown:
            clean_marker.unlink()

    def _complete_interrupted_swaps(self) -> None:
        """A future log whose current log is gone was being swapped in when the broker
        died (``replace_current_with_future_log`` renames the current log ``-delete``
        first, and only a caught-up, flushed future log gets there): it becomes the
        current log. Not while a directory is offline, where the current log may be."""
        if self._offline_dirs:
            return
        for tp, future in list(self._future_logs.items()):
            if tp in self._logs:
                continue
            del self._future_logs[tp]
            future.rename_dir(log_dir_name(tp))
            self._logs[tp] = future
            logger.info("Completed the interrupted swap of partition %s's future log: it "
                        "is the current log in %s", tp, future.dir.parent)

    def _read_checkpoint(self, directory: Path, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(directory / name).read()
        except KafkaStorageError as exc:
            logger.warning("Error occurred while reading %s of directory %s, resetting to "
                           "empty: %s", name, directory, exc)
            return {}

    def _schedule_tasks(self) -> None:
        config = self.config
        tasks: list[tuple[str, Callable[[], Any], int]] = [
            ("kafka-log-retention", self.cleanup_logs, config.log_retention_check_interval_ms),
            ("kafka-log-flusher", self.flush_dirty_logs, config.log_flush_scheduler_interval_ms),
            ("kafka-recovery-point-checkpoint", self.checkpoint_recovery_offsets,
             config.log_flush_offset_checkpoint_interval_ms),
            ("kafka-log-start-offset-checkpoint", self.checkpoint_log_start_offsets,
             config.log_flush_start_offset_checkpoint_interval_ms),
            ("highwatermark-checkpoint", self.checkpoint_high_watermarks,
             config.replica_high_watermark_checkpoint_interval_ms),
            ("PeriodicProducerExpirationCheck", self.remove_expired_producers,
             config.producer_id_expiration_check_interval_ms),
        ]
        for name, function, period_ms in tasks:
            if 0 < period_ms < LONG_MAX:
                task = _Periodic(name, function, period_ms / 1000.0)
                self._periodic.append(task)
                delay_ms = min(INITIAL_TASK_DELAY_MS, period_ms)
                task.call = self._clock.callLater(delay_ms / 1000.0, self._run_periodic, task)

    def _run_periodic(self, task: _Periodic) -> None:
        try:
            task.function()
        except Exception:
            logger.exception("Uncaught exception in scheduled task '%s'", task.name)
        if self._started:
            task.call = self._clock.callLater(task.period, self._run_periodic, task)

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean shutdown marker
        in each directory, release the locks."""
        if not self._started:
            return
        self._started = False
        for task in self._periodic:
            if task.call is not None and task.call.active():
                task.call.cancel()
        self._periodic.clear()
        for call in self._pending_deletions:
            if call.active():
                call.cancel()
        self._pending_deletions.clear()
        for directory in self._live_dirs:
            logs = self._logs_in_dir(directory)
            futures = self.future_logs_in_dir(directory)
            try:
                # Kafka's shutdown: the directory's recovery pool flushes and closes its logs.
                run_on_threads(_flush_and_close, [*logs.values(), *futures.values()],
                               self.config.num_recovery_threads_per_data_dir)
                self._write_checkpoints(directory)
                (directory / CLEAN_SHUTDOWN_FILE).touch()
            except (OSError, KafkaError) as exc:
                logger.error("Error while shutting down logs in %s: %s", directory, exc)
        for log in self._future_logs.values():
            log.close_handlers()
        self._future_logs.clear()
        self._logs.clear()
        self._unlock_dirs()

    # -- logs ----------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    @property
    def logs_by_topic_partition(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def _logs_in_dir(self, directory: Path) -> dict[TopicPartition, Log]:
        # Compared as strings: a Path built per log (``log.dir.parent``) made this a block
        # of the reactor of ~0.1-0.5 s at 10,000 logs, every high watermark checkpoint.
        name = str(directory)
        dirname = os.path.dirname
        return {tp: log for tp, log in self._logs.items() if dirname(str(log.dir)) == name}

    def _checkpointed_logs(self, directory: Path) -> dict[TopicPartition, Log]:
        """The logs whose offsets ``directory``'s checkpoint files hold: its current logs
        and its future logs (never of the same partition: a future log is in another
        directory than its current one), so a resumed move recovers only its tail."""
        logs = self._logs_in_dir(directory)
        logs.update(self.future_logs_in_dir(directory))
        return logs

    def _write_checkpoints(self, directory: Path) -> None:
        logs = self._checkpointed_logs(directory)
        self._write_recovery_points(directory, logs)
        self._write_log_start_offsets(directory, logs)
        self._write_high_watermarks(directory, logs)

    def next_log_dir(self, tp: TopicPartition | None = None,
                     counts: dict[Path, int] | None = None) -> Path:
        """The directory AlterReplicaLogDirs chose for ``tp`` if it is live, else the live
        directory holding the fewest partitions (the first of equals). ``counts``: the
        partitions per directory, when the caller keeps them (``_log_counts``)."""
        if not self._live_dirs:
            raise KafkaStorageError("No live log directory")
        preferred = None if tp is None else self._preferred_log_dirs.get(tp)
        if preferred is not None and preferred in self._live_dirs:
            return preferred
        if len(self._live_dirs) == 1:  # counting is O(logs), once per log created
            return self._live_dirs[0]
        if counts is None:
            counts = self._log_counts()
        return min(self._live_dirs, key=lambda directory: counts.get(directory, 0))

    def _log_counts(self) -> dict[Path, int]:
        counts = dict.fromkeys(self._live_dirs, 0)
        for log in self._logs.values():
            if log.dir.parent in counts:
                counts[log.dir.parent] += 1
        return counts

    def get_or_create_log(
        self, tp: TopicPartition, config: LogConfig | None = None, *, is_new: bool = True
    ) -> Log:
        """The log of ``tp``, created empty in ``next_log_dir()`` if there is none.
        ``is_new=False`` (a replica the controller says existed) refuses to create it
        while some directory is offline, since its data may be there."""
        log = self._logs.get(tp)
        if log is not None:
            return log
        return self._open_new_log(tp, self._new_log_dir(tp, config, is_new))

    def _open_new_log(self, tp: TopicPartition, directory: Path) -> Log:
        try:
            log = Log(directory, self.config_for(tp.topic), clock=self._clock,
                      topic_partition=tp,
                      max_producer_id_expiration_ms=self.config.transactional_id_expiration_ms,
                      new_dir=True)
        except KafkaStorageError as exc:
            self._log_creation_failed(tp, directory, exc)
            raise
        self._add_new_log(tp, log)
        return log

    def create_logs(self, wanted: Mapping[TopicPartition, tuple[LogConfig | None, bool]],
                    done: Callable[[dict[TopicPartition, KafkaError]], None]) -> None:
        """``get_or_create_log`` of each partition of ``wanted`` (partition -> (config,
        is_new)), the new logs opened in parallel on the I/O threads; then ``done``, on the
        clock's thread, with the partitions whose log could not be created. A log is
        registered only once open; a directory left from before (not a new log's) is
        loaded here, on the calling thread, as ``get_or_create_log`` does."""
        failures: dict[TopicPartition, KafkaError] = {}
        opening: list[_NewLog] = []
        counts = self._log_counts() if len(self._live_dirs) > 1 else None
        room = self._room_for_new_logs(sum(1 for tp in wanted if tp not in self._logs))
        for tp, (config, is_new) in wanted.items():
            if tp in self._logs:
                continue
            if room is not None:
                if room <= 0:
                    failures[tp] = KafkaStorageError(
                        f"Cannot create the log of {tp}: this broker has no file descriptor "
                        f"to spare for it (the limit is {self.max_open_files}, ulimit -n)")
                    continue
                room -= 1
            try:
                directory = self._new_log_dir(tp, config, is_new, counts)
                if counts is not None:
                    counts[directory.parent] = counts.get(directory.parent, 0) + 1
                if directory.exists():
                    self._open_new_log(tp, directory)
                    continue
            except KafkaError as exc:
                failures[tp] = exc
                continue
            opening.append(_NewLog(tp, directory, self.config_for(tp.topic),
                                   self.config.transactional_id_expiration_ms, self._clock))

        def opened() -> None:
            created: dict[tuple[str, Path], list[int]] = {}
            for new in opening:
                if new.error is not None:
                    if isinstance(new.error, KafkaStorageError):
                        self._log_creation_failed(new.tp, new.directory, new.error)
                    failures[new.tp] = new.error
                    continue
                assert new.log is not None
                if not self._started or new.directory.parent not in self._live_dirs or (
                        new.tp in self._logs):
                    # Shut down, or the directory failed, while the log was being opened.
                    new.log.close_handlers()
                    failures[new.tp] = KafkaStorageError(
                        f"Log for {new.tp} created in {new.directory.parent}, which is no "
                        f"longer online")
                    continue
                self._add_new_log(new.tp, new.log, announce=False)
                created.setdefault((new.tp.topic, new.directory.parent), []).append(
                    new.tp.partition)
            # One line per topic and directory instead of one per log (thousands at once).
            for (topic, parent), partitions in created.items():
                logger.info("Created logs for %d partitions of %s (%s) in %s with properties "
                            "%s", len(partitions), topic, ",".join(map(str, partitions)),
                            parent, self.config_for(topic).overridden)
            done(failures)

        work = [new.open for new in opening]
        if self._io_threads is None or not work:
            for item in work:
                item()
            opened()
        else:
            self._io_threads.run_all_then(work, opened)

    def _room_for_new_logs(self, new: int) -> int | None:
        """How many of ``new`` logs the file descriptor limit leaves room for, or None when
        it leaves room for all of them. Counted exactly (``/proc/self/fd``) only when the
        logs hosted (one descriptor each at least) come near the limit. Running out would
        fail the next file operation of any log, and with it the whole directory; a log
        that cannot be created fails alone, and the directory stays online."""
        limit = self.max_open_files
        if limit is None:
            return None
        headroom = min(FD_HEADROOM, limit // 4)
        hosted = len(self._logs) + len(self._future_logs)
        if hosted + new + headroom <= limit * 3 // 4:
            return None
        measured = self._open_files_measured
        now = self._clock.seconds()
        if measured is not None and now - measured[2] < OPEN_FILES_RECOUNT_S:
            # Counted a moment ago: that count and the logs added since (a LeaderAndIsr of
            # thousands asks once per slice of 50).
            in_use = measured[0] + hosted - measured[1]
        else:
            try:
                in_use = len(os.listdir("/proc/self/fd"))
            except OSError:
                return None
            self._open_files_measured = (in_use, hosted, now)
        room = limit - headroom - in_use
        if room >= new:
            return None
        logger.error("Cannot create %d of %d new logs: %d of this broker's %d file descriptors "
                     "(ulimit -n) are open, and %d are kept for connections and segment "
                     "rolls; raise the limit to host more partitions", new - max(room, 0), new,
                     in_use, limit, headroom)
        return room

    def flush_leader_epochs(self, logs: Mapping[TopicPartition, Log]
                            ) -> dict[TopicPartition, KafkaStorageError]:
        """Write the leader-epoch checkpoints that ``Log.assign_epoch_start_offset(...,
        flush=False)`` left to write, in parallel on the I/O threads, and return once all are
        on disk: the partitions whose write failed (their directories reported offline)."""
        failures: dict[TopicPartition, KafkaStorageError] = {}
        work = self._leader_epoch_writes(logs, failures)
        if self._io_threads is None or len(work) < 2:
            for item in work:
                item()
        else:
            self._io_threads.run_all(work)
        return failures

    def flush_leader_epochs_then(
            self, logs: Mapping[TopicPartition, Log],
            done: Callable[[dict[TopicPartition, KafkaStorageError]], None]) -> None:
        """``flush_leader_epochs`` without waiting for the writes: they run on the I/O
        threads while the clock's thread goes on, then ``done`` is called on the clock's
        thread with the failures."""
        failures: dict[TopicPartition, KafkaStorageError] = {}
        work = self._leader_epoch_writes(logs, failures)
        if self._io_threads is None:
            for item in work:
                item()
            done(failures)
        else:
            self._io_threads.run_all_then(work, lambda: done(failures))

    @staticmethod
    def _leader_epoch_writes(logs: Mapping[TopicPartition, Log],
                             failures: dict[TopicPartition, KafkaStorageError]
                             ) -> list[Callable[[], None]]:
        def flush(tp: TopicPartition, log: Log) -> None:
            try:
                log.flush_leader_epoch_cache()
            except KafkaStorageError as exc:
                failures[tp] = exc

        return [functools.partial(flush, tp, log) for tp, log in logs.items()
                if log.leader_epoch_cache_unflushed]

    def _new_log_dir(self, tp: TopicPartition, config: LogConfig | None, is_new: bool,
                     counts: dict[Path, int] | None = None) -> Path:
        """Where a new log of ``tp`` goes (``is_new=False`` refuses while a directory is
        offline); ``config`` becomes the topic's."""
        if not is_new and self._offline_dirs:
            raise KafkaStorageError(
                f"Can not create log for {tp} because log directories "
                f"{', '.join(str(d) for d in self._offline_dirs)} are offline"
            )
        if config is not None:
            self._topic_configs[tp.topic] = config
        return self.next_log_dir(tp, counts) / log_dir_name(tp)

    def _log_creation_failed(self, tp: TopicPartition, directory: Path,
                             exc: KafkaStorageError) -> None:
        if isinstance(exc.__cause__, OSError):
            self.log_dir_failure_channel.maybe_add_offline_log_dir(
                directory.parent, f"Error while creating log for {tp} in dir {directory.parent}",
                exc.__cause__)

    def _add_new_log(self, tp: TopicPartition, log: Log, *, announce: bool = True) -> None:
        log.flush_time_listener = self.flush_time_listener
        log.log_dir_failure_channel = self.log_dir_failure_channel
        self._preferred_log_dirs.pop(tp, None)
        self._logs[tp] = log
        if announce:
            logger.info("Created log for partition %s in %s with properties %s", tp,
                        log.dir.parent, self.config_for(tp.topic).overridden)

    def async_delete(self, tp: TopicPartition) -> Log | None:
        """Delete a partition's log: rename its directory to ``<topic>-<p>.<id>-delete``
        now, remove it after file.delete.delay.ms."""
        self.abort_future_log(tp)
        log = self._logs.pop(tp, None)
        if log is None:
            return None
        directory = log.dir.parent
        log.close()
        log.rename_dir(log_delete_dir_name(tp))
        logs = self._checkpointed_logs(directory)
        self._write_recovery_points(directory, logs)
        self._write_log_start_offsets(directory, logs)
        self._write_high_watermarks(directory, logs)
        logger.info("Log for partition %s is renamed to %s and is scheduled for deletion",
                    tp, log.dir)
        delay = self.config_for(tp.topic).file_delete_delay_ms / 1000.0
        self._pending_deletions.append(self._clock.callLater(delay, log.delete))
        return log

    def _schedule_dir_deletion(self, directory: Path) -> None:
        delay = self.default_config.file_delete_delay_ms / 1000.0
        self._pending_deletions.append(
            self._clock.callLater(delay, shutil.rmtree, directory, True)
        )

    def truncate_to(self, partition_offsets: Mapping[TopicPartition, int]) -> None:
        """Truncate logs (followers diverging from their leader) and checkpoint the
        recovery points at once, so a crash cannot skip recovering the new tail."""
        touched: set[Path] = set()
        for tp, offset in partition_offsets.items():
            log = self._logs.get(tp)
            if log is not None and log.truncate_to(offset):
                touched.add(log.dir.parent)
        for directory in touched:
            self._write_recovery_points(directory, self._checkpointed_logs(directory))

    def truncate_fully_and_start_at(self, tp: TopicPartition, new_offset: int) -> None:
        log = self._logs.get(tp)
        if log is None:
            return
        log.truncate_fully_and_start_at(new_offset)
        directory = log.dir.parent
        logs = self._checkpointed_logs(directory)
        self._write_recovery_points(directory, logs)
        self._write_log_start_offsets(directory, logs)

    def handle_log_dir_failure(self, directory: Path) -> list[TopicPartition]:
        """Stop serving the logs of a failed directory (Kafka's handleLogDirFailure): close
        their files without writing, forget them, release the directory's lock. Returns
        the partitions whose logs were there. The caller stops the broker if no live
        directory is left."""
        directory = Path(directory)
        logger.info("Stopping serving logs in dir %s", directory)
        offline = sorted(tp for tp, log in self._logs.items() if log.dir.parent == directory)
        for tp in offline:
            self._logs.pop(tp).close_handlers()
        for tp, log in list(self._future_logs.items()):
            if log.dir.parent == directory:
                self._future_logs.pop(tp).close_handlers()
            elif tp in offline:  # its current log is gone: the move cannot finish
                self.abort_future_log(tp)
        if directory in self._live_dirs:
            self._live_dirs.remove(directory)
            self._offline_dirs.append(directory)
        fd = self._lock_fds.pop(directory, None)
        if fd is not None:
            os.close(fd)
        logger.warning("Logs for partitions %s are offline due to failure on log directory "
                       "%s", ",".join(str(tp) for tp in offline), directory)
        return offline

    def _checkpoint_failed(self, path: Path, exc: KafkaStorageError) -> None:
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        self.log_dir_failure_channel.maybe_add_offline_log_dir(
            path.parent, f"Disk error while writing to {path.name} in dir {path.parent}", cause)

    def is_log_dir_online(self, log_dir: str) -> bool:
        """Whether the configured directory ``log_dir`` is live; LOG_DIR_NOT_FOUND if no
        configured directory has that absolute path."""
        directory = self.configured_log_dir(log_dir)
        return directory in self._live_dirs

    def configured_log_dir(self, log_dir: str) -> Path:
        path = Path(log_dir).absolute()
        for directory in self._log_dirs:
            if directory == path:
                return directory
        raise LogDirNotFoundError(f"Failed to find log dir {log_dir}.")

    @property
    def configured_log_dirs(self) -> list[Path]:
        return list(self._log_dirs)

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """Create ``tp``'s log in ``log_dir`` when it is created (AlterReplicaLogDirs for a
        replica not hosted yet)."""
        if tp not in self._logs:
            self._preferred_log_dirs[tp] = self.configured_log_dir(log_dir)

    def logs_in_dir(self, directory: Path) -> dict[TopicPartition, Log]:
        return self._logs_in_dir(directory)

    # -- moves between log directories (AlterReplicaLogDirs) ----------------------------

    @property
    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def future_logs_in_dir(self, directory: Path) -> dict[TopicPartition, Log]:
        return {tp: log for tp, log in self._future_logs.items() if log.dir.parent == directory}

    def create_future_log(self, tp: TopicPartition, log_dir: str) -> Log:
        """The ``-future`` log of ``tp`` in ``log_dir`` (created empty at the current
        log's start offset), where the current log is copied before it replaces it. A
        future log elsewhere is dropped first. KafkaStorageError while a directory is
        offline (Kafka creates none then)."""
        destination = self.configured_log_dir(log_dir)
        existing = self._future_logs.get(tp)
        if existing is not None and existing.dir.parent == destination:
            return existing
        if existing is not None:
            self.abort_future_log(tp)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"No log of {tp} to move")
        if self._offline_dirs:
            raise KafkaStorageError(
                f"Can not create future log for {tp} because log directories "
                f"{', '.join(str(d) for d in self._offline_dirs)} are offline")
        if destination not in self._live_dirs:
            raise KafkaStorageError(f"Log directory {destination} is offline")
        directory = destination / log_future_dir_name(tp)
        try:
            log = Log(directory, self.config_for(tp.topic), clock=self._clock,
                      topic_partition=tp,
                      max_producer_id_expiration_ms=self.config.transactional_id_expiration_ms,
                      new_dir=True)
            if current.log_start_offset > 0:
                log.truncate_fully_and_start_at(current.log_start_offset)
        except KafkaStorageError as exc:
            if isinstance(exc.__cause__, OSError):
                self.log_dir_failure_channel.maybe_add_offline_log_dir(
                    destination, f"Error while creating future log for {tp} in {destination}",
                    exc.__cause__)
            raise
        log.flush_time_listener = self.flush_time_listener
        log.log_dir_failure_channel = self.log_dir_failure_channel
        self._future_logs[tp] = log
        logger.info("Created future log for partition %s in %s", tp, destination)
        return log

    def truncate_future_log_to(self, tp: TopicPartition, offset: int) -> None:
        """Truncate ``tp``'s future log and checkpoint its directory's recovery points at
        once, as ``truncate_to`` does for current logs."""
        log = self._future_logs.get(tp)
        if log is not None and log.truncate_to(offset):
            directory = log.dir.parent
            self._write_recovery_points(directory, self._checkpointed_logs(directory))

    def abort_future_log(self, tp: TopicPartition) -> None:
        """Drop ``tp``'s future log and its files (the move was cancelled)."""
        log = self._future_logs.pop(tp, None)
        if log is not None:
            log.delete()
            logger.info("Deleted future log of partition %s in %s", tp, log.dir.parent)

    def replace_current_with_future_log(self, tp: TopicPartition) -> Log:
        """The future log, caught up, becomes ``tp``'s log (renamed ``<topic>-<p>``); the
        old one is renamed ``-delete`` and removed after file.delete.delay.ms (Kafka's
        replaceCurrentWithFutureLog).

        Unlike Kafka, the current log is renamed away before the future log takes its
        name, so a kill at any point leaves one log the next start loads as current:
        before the first rename the move resumes (the future log is caught up, the swap
        comes at the first step); between the two the future log has no current log left
        and ``_complete_interrupted_swaps`` finishes the rename; after the second only the
        ``-delete`` directory is left to delete. (Kafka's order leaves two ``<topic>-<p>``
        directories in between, which its next start refuses.)"""
        future = self._future_logs[tp]
        current = self._logs[tp]
        future.update_high_watermark(current.high_watermark)
        future.flush()
        old_dir = current.dir.parent
        current.rename_dir(log_delete_dir_name(tp))
        del self._logs[tp]
        try:
            future.rename_dir(log_dir_name(tp))
        except KafkaStorageError:
            current.rename_dir(log_dir_name(tp))  # the destination failed: keep the current
            self._logs[tp] = current
            raise
        del self._future_logs[tp]
        self._logs[tp] = future
        try:
            current.close()
        except KafkaStorageError as exc:  # reported: its directory goes offline
            logger.error("Error closing the replaced log of %s: %s", tp, exc)
        delay = self.config_for(tp.topic).file_delete_delay_ms / 1000.0
        self._pending_deletions.append(self._clock.callLater(delay, current.delete))
        for directory in (old_dir, future.dir.parent):
            self._write_checkpoints(directory)
        logger.info("The current replica of %s is moved from %s to %s", tp, old_dir,
                    future.dir.parent)
        return future

    def _mark_offline(self, directory: Path) -> None:
        for tp, log in list(self._logs.items()):
            if log.dir.parent == directory:
                try:
                    log.close()
                except KafkaError:
                    logger.exception("Error closing %s", log)
                del self._logs[tp]
        if directory in self._live_dirs:
            self._live_dirs.remove(directory)
            self._offline_dirs.append(directory)
        fd = self._lock_fds.pop(directory, None)
        if fd is not None:
            os.close(fd)

    # -- periodic work -------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """One retention run over every log; returns the segments deleted. (With no log
        cleaner, compacted topics get only their log-start-offset deletions.)"""
        total = 0
        for log in list(self._logs.values()):
            try:
                total += log.delete_old_segments()
            except KafkaStorageError as exc:
                logger.error("Error during retention of %s: %s", log.name, exc)
        return total

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is older than its flush.ms, future logs too
        (Kafka's flushDirtyLogs), so a move's recovery point advances between rolls."""
        now = now_ms(self._clock)
        for log in [*self._logs.values(), *self._future_logs.values()]:
            if now - log.last_flush_time >= log.config.flush_ms and not log.closed:
                try:
                    log.flush()
                except KafkaStorageError as exc:
                    logger.error("Error flushing %s: %s", log.name, exc)

    def checkpoint_recovery_offsets(self) -> None:
        """Write the recovery points, then delete the producer snapshots they make
        unnecessary (Kafka's checkpointRecoveryOffsetsAndCleanSnapshotsInDir)."""
        for directory in self._live_dirs:
            logs = self._checkpointed_logs(directory)

            def clean_snapshots(logs: dict[TopicPartition, Log] = logs) -> None:
                for log in logs.values():
                    if not log.closed:
                        log.delete_snapshots_after_recovery_point_checkpoint()

            self.checkpoints.write_later(directory / RECOVERY_POINT_CHECKPOINT,
                                         self._recovery_points(logs), clean_snapshots)

    def remove_expired_producers(self) -> None:
        for log in list(self._logs.values()):
            log.remove_expired_producers()

    def checkpoint_log_start_offsets(self) -> None:
        for directory in self._live_dirs:
            logs = self._checkpointed_logs(directory)
            self.checkpoints.write_later(directory / LOG_START_OFFSET_CHECKPOINT,
                                         self._log_start_offsets(logs))

    def checkpoint_high_watermarks(self) -> None:
        for directory in self._live_dirs:
            logs = self._checkpointed_logs(directory)
            self.checkpoints.write_later(directory / REPLICATION_OFFSET_CHECKPOINT,
                                         self._high_watermarks(logs))

    @staticmethod
    def _recovery_points(logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
        return {tp: log.recovery_point for tp, log in logs.items()}

    @staticmethod
    def _log_start_offsets(logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
        return {
            tp: log.log_start_offset
            for tp, log in logs.items()
            if log.log_segments and log.log_start_offset > log.log_segments[0].base_offset
        }

    @staticmethod
    def _high_watermarks(logs: Mapping[TopicPartition, Log]) -> dict[TopicPartition, int]:
        return {tp: log.high_watermark for tp, log in logs.items()}

    def _write_recovery_points(self, directory: Path,
                               logs: Mapping[TopicPartition, Log]) -> None:
        self.checkpoints.write_now(directory / RECOVERY_POINT_CHECKPOINT,
                                   self._recovery_points(logs))

    def _write_log_start_offsets(self, directory: Path,
                                 logs: Mapping[TopicPartition, Log]) -> None:
        self.checkpoints.write_now(directory / LOG_START_OFFSET_CHECKPOINT,
                                   self._log_start_offsets(logs))

    def _write_high_watermarks(self, directory: Path,
                               logs: Mapping[TopicPartition, Log]) -> None:
        self.checkpoints.write_now(directory / REPLICATION_OFFSET_CHECKPOINT,
                                   self._high_watermarks(logs))


def _flush_and_close(log: Log) -> None:
    log.flush()
    log.close()


def run_on_threads(action: Callable[[_T], _R], items: Sequence[_T], threads: int,
                   undo: Callable[[_R], object] | None = None) -> list[_R]:
    """``action`` of every item, the results in order, on up to ``threads`` threads (on
    the calling thread with one). When one fails the others still run to their end; then
    ``undo`` is applied to the results of those that succeeded and the first failure (in
    the items' order) is raised."""
    if threads <= 1 or len(items) <= 1:
        done: list[_R] = []
        try:
            for item in items:
                done.append(action(item))  # noqa: PERF401 (kept up to a failure)
        except BaseException:
            _undo_all(undo, done)
            raise
        return done
    with ThreadPoolExecutor(max_workers=min(threads, len(items)),
                            thread_name_prefix="log-recovery") as pool:
        futures = [pool.submit(action, item) for item in items]
    failures = [exc for f in futures if (exc := f.exception()) is not None]
    if failures:
        _undo_all(undo, [f.result() for f in futures if f.exception() is None])
        raise failures[0]
    return [f.result() for f in futures]


def _undo_all(undo: Callable[[_R], object] | None, results: Sequence[_R]) -> None:
    if undo is None:
        return
    for result in results:
        try:
            undo(result)
        except Exception:
            logger.exception("Error while undoing a partial load")
