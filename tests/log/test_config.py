from __future__ import annotations

import pytest

from kafkaclone.common.config_def import ConfigError
from kafkaclone.common.errors import InvalidConfigError
from kafkaclone.log.config import (
    BROKER_CONFIG_VARIANTS,
    LOG_CONFIG_KEYS,
    LONG_MAX,
    TOPIC_CONFIG_SYNONYMS,
    LogConfig,
    LogManagerConfig,
    config_docs,
)


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.message_timestamp_difference_max_ms == LONG_MAX
    assert config.file_delete_delay_ms == 60000
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.min_insync_replicas == 1
    assert config.cleanup_policy == ("delete",)
    assert config.unclean_leader_election_enable is False
    assert config.compression_type == "producer"


def test_table_and_dataclass_agree() -> None:
    config = LogConfig()
    for key in LOG_CONFIG_KEYS:
        assert config.get(key.name) == key.default, key.name


def test_from_props_parses_strings_and_tracks_overrides() -> None:
    config = LogConfig.from_props(
        {"segment.bytes": "1024", "cleanup.policy": "compact, delete",
         "unclean.leader.election.enable": "TRUE", "min.cleanable.dirty.ratio": "0.25"}
    )
    assert config.segment_bytes == 1024
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compact and config.delete
    assert config.unclean_leader_election_enable is True
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.overridden == {"segment.bytes", "cleanup.policy",
                                 "unclean.leader.election.enable", "min.cleanable.dirty.ratio"}
    layered = LogConfig.from_props({"retention.ms": "5"}, defaults=config)
    assert layered.segment_bytes == 1024 and layered.retention_ms == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("segment.bytes", str(2**31)),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "compact,forever"),
        ("message.timestamp.type", "WallClock"),
        ("compression.type", "brotli"),
        ("unclean.leader.election.enable", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.insync.replicas", "0"),
    ],
)
def test_invalid_values_name_the_key(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError) as excinfo:
        LogConfig.from_props({name: value})
    assert name in str(excinfo.value)
    assert excinfo.value.code == 40


def test_unknown_names() -> None:
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: nope"):
        LogConfig.from_props({"nope": "1"})
    assert LogConfig.from_props({"nope": "1"}, ignore_unknown=True) == LogConfig()


def test_topic_overrides_over_broker_defaults() -> None:
    defaults = LogConfig.from_broker_props({"log.segment.bytes": "2048",
                                            "log.retention.hours": "1"})
    config = LogConfig.from_topic_overrides(
        {"retention.ms": "5000", "from.a.newer.broker": "x"}, defaults)
    assert (config.segment_bytes, config.retention_ms) == (2048, 5000)
    assert config.overridden == frozenset({"retention.ms"})
    assert LogConfig.from_topic_overrides({}, defaults) == defaults
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        LogConfig.from_topic_overrides({"segment.bytes": "1"}, defaults)


def test_cross_key_validation() -> None:
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms"):
        LogConfig.from_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_to_props_round_trip() -> None:
    config = LogConfig.from_props({"cleanup.policy": "compact", "segment.ms": "77"})
    assert LogConfig.from_props(config.to_props()) == config


def test_random_segment_jitter_is_bounded() -> None:
    assert LogConfig().random_segment_jitter() == 0
    config = LogConfig.from_props({"segment.jitter.ms": "1000", "segment.ms": "10"})
    assert all(0 <= config.random_segment_jitter() < 10 for _ in range(100))


def test_broker_props_supply_defaults_with_kafka_precedence() -> None:
    config = LogConfig.from_broker_props(
        {"log.segment.bytes": "2048", "log.retention.hours": "1", "log.roll.hours": "2",
         "message.max.bytes": "5000", "log.cleanup.policy": "compact", "unrelated": "x"}
    )
    assert config.segment_bytes == 2048
    assert config.retention_ms == 3_600_000
    assert config.segment_ms == 7_200_000
    assert config.max_message_bytes == 5000
    assert config.cleanup_policy == ("compact",)
    assert config.overridden == frozenset()
    minutes = LogConfig.from_broker_props({"log.retention.minutes": "2",
                                           "log.retention.hours": "1"})
    assert minutes.retention_ms == 120_000
    millis = LogConfig.from_broker_props({"log.retention.ms": "7", "log.retention.minutes": "2"})
    assert millis.retention_ms == 7


def test_log_manager_config() -> None:
    config = LogManagerConfig.from_props(
        {"log.dirs": "/a,/b", "log.retention.check.interval.ms": "1000", "broker.id": "3",
         "log.segment.bytes": "4096"}
    )
    assert config.log_dirs == ("/a", "/b")
    assert config.log_retention_check_interval_ms == 1000
    assert config.broker_id == 3
    assert config.default_log_config.segment_bytes == 4096
    assert LogManagerConfig.from_props({"log.dir": "/c"}).log_dirs == ("/c",)
    assert LogManagerConfig.from_props({}).log_dirs == ("/tmp/kafka-logs",)


def test_docs_table_lists_every_key() -> None:
    docs = config_docs()
    for key in LOG_CONFIG_KEYS:
        assert f"| {key.name} |" in docs


def test_synonyms_are_the_tables_server_default_column() -> None:
    assert TOPIC_CONFIG_SYNONYMS["segment.ms"] == "log.roll.ms"
    assert TOPIC_CONFIG_SYNONYMS["max.message.bytes"] == "message.max.bytes"
    assert list(TOPIC_CONFIG_SYNONYMS) == [
        key.name for key in LOG_CONFIG_KEYS if key.server_default_config is not None
    ]
    assert "leader.replication.throttled.replicas" not in TOPIC_CONFIG_SYNONYMS
    assert set(BROKER_CONFIG_VARIANTS) <= set(TOPIC_CONFIG_SYNONYMS.values())


def test_broker_props_flush_ms_falls_back_to_the_scheduler_interval() -> None:
    assert LogConfig.from_broker_props({"log.flush.scheduler.interval.ms": "100"}).flush_ms == 100
    both = {"log.flush.scheduler.interval.ms": "100", "log.flush.interval.ms": "7"}
    assert LogConfig.from_broker_props(both).flush_ms == 7
    jitter = LogConfig.from_broker_props({"log.roll.jitter.hours": "1"})
    assert jitter.segment_jitter_ms == 3_600_000


def test_a_bad_broker_variant_names_it() -> None:
    with pytest.raises(ConfigError) as raised:
        LogConfig.from_broker_props({"log.retention.hours": "a week"})
    assert raised.value.key == "log.retention.hours"
    assert raised.value.code == 40
    with pytest.raises(ConfigError) as raised:
        LogConfig.from_broker_props({"log.segment.bytes": "13"})
    assert raised.value.key == "segment.bytes"


def test_invalid_values_are_config_errors_saying_what_is_allowed() -> None:
    with pytest.raises(ConfigError) as raised:
        LogConfig.from_props({"segment.bytes": "13"})
    assert str(raised.value) == (
        "Invalid value '13' for configuration segment.bytes: must be at least 14"
    )


def test_log_manager_log_dirs_are_split_and_trimmed() -> None:
    assert LogManagerConfig.from_props({"log.dirs": " /a , /b ,"}).log_dirs == ("/a", "/b")
    assert LogManagerConfig.from_props({"log.dirs": " , ", "log.dir": "/c"}).log_dirs == ("/c",)
