"""Bounded polling for tests and benchmarks: wait on a condition, never on a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout: float, what: str,
               interval: float = 0.2) -> T:
    """The first true value of ``condition``, asked every ``interval`` seconds (and once
    more at the deadline); AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(interval)
