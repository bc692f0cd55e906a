"""What the v2 batch and the legacy (v0/v1) message formats share.

Every log entry, batch or legacy message, starts the same way (Kafka's ``Records``)::

    offset  int64   0    (a batch's baseOffset; a legacy entry's offset)
    size    int32   8    (bytes after this field)
    ...
    magic   int8   16

and the low bits of the attributes mean the same in both (int8 in v0/v1, int16 in v2).
"""

from __future__ import annotations

from typing import Final

BytesLike = bytes | bytearray | memoryview
"""Any buffer a batch can live in."""

OFFSET_OFFSET: Final = 0
SIZE_OFFSET: Final = 8
LOG_OVERHEAD: Final = 12
"""offset int64 + size int32: the bytes in front of every batch or legacy message that its
size field does not count."""
MAGIC_OFFSET: Final = 16
HEADER_SIZE_UP_TO_MAGIC: Final = 17
"""The bytes to read to learn an entry's format."""

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
"""Set for LogAppendTime (magic 1 and 2)."""

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
