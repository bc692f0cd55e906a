"""The clock and scheduler everything time-driven takes: a Twisted reactor in a broker,
``twisted.internet.task.Clock`` in tests. Typed here as Protocols so the floor imports no
Twisted."""

from __future__ import annotations

from typing import Any, Protocol


class DelayedCall(Protocol):
    def cancel(self) -> None: ...

    def active(self) -> bool: ...


class Scheduler(Protocol):
    """The part of Twisted's IReactorTime the log needs (a reactor or ``task.Clock``)."""

    def seconds(self) -> float: ...

    def callLater(self, delay: float, callable: Any, *args: Any, **kw: Any) -> Any: ...


def now_ms(clock: Scheduler) -> int:
    return int(clock.seconds() * 1000)
