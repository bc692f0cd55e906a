"""A range of an open file, to be sent to a socket without passing through Python buffers.

The log hands the Fetch path record batches as :class:`FileRegion`s (Kafka's
``FileRecords.slice``: a file, a position, a size); the socket server sends them with
``os.sendfile`` (Kafka's ``FileRecords.writeTo`` → ``transferTo``). Anything that needs the
bytes (a TLS connection, down-conversion, an encoder writing into one buffer) reads them
with :meth:`FileRegion.read`.

The file descriptor is shared between the segment's ``FileRecords`` and every region cut
from it (:class:`SharedFile`), and closed when the last of them lets go: a segment deleted
by retention or compaction between the read and the send keeps its data readable through
the open descriptor, as Kafka keeps its FileChannel, and no other file can take over the
descriptor's number meanwhile.
"""

from __future__ import annotations

import os


class ShortFileRegionError(OSError):
    """A region's file ended before the region did: the file was truncated after the read.
    What was promised cannot be sent; the connection carrying it must close."""


class SharedFile:
    """An open file descriptor, closed when the last object holding this one is freed
    (its owner calls :meth:`close` to give up its own use early)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:  # nothing to do about it in a finaliser
                pass


class FileRegion:
    """``size`` bytes of ``file`` from ``position``."""

    __slots__ = ("file", "position", "size")

    def __init__(self, file: SharedFile, position: int, size: int) -> None:
        self.file = file
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.file.fd}, position={self.position}, size={self.size})"

    def fileno(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        """The region's bytes; ShortFileRegionError if the file no longer holds them all."""
        data = os.pread(self.file.fd, self.size, self.position)
        if len(data) == self.size:
            return data
        parts = [data]
        got = len(data)
        while got < self.size:
            more = os.pread(self.file.fd, self.size - got, self.position + got)
            if not more:
                raise ShortFileRegionError(
                    f"{self!r}: the file ends {self.size - got} bytes before the region")
            parts.append(more)
            got += len(more)
        return b"".join(parts)
