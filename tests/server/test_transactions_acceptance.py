"""Issue 15's acceptance run (benchmarks/acceptance_transactions.py) at a bounded size: a
confluent-kafka consume-transform-produce process sending its offsets to its transactions
over 3,000 input records on three broker processes (RF 3, min.insync.replicas=2), killed -9
three times and restarted. A read_committed consumer of the output sees every input exactly
once, and the group's committed offsets in ZooKeeper match the output.

The broker-kill scenario (the transaction coordinator's broker and a partition leader
killed -9) runs in the benchmark script only: it stalled in two of five 100k runs (an open
bug, docs/benchmarks.md), and a test that fails by chance would block every run."""

from __future__ import annotations

import pytest

from benchmarks.acceptance_transactions import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_exactly_once_through_processor_kills() -> None:
    outcome = run(3000, ["processor", "processor", "processor"], batch=50,
                  stall_timeout=180)
    assert outcome.anomalies == [], outcome.report()
    assert outcome.processors_started >= 4
    # Every record went through transactions of at most 50. The commits counted are the
    # processors' log lines: a processor killed after its transaction committed at the
    # coordinator, but before its "commit" line, leaves that commit uncounted (one per kill).
    assert outcome.commits >= 3000 // 50 - len(outcome.faults)
