"""Option parsing of the "kafkaclone" source and sink: Spark's Kafka option names,
defaults and refusals, checked before any task runs."""

from __future__ import annotations

import pytest

from kafkaclone.spark.options import (
    KafkaCloneOptionError,
    OffsetSpec,
    parse_reader_options,
    parse_writer_options,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(streaming: bool = False, **options: str) -> object:
    return parse_reader_options({**BOOTSTRAP, **options}, streaming=streaming)


def test_defaults_batch_and_streaming() -> None:
    batch = parse_reader_options({**BOOTSTRAP, "subscribe": "a"}, streaming=False)
    assert batch.starting == OffsetSpec("earliest")
    assert batch.ending == OffsetSpec("latest")
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.min_partitions is None
    assert batch.poll_timeout_ms == 120_000
    assert batch.fetch_offset_num_retries == 3
    assert batch.consumer_config()["bootstrap.servers"] == "127.0.0.1:9092"
    stream = parse_reader_options({**BOOTSTRAP, "subscribe": "a"}, streaming=True)
    assert stream.starting == OffsetSpec("latest")


def test_subscriptions() -> None:
    assert parse(subscribe=" a, b ,").subscription.topics == ("a", "b")  # type: ignore[attr-defined]
    pattern = parse(subscribePattern="logs-.*").subscription  # type: ignore[attr-defined]
    assert pattern.matches("logs-1") and not pattern.matches("xlogs-1")
    assigned = parse(assign='{"a": [0, 2], "b": [1]}').subscription  # type: ignore[attr-defined]
    assert assigned.partitions == (("a", 0), ("a", 2), ("b", 1))


def test_option_names_are_case_insensitive() -> None:
    options = parse_reader_options(
        {"KAFKA.bootstrap.servers": "h:1", "SUBSCRIBE": "a", "failondataloss": "FALSE",
         "INCLUDEHEADERS": "true", "minpartitions": "7"},
        streaming=False,
    )
    assert not options.fail_on_data_loss and options.include_headers
    assert options.min_partitions == 7


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "Exactly one of the options 'assign', 'subscribe' or 'subscribePattern'"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "Exactly one of"),
        ({"subscribe": " , "}, "comma-separated list"),
        ({"subscribePattern": "(unclosed"}, "not a valid pattern"),
        ({"assign": "{not json"}, "'assign' is not valid JSON"),
        ({"assign": '{"a": "0"}'}, "list of partition numbers"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": 1'}, "'startingOffsets' is not valid"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "is not an integer"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": "1"}}'}, "must be an integer"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "is not an offset"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "cannot be 'latest' for a batch"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, "not allowed for a batch"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "-2 (earliest) is not allowed"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "10"}, "streaming queries only"),
        ({"subscribe": "a", "minPartitions": "0"}, "'minPartitions' must be at least 1"),
        ({"subscribe": "a", "minPartitions": "many"}, "must be an integer"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "timestamp in milliseconds"),
        ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, "'error' or 'latest'"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not"),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, "'value.deserializer' is not"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "not supported"),
    ],
)
def test_bad_batch_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaCloneOptionError) as info:
        parse_reader_options({**BOOTSTRAP, **options}, streaming=False)
    assert message in str(info.value)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(KafkaCloneOptionError, match=r"kafka\.bootstrap\.servers"):
        parse_reader_options({"subscribe": "a"}, streaming=True)
    with pytest.raises(KafkaCloneOptionError, match=r"kafka\.bootstrap\.servers"):
        parse_writer_options({"topic": "a"})


def test_streaming_only_and_batch_only_options() -> None:
    with pytest.raises(KafkaCloneOptionError, match="batch queries only"):
        parse(streaming=True, subscribe="a", endingOffsets="latest")
    options = parse_reader_options(
        {**BOOTSTRAP, "subscribe": "a", "maxOffsetsPerTrigger": "100",
         "minOffsetsPerTrigger": "10", "maxTriggerDelay": "2s"},
        streaming=True,
    )
    assert (options.max_offsets_per_trigger, options.min_offsets_per_trigger) == (100, 10)
    assert options.max_trigger_delay_ms == 2000
    with pytest.raises(KafkaCloneOptionError, match="must not exceed"):
        parse(streaming=True, subscribe="a", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="6")


def test_offsets_json_and_timestamps() -> None:
    options = parse_reader_options(
        {**BOOTSTRAP, "subscribe": "a,b",
         "startingOffsets": '{"a": {"0": 23, "1": -2}, "b": {"0": -2}}',
         "endingOffsets": '{"a": {"0": 50, "1": -1}, "b": {"0": -1}}'},
        streaming=False,
    )
    assert options.starting.offsets == {("a", 0): 23, ("a", 1): -2, ("b", 0): -2}
    assert options.ending.offsets == {("a", 0): 50, ("a", 1): -1, ("b", 0): -1}
    by_time = parse_reader_options(
        {**BOOTSTRAP, "subscribe": "a", "startingOffsets": "earliest",
         "startingOffsetsByTimestamp": '{"a": {"0": 1000}}'},
        streaming=True,
    )
    assert by_time.starting == OffsetSpec("timestamps", offsets={("a", 0): 1000})
    single = parse_reader_options(
        {**BOOTSTRAP, "subscribe": "a", "startingTimestamp": "5000",
         "startingOffsetsByTimestamp": '{"a": {"0": 1000}}',
         "startingOffsetsByTimestampStrategy": "latest"},
        streaming=True,
    )
    assert single.starting == OffsetSpec("timestamp", timestamp=5000, strategy="latest")


def test_writer_options() -> None:
    options = parse_writer_options({**BOOTSTRAP, "topic": "out", "kafka.acks": "all"})
    assert options.topic == "out"
    assert options.producer_config()["acks"] == "all"
    with pytest.raises(KafkaCloneOptionError, match=r"'value\.serializer' is not supported"):
        parse_writer_options({**BOOTSTRAP, "kafka.value.serializer": "x"})


def test_the_package_installs_a_module_pyspark_finds_by_itself() -> None:
    """PySpark's data source lookup imports every top-level ``pyspark_*`` module and
    registers its ``DefaultSource``: ours is there and is the kafkaclone source."""
    import importlib
    import pkgutil

    from pyspark.sql.datasource import DataSource

    from kafkaclone.spark import data_source

    names = [info.name for info in pkgutil.iter_modules() if info.name.startswith("pyspark_")]
    assert "pyspark_kafkaclone" in names
    module = importlib.import_module("pyspark_kafkaclone")
    assert issubclass(module.DefaultSource, DataSource)
    assert module.DefaultSource is data_source()
    assert module.DefaultSource.name() == "kafkaclone"


def test_security_options_reach_the_clients() -> None:
    """Spark's Kafka source hands ``kafka.security.protocol``, ``kafka.sasl.*`` and
    ``kafka.ssl.*`` to its consumer and producer unchanged (values keep their case)."""
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="Alice-Secret";')
    security = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": jaas, "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": "/etc/kafka/CA.pem"}
    expected = {key[len("kafka."):]: value for key, value in security.items()}
    reader = parse_reader_options({**BOOTSTRAP, "subscribe": "a", **security}, streaming=False)
    writer = parse_writer_options({**BOOTSTRAP, "topic": "a", **security})
    for config in (reader.consumer_config(), writer.producer_config()):
        assert {key: config[key] for key in expected} == expected
