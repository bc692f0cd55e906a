"""Writing a frame to a TCP transport now, instead of on the reactor's next turn.

Twisted's ``transport.write`` only buffers: the bytes leave when the reactor next polls
and finds the socket writable, so every answer costs an ``epoll_ctl`` to watch for
writability, one more trip through the reactor loop, the ``send``, and another
``epoll_ctl`` to stop watching. On the acks=all round trip (a produce answer, two follower
fetch answers, two follower fetch requests and a consumer's fetch answer per record) that
is most of the broker's work per small request, and a wait on every hop.

:func:`write_sequence` sends the parts with one ``sendmsg`` when the transport has nothing
buffered (the kernel takes them in order, as Twisted would); whatever the socket did not
take, and everything when something is already buffered, goes through
``transport.writeSequence`` as before, so order, the write buffer's back-pressure and the
handling of a broken connection stay Twisted's. Only for plain TCP transports (a TLS
transport encrypts in its own buffer): :func:`direct_socket` tells, once per connection.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any, Final

from twisted.internet import tcp
from twisted.internet.interfaces import ISSLTransport

MAX_PARTS: Final = 64
"""More parts than this go through Twisted (a ``sendmsg`` takes at most IOV_MAX buffers;
a response in that many parts is large, and one reactor turn more does not matter)."""


def direct_socket(transport: Any) -> socket.socket | None:
    """The socket of a plain TCP transport, which :func:`write_sequence` may write to
    directly; None for anything else (TLS, test transports)."""
    if not isinstance(transport, tcp.Connection) or ISSLTransport.providedBy(transport):
        return None
    handle: socket.socket = transport.getHandle()
    return handle


def nothing_buffered(transport: Any) -> bool:
    """Whether a plain TCP transport is open for writing with nothing in its write buffer:
    bytes written to its socket now cannot overtake any written before."""
    return bool(transport.connected and not transport.disconnecting
                and not transport._writeDisconnected and not transport._tempDataLen
                and transport.offset == len(transport.dataBuffer))


def write_sequence(transport: Any, sock: socket.socket | None,
                   parts: Sequence[bytes]) -> None:
    """``transport.writeSequence(parts)``, sent at once through ``sock`` (the transport's
    socket, from :func:`direct_socket`) when the transport has nothing buffered."""
    if sock is None or len(parts) > MAX_PARTS or not nothing_buffered(transport):
        transport.writeSequence(parts)
        return
    try:
        sent = sock.sendmsg(parts)
    except OSError:
        # Full (EAGAIN), interrupted, or broken: Twisted sends it, or finds the error and
        # closes the connection as it always does.
        transport.writeSequence(parts)
        return
    if sent == sum(len(part) for part in parts):
        return
    rest: list[bytes] = []
    for part in parts:
        if sent >= len(part):
            sent -= len(part)
            continue
        rest.append(part[sent:] if sent else part)
        sent = 0
    transport.writeSequence(rest)
