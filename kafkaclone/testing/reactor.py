"""Drive Twisted code from a test or a script without starting the reactor.

``run`` waits for a coroutine or Deferred by iterating the global reactor, for a bounded
time; ``run_until`` iterates until a condition holds. Because the reactor is never
started, nothing outlives the call, and many tests in one process can use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

T = TypeVar("T")

_REACTOR: Any = reactor

RUN_TIMEOUT = 15.0


def run(awaitable: Coroutine[Any, Any, T] | Deferred[T], timeout: float = RUN_TIMEOUT) -> T:
    """Run a coroutine (or wait for a Deferred) on the global reactor by iterating it, for
    at most ``timeout`` seconds. The reactor is never started, so nothing outlives the
    test; callFromThread calls from kazoo's threads are processed by each iteration."""
    d = awaitable if isinstance(awaitable, Deferred) else Deferred.fromCoroutine(awaitable)
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    deadline = time.monotonic() + timeout
    while not outcome:
        if time.monotonic() > deadline:
            d.cancel()
            raise TimeoutError(f"not done within {timeout}s")
        _REACTOR.iterate(0.005)
    result = outcome[0]
    if isinstance(result, Failure):
        result.raiseException()
    return result  # type: ignore[no-any-return]


def run_until(condition: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:
    """Iterate the reactor until ``condition()`` holds (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        _REACTOR.iterate(0.005)
