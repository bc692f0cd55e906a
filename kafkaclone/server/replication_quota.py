"""Replication throttles (Kafka 2.8's ReplicationQuotaManager, KIP-73).

A broker has two: the leader's, for what it serves to followers, and the follower's, for
what its replica fetchers read. Each has a rate in bytes/s (the broker's dynamic configs
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``; none:
unthrottled) and applies to the replicas the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
name for this broker (``partition:broker,...``, or ``*`` for all). A third, at
``replica.alter.log.dirs.io.max.bytes.per.second``, throttles every copy between the
broker's log directories (AlterReplicaLogDirs).

The rate is measured as Kafka's ReplicationQuotaManager measures it, with a SimpleRate over
a SampledStat: ``replication.quota.window.num`` (11) samples of
``replication.quota.window.size.seconds`` (1 s), over the time since the oldest retained
sample began, taken as at least one window. (Not Kafka's ``Rate`` of the client quotas,
which counts at least all windows but one and so grants a fresh quota a burst of ten
windows' bytes.) Over quota, a throttled replica that is not in sync is left out: the
leader answers it with no records (``should_leader_throttle``), the follower leaves it out
of its fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.clock import Scheduler
from kafkaclone.common.topic_partition import TopicPartition

LEADER_REPLICATION_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND: Final = (
    "replica.alter.log.dirs.io.max.bytes.per.second")
ALL_REPLICAS: Final = "*"
QUOTA_WINDOW_NUM: Final = 11
QUOTA_WINDOW_SIZE_S: Final = 1.0
LONG_MAX: Final = 2**63 - 1
"""The rates' default: unthrottled."""

ThrottledReplicas = Callable[[str], Sequence[str]]
"""A topic's throttled replicas config value (``["0:1", "1:2"]``, ``["*"]`` or empty)."""


def throttled_partitions(value: Sequence[str], broker_id: int) -> frozenset[int] | None:
    """The partitions that ``value`` throttles on ``broker_id``; None for all (``*``)."""
    entries = [v.strip() for v in value if v.strip()]
    if ALL_REPLICAS in entries:
        return None
    partitions = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        try:
            if int(broker) == broker_id:
                partitions.add(int(partition))
        except ValueError:
            continue
    return frozenset(partitions)


def quota_of(props: dict[str, object], name: str) -> float | None:
    """A throttle rate from the broker's effective props; None when unset or invalid."""
    value = props.get(name)
    if value is None or value == "":
        return None
    try:
        rate = float(str(value))
    except ValueError:
        return None
    return rate if 0 <= rate < LONG_MAX else None


@dataclass
class _Sample:
    start: float
    total: float = 0.0


class ReplicationQuotaManager:
    """One replication throttle (leader or follower side) of one broker."""

    def __init__(self, broker_id: int, clock: Scheduler, throttled_replicas: ThrottledReplicas,
                 *, num_samples: int = QUOTA_WINDOW_NUM,
                 window_s: float = QUOTA_WINDOW_SIZE_S) -> None:
        self.broker_id = broker_id
        self._clock = clock
        self._throttled_replicas = throttled_replicas
        self._num_samples = num_samples
        self._window_s = window_s
        self._samples: list[_Sample] = []
        self.quota: float | None = None
        """Bytes/s; None: unthrottled."""
        self._parsed: dict[str, tuple[tuple[str, ...], frozenset[int] | None]] = {}

    def update_quota(self, bytes_per_second: float | None) -> None:
        self.quota = bytes_per_second

    def is_throttled(self, tp: TopicPartition) -> bool:
        if self.quota is None:
            return False
        value = tuple(self._throttled_replicas(tp.topic))
        cached = self._parsed.get(tp.topic)
        if cached is None or cached[0] != value:
            cached = (value, throttled_partitions(value, self.broker_id))
            self._parsed[tp.topic] = cached
        partitions = cached[1]
        return partitions is None or tp.partition in partitions

    def is_quota_exceeded(self) -> bool:
        return self.quota is not None and self.rate() > self.quota

    def record(self, num_bytes: int) -> None:
        if num_bytes <= 0:
            return
        now = self._clock.seconds()
        self._purge(now)
        if not self._samples or now - self._samples[-1].start >= self._window_s:
            self._samples.append(_Sample(now))
        self._samples[-1].total += num_bytes

    def rate(self) -> float:
        """Bytes/s over the retained samples (Kafka's SimpleRate.measure)."""
        now = self._clock.seconds()
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0].start, self._window_s)
        return sum(s.total for s in self._samples) / elapsed

    def _purge(self, now: float) -> None:
        """Drop the samples started ``num_samples`` windows ago or earlier (Kafka's
        SampledStat.purgeObsoleteSamples), so at most ``num_samples`` are retained."""
        horizon = now - self._num_samples * self._window_s
        while self._samples and self._samples[0].start <= horizon:
            self._samples.pop(0)
