"""Definitions shared by the batch, legacy message and codec modules."""

from __future__ import annotations

from typing import Final

BytesLike = bytes | bytearray | memoryview
"""Any buffer a batch can live in."""

LOG_OVERHEAD: Final = 12
"""offset int64 + size int32: the bytes in front of every batch or legacy message that its
size field does not count."""

MAGIC_OFFSET: Final = 16
"""Where every entry keeps its magic byte, whatever its format."""

NO_TIMESTAMP_TYPE: Final = -1
CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1
NO_TIMESTAMP: Final = -1


def as_view(buf: BytesLike) -> memoryview:
    """A flat byte view of ``buf`` (no copy)."""
    view = memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view
