"""A watchdog for a broker's reactor, loaded into broker processes started by a benchmark.

With ``benchmarks/reactor_stalls`` on ``PYTHONPATH`` and ``KAFKACLONE_STALL_DIR`` set, every
process running ``kafkaclone.tools.server_start`` starts a thread that keeps a 10 ms timer on
the reactor. Whenever the timer is over ``LATE_S`` late, the thread samples the reactor
thread's stack every ``SAMPLE_S`` until it runs again, and for each stall longer than
``REPORT_S`` appends to ``<dir>/stall-<pid>.txt`` its length, the reactor thread's and the
process's CPU time meanwhile (less CPU than wall time: the thread waited for a core or for
the GIL) and its most frequent stacks. ``bench_control_plane.py --stalls DIR`` sets this up.
A benchmark's tool, not the broker's: nothing in ``kafkaclone`` imports it.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import traceback
from typing import Any

LATE_S = 0.15
SAMPLE_S = 0.02
REPORT_S = 0.3
STACK_DEPTH = 14


def _thread_cpu_s(native_id: int) -> float:
    with open(f"/proc/self/task/{native_id}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _watch(directory: str) -> None:
    while "twisted.internet.reactor" not in sys.modules:
        time.sleep(0.2)
    from twisted.internet import reactor

    running: Any = reactor
    while not running.running:
        time.sleep(0.2)
    last: dict[str, Any] = {}

    def tick() -> None:
        last["at"] = time.monotonic()
        last["thread"] = threading.get_ident()
        last["native"] = threading.get_native_id()
        running.callLater(0.01, tick)

    running.callFromThread(tick)
    out = open(os.path.join(directory, f"stall-{os.getpid()}.txt"), "a")
    stacks: collections.Counter[str] = collections.Counter()
    since: float | None = None
    thread_cpu = process_cpu = 0.0
    while True:
        time.sleep(SAMPLE_S)
        at = last.get("at")
        if at is None:
            continue
        if time.monotonic() - at > LATE_S:
            if since is None:
                since = at
                stacks.clear()
                thread_cpu, process_cpu = _thread_cpu_s(last["native"]), _process_cpu_s()
            frame = sys._current_frames().get(last["thread"])
            if frame is not None:
                summary = traceback.extract_stack(frame)[-STACK_DEPTH:]
                stacks[" <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                                   for f in reversed(summary))] += 1
        elif since is not None:
            stalled = at - since
            if stalled > REPORT_S:
                out.write(f"=== stall {stalled:.3f}s ending {time.strftime('%H:%M:%S')} "
                          f"samples={sum(stacks.values())} "
                          f"reactor_cpu={_thread_cpu_s(last['native']) - thread_cpu:.2f}s "
                          f"process_cpu={_process_cpu_s() - process_cpu:.2f}s\n")
                for stack, count in stacks.most_common(6):
                    out.write(f"  {count:4d} {stack}\n")
                out.flush()
            since = None


def _is_broker() -> bool:
    with open("/proc/self/cmdline", "rb") as cmdline:
        return b"kafkaclone.tools.server_start" in cmdline.read()


_directory = os.environ.get("KAFKACLONE_STALL_DIR")
if _directory and _is_broker():
    threading.Thread(target=_watch, args=(_directory,), name="reactor-stalls",
                     daemon=True).start()
