"""LeaderEpochFileCache: which leader epoch wrote which offsets, kept in
``leader-epoch-checkpoint`` (Kafka's LeaderEpochFileCache).

Each entry says "epoch E started at offset O" and holds until the next entry's start. The
cache answers OffsetForLeaderEpoch (``end_offset_for``): the first offset after the end of
an epoch, which is how a follower finds where its log diverges from the leader's.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.log.checkpoints import LeaderEpochCheckpointFile
from kafkaclone.log.common import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

logger = logging.getLogger(__name__)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """Epoch -> start offset, oldest first, persisted on every change."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        log_end_offset: Callable[[], int],
        checkpoint: LeaderEpochCheckpointFile,
        *,
        load: bool = True,
    ) -> None:
        """``load=False``: a new log's, with no checkpoint file yet; the file is written
        when an epoch is first assigned (``flush``), not created empty beforehand."""
        self.topic_partition = topic_partition
        self._log_end_offset = log_end_offset
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        self._changes = 0
        """Counts the ``assign(..., flush=False)`` calls; ``_flushed`` is the count the
        last checkpoint write included."""
        self._flushed = 0
        self._write_lock = threading.Lock()
        """One checkpoint write at a time: an I/O thread may write a new leader's epoch
        while the reactor thread truncates (both write the same file)."""
        if load:
            checkpoint.create_if_missing()
            for epoch, start_offset in checkpoint.read():
                self._assign(EpochEntry(epoch, start_offset))

    # -- reading --

    @property
    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def non_empty(self) -> bool:
        return bool(self._entries)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``, if the cache knows it."""
        starts = [entry.start_offset for entry in self._entries]
        slot = bisect_right(starts, offset) - 1
        return self._entries[slot].epoch if slot >= 0 else None

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch.

        For the latest epoch, the log end offset; for an older epoch, the start offset of
        the first later epoch together with the largest known epoch <= the requested one;
        for an epoch older than every entry, (requested epoch, start of the first entry);
        (-1, -1) for an undefined or unknown newer epoch.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, self._log_end_offset()
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    # -- changing --

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (a new leader's first append).
        Entries that would no longer be monotonic (same or newer epoch, same or later
        offset) are removed first. ``flush=False`` leaves the checkpoint write to the
        caller (``flush``), who writes many at once."""
        if self._assign(EpochEntry(epoch, start_offset)):
            if flush:
                self.flush()
            else:
                self._changes += 1

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        latest = self.latest_entry
        if latest is not None and latest.epoch == entry.epoch and (
            entry.start_offset >= latest.start_offset
        ):
            return False
        removed: list[EpochEntry] = []
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            logger.warning(
                "%s: new epoch entry %s caused truncation of conflicting entries %s",
                self.topic_partition, entry, removed,
            )
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated
        to it)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies before ``start_offset`` (the log start moved up): entries
        starting at or before it collapse into one entry for the latest of them, moved to
        start at ``start_offset``."""
        keep_from = 0
        while keep_from < len(self._entries) and (
            self._entries[keep_from].start_offset <= start_offset
        ):
            keep_from += 1
        if keep_from == 0:
            return
        first = EpochEntry(self._entries[keep_from - 1].epoch, start_offset)
        self._entries = [first, *self._entries[keep_from:]]
        self.flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    def set_checkpoint(self, checkpoint: LeaderEpochCheckpointFile) -> None:
        """Write to ``checkpoint`` from now on (the log directory was renamed)."""
        self._checkpoint = checkpoint

    @property
    def unflushed(self) -> bool:
        """Whether an ``assign(..., flush=False)`` is not in the checkpoint yet."""
        return self._flushed != self._changes

    def flush(self) -> None:
        """Write the entries to the checkpoint (temp file, fsync, rename): from the thread
        that changes them or from another (an I/O thread), one write at a time."""
        with self._write_lock:
            changes = self._changes
            self._checkpoint.write(list(self._entries))
            self._flushed = changes
