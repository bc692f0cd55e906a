"""ReplicationQuotaManager (Kafka's ReplicationQuotaManager, KIP-73): the throttled replica
lists, and the rate over 11 one-second samples with the burst allowance of a fresh quota."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.server.replication_quota import (
    ReplicationQuotaManager,
    quota_of,
    throttled_partitions,
)

pytestmark = pytest.mark.timeout(10)


def test_throttled_partitions_are_those_listed_for_this_broker() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == frozenset({0, 2})
    assert throttled_partitions(["0:1"], 3) == frozenset()
    assert throttled_partitions(["*"], 3) is None
    assert throttled_partitions([], 3) == frozenset()


def test_quota_of_reads_the_rate_and_treats_the_default_as_unthrottled() -> None:
    assert quota_of({"leader.replication.throttled.rate": "1000"},
                    "leader.replication.throttled.rate") == 1000.0
    assert quota_of({"leader.replication.throttled.rate": str(2**63 - 1)},
                    "leader.replication.throttled.rate") is None
    assert quota_of({}, "leader.replication.throttled.rate") is None


def test_only_listed_replicas_are_throttled_and_only_with_a_quota() -> None:
    configs = {"t": ["0:1"], "all": ["*"]}
    quota = ReplicationQuotaManager(1, Clock(), lambda topic: configs.get(topic, []))
    assert not quota.is_throttled(TopicPartition("t", 0))  # no quota set
    quota.update_quota(100.0)
    assert quota.is_throttled(TopicPartition("t", 0))
    assert not quota.is_throttled(TopicPartition("t", 1))
    assert quota.is_throttled(TopicPartition("all", 5))
    configs["t"] = ["1:1"]  # a config change is seen at once
    assert quota.is_throttled(TopicPartition("t", 1))
    assert not quota.is_throttled(TopicPartition("t", 0))


def test_rate_is_over_the_time_since_the_oldest_sample_at_least_one_window() -> None:
    # Kafka's SimpleRate (ReplicationQuotaManager): no burst allowance for a fresh quota.
    clock = Clock()
    quota = ReplicationQuotaManager(1, clock, lambda topic: ["*"])
    quota.update_quota(100.0)
    quota.record(90)
    assert quota.rate() == pytest.approx(90.0)  # over one window at least
    assert not quota.is_quota_exceeded()
    quota.record(20)
    assert quota.is_quota_exceeded()
    clock.advance(0.5)
    assert quota.rate() == pytest.approx(110.0)
    clock.advance(0.6)
    assert quota.rate() == pytest.approx(100.0)  # 110 bytes over 1.1 s
    assert not quota.is_quota_exceeded()
    for _ in range(20):
        clock.advance(1.0)
        quota.record(100)
    # Steady at the quota: 100 bytes each second over the 11 retained samples.
    assert quota.rate() == pytest.approx(100.0, rel=0.15)
    clock.advance(13.0)
    assert quota.rate() == 0.0


def test_a_sample_expires_after_the_number_of_windows_as_in_kafka() -> None:
    # SampledStat.purgeObsoleteSamples: obsolete once now - its start >= 11 x 1 s.
    clock = Clock()
    quota = ReplicationQuotaManager(1, clock, lambda topic: ["*"])
    quota.update_quota(100.0)
    quota.record(1100)
    clock.advance(10.9)
    assert quota.rate() == pytest.approx(1100 / 10.9)
    assert quota.is_quota_exceeded()
    clock.advance(0.1)
    assert quota.rate() == 0.0
    assert not quota.is_quota_exceeded()
