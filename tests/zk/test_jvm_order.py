"""The JVM map iteration models behind Kafka's JSON key order, checked against payloads
captured from real Kafka clusters (Scala 2.13 builds) and against a real JVM (Java 17's
Properties and HashMap; the expected orders below were printed by it)."""

from __future__ import annotations

import pytest

from kafkaclone.common.jvm import java_string_hash
from kafkaclone.zk.jvm_order import (
    java_hash_map_order,
    java_properties_order,
    scala_immutable_map_order,
    scala_mutable_hash_map_order,
)


def test_java_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("version") == 351608024
    assert java_string_hash("adding_replicas") == -916116071  # wraps to negative
    assert java_string_hash("\U0001f600") == 1772899  # hashed as its two UTF-16 units


def test_broker_registration_order() -> None:
    # mutable.Map built with 6 entries, then listener map and features added
    keys = ["version", "host", "port", "endpoints", "jmx_port", "timestamp"]
    extra = ["listener_security_protocol_map", "features"]
    assert scala_mutable_hash_map_order([*keys, *extra], size_hint=6) == [
        "features",
        "listener_security_protocol_map",
        "endpoints",
        "jmx_port",
        "port",
        "host",
        "version",
        "timestamp",
    ]
    with_rack = scala_mutable_hash_map_order([*keys, "rack", *extra], size_hint=6)
    assert with_rack.index("rack") == with_rack.index("endpoints") + 1


def test_topic_assignment_order() -> None:
    keys = ["version", "partitions", "adding_replicas", "removing_replicas"]
    assert scala_mutable_hash_map_order(keys, size_hint=4) == [
        "partitions",
        "adding_replicas",
        "removing_replicas",
        "version",
    ]
    assert scala_mutable_hash_map_order([*keys, "topic_id"], size_hint=4) == [
        "partitions",
        "topic_id",
        "adding_replicas",
        "removing_replicas",
        "version",
    ]


def test_partition_map_grows_like_scala() -> None:
    # 12 partitions: the table doubles at the 12th key and "11" lands in bucket 0.
    assert scala_mutable_hash_map_order(str(p) for p in range(12)) == [
        "11", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
    ]  # fmt: skip
    assert scala_mutable_hash_map_order(str(p) for p in range(11)) == [
        str(p) for p in range(11)
    ]


def test_partition_state_order_is_the_champ_order() -> None:
    keys = ["version", "leader", "leader_epoch", "controller_epoch", "isr"]
    assert scala_immutable_map_order(keys) == [
        "controller_epoch",
        "leader",
        "version",
        "leader_epoch",
        "isr",
    ]


def test_small_immutable_maps_keep_insertion_order() -> None:
    assert scala_immutable_map_order(["b", "a", "c", "a"]) == ["b", "a", "c"]


def test_champ_order_is_a_permutation() -> None:
    keys = [f"LISTENER_{i}" for i in range(40)]
    assert sorted(scala_immutable_map_order(keys)) == sorted(keys)


@pytest.mark.parametrize(
    ("keys", "properties", "hash_map"),
    [
        (
            "cleanup.policy segment.bytes compression.type",
            "compression.type cleanup.policy segment.bytes",
            "compression.type cleanup.policy segment.bytes",
        ),
        (
            "retention.ms min.insync.replicas cleanup.policy segment.ms max.message.bytes "
            "compression.type unclean.leader.election.enable retention.bytes segment.bytes "
            "message.timestamp.type delete.retention.ms min.compaction.lag.ms "
            "max.compaction.lag.ms file.delete.delay.ms flush.messages flush.ms "
            "index.interval.bytes preallocate segment.index.bytes segment.jitter.ms",
            "compression.type max.compaction.lag.ms file.delete.delay.ms max.message.bytes "
            "min.compaction.lag.ms message.timestamp.type min.insync.replicas preallocate "
            "segment.jitter.ms index.interval.bytes unclean.leader.election.enable "
            "retention.bytes delete.retention.ms cleanup.policy flush.ms retention.ms "
            "segment.ms segment.bytes flush.messages segment.index.bytes",
            "compression.type max.compaction.lag.ms file.delete.delay.ms max.message.bytes "
            "min.compaction.lag.ms message.timestamp.type min.insync.replicas preallocate "
            "segment.jitter.ms index.interval.bytes unclean.leader.election.enable "
            "retention.bytes delete.retention.ms cleanup.policy flush.ms retention.ms "
            "segment.ms segment.bytes flush.messages segment.index.bytes",
        ),
        (
            # "ar" and "bs" share a bin that splits on resize: ConcurrentHashMap's
            # transfer reverses them, HashMap's does not.
            "ar bs ab aa ac ad ae af ag ah ai aj ak al am",
            "aa ab ac ad ae af ag ah ai aj ak al am bs ar",
            "aa ab ac ad ae af ag ah ai aj ak al am ar bs",
        ),
        (
            "a b c d e f g h i j k l m n o p q Aa BB C# Ab BC",
            "Aa BB C# a Ab BC b c d e f g h i j k l m n o p q",
            "Aa BB C# a Ab BC b c d e f g h i j k l m n o p q",
        ),
    ],
)
def test_java_maps_match_a_real_jvm(keys: str, properties: str, hash_map: str) -> None:
    assert java_properties_order(keys.split()) == properties.split()
    assert java_hash_map_order(keys.split()) == hash_map.split()
