"""Drive Twisted code from a test without starting the reactor.

``run`` waits for a coroutine or Deferred by iterating the global reactor, for a bounded
time (TimeoutError after it); ``run_until`` iterates until a condition holds
(AssertionError after the timeout: the test's expectation failed). Both iterate the
reactor with kafkaclone.tools.reactor, the same loop the command-line tools use, with a
test's default timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet.defer import Deferred

from kafkaclone.tools import reactor

T = TypeVar("T")

RUN_TIMEOUT = 15.0


def run(awaitable: Coroutine[Any, Any, T] | Deferred[T], timeout: float = RUN_TIMEOUT) -> T:
    """Run a coroutine (or wait for a Deferred) on the global reactor for at most
    ``timeout`` seconds."""
    return reactor.run(awaitable, timeout)


def run_until(condition: Callable[[], bool], timeout: float = RUN_TIMEOUT) -> None:
    """Iterate the reactor until ``condition()`` holds (AssertionError after ``timeout``)."""
    try:
        reactor.run_until(condition, timeout)
    except reactor.NotDoneError as exc:
        raise AssertionError(str(exc)) from None
