"""The broker configuration: kafkaclone.server.config."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkaclone.common.endpoint import EndPoint, SecurityProtocol
from kafkaclone.common.errors import InvalidConfigError
from kafkaclone.log.config import LOG_MANAGER_CONFIG_KEYS, LogConfig
from kafkaclone.server.broker import controller_config
from kafkaclone.server.config import (
    BROKER_CONFIG,
    KAFKA_VERSIONS,
    TOPIC_CONFIG_SYNONYMS,
    ConfigError,
    ConfigKey,
    ConfigType,
    KafkaConfig,
    broker_config_synonyms,
    canonical_kafka_version,
    parse_overrides,
    parse_properties,
    topic_config_synonyms,
)
from kafkaclone.server.replica_fetcher import ReplicaFetcherConfig
from kafkaclone.server.replica_manager import ReplicaManagerConfig
from kafkaclone.tools import config_doc

REPO = Path(__file__).resolve().parents[2]
SERVER_PROPERTIES = REPO / "config" / "server.properties"
LOGGER = "kafkaclone.server.config"
ZK = {"zookeeper.connect": "localhost:2181"}


def config(**props: object) -> KafkaConfig:
    """A config with zookeeper.connect set and ``props`` (dots spelled as __) on top."""
    return KafkaConfig({**ZK, **{name.replace("__", "."): value for name, value in props.items()}})


def config_error(props: dict[str, object]) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        KafkaConfig({**ZK, **props})
    return raised.value


# --- defaults -------------------------------------------------------------------------------

# Checked against Kafka 2.8: core/src/main/scala/kafka/server/KafkaConfig.scala (Defaults,
# OffsetConfig, TransactionLog, TransactionStateManager) and the 2.8 ApiVersion list.
KAFKA_2_8_DEFAULTS = [
    ("broker.id", -1),
    ("zookeeper.session.timeout.ms", 18000),
    ("zookeeper.max.in.flight.requests", 10),
    ("message.max.bytes", 1048588),
    ("num.network.threads", 3),
    ("num.io.threads", 8),
    ("queued.max.requests", 500),
    ("socket.send.buffer.bytes", 102400),
    ("socket.receive.buffer.bytes", 102400),
    ("socket.request.max.bytes", 104857600),
    ("connections.max.idle.ms", 600000),
    ("listener.security.protocol.map",
     "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("log.dir", "/tmp/kafka-logs"),
    ("log.segment.bytes", 1073741824),
    ("log.roll.hours", 168),
    ("log.retention.hours", 168),
    ("log.retention.bytes", -1),
    ("log.retention.check.interval.ms", 300000),
    ("log.cleanup.policy", ("delete",)),
    ("log.index.size.max.bytes", 10485760),
    ("log.index.interval.bytes", 4096),
    ("log.segment.delete.delay.ms", 60000),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.message.format.version", "2.8-IV1"),
    ("inter.broker.protocol.version", "2.8-IV1"),
    ("min.insync.replicas", 1),
    ("compression.type", "producer"),
    ("unclean.leader.election.enable", False),
    ("auto.create.topics.enable", True),
    ("delete.topic.enable", True),
    ("replica.lag.time.max.ms", 30000),
    ("replica.socket.timeout.ms", 30000),
    ("replica.socket.receive.buffer.bytes", 65536),
    ("replica.fetch.max.bytes", 1048576),
    ("replica.fetch.wait.max.ms", 500),
    ("replica.fetch.response.max.bytes", 10485760),
    ("replica.high.watermark.checkpoint.interval.ms", 5000),
    ("leader.imbalance.per.broker.percentage", 10),
    ("leader.imbalance.check.interval.seconds", 300),
    ("controlled.shutdown.max.retries", 3),
    ("controlled.shutdown.retry.backoff.ms", 5000),
    ("group.min.session.timeout.ms", 6000),
    ("group.max.session.timeout.ms", 1800000),
    ("group.initial.rebalance.delay.ms", 3000),
    ("offsets.topic.num.partitions", 50),
    ("offsets.topic.replication.factor", 3),
    ("offsets.topic.segment.bytes", 104857600),
    ("offsets.retention.minutes", 10080),
    ("offsets.retention.check.interval.ms", 600000),
    ("offsets.commit.timeout.ms", 5000),
    ("transaction.state.log.num.partitions", 50),
    ("transaction.state.log.min.isr", 2),
    ("transactional.id.expiration.ms", 604800000),
    ("transaction.max.timeout.ms", 900000),
    ("fetch.max.bytes", 57671680),
]


@pytest.mark.parametrize(("name", "default"), KAFKA_2_8_DEFAULTS)
def test_defaults_are_kafka_2_8s(name: str, default: object) -> None:
    assert BROKER_CONFIG[name].default == default
    assert config().get(name) == default


def test_a_minimal_config_has_every_default() -> None:
    assert dict(config().values) == {**BROKER_CONFIG.defaults(), **ZK}


def test_derived_defaults() -> None:
    cfg = config()
    assert cfg.log_retention_ms == 7 * 24 * 3600 * 1000
    assert cfg.log_roll_ms == 7 * 24 * 3600 * 1000
    assert cfg.log_roll_jitter_ms == 0
    assert cfg.log_flush_interval_ms == 2**63 - 1
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.zookeeper_connection_timeout_ms == 18000
    assert [e.connection_string for e in cfg.listeners] == ["PLAINTEXT://:9092"]
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.inter_broker_security_protocol is SecurityProtocol.PLAINTEXT
    assert cfg.control_plane_listener is None
    assert cfg.offsets_storage == "zookeeper"


def test_the_broker_parts_config_defaults_are_the_tables() -> None:
    cfg = config()
    assert ReplicaManagerConfig() == ReplicaManagerConfig.from_kafka_config(cfg)
    assert ReplicaFetcherConfig(cfg.broker_id) == ReplicaFetcherConfig.from_kafka_config(cfg)
    assert ReplicaManagerConfig().replica_lag_time_max_ms == BROKER_CONFIG[
        "replica.lag.time.max.ms"].default == 30_000


def test_the_connection_setup_timeouts_reach_every_inter_broker_client() -> None:
    """socket.connection.setup.timeout.ms / .max.ms (Kafka's 10 s / 30 s) go to the replica
    fetchers and the controller channel, as in Kafka's NetworkClients."""
    assert config().socket_connection_setup_timeout_ms == 10_000
    assert config().socket_connection_setup_timeout_max_ms == 30_000
    cfg = config(**{"socket.connection.setup.timeout.ms": "2500",
                    "socket.connection.setup.timeout.max.ms": "9000"})
    fetchers = ReplicaFetcherConfig.from_kafka_config(cfg)
    assert (fetchers.socket_connection_setup_timeout_ms,
            fetchers.socket_connection_setup_timeout_max_ms) == (2500, 9000)
    controller = controller_config(cfg)
    assert (controller.socket_connection_setup_timeout_ms,
            controller.socket_connection_setup_timeout_max_ms) == (2500, 9000)
    assert "socket.connection.setup.timeout.ms" in str(
        config_error({"socket.connection.setup.timeout.ms": "-1"}))


def test_every_key_is_documented_and_grouped() -> None:
    for key in BROKER_CONFIG:
        assert key.doc.endswith("."), key.name
        assert key.group, key.name
    assert BROKER_CONFIG["offsets.storage"].kafkaclone_only
    assert sum(key.kafkaclone_only for key in BROKER_CONFIG) == 1


def test_config_types_carry_describe_configs_codes() -> None:
    assert [t.value for t in ConfigType] == list(range(1, 10))
    assert ConfigType.PASSWORD.name == "PASSWORD"


def test_a_default_that_fails_its_validator_is_refused_at_declaration() -> None:
    from kafkaclone.server.config import ConfigDef, Importance, at_least

    with pytest.raises(ConfigError):
        ConfigDef([ConfigKey("x", ConfigType.INT, 0, Importance.LOW, "X.", at_least(1))])
    with pytest.raises(ValueError, match="declared twice"):
        key = ConfigKey("x", ConfigType.INT, 1, Importance.LOW, "X.")
        ConfigDef([key, key])


# --- properties files -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1\nb = 2\nc:3\nd : 4\ne 5\nf\t6\n", {"a": "1", "b": "2", "c": "3", "d": "4",
                                                    "e": "5", "f": "6"}),
        ("# comment\n! also a comment\n   # indented comment\n\n   \nk=v", {"k": "v"}),
        ("k=v # not a comment", {"k": "v # not a comment"}),
        ("k=a=b:c", {"k": "a=b:c"}),
        ("k = = v", {"k": "= v"}),
        ("k   :   v  ", {"k": "v  "}),
        ("   leading.space=v", {"leading.space": "v"}),
        ("empty=\nalone\nspaces=   ", {"empty": "", "alone": "", "spaces": ""}),
        ("k=one, \\\n    two, \\\n\tthree", {"k": "one, two, three"}),
        ("k=ends with two\\\\\nnext=line", {"k": "ends with two\\", "next": "line"}),
        ("k=continued at end of file\\", {"k": "continued at end of file"}),
        ("# a comment\\\nk=v", {"k": "v"}),
        ("k=tab\\there\\nnewline\\u0041\\u00e9", {"k": "tab\there\nnewlineAé"}),
        ("a\\=b=c\nd\\:e:f\ng\\ h i", {"a=b": "c", "d:e": "f", "g h": "i"}),
        ("k=C:\\\\kafka\\\\logs\nw=\\q", {"k": "C:\\kafka\\logs", "w": "q"}),
        ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
        ("k=first\nk=second", {"k": "second"}),
        ("k=v\\\n\n", {"k": "v"}),
    ],
)
def test_java_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ValueError, match="uxxxx"):
        parse_properties("k=\\u12G4")


def test_a_bad_unicode_escape_in_a_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("zookeeper.connect=\\u00\n")
    with pytest.raises(ConfigError, match="uxxxx"):
        KafkaConfig.from_properties_file(path)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.properties"):
        KafkaConfig.from_properties_file(tmp_path / "missing.properties")


def test_a_latin1_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"zookeeper.connect=localhost:2181\nbroker.rack=r\xe9\n")
    assert KafkaConfig.from_properties_file(path).broker_rack == "ré"


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("zookeeper.connect=zk1:2181\nbroker.id=0\nnum.partitions=3\n")
    cfg = KafkaConfig.from_properties_file(
        path, ["broker.id=7", "log.dirs=/data/a,/data/b", "broker.rack="]
    )
    assert cfg.broker_id == 7
    assert cfg.num_partitions == 3
    assert cfg.log_dirs == ["/data/a", "/data/b"]
    assert cfg.broker_rack == ""
    assert cfg.is_set("broker.id") and not cfg.is_set("num.io.threads")


def test_parse_overrides() -> None:
    assert parse_overrides(["a=b=c", " k =v", "e="]) == {"a": "b=c", "k": "v", "e": ""}
    for bad in ("novalue", "=v"):
        with pytest.raises(ConfigError) as raised:
            parse_overrides([bad])
        assert raised.value.key == "--override"


# --- the shipped files ----------------------------------------------------------------------

def test_shipped_server_properties_parses_without_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    cfg = KafkaConfig.from_properties_file(SERVER_PROPERTIES)
    assert caplog.records == []
    assert cfg.unknown_keys == ()
    assert cfg.broker_id == 0
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.zookeeper_connect == "localhost:2181"
    assert cfg.zookeeper_connection_timeout_ms == 18000
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.transaction_state_log_min_isr == 1
    assert cfg.group_initial_rebalance_delay_ms == 0
    assert [e.connection_string for e in cfg.advertised_listeners] == ["PLAINTEXT://:9092"]


def test_shipped_zookeeper_properties_has_kafkas_settings() -> None:
    props = parse_properties((REPO / "config" / "zookeeper.properties").read_text())
    assert props == {
        "dataDir": "/tmp/zookeeper",
        "clientPort": "2181",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
    }


def test_docs_are_generated_from_the_table() -> None:
    assert config_doc.DOC.read_text() == config_doc.render_document(), (
        "docs/configuration.md is out of date: run python -m kafkaclone.tools.config_doc --write"
    )
    assert config_doc.main(["--check"]) == 0


def test_docs_list_every_key() -> None:
    document = config_doc.render_document()
    for key in BROKER_CONFIG:
        assert f"| `{key.name}` |" in document


# --- precedence -----------------------------------------------------------------------------

def test_retention_ms_over_minutes_over_hours() -> None:
    assert config(log__retention__hours="1").log_retention_ms == 3_600_000
    cfg = config(log__retention__hours="1", log__retention__minutes="2")
    assert cfg.log_retention_ms == 120_000
    assert config(
        log__retention__hours="1", log__retention__minutes="2", log__retention__ms="3"
    ).log_retention_ms == 3


def test_negative_retention_means_unlimited() -> None:
    assert config(log__retention__hours="-1").log_retention_ms == -1
    assert config(log__retention__minutes="-5").log_retention_ms == -1
    assert config(log__retention__ms="-1").log_retention_ms == -1
    assert config_error({"log.retention.ms": "0"}).key == "log.retention.ms"


def test_roll_ms_over_hours() -> None:
    assert config(log__roll__hours="2").log_roll_ms == 7_200_000
    assert config(log__roll__hours="2", log__roll__ms="5000").log_roll_ms == 5000
    assert config(log__roll__jitter__hours="1").log_roll_jitter_ms == 3_600_000
    assert config(log__roll__jitter__hours="1", log__roll__jitter__ms="9").log_roll_jitter_ms == 9
    assert config_error({"log.roll.ms": "0"}).key == "log.roll.ms"
    assert config_error({"log.roll.hours": "0"}).key == "log.roll.hours"


def test_flush_interval_ms_over_scheduler_interval() -> None:
    assert config(log__flush__scheduler__interval__ms="100").log_flush_interval_ms == 100
    cfg = config(log__flush__scheduler__interval__ms="100", log__flush__interval__ms="7")
    assert cfg.log_flush_interval_ms == 7


def test_log_dirs_over_log_dir() -> None:
    assert config(log__dir="/a").log_dirs == ["/a"]
    assert config(log__dir="/a", log__dirs=" /b , /c ,").log_dirs == ["/b", "/c"]
    assert config_error({"log.dirs": " , "}).key == "log.dirs"


def test_connection_timeout_falls_back_to_session_timeout() -> None:
    assert config(zookeeper__session__timeout__ms="6000").zookeeper_connection_timeout_ms == 6000
    cfg = config(zookeeper__session__timeout__ms="6000", zookeeper__connection__timeout__ms="9")
    assert cfg.zookeeper_connection_timeout_ms == 9


# --- bad values -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("props", "key", "fragment"),
    [
        ({"num.partitions": "three"}, "num.partitions", "not a number of type INT"),
        ({"num.partitions": "1.5"}, "num.partitions", "INT"),
        ({"num.partitions": "0"}, "num.partitions", "at least 1"),
        ({"num.partitions": "2147483648"}, "num.partitions", "INT"),
        ({"num.partitions": True}, "num.partitions", "INT"),
        ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor",
         "SHORT"),
        ({"log.retention.bytes": "1_000"}, "log.retention.bytes", "LONG"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio",
         "[0, 1]"),
        ({"log.cleaner.io.buffer.load.factor": "much"}, "log.cleaner.io.buffer.load.factor",
         "DOUBLE"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable", "true or false"),
        ({"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type",
         "CreateTime, LogAppendTime"),
        ({"compression.type": "brotli"}, "compression.type", "gzip"),
        ({"log.cleanup.policy": "compact,archive"}, "log.cleanup.policy", "compact, delete"),
        ({"offsets.storage": "redis"}, "offsets.storage", "zookeeper, kafka"),
        ({"inter.broker.protocol.version": "3.0"}, "inter.broker.protocol.version", "2.8-IV1"),
        ({"security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol",
         "PLAINTEXT"),
        ({"zookeeper.connect": ""}, "zookeeper.connect", "required"),
        ({"zookeeper.connect": None}, "zookeeper.connect", "required"),
        ({"broker.id": None}, "broker.id", "required"),
        ({"broker.id": "1001"}, "broker.id", "reserved.broker.max.id"),
        ({"broker.id": "-2"}, "broker.id", "[-1, 1000]"),
        ({"broker.id": "-1", "broker.id.generation.enable": "false"}, "broker.id", ">= 0"),
        ({"listeners": ""}, "listeners", "at least one"),
        ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"}, "listeners", "listener name"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners", "different port"),
        ({"listeners": "PLAINTEXT://host"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://:70000"}, "listeners", "65535"),
        ({"listeners": "INTERNAL://:9092"}, "listeners", "no security protocol"),
        ({"listener.security.protocol.map": "A:PLAINTEXT,a:SSL"},
         "listener.security.protocol.map", "more than once"),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map",
         "NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map",
         "unknown security protocol"),
        ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners", "not among"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners",
         "0.0.0.0"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "0.0.0.0"),
        ({"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms",
         "replica.socket.timeout.ms"),
        ({"replica.fetch.wait.max.ms": "20000", "replica.lag.time.max.ms": "10000"},
         "replica.fetch.wait.max.ms", "replica.lag.time.max.ms"),
        ({"offsets.commit.required.acks": "4"}, "offsets.commit.required.acks", "[-1, "),
        ({"log.cleaner.dedupe.buffer.size": "1048576"}, "log.cleaner.dedupe.buffer.size",
         "1 MiB"),
        ({"log.cleaner.threads": "-1"}, "log.cleaner.threads", "at least 0"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio",
         "in [0, 1]"),
        ({"log.cleaner.max.compaction.lag.ms": "0"}, "log.cleaner.max.compaction.lag.ms",
         "at least 1"),
        ({"log.cleaner.delete.retention.ms": "-5"}, "log.cleaner.delete.retention.ms",
         "at least 0"),
        ({"queued.max.request.bytes": "10"}, "queued.max.request.bytes",
         "socket.request.max.bytes"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip", "overrides"),
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides",
         "host:count"),
        ({"inter.broker.protocol.version": "0.10.2", "log.message.format.version": "2.0"},
         "log.message.format.version", "inter.broker.protocol.version"),
    ],
)
def test_bad_values_raise_a_config_error_naming_the_key(
    props: dict[str, object], key: str, fragment: str
) -> None:
    error = config_error(props)
    message = str(error)
    assert error.key == key
    assert f"configuration {key}:" in message
    assert fragment in message
    assert "\n" not in message


def test_config_error_is_kafkas_invalid_config() -> None:
    error = config_error({"num.partitions": "x"})
    assert isinstance(error, InvalidConfigError)
    assert error.code == 40
    assert error.value == "x"
    assert str(error) == (
        "Invalid value 'x' for configuration num.partitions: not a number of type INT"
    )


def test_typed_values_are_accepted() -> None:
    cfg = config(num__partitions=4, auto__create__topics__enable=False,
                 log__cleanup__policy=["compact", "delete"],
                 log__cleaner__min__cleanable__ratio=1)
    assert cfg.num_partitions == 4
    assert cfg.auto_create_topics_enable is False
    assert cfg.log_cleanup_policy == ["compact", "delete"]
    assert cfg.log_cleaner_min_cleanable_ratio == 1.0
    assert cfg.string_value("log.cleanup.policy") == "compact,delete"
    assert cfg.string_value("auto.create.topics.enable") == "false"
    assert cfg.string_value("broker.rack") is None
    # Kafka's ValidList accepts an empty list: neither deletion nor compaction.
    assert config(log__cleanup__policy="").log_cleanup_policy == []


def test_string_values_are_trimmed_and_booleans_case_insensitive() -> None:
    cfg = config(num__partitions=" 6 ", delete__topic__enable="FALSE", broker__rack=" r1 ")
    assert cfg.num_partitions == 6
    assert cfg.delete_topic_enable is False
    assert cfg.broker_rack == "r1"


# --- unknown and deprecated keys ------------------------------------------------------------

def test_unknown_keys_warn_and_do_not_fail(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    cfg = KafkaConfig({**ZK, "made.up.password": "s3cret", "made.up": "1",
                       "listener.name.sasl_ssl.plain.sasl.jaas.config": "x"})
    assert cfg.unknown_keys == ("made.up.password", "made.up",
                                "listener.name.sasl_ssl.plain.sasl.jaas.config")
    warned = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    assert len(warned) == 2  # a per-listener security key is known to the security config
    assert "made.up.password" in warned[0] and "made.up" in warned[1]
    assert all(record.levelno == logging.WARNING for record in caplog.records)
    assert not any("s3cret" in message for message in warned)
    assert cfg.originals["made.up"] == "1"
    with pytest.raises(KeyError):
        cfg.get("made.up")


def test_deprecated_host_and_port_still_work(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    cfg = config(host__name="127.0.0.1", port="9093")
    assert [e.connection_string for e in cfg.listeners] == ["PLAINTEXT://127.0.0.1:9093"]
    assert cfg.advertised_listeners == cfg.listeners
    assert any("host.name is deprecated" in r.getMessage() for r in caplog.records)
    cfg = config(port="9093", advertised__host__name="broker1.example.com")
    assert [e.connection_string for e in cfg.advertised_listeners] == [
        "PLAINTEXT://broker1.example.com:9093"
    ]


def test_listeners_win_over_host_and_port() -> None:
    cfg = config(listeners="PLAINTEXT://:9095", port="9093")
    assert [e.port for e in cfg.listeners] == [9095]


# --- listeners ------------------------------------------------------------------------------

def test_advertised_listeners_default_to_listeners() -> None:
    cfg = config(listeners="PLAINTEXT://127.0.0.1:9092")
    assert cfg.advertised_listeners == cfg.listeners == [
        EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
    ]
    assert cfg.get("advertised.listeners") is None


def test_advertised_listeners_may_differ_and_share_ports() -> None:
    cfg = config(
        listeners="INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9093",
        advertised__listeners="INTERNAL://broker1:9092,EXTERNAL://lb.example.com:9092",
        listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        inter__broker__listener__name="internal",
    )
    assert [e.host for e in cfg.listeners] == ["0.0.0.0", "0.0.0.0"]
    assert [e.connection_string for e in cfg.advertised_listeners] == [
        "INTERNAL://broker1:9092", "EXTERNAL://lb.example.com:9092"
    ]
    assert cfg.inter_broker_listener_name == "INTERNAL"
    assert cfg.inter_broker_security_protocol is SecurityProtocol.PLAINTEXT


def test_listener_with_its_own_name_and_a_control_plane() -> None:
    cfg = config(
        listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093",
        listener__security__protocol__map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        control__plane__listener__name="controller",
    )
    assert cfg.listeners[1] == EndPoint("CONTROLLER", SecurityProtocol.PLAINTEXT, None, 9093)
    assert cfg.control_plane_listener_name == "CONTROLLER"
    assert cfg.control_plane_listener == cfg.listeners[1]
    assert cfg.data_plane_listeners == cfg.listeners[:1]
    assert cfg.listener_security_protocol_map == {
        "PLAINTEXT": SecurityProtocol.PLAINTEXT, "CONTROLLER": SecurityProtocol.PLAINTEXT
    }


@pytest.mark.parametrize(
    ("props", "key", "fragment"),
    [
        ({"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:SSL"},
         "security.inter.broker.protocol", "must be one of advertised.listeners"),
        ({"inter.broker.listener.name": "PLAINTEXT",
          "security.inter.broker.protocol": "PLAINTEXT"},
         "inter.broker.listener.name", "not both"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name",
         "listener.security.protocol.map"),
        ({"control.plane.listener.name": "PLAINTEXT"}, "control.plane.listener.name",
         "differ from the inter-broker"),
        ({"control.plane.listener.name": "SSL"}, "control.plane.listener.name",
         "advertised.listeners"),
        ({"control.plane.listener.name": "OTHER"}, "control.plane.listener.name",
         "listener.security.protocol.map"),
    ],
)
def test_inter_broker_and_control_plane_checks(
    props: dict[str, object], key: str, fragment: str
) -> None:
    error = config_error(props)
    assert error.key == key
    assert fragment in str(error)


# --- versions -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("2.8", "2.8-IV1"), ("2.8.0", "2.8-IV1"), ("2.8.1", "2.8-IV1"), ("2.8-IV0", "2.8-IV0"),
        ("2.7", "2.7-IV2"), ("1.0.0-IV0", "1.0-IV0"), ("0.10.0", "0.10.0-IV1"),
        ("0.10.0.0-IV0", "0.10.0-IV1"), ("0.10.2.1", "0.10.2-IV0"), ("0.8.0.1", "0.8.0"),
        ("0.11.0", "0.11.0-IV2"), ("3.0", None), ("2.9", None), ("banana", None), ("", None),
    ],
)
def test_kafka_versions_resolve_like_apiversion_apply(text: str, canonical: str | None) -> None:
    assert canonical_kafka_version(text) == canonical


def test_version_properties_are_canonical() -> None:
    cfg = config(inter__broker__protocol__version="2.1", log__message__format__version="0.10.2")
    assert cfg.inter_broker_protocol_version == "2.1-IV2"
    assert cfg.log_message_format_version == "0.10.2-IV0"
    assert len(KAFKA_VERSIONS) == 33


# --- synonyms and topic defaults ------------------------------------------------------------

def test_topic_synonyms_name_declared_broker_keys() -> None:
    assert TOPIC_CONFIG_SYNONYMS["segment.bytes"] == "log.segment.bytes"
    assert TOPIC_CONFIG_SYNONYMS["max.message.bytes"] == "message.max.bytes"
    for topic_config in TOPIC_CONFIG_SYNONYMS:
        chain = topic_config_synonyms(topic_config)
        assert chain and all(name in BROKER_CONFIG for name in chain), topic_config
    assert topic_config_synonyms("retention.ms") == (
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"
    )
    assert topic_config_synonyms("segment.ms") == ("log.roll.ms", "log.roll.hours")
    assert topic_config_synonyms("flush.ms") == (
        "log.flush.interval.ms", "log.flush.scheduler.interval.ms"
    )
    assert topic_config_synonyms("leader.replication.throttled.replicas") == ()


def test_broker_config_synonyms() -> None:
    assert broker_config_synonyms("log.retention.hours") == (
        "log.retention.ms", "log.retention.minutes", "log.retention.hours"
    )
    assert broker_config_synonyms("log.roll.hours") == ("log.roll.ms", "log.roll.hours")
    assert broker_config_synonyms("log.flush.scheduler.interval.ms") == (
        "log.flush.scheduler.interval.ms",
    )
    assert broker_config_synonyms("num.partitions") == ("num.partitions",)


def test_log_config_props_are_the_topic_defaults() -> None:
    cfg = config(log__retention__minutes="30", log__roll__hours="1", message__max__bytes="2000",
                 log__cleanup__policy="compact")
    props = cfg.log_config_props()
    assert set(props) == set(TOPIC_CONFIG_SYNONYMS)
    assert props["retention.ms"] == 30 * 60_000
    assert props["segment.ms"] == 3_600_000
    assert props["max.message.bytes"] == 2000
    assert props["cleanup.policy"] == ("compact",)
    assert props["flush.ms"] == 2**63 - 1
    assert props["message.format.version"] == "2.8-IV1"


# --- the typed view -------------------------------------------------------------------------

def test_typed_attributes_read_the_table() -> None:
    cfg = config(broker__id="3", broker__rack="r1", log__cleaner__enable="false")
    assert cfg.broker_id == 3 and isinstance(cfg.broker_id, int)
    assert cfg.broker_rack == "r1"
    assert cfg.log_cleaner_enable is False
    assert cfg.log_cleaner_io_max_bytes_per_second == 1.7976931348623157e308
    assert cfg.message_max_bytes == cfg.get("message.max.bytes")
    assert repr(cfg) == (
        "KafkaConfig(zookeeper.connect=localhost:2181, broker.id=3, broker.rack=r1, "
        "log.cleaner.enable=false)"
    )


def test_a_typed_attribute_for_a_missing_or_mistyped_key_fails_at_class_creation() -> None:
    from kafkaclone.server import config as config_module

    # (Python 3.11 wraps an error raised in __set_name__ in a RuntimeError: call it directly.)
    with pytest.raises(TypeError, match=r"no INT/SHORT/LONG config no\.such\.key"):
        config_module._Int("no.such.key").__set_name__(KafkaConfig, "x")
    with pytest.raises(TypeError, match=r"no BOOLEAN config num\.partitions"):
        config_module._Bool("num.partitions").__set_name__(KafkaConfig, "x")
    with pytest.raises(TypeError, match=r"broker\.rack may be null"):
        config_module._Str("broker.rack").__set_name__(KafkaConfig, "x")


def test_broker_defaults_of_topic_configs_are_the_topic_defaults() -> None:
    defaults = LogConfig()
    assert config().log_config_props() == {
        topic_config: defaults.get(topic_config) for topic_config in TOPIC_CONFIG_SYNONYMS
    }


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"log.retention.minutes": "30", "log.roll.hours": "1", "message.max.bytes": "2000",
         "log.cleanup.policy": "compact", "log.flush.scheduler.interval.ms": "500"},
        {"log.retention.ms": "5", "log.retention.hours": "1", "log.roll.jitter.hours": "2",
         "log.segment.bytes": "4096", "compression.type": "zstd"},
    ],
)
def test_log_layer_and_broker_agree_on_topic_defaults(props: dict[str, str]) -> None:
    from_broker = LogConfig.from_broker_props(props)
    assert LogConfig.from_props(config(**{
        name.replace(".", "__"): value for name, value in props.items()
    }).log_config_props()) == from_broker


def test_log_manager_rows_are_placed_in_the_broker_table() -> None:
    for key in LOG_MANAGER_CONFIG_KEYS:
        assert BROKER_CONFIG[key.name].doc == key.doc, key.name
        assert BROKER_CONFIG[key.name].default == key.default, key.name
        assert BROKER_CONFIG[key.name].group, key.name
    assert BROKER_CONFIG["broker.id"].group == "General"
    assert BROKER_CONFIG["replica.high.watermark.checkpoint.interval.ms"].group == "Replication"


def test_replica_selector_class() -> None:
    assert config().replica_selector_class is None
    name = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert KafkaConfig({**ZK, "replica.selector.class": name}).replica_selector_class == name
    error = config_error({"replica.selector.class": "com.example.NearestReplicaSelector"})
    assert "replica.selector.class" in str(error) and "\n" not in str(error)
    assert name in str(error)
