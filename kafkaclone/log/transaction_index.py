"""TransactionIndex: a segment's aborted transactions, the ``.txnindex`` file (Kafka 2.8's
kafka.log.TransactionIndex and AbortedTxn).

A transaction is indexed in the segment that holds its ABORT marker, once the marker is
written. Entries are appended in the order of their last offsets, each one fixed-size,
Kafka's format (version 0)::

    version            int16    0
    producer_id        int64
    first_offset       int64    the transaction's first offset in this partition
    last_offset        int64    the offset of its ABORT marker
    last_stable_offset int64    the partition's LSO once the marker was written

A read_committed fetch collects the entries whose range overlaps what it returns, from the
segment of its fetch offset on, until an entry's last_stable_offset reaches the end of the
fetched range (no transaction aborted later can have started inside it).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Final, NamedTuple

from kafkaclone.log.common import TXN_INDEX_FILE_SUFFIX, filename_prefix_from_offset

ABORTED_TXN_VERSION: Final = 0
_ENTRY: Final = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE: Final = _ENTRY.size  # 34


class CorruptTransactionIndexError(Exception):
    """A ``.txnindex`` that cannot be read (Kafka's CorruptIndexException)."""


def transaction_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (
        filename_prefix_from_offset(base_offset) + TXN_INDEX_FILE_SUFFIX + suffix)


class AbortedTxn(NamedTuple):
    """One entry of a transaction index (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> AbortedTxn:
        version, producer_id, first_offset, last_offset, lso = _ENTRY.unpack_from(data, offset)
        if version != ABORTED_TXN_VERSION:
            raise CorruptTransactionIndexError(
                f"Unexpected aborted transaction version {version}")
        return cls(producer_id, first_offset, last_offset, lso)


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The aborted transactions of one segment. The file is created on the first append;
    a segment with no aborted transaction has none (as Kafka's, lazily)."""

    def __init__(self, start_offset: int, path: Path) -> None:
        self.start_offset = start_offset
        self.path = path
        self._corruption: str | None = None
        self._entries: list[AbortedTxn] = self._load() if path.exists() else []

    def _load(self) -> list[AbortedTxn]:
        """The entries of the file; a torn or unreadable tail is left for sanity_check to
        report (the segment is then recovered and the index rebuilt)."""
        data = self.path.read_bytes()
        if len(data) % ABORTED_TXN_SIZE:
            self._corruption = (f"Transaction index file {self.path} has size {len(data)}, "
                                f"not a multiple of {ABORTED_TXN_SIZE}")
        entries = []
        for position in range(0, len(data) - len(data) % ABORTED_TXN_SIZE, ABORTED_TXN_SIZE):
            try:
                entries.append(AbortedTxn.decode(data, position))
            except CorruptTransactionIndexError as exc:
                self._corruption = f"{self.path}: {exc}"
                break
        return entries

    @property
    def last_offset(self) -> int | None:
        return self._entries[-1].last_offset if self._entries else None

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, aborted_txn: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and last >= aborted_txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{aborted_txn.last_offset} is not greater than current last offset {last} "
                f"of index {self.path}")
        with open(self.path, "ab") as out:
            out.write(aborted_txn.encode())
        self._entries.append(aborted_txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> TxnIndexSearchResult:
        """The entries overlapping [fetch_offset, upper_bound_offset); complete once one of
        them was written with a last stable offset at or past the upper bound."""
        found: list[AbortedTxn] = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at ``offset`` or later."""
        kept = [entry for entry in self._entries if entry.last_offset < offset]
        if len(kept) == len(self._entries):
            return
        self._entries = kept
        self._rewrite()

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them)."""
        self._entries = []
        self._corruption = None
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        if not self._entries:
            self.path.unlink(missing_ok=True)
            return
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "wb") as out:
            out.write(b"".join(entry.encode() for entry in self._entries))
        os.replace(temporary, self.path)

    def flush(self) -> None:
        if self.path.exists():
            with open(self.path, "rb+") as out:
                os.fsync(out.fileno())

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def sanity_check(self) -> None:
        if self._corruption is not None:
            raise CorruptTransactionIndexError(self._corruption)
        for entry in self._entries:
            if entry.last_offset < self.start_offset:
                raise CorruptTransactionIndexError(
                    f"Last offset of aborted transaction {entry} in index {self.path} is "
                    f"less than start offset {self.start_offset}")
