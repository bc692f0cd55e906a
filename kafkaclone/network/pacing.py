"""Long work on the reactor thread, paced.

The controller's events and a broker's LeaderAndIsr run on the reactor thread, where every
client's requests are served too. At 10,000 partitions one of them is seconds of work; done
in one piece, every other client waits that long. A :class:`Pacer` lets such work give the
reactor a turn once it has run for a stretch (``PACING_STRETCH_S``): other clients then wait
milliseconds, and the work pays one reactor turn per stretch, not per item.
"""

from __future__ import annotations

import math
import time
from typing import Final

from twisted.internet.defer import Deferred

from kafkaclone.common.clock import Scheduler

PACING_STRETCH_S: Final = 0.01
"""How long paced work runs before the reactor takes a turn."""


class Pacer:
    """Gives the reactor a turn from long work once ``stretch_s`` has gone on it:

        for item in items:
            if pacer.due:
                await pacer.turn()
            ...
    """

    def __init__(self, clock: Scheduler | None, stretch_s: float = PACING_STRETCH_S) -> None:
        self._clock = clock
        self.stretch_s = stretch_s if clock is not None else math.inf
        self._since = time.perf_counter()

    @classmethod
    def never(cls) -> Pacer:
        """A pacer that is never due (work that may hold the reactor: tests, tools)."""
        return cls(None)

    def restart(self) -> None:
        """Count the stretch from now (the work has just waited for something else)."""
        self._since = time.perf_counter()

    @property
    def due(self) -> bool:
        """The work has run for a stretch since the last turn."""
        return time.perf_counter() - self._since >= self.stretch_s

    async def turn(self) -> None:
        """Let the reactor serve what waits (I/O, timers, a SIGTERM), then go on."""
        if self._clock is not None:
            turn: Deferred[None] = Deferred()
            self._clock.callLater(0, turn.callback, None)
            await turn
        self._since = time.perf_counter()
