"""One log line for thousands of like events.

A state change of 10,000 partitions logged a line each costs the reactor thread seconds (a
format and a write per line), where every client waits. Such changes log one summary line
at their level, naming the first ``EXAMPLES`` items, and each item at DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

EXAMPLES: Final = 10
"""How many items a summary line names."""


def summarized(count: int) -> bool:
    """Whether ``count`` like events get one summary line (their own lines at DEBUG)."""
    return count > EXAMPLES


def each_level(count: int, level: int) -> int:
    """The level of each of ``count`` like events' own lines: ``level``, or DEBUG when they
    are ``summarized`` (the caller then logs the summary line at ``level``)."""
    return logging.DEBUG if summarized(count) else level


def examples(items: Sequence[object], limit: int = EXAMPLES) -> str:
    """The first ``limit`` of ``items`` for a summary line, then "..." if there are more."""
    shown = ", ".join(str(item) for item in items[:limit])
    return shown + (", ..." if len(items) > limit else "")
