"""When a large frame is read into a buffer of its own size (both ends of a connection).

A frame arrives in many socket reads. Appending them to a receive buffer and slicing the
frame out of it copies each byte two or three times; once a large frame's length is known
and enough of it is in, the socket server (requests) and the client (responses) copy the
rest of its reads straight into a buffer of the frame's size instead.
"""

from __future__ import annotations

from typing import Final

LARGE_FRAME_START: Final = 64 * 1024
"""A frame at least this large, with at least this much of it received, is read into a
buffer of its own size."""
LARGE_FRAME_GROWTH: Final = 16
"""... when what was received is at least 1/16 of its size: a peer announcing a large
frame gets at most this many times what it sent allocated."""


def large_frame_due(length: int, received: int) -> bool:
    """Whether a frame of ``length`` bytes, ``received`` of them in, goes to its own buffer
    now."""
    return (length >= LARGE_FRAME_START and received >= LARGE_FRAME_START
            and received * LARGE_FRAME_GROWTH >= length)
