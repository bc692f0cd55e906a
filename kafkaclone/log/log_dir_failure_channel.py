"""LogDirFailureChannel: where an I/O error takes its log directory offline (Kafka 2.8's
``kafka.server.LogDirFailureChannel``).

Whatever fails on a log directory (an append, a roll, a flush, an index or checkpoint write,
a log's creation) reports the directory here with the error. The first report of a
directory is logged and handed to the listener (the ReplicaManager's
``handle_log_dir_failure``, which stops the directory's replicas, tells the controller and
halts the broker when no directory is left); later reports of the same directory only return.
Reports may come from any thread (the checkpoint writer runs on a worker thread): the
channel only records the directory under a lock and passes it on; the listener is
expected to move it to the reactor thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

OfflineLogDirListener = Callable[[Path], None]


class LogDirFailureChannel:
    """The set of offline log directories, each reported once to the listener."""

    def __init__(self, listener: OfflineLogDirListener | None = None) -> None:
        self._lock = threading.Lock()
        self._offline: set[Path] = set()
        self._pending: list[Path] = []
        self._listener = listener

    def set_listener(self, listener: OfflineLogDirListener) -> None:
        """Set who handles offline directories; directories reported before are handed
        over now, in the order they failed."""
        with self._lock:
            self._listener = listener
            pending, self._pending = self._pending, []
        for directory in pending:
            listener(directory)

    def has_offline_log_dir(self, directory: Path) -> bool:
        with self._lock:
            return Path(directory) in self._offline

    @property
    def offline_log_dirs(self) -> set[Path]:
        with self._lock:
            return set(self._offline)

    def maybe_add_offline_log_dir(self, directory: Path, message: str,
                                  error: BaseException | None = None) -> None:
        """Take ``directory`` offline for ``error`` (once: later reports only return)."""
        directory = Path(directory)
        with self._lock:
            if directory in self._offline:
                return
            self._offline.add(directory)
            listener = self._listener
            if listener is None:
                self._pending.append(directory)
        logger.error("%s: %s", message, error)
        if listener is not None:
            listener(directory)
