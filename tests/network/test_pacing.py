"""The Pacer: long work on the reactor thread takes a turn per stretch, not per item."""

from __future__ import annotations

import time

from twisted.internet import reactor
from twisted.internet.defer import Deferred

from kafkaclone.network.pacing import Pacer
from kafkaclone.testing.reactor import run


async def _work(pacer: Pacer, items: int, seconds_each: float, ran: list[str]) -> None:
    for _ in range(items):
        if pacer.due:
            await pacer.turn()
        deadline = time.perf_counter() + seconds_each
        while time.perf_counter() < deadline:
            pass
        ran.append("item")


def _interleaving(pacer: Pacer, items: int, seconds_each: float) -> list[str]:
    ran: list[str] = []

    def other_client() -> None:  # runs at each reactor turn until the work is done
        ran.append("turn")
        if ran.count("item") < items:
            reactor.callLater(0, other_client)

    reactor.callLater(0, other_client)
    pacer.restart()
    run(Deferred.fromCoroutine(_work(pacer, items, seconds_each, ran)))
    return ran


def test_work_takes_a_turn_once_a_stretch_has_gone_by() -> None:
    ran = _interleaving(Pacer(reactor, stretch_s=0.02), items=20, seconds_each=0.005)
    # 100 ms of work in stretches of 20 ms: a turn about every 4 items, not after each.
    turns_during = ran[ran.index("item"):ran.index("item") + ran.count("item") + 20].count(
        "turn")
    assert 2 <= turns_during <= 8, ran


def test_short_work_runs_in_one_piece() -> None:
    ran = _interleaving(Pacer(reactor, stretch_s=1.0), items=20, seconds_each=0.0)
    first = ran.index("item")
    assert ran[first:first + 20] == ["item"] * 20


def test_a_pacer_without_a_clock_is_never_due() -> None:
    pacer = Pacer.never()
    time.sleep(0.01)
    assert not pacer.due
