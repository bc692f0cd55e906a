"""Scenario 6: ``unclean.leader.election.enable`` decides between availability and data.

Two topics, each one partition on the same two brokers A (leader) and B, with
``min.insync.replicas=1`` so A alone may acknowledge; one with unclean elections off, one on,
an acks=all writer on each. B is killed and leaves the ISR; A acknowledges writes alone; A is
killed (the partitions go offline, ISR [A]); B comes back, out of sync.

- off: the partition stays offline (leader -1) while only B is alive; when A returns it leads
  again and the checker finds nothing acknowledged lost.
- on: B is elected although it is not in the ISR; when A returns it truncates to B's log, and
  the checker reports the writes A acknowledged alone as lost (and the offsets B gave again
  as inconsistent, the acknowledged offsets going back as reordered). This is the run that
  proves the checker can fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kafkaclone.testing.history import History

from .checks import NON_IDEMPOTENT, check_history
from .cluster import ContainerCluster, progress, wait_until
from .workload import Writer, create_topic, drain

SESSION_TIMEOUT_MS = 6000
TOPICS = {"unclean-off": "false", "unclean-on": "true"}


def state_is(cluster: ContainerCluster, topic: str, key: str,
             expected: object) -> Callable[[], bool]:
    return lambda: bool(cluster.partition_state(topic, 0)[key] == expected)


def index(value: str) -> int:
    return int(value.rsplit("-", 1)[1])


@pytest.mark.timeout(420)
def test_unclean_election_off_stays_offline_on_loses_what_only_the_old_leader_had(
        start_cluster: Callable[..., ContainerCluster], history: History) -> None:
    cluster = start_cluster(3, session_timeout_ms=SESSION_TIMEOUT_MS)
    controller = wait_until(cluster.controller, 30, "a controller")
    a, b = (n for n in sorted(cluster.brokers) if n != controller)
    histories = {"unclean-off": history, "unclean-on": History()}
    writers = {}
    for topic, unclean in TOPICS.items():
        create_topic(cluster, topic, 1, replication_factor=2, assignment=[[a, b]],
                     config={"min.insync.replicas": "1",
                             "unclean.leader.election.enable": unclean})
        assert cluster.leader(topic, 0) == a
        writers[topic] = Writer(cluster, topic, 1, histories[topic], name=topic, count=50_000,
                                seconds=240, rate=200, config={"retries": 0}).start()
    for writer in writers.values():
        writer.wait_for_acks(500, 60)

    b_killed_at = time.monotonic()
    cluster.brokers[b].kill()
    for topic in TOPICS:
        wait_until(state_is(cluster, topic, "isr", [a]), SESSION_TIMEOUT_MS / 1000 + 20,
                   f"{topic}-0 with ISR [{a}]")
    shrunk_at = {topic: writer.sent for topic, writer in writers.items()}
    for writer in writers.values():  # acknowledged by A alone
        writer.wait_for_acks(writer.acked() + 400, 60)

    cluster.brokers[a].kill()
    a_killed_at = time.monotonic()
    for topic in TOPICS:
        wait_until(state_is(cluster, topic, "leader", -1), SESSION_TIMEOUT_MS / 1000 + 20,
                   f"{topic}-0 offline")
        assert cluster.partition_state(topic, 0)["isr"] == [a]  # the ISR is never emptied

    cluster.brokers[b].restart()
    cluster.wait_for_brokers([b], timeout=60)
    wait_until(lambda: cluster.leader("unclean-on", 0) == b, 30,
               f"broker {b}, out of sync, elected leader of unclean-on-0")
    assert cluster.partition_state("unclean-on", 0)["isr"] == [b]
    writers["unclean-on"].wait_for_acks(writers["unclean-on"].acked() + 400, 60)
    # unclean-off stays offline while only B (not in its ISR) is alive.
    for _ in range(10):
        assert cluster.partition_state("unclean-off", 0)["leader"] == -1
        time.sleep(1)

    cluster.brokers[a].restart()
    cluster.wait_for_brokers([a, b], timeout=60)
    wait_until(lambda: cluster.leader("unclean-off", 0) == a, 30,
               f"broker {a} leading unclean-off-0 again")
    for topic in TOPICS:
        cluster.wait_for_isr(topic, 0, 2, timeout=90)
        writers[topic].wait_for_acks(writers[topic].acked() + 200, 60)
    for writer in writers.values():
        writer.stop()
        writer.join()
    for topic in TOPICS:
        drain(cluster, topic, 1, histories[topic])
        cluster.wait_for_identical_replicas(topic, 0)

    # Off: nothing acknowledged is lost.
    check_history(histories["unclean-off"], min_acked=1000)

    # On: the checker reports the lost writes, and exactly the ones only A had.
    result = histories["unclean-on"].check(NON_IDEMPOTENT)
    progress("unclean-on: " + result.summary())
    assert not result.valid
    on = histories["unclean-on"]
    lost = {send.value: send for send in on.sends if send.value in set(result.lost)}
    # Every lost write was acknowledged by A alone: after B died, before A did.
    assert all(b_killed_at < (send.completed_at or 0) < a_killed_at for send in lost.values())
    # And every write sent after B had left the ISR and acknowledged before A died is lost.
    acked_by_a_alone = {send.value for send in on.sends
                        if send.acked and index(send.value) >= shrunk_at["unclean-on"]
                        and (send.completed_at or 0) < a_killed_at}
    assert len(acked_by_a_alone) >= 400
    assert acked_by_a_alone <= set(lost), sorted(acked_by_a_alone - set(lost))[:10]
    # B reused the offsets A had given: each such position was acknowledged with a lost
    # value and now holds another; acknowledged offsets went back (reordered). Reads are
    # still sane: monotonic, and only values that were sent.
    assert result.inconsistent_offsets and result.reordered
    for position, values in result.inconsistent_offsets.items():
        assert len(values) == 2 and len(set(values) & set(lost)) == 1, (position, values)
    assert not result.nonmonotonic_polls and not result.unexpected, result.summary()
    progress(f"unclean-on: {len(lost)} acknowledged writes lost, as expected "
             f"({len(acked_by_a_alone)} of them sent after the ISR shrank)")
