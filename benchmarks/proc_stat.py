"""CPU time of processes from ``/proc/<pid>/stat``, for benchmarks that measure a server
process from outside (a broker, a bare Twisted floor process)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of processes so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks
