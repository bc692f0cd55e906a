"""Source offsets in standalone mode: Kafka's ``FileOffsetBackingStore``.

Kafka writes a Java-serialized ``HashMap<ByteBuffer, ByteBuffer>``; kafkaclone writes JSON
(one object: connector name -> list of ``{"partition": ..., "offset": ...}``), replaced
atomically (write a temporary file, fsync, rename), so a killed worker leaves either the
previous or the new offsets. A Kafka worker's offsets file is not readable here, nor the
reverse.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from kafkaclone.connect.api import SourceOffset, SourcePartition

PartitionKey = tuple[tuple[str, object], ...]


def partition_key(partition: SourcePartition) -> PartitionKey:
    return tuple(sorted(partition.items()))


class OffsetBackingStore(Protocol):
    """Where source offsets live: a local file (standalone) or ``offset.storage.topic``
    (distributed)."""

    def get(self, connector: str, partition: SourcePartition) -> SourceOffset | None: ...

    def set(self, connector: str, offsets: Mapping[PartitionKey,
                                                   tuple[SourcePartition, SourceOffset]]
            ) -> None:
        """Store ``offsets`` durably before returning."""


class FileOffsetBackingStore:
    """Every connector's source offsets, in memory and in ``offset.storage.file.filename``."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._data: dict[str, dict[PartitionKey, tuple[SourcePartition, SourceOffset]]] = {}
        if self.path is not None and self.path.exists():
            loaded = json.loads(self.path.read_text(encoding="utf-8") or "{}")
            for connector, entries in loaded.items():
                self._data[connector] = {
                    partition_key(e["partition"]): (e["partition"], e["offset"])
                    for e in entries}

    def get(self, connector: str, partition: SourcePartition) -> SourceOffset | None:
        with self._lock:
            found = self._data.get(connector, {}).get(partition_key(partition))
        return None if found is None else found[1]

    def set(self, connector: str, offsets: Mapping[PartitionKey,
                                                   tuple[SourcePartition, SourceOffset]]) -> None:
        """Store ``offsets`` and write the file before returning."""
        with self._lock:
            self._data.setdefault(connector, {}).update(offsets)
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        document = {connector: [{"partition": dict(p), "offset": dict(o)}
                                for p, o in entries.values()]
                    for connector, entries in self._data.items()}
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(document, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


class ConnectorOffsetReader:
    """Kafka's ``OffsetStorageReaderImpl`` for one connector."""

    def __init__(self, store: OffsetBackingStore, connector: str) -> None:
        self.store = store
        self.connector = connector

    def offset(self, partition: SourcePartition) -> SourceOffset | None:
        return self.store.get(self.connector, partition)

    def offsets(self, partitions: Sequence[SourcePartition]
                ) -> dict[PartitionKey, SourceOffset]:
        out: dict[PartitionKey, SourceOffset] = {}
        for partition in partitions:
            found = self.store.get(self.connector, partition)
            if found is not None:
                out[partition_key(partition)] = found
        return out
