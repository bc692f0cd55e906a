"""Assertions every fault scenario ends with."""

from __future__ import annotations

from collections.abc import Sequence

from kafkaclone.testing.history import CheckResult, History

from . import zktxn
from .cluster import ContainerCluster, progress


def check_controller_history(cluster: ContainerCluster) -> list[zktxn.Txn]:
    """On ZooKeeper's transaction log: ``/controller_epoch`` only ever rose and ends at the
    current epoch; no leader election under a stale controller epoch, no two leaders in one
    leader epoch; no controller write from a session other than the current controller's."""
    txns = cluster.transactions()
    epochs = [value for _, value in zktxn.controller_epoch_writes(txns)]
    assert epochs and epochs == sorted(set(epochs)), f"/controller_epoch writes: {epochs}"
    assert epochs[-1] == cluster.controller_epoch(), epochs
    assert zktxn.partition_state_anomalies(txns) == []
    assert zktxn.foreign_controller_writes(txns) == []
    progress(f"ZooKeeper's log: {len(txns)} transactions, controller epochs {epochs}, no "
             f"stale or foreign controller write")
    return txns


# Without idempotence (the brokers do not serve InitProducerId yet) a value may be written
# twice although the producer runs with retries=0: librdkafka re-sends a batch the old leader
# appended, that the followers copied, but that it then answered NOT_LEADER_OR_FOLLOWER
# (seen in the clean leader bounces: the second copy acknowledged retry.backoff.ms later).
# Kafka 2.8 answers the same way, so duplicates are allowed. The re-sent copy is the one
# acknowledged, at a later offset than values sent after the first copy, so acknowledged
# offsets can go back in send order ("reordered", seen once in a controller hard bounce:
# the value's first copy sat among its neighbours): allowed for the same reason. Lost
# writes, inconsistent offsets, non-monotonic polls and unexpected values are checked.
NON_IDEMPOTENT = tuple(kind for kind in CheckResult.ANOMALIES
                       if kind not in ("duplicates", "reordered"))


def check_history(history: History, *, min_acked: int,
                  anomalies: Sequence[str] = NON_IDEMPOTENT) -> CheckResult:
    """The History shows none of ``anomalies`` and at least ``min_acked`` acknowledgements."""
    result = history.check(anomalies)
    progress(result.summary())
    assert result.valid, result.summary()
    assert result.acked >= min_acked, result.summary()
    return result
