"""ControllerEventManager: one event at a time, and a shutdown that waits for the event in
progress only so long."""

from __future__ import annotations

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock

from kafkaclone.controller.events import ControllerEvent, ControllerEventManager, TopicChange


def test_shutdown_cancels_an_event_that_outlasts_the_grace_period() -> None:
    clock = Clock()
    never: Deferred[None] = Deferred()
    outcomes: list[str] = []

    async def process(event: ControllerEvent) -> None:
        try:
            await never
        except CancelledError:
            outcomes.append("cancelled")
            raise

    events = ControllerEventManager(process)
    events.put(TopicChange())
    events.put(TopicChange())  # dropped by the shutdown
    stopped = Deferred.fromCoroutine(events.shutdown(clock, 2.0))
    clock.advance(1.9)
    assert not stopped.called
    clock.advance(0.2)
    assert stopped.called and outcomes == ["cancelled"]
    assert events.idle


def test_shutdown_lets_an_event_finish_within_the_grace_period() -> None:
    clock = Clock()
    step: Deferred[None] = Deferred()
    outcomes: list[str] = []

    async def process(event: ControllerEvent) -> None:
        await step
        outcomes.append("done")

    events = ControllerEventManager(process)
    events.put(TopicChange())
    stopped = Deferred.fromCoroutine(events.shutdown(clock, 2.0))
    step.callback(None)
    assert stopped.called and outcomes == ["done"]
    assert not clock.getDelayedCalls()
