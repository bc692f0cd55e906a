"""Issue 15's acceptance run (benchmarks/acceptance_transactions.py) at a bounded size: a
confluent-kafka consume-transform-produce process sending its offsets to its transactions
over 3,000 input records on three broker processes (RF 3, min.insync.replicas=2), killed -9
twice and restarted, then the broker of its transaction coordinator killed -9 and
restarted. A read_committed consumer of the output sees every input exactly once, and the
group's committed offsets in ZooKeeper match the output."""

from __future__ import annotations

import pytest

from benchmarks.acceptance_transactions import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_exactly_once_through_processor_and_coordinator_kills() -> None:
    outcome = run(3000, ["processor", "processor", "coordinator"], batch=50,
                  stall_timeout=180)
    assert outcome.anomalies == [], outcome.report()
    assert outcome.processors_started >= 3
    assert outcome.commits >= 3000 // 50
