"""The leader's assignment of connectors and tasks to the workers of a Connect group
(Kafka's ``EagerAssignor`` and ``IncrementalCooperativeAssignor``, KIP-415).

Both take what the leader knows: the members' metadata (:class:`WorkerState`), the
configured connectors with their task counts, the config offset the leader has read to.

Eager (protocol ``default``): every member stopped everything before joining; connectors
and tasks go round robin over the members sorted by id, each connector followed by its
tasks.

Incremental cooperative (``compatible`` / ``sessioned``): members keep running what they
have and report it in their metadata. The leader remembers the assignment of the previous
generation and derives:

- *deleted* = previous - configured (revoked from whoever runs them);
- *lost* = previous - active - deleted (their worker left the group);
- *new* = configured - previous - active (assigned to the least loaded workers).

Lost work is not reassigned at once: the first rebalance that sees it schedules a
rebalance ``scheduled.rebalance.max.delay.ms`` later (the delay goes out in every
assignment, each member rejoins when it expires); workers that join empty meanwhile are
candidates, and a worker that comes back within the delay gets the lost work. When the
delay has expired the lost work goes to the candidates, else it is treated as new.
Balance is restored in two rounds: when workers with nothing join (and no delay is
pending), existing workers are asked to revoke what is above the new ceiling average, and
the next rebalance (which revoking members request) assigns it to the new workers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from kafkaclone.connect.connect_protocol import (
    CONFIG_MISMATCH,
    CONNECT_PROTOCOL_V0,
    NO_ERROR,
    ConnectAssignment,
    TaskId,
    WorkerState,
)

logger = logging.getLogger(__name__)


@dataclass
class ConnectorsAndTasks:
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def minus(self, *others: ConnectorsAndTasks) -> ConnectorsAndTasks:
        out = ConnectorsAndTasks(set(self.connectors), set(self.tasks))
        for other in others:
            out.connectors -= other.connectors
            out.tasks -= other.tasks
        return out

    def size(self) -> int:
        return len(self.connectors) + len(self.tasks)


def configured_work(task_counts: Mapping[str, int]) -> ConnectorsAndTasks:
    return ConnectorsAndTasks(set(task_counts), {(name, i) for name, count in
                                                 task_counts.items() for i in range(count)})


def _current(state: WorkerState) -> ConnectorsAndTasks:
    a = state.assignment
    return ConnectorsAndTasks() if a is None else ConnectorsAndTasks(set(a.connectors),
                                                                    set(a.tasks))


def _assignments(members: Mapping[str, WorkerState], version: int, error: int, leader: str,
                 offset: int, assigned: Mapping[str, ConnectorsAndTasks],
                 revoked: Mapping[str, ConnectorsAndTasks], delay: int
                 ) -> dict[str, ConnectAssignment]:
    leader_url = members[leader].url
    out: dict[str, ConnectAssignment] = {}
    for member in members:
        given = assigned.get(member, ConnectorsAndTasks())
        taken = revoked.get(member, ConnectorsAndTasks())
        out[member] = ConnectAssignment(
            version, error, leader, leader_url, offset, sorted(given.connectors),
            sorted(given.tasks), sorted(taken.connectors), sorted(taken.tasks), delay)
    return out


def config_mismatch(members: Mapping[str, WorkerState], leader: str, version: int,
                    max_offset: int) -> dict[str, ConnectAssignment]:
    """The leader is behind a member's config offset: everybody reads and rejoins."""
    return _assignments(members, version, CONFIG_MISMATCH, leader, max_offset, {}, {}, 0)


def eager_assign(members: Mapping[str, WorkerState], leader: str, offset: int,
                 task_counts: Mapping[str, int]) -> dict[str, ConnectAssignment]:
    """Kafka's ``EagerAssignor``: round robin, each connector then its tasks."""
    ids = sorted(members)
    assigned = {m: ConnectorsAndTasks() for m in ids}
    turn = 0
    for name in sorted(task_counts):
        assigned[ids[turn % len(ids)]].connectors.add(name)
        turn += 1
        for task in range(task_counts[name]):
            assigned[ids[turn % len(ids)]].tasks.add((name, task))
            turn += 1
    return _assignments(members, CONNECT_PROTOCOL_V0, NO_ERROR, leader, offset, assigned, {},
                        0)


class IncrementalCooperativeAssignor:
    """The leader's state between generations lives here; ``now_ms`` is the clock."""

    def __init__(self, max_delay_ms: int, now_ms: Callable[[], int]) -> None:
        self.max_delay_ms = max_delay_ms
        self.now_ms = now_ms
        self.previous_assignment = ConnectorsAndTasks()
        self.previous_revocation = ConnectorsAndTasks()
        self.previous_generation = -1
        self.previous_members: set[str] = set()
        self.candidate_workers: set[str] = set()
        self.scheduled_rebalance = 0
        self.delay = 0

    def assign(self, members: Mapping[str, WorkerState], leader: str, offset: int,
               task_counts: Mapping[str, int], *, version: int, generation: int,
               last_completed_generation: int) -> dict[str, ConnectAssignment]:
        if self.previous_generation != last_completed_generation:
            # The last rebalance led by this worker did not complete (or another led it):
            # what it remembers may be stale.
            self.previous_assignment = ConnectorsAndTasks()
        configured = configured_work(task_counts)
        active = ConnectorsAndTasks()
        for state in members.values():
            current = _current(state)
            active.connectors |= current.connectors
            active.tasks |= current.tasks
        if self.previous_revocation:
            if self.previous_revocation.connectors & active.connectors or \
                    self.previous_revocation.tasks & active.tasks:
                self.previous_assignment = active  # a revocation did not take effect
            self.previous_revocation = ConnectorsAndTasks()

        deleted = self.previous_assignment.minus(configured)
        lost = self.previous_assignment.minus(active, deleted)
        new = configured.minus(self.previous_assignment, active)

        loads = {m: _current(members[m]) for m in sorted(members)}
        revoked: dict[str, ConnectorsAndTasks] = {}

        def revoke(member: str, connectors: Collection[str], tasks: Collection[TaskId]
                   ) -> None:
            entry = revoked.setdefault(member, ConnectorsAndTasks())
            entry.connectors.update(connectors)
            entry.tasks.update(tasks)
            loads[member].connectors.difference_update(connectors)
            loads[member].tasks.difference_update(tasks)

        # Deleted work, and work more than one member runs, is revoked from its runners.
        seen = ConnectorsAndTasks()
        for member, load in loads.items():
            revoke(member, load.connectors & (deleted.connectors | seen.connectors),
                   load.tasks & (deleted.tasks | seen.tasks))
            seen.connectors |= load.connectors
            seen.tasks |= load.tasks
        before = {m: ConnectorsAndTasks(set(w.connectors), set(w.tasks))
                  for m, w in loads.items()}

        self._handle_lost(lost, new, loads, set(members))
        if self.delay == 0:
            for member, extra in self._balance_revocations(configured, loads).items():
                revoke(member, extra.connectors, extra.tasks)
                before[member] = before[member].minus(extra)
        self._assign_least_loaded(loads, sorted(new.connectors), sorted(new.tasks))

        assigned = {m: loads[m].minus(before[m]) for m in loads}
        outcome = _assignments(members, version, NO_ERROR, leader, offset, assigned, revoked,
                               self.delay)
        previous = ConnectorsAndTasks(set(lost.connectors), set(lost.tasks))
        for load in loads.values():
            previous.connectors |= load.connectors
            previous.tasks |= load.tasks
        for entry in revoked.values():
            self.previous_revocation.connectors |= entry.connectors
            self.previous_revocation.tasks |= entry.tasks
        self.previous_assignment = previous
        self.previous_generation = generation
        self.previous_members = set(members)
        logger.debug("Assignment of generation %d: %s (lost %s, delay %d)", generation,
                     outcome, lost, self.delay)
        return outcome

    def _handle_lost(self, lost: ConnectorsAndTasks, new: ConnectorsAndTasks,
                     loads: dict[str, ConnectorsAndTasks], members: set[str]) -> None:
        if not lost:
            self._reset_delay()
            return
        now = self.now_ms()
        if self.scheduled_rebalance <= 0 and members >= self.previous_members:
            # Nobody left: members missed the last assignment; the work is simply new.
            new.connectors |= lost.connectors
            new.tasks |= lost.tasks
            return
        if 0 < self.scheduled_rebalance <= now:
            candidates = sorted(w for w in self.candidate_workers if w in loads)
            if candidates:
                for i, connector in enumerate(sorted(lost.connectors)):
                    loads[candidates[i % len(candidates)]].connectors.add(connector)
                for i, task in enumerate(sorted(lost.tasks)):
                    loads[candidates[i % len(candidates)]].tasks.add(task)
            else:
                new.connectors |= lost.connectors
                new.tasks |= lost.tasks
            self._reset_delay()
            return
        self.candidate_workers |= {m for m, load in loads.items() if not load}
        if now < self.scheduled_rebalance:
            self.delay = self.scheduled_rebalance - now
        else:
            self.delay = self.max_delay_ms
        self.scheduled_rebalance = now + self.delay

    def _reset_delay(self) -> None:
        self.candidate_workers.clear()
        self.scheduled_rebalance = 0
        self.delay = 0

    @staticmethod
    def _balance_revocations(configured: ConnectorsAndTasks,
                             loads: Mapping[str, ConnectorsAndTasks]
                             ) -> dict[str, ConnectorsAndTasks]:
        """Kafka's ``performTaskRevocation``: only when empty workers joined, revoke from
        each loaded worker what is above the ceiling of the new average."""
        existing = [m for m, load in loads.items() if load]
        total = len(loads)
        if not existing or len(existing) == total:
            return {}
        out: dict[str, ConnectorsAndTasks] = {}
        for kind in ("connectors", "tasks"):
            count = len(getattr(configured, kind))
            floor = count // total
            ceil = floor + (1 if count % total else 0)
            for member in existing:
                held = sorted(getattr(loads[member], kind))
                excess = len(held) - ceil
                take = held[len(held) - min(excess, len(held) - floor):] if excess > 0 else []
                if take:
                    getattr(out.setdefault(member, ConnectorsAndTasks()), kind).update(take)
        return out

    @staticmethod
    def _assign_least_loaded(loads: dict[str, ConnectorsAndTasks], connectors: list[str],
                             tasks: list[TaskId]) -> None:
        for connector in connectors:
            member = min(loads, key=lambda m: (len(loads[m].connectors), m))
            loads[member].connectors.add(connector)
        for task in tasks:
            member = min(loads, key=lambda m: (len(loads[m].tasks), m))
            loads[member].tasks.add(task)
