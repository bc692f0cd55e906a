"""Drive Twisted code from a synchronous caller without starting the reactor.

The command-line tools' ZooKeeper path (KafkaZkClient is reactor code) and the tests both
wait this way: ``run`` waits for a coroutine or Deferred by iterating the global reactor,
``run_until`` iterates until a condition holds, each for a bounded time. Because the
reactor is never started, nothing outlives the call, and many callers in one process can
use it; ``callFromThread`` calls from kazoo's threads are processed by each iteration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

T = TypeVar("T")

_REACTOR: Any = global_reactor
ITERATION_S: Final = 0.005
"""How long one reactor iteration may wait for I/O."""


class NotDoneError(TimeoutError):
    """What was awaited did not finish (or the condition did not hold) in time."""


def run(awaitable: Coroutine[Any, Any, T] | Deferred[T], timeout: float) -> T:
    """The result of a coroutine (run on the global reactor) or of a Deferred, iterating
    the reactor for at most ``timeout`` seconds; NotDoneError (the Deferred cancelled)
    after that."""
    d = awaitable if isinstance(awaitable, Deferred) else Deferred.fromCoroutine(awaitable)
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    deadline = time.monotonic() + timeout
    while not outcome:
        if time.monotonic() > deadline:
            d.cancel()
            raise NotDoneError(f"not done within {timeout}s")
        _REACTOR.iterate(ITERATION_S)
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result  # type: ignore[no-any-return]


def run_until(condition: Callable[[], bool], timeout: float) -> None:
    """Iterate the reactor until ``condition()`` holds; NotDoneError after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise NotDoneError(f"condition not met within {timeout}s")
        _REACTOR.iterate(ITERATION_S)
