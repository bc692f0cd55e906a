"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` and
``log-start-offset-checkpoint`` hold ``topic partition offset`` lines;
``leader-epoch-checkpoint`` holds ``epoch startOffset`` lines. All are version 0::

    0
    2
    my-topic 0 1234
    my-topic 1 99

A checkpoint is replaced atomically: written to ``<name>.tmp``, fsynced, renamed over the
old file, and the directory fsynced, so a crash leaves either the old or the new content.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final, Generic, TypeVar

from kafkaclone.common.errors import KafkaStorageError
from kafkaclone.common.properties import escape_property, parse_properties
from kafkaclone.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

CURRENT_VERSION: Final = 0

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"

T = TypeVar("T")


class CheckpointFileError(KafkaStorageError):
    """A checkpoint file that cannot be read (bad version, count or line)."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or file creation in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class CheckpointFile(Generic[T]):
    """A checkpoint of entries of type T, each formatted as one line."""

    def __init__(
        self,
        path: Path,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T],
        *,
        version: int = CURRENT_VERSION,
    ) -> None:
        self.path = path
        self._format_entry = format_entry
        self._parse_entry = parse_entry
        self._version = version

    def create_if_missing(self) -> None:
        """Create the file empty if it does not exist (Kafka's CheckpointFile does)."""
        try:
            with open(self.path, "xb"):
                pass
        except FileExistsError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"Failed to create checkpoint {self.path}: {exc}") from exc

    def write(self, entries: Iterable[T]) -> None:
        items = list(entries)
        lines = [str(self._version), str(len(items))]
        lines.extend(self._format_entry(item) for item in items)
        try:
            write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"))
        except OSError as exc:
            raise KafkaStorageError(
                f"Error while writing to checkpoint file {self.path}: {exc}"
            ) from exc

    def read(self) -> list[T]:
        """The entries; an empty list if the file does not exist."""
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise KafkaStorageError(
                f"Error while reading checkpoint file {self.path}: {exc}"
            ) from exc
        lines = text.splitlines()
        if not lines:
            return []  # created empty, as Kafka does when a checkpoint is first opened
        if len(lines) < 2:
            raise CheckpointFileError(f"Malformed checkpoint file {self.path}: too short")
        try:
            version = int(lines[0])
            expected = int(lines[1])
        except ValueError:
            raise CheckpointFileError(f"Malformed header in checkpoint file {self.path}") from None
        if version != self._version:
            raise CheckpointFileError(
                f"Unrecognized version of the checkpoint file {self.path}: {version}"
            )
        entries: list[T] = []
        for line in lines[2:]:
            if not line.strip():
                continue
            try:
                entries.append(self._parse_entry(line.split()))
            except (ValueError, IndexError):
                raise CheckpointFileError(
                    f"Malformed line in checkpoint file {self.path}: {line!r}"
                ) from None
        if len(entries) != expected:
            raise CheckpointFileError(
                f"Expected {expected} entries in checkpoint file {self.path}, "
                f"but found only {len(entries)}"
            )
        return entries


def _format_offset(entry: tuple[TopicPartition, int]) -> str:
    tp, offset = entry
    return f"{tp.topic} {tp.partition} {offset}"


def _parse_offset(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError("expected: topic partition offset")
    return TopicPartition(fields[0], int(fields[1])), int(fields[2])


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoints (recovery point, high watermark, log start)."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, _format_offset, _parse_offset
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def create_if_missing(self) -> None:
        self._file.create_if_missing()

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())


def _format_epoch(entry: tuple[int, int]) -> str:
    return f"{entry[0]} {entry[1]}"


def _parse_epoch(fields: list[str]) -> tuple[int, int]:
    if len(fields) != 2:
        raise ValueError("expected: epoch offset")
    return int(fields[0]), int(fields[1])


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: ``epoch startOffset`` lines, oldest first."""

    def __init__(self, path: Path) -> None:
        self._file: CheckpointFile[tuple[int, int]] = CheckpointFile(
            path, _format_epoch, _parse_epoch
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def create_if_missing(self) -> None:
        self._file.create_if_missing()

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        self._file.write(entries)

    def read(self) -> list[tuple[int, int]]:
        return self._file.read()


# -- meta.properties ----------------------------------------------------------------------

META_PROPERTIES: Final = "meta.properties"


class BrokerMetadataCheckpoint:
    """``meta.properties`` in a log directory: ``version``, ``broker.id``, ``cluster.id``,
    written as Java's Properties.store does (a date comment first)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, str] | None:
        """The properties, or None if the file does not exist."""
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KafkaStorageError(f"Failed to read {self.path}: {exc}") from exc
        return parse_properties(text)

    def write(self, properties: Mapping[str, str]) -> None:
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
        lines = ["#", f"#{stamp}"]
        lines.extend(
            f"{escape_property(key, is_key=True)}={escape_property(value, is_key=False)}"
            for key, value in properties.items()
        )
        try:
            write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"))
        except OSError as exc:
            raise KafkaStorageError(f"Failed to write {self.path}: {exc}") from exc
