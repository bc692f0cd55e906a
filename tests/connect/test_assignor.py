"""The leader's assignors, driven generation by generation with a fake clock: each
round's members report what they run (as their metadata would), the assignor answers
with what to start and what to revoke."""

from __future__ import annotations

import pytest

from kafkaclone.connect.assignor import IncrementalCooperativeAssignor, eager_assign
from kafkaclone.connect.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    TaskId,
    WorkerState,
)

pytestmark = pytest.mark.timeout(10)

DELAY_MS = 2000


class Group:
    """Members applying their assignments as WorkerCoordinator does."""

    def __init__(self, task_counts: dict[str, int]) -> None:
        self.now = 0
        self.assignor = IncrementalCooperativeAssignor(DELAY_MS, lambda: self.now)
        self.task_counts = task_counts
        self.running: dict[str, tuple[set[str], set[TaskId]]] = {}
        self.generation = 0
        self.last: dict[str, ConnectAssignment] = {}

    def join(self, member: str) -> None:
        self.running[member] = (set(), set())

    def leave(self, member: str) -> None:
        del self.running[member]

    def rebalance(self) -> dict[str, ConnectAssignment]:
        self.generation += 1
        members = {m: WorkerState(f"http://{m}/", 10, ConnectAssignment(
            1, 0, "", "", 10, sorted(c), sorted(t))) for m, (c, t) in self.running.items()}
        leader = sorted(members)[0]
        out = self.assignor.assign(members, leader, 10, self.task_counts, version=1,
                                   generation=self.generation,
                                   last_completed_generation=self.generation - 1)
        for member, a in out.items():
            connectors, tasks = self.running[member]
            connectors.difference_update(a.revoked_connectors)
            tasks.difference_update(a.revoked_tasks)
            assert not connectors & set(a.connectors) and not tasks & set(a.tasks)
            connectors.update(a.connectors)
            tasks.update(a.tasks)
        self.last = out
        return out

    def counts(self) -> dict[str, tuple[int, int]]:
        return {m: (len(c), len(t)) for m, (c, t) in self.running.items()}

    def everything_runs_once(self) -> bool:
        connectors = [c for cs, _ in self.running.values() for c in cs]
        tasks = [t for _, ts in self.running.values() for t in ts]
        wanted = sum(self.task_counts.values())
        return sorted(connectors) == sorted(self.task_counts) and \
            len(tasks) == len(set(tasks)) == wanted


def settled(group: Group) -> Group:
    """Rebalance while a member revoked something (revoking members rejoin at once)."""
    for _ in range(5):
        out = group.rebalance()
        if not any(a.revoked_connectors or a.revoked_tasks for a in out.values()):
            return group
    raise AssertionError("the group did not settle")


def test_first_assignment_is_balanced() -> None:
    group = Group({"a": 3, "b": 3})
    for member in ("w1", "w2", "w3"):
        group.join(member)
    out = group.rebalance()
    assert all(a.delay == 0 and not a.revoked_tasks for a in out.values())
    assert group.everything_runs_once()
    assert sorted(group.counts().values()) == [(0, 2), (1, 2), (1, 2)]


def test_join_revokes_only_the_excess_then_assigns_it() -> None:
    group = Group({"a": 4, "b": 2})
    group.join("w1")
    settled(group)
    assert group.counts() == {"w1": (2, 6)}
    before = {t for _, ts in group.running.values() for t in ts}
    group.join("w2")
    first = group.rebalance()
    # First round: w1 gives up what is over the new ceiling (3 tasks, 1 connector) ...
    assert len(first["w1"].revoked_tasks) == 3 and len(first["w1"].revoked_connectors) == 1
    assert first["w2"].tasks == [] and first["w2"].connectors == []
    kept = group.running["w1"][1]
    assert len(kept) == 3 and kept <= before
    # ... second round: the revoked work goes to the new worker; nothing else moves.
    second = group.rebalance()
    assert not second["w1"].revoked_tasks and not second["w1"].tasks
    assert sorted(second["w2"].tasks) == sorted(before - kept)
    assert group.counts() == {"w1": (1, 3), "w2": (1, 3)}
    assert group.everything_runs_once()


def test_a_departed_workers_work_waits_for_the_delay_then_moves() -> None:
    group = Group({"a": 2, "b": 2})
    for member in ("w1", "w2"):
        group.join(member)
    settled(group)
    lost_work = group.running["w2"]
    group.leave("w2")
    group.now = 1000
    held = group.rebalance()
    assert held["w1"].delay == DELAY_MS
    assert not held["w1"].tasks and not held["w1"].connectors  # held back
    group.now = 2500  # a rebalance within the delay reports the remaining time
    assert group.rebalance()["w1"].delay == 500
    group.now = 3000  # expired: the members' scheduled rejoin
    moved = group.rebalance()
    assert moved["w1"].delay == 0
    assert set(moved["w1"].tasks) == lost_work[1]
    assert set(moved["w1"].connectors) == lost_work[0]
    assert group.everything_runs_once()


def test_a_worker_back_within_the_delay_gets_its_work_back() -> None:
    group = Group({"a": 2, "b": 2})
    for member in ("w1", "w2"):
        group.join(member)
    settled(group)
    w1_before = {m: set(v) for m, v in zip(("c", "t"), group.running["w1"], strict=True)}
    lost_work = group.running["w2"]
    group.leave("w2")
    group.now = 1000
    group.rebalance()
    group.now = 2000
    group.join("w2-again")  # the restarted worker: a new member, running nothing
    back = group.rebalance()
    assert back["w1"].delay == back["w2-again"].delay == 1000
    assert not back["w1"].revoked_tasks and not back["w2-again"].tasks
    group.now = 3000
    group.rebalance()
    assert group.running["w2-again"] == lost_work
    assert group.running["w1"] == (w1_before["c"], w1_before["t"])  # never moved


def test_leave_beyond_the_delay_and_new_connector_while_held() -> None:
    group = Group({"a": 2})
    for member in ("w1", "w2"):
        group.join(member)
    settled(group)
    group.leave("w2")
    group.now = 1000
    group.rebalance()
    group.task_counts["c"] = 1  # a new connector is assigned at once despite the delay
    out = group.rebalance()
    assert out["w1"].connectors == ["c"] and out["w1"].tasks == [("c", 0)]
    group.now = 10_000
    group.rebalance()
    assert group.everything_runs_once()
    assert group.counts() == {"w1": (2, 3)}


def test_deleted_connector_is_revoked() -> None:
    group = Group({"a": 2, "b": 1})
    group.join("w1")
    settled(group)
    del group.task_counts["b"]
    out = group.rebalance()
    assert out["w1"].revoked_connectors == ["b"] and out["w1"].revoked_tasks == [("b", 0)]
    assert group.everything_runs_once()


def test_imbalance_after_join_of_two_workers() -> None:
    group = Group({"a": 6, "b": 3})
    group.join("w1")
    settled(group)
    group.join("w2")
    group.join("w3")
    settled(group)
    assert group.everything_runs_once()
    counts = sorted(group.counts().values())
    assert [t for _, t in counts] == [3, 3, 3]
    assert sorted(c for c, _ in counts) == [0, 1, 1]


def test_eager_round_robin_each_connector_then_its_tasks() -> None:
    members = {m: WorkerState(f"http://{m}/", 3) for m in ("w2", "w1")}
    out = eager_assign(members, "w1", 3, {"b": 1, "a": 2})
    # w1: a, w2: a-0, w1: a-1, w2: b, w1: b-0
    assert out["w1"].connectors == ["a"] and out["w1"].tasks == [("a", 1), ("b", 0)]
    assert out["w2"].connectors == ["b"] and out["w2"].tasks == [("a", 0)]
    assert {a.version for a in out.values()} == {0}
    assert {a.leader_url for a in out.values()} == {"http://w1/"}


def test_config_mismatch() -> None:
    from kafkaclone.connect.assignor import config_mismatch

    members = {"w1": WorkerState("http://w1/", 3), "w2": WorkerState("http://w2/", 9)}
    out = config_mismatch(members, "w1", 2, 9)
    assert all(a.error == CONFIG_MISMATCH and a.config_offset == 9 for a in out.values())
