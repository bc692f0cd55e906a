"""ZooKeeper's multiRead (OpCode 22, ZooKeeper 3.6+) as a request for kazoo's protocol
layer, which does not speak it (kazoo 2.x knows ``multi``, op 14, for writes only).

One multiRead carries many getData ops and is answered with each op's result in order, in
one request and one reply: kazoo's connection thread sends one request per loop turn, so
10,000 getData requests cost it 10,000 turns, a multiRead of 1,000 paths one.

Wire format (ZooKeeper's ``MultiOperationRecord`` / ``MultiResponse``, the same framing as
the write multi kazoo's ``Transaction`` sends):

- request: per op a ``MultiHeader`` (int type, bool done = false, int err = -1) then the op's
  record (getData: ``GetDataRequest``: string path, bool watch); the list ends with a
  ``MultiHeader`` (-1, true, -1);
- reply: per op a ``MultiHeader`` (type, false, err) then ``GetDataResponse`` (buffer data,
  Stat) for type 4, or ``ErrorResponse`` (int err) for type -1 (NONODE, NOAUTH ... for that
  op alone); ends with a ``MultiHeader`` (-1, true, -1). A server without multiRead answers
  the whole request with UNIMPLEMENTED (and closes the connection).

kazoo's connection calls ``serialize()`` to send it and ``deserialize(buffer, offset)`` on
its reply (only when the reply header carries no error), on its own thread.
"""

from __future__ import annotations

import struct
from typing import ClassVar, Final, TypeAlias

from kazoo.exceptions import EXCEPTIONS, ZookeeperError
from kazoo.protocol.states import ZnodeStat

MULTI_READ_OPCODE: Final = 22
GET_DATA_OPCODE: Final = 4
ERROR_OPCODE: Final = -1

_INT: Final = struct.Struct("!i")
_MULTI_HEADER: Final = struct.Struct("!iBi")
"""MultiHeader: int type, boolean done, int err."""
_STAT: Final = struct.Struct("!qqqqiiiqiiq")
"""Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner,
dataLength, numChildren, pzxid (kazoo's ZnodeStat field order)."""
_END: Final = _MULTI_HEADER.pack(-1, 1, -1)

GET_DATA_OP_OVERHEAD: Final = _MULTI_HEADER.size + _INT.size + 1
"""Request bytes of one getData op besides its path's bytes."""
GET_DATA_RESULT_OVERHEAD: Final = _MULTI_HEADER.size + _INT.size + _STAT.size
"""Reply bytes of one getData result besides the znode's data."""

ReadResult: TypeAlias = tuple[bytes, ZnodeStat] | ZookeeperError
"""One op's result: (data, stat), or the error ZooKeeper answered for that op."""


class MultiRead:
    """getData of each of ``paths`` (full paths, chroot included), no watches, in one
    request. kazoo's connection reads ``type`` and, to register watches, ``watcher``."""

    type: ClassVar[int] = MULTI_READ_OPCODE
    watcher: ClassVar[None] = None
    __slots__ = ("paths",)

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths

    def __repr__(self) -> str:  # kazoo logs each request it sends at DEBUG
        return f"MultiRead({len(self.paths)} paths)"

    def serialize(self) -> bytes:
        out = bytearray()
        op_header = _MULTI_HEADER.pack(GET_DATA_OPCODE, 0, -1)
        for path in self.paths:
            encoded = path.encode()
            out += op_header
            out += _INT.pack(len(encoded))
            out += encoded
            out += b"\x00"  # watch: false
        out += _END
        return bytes(out)

    @classmethod
    def deserialize(cls, buffer: bytes | bytearray | memoryview, offset: int
                    ) -> list[ReadResult]:
        results: list[ReadResult] = []
        while True:
            op_type, done, _err = _MULTI_HEADER.unpack_from(buffer, offset)
            offset += _MULTI_HEADER.size
            if done:
                return results
            if op_type == GET_DATA_OPCODE:
                (length,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                data = b""
                if length > 0:
                    data = bytes(buffer[offset : offset + length])
                    offset += length
                stat = ZnodeStat._make(_STAT.unpack_from(buffer, offset))
                offset += _STAT.size
                results.append((data, stat))
            elif op_type == ERROR_OPCODE:
                (code,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                results.append(EXCEPTIONS[code]())
            else:
                raise ValueError(f"unexpected op type {op_type} in a multiRead reply")


def multi_read_batches(paths: list[str], *, max_ops: int, max_request_bytes: int,
                       max_reply_bytes: int, expected_data_bytes: int) -> list[list[int]]:
    """Indices into ``paths`` cut into multiRead batches: at most ``max_ops`` ops, a request
    of at most ``max_request_bytes`` and a reply expected (``expected_data_bytes`` of data
    per znode) within ``max_reply_bytes`` (the reading side's jute.maxbuffer)."""
    per_reply = GET_DATA_RESULT_OVERHEAD + expected_data_bytes
    max_ops = max(1, min(max_ops, max_reply_bytes // per_reply))
    batches: list[list[int]] = []
    batch: list[int] = []
    request_bytes = 0
    for i, path in enumerate(paths):
        size = GET_DATA_OP_OVERHEAD + len(path.encode())
        if batch and (len(batch) >= max_ops or request_bytes + size > max_request_bytes):
            batches.append(batch)
            batch, request_bytes = [], 0
        batch.append(i)
        request_bytes += size
    if batch:
        batches.append(batch)
    return batches
