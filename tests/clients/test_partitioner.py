"""Partitioners and client config, without a cluster."""

from __future__ import annotations

import pytest

from kafkaclone.clients import ConfigException, Consumer, Producer
from kafkaclone.clients.config import ProducerConfig
from kafkaclone.clients.partitioner import (
    DefaultPartitioner,
    RoundRobinPartitioner,
    make_partitioner,
    murmur2,
    murmur2_partition,
)


def signed(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


@pytest.mark.parametrize(("key", "expected"), [
    # The vectors of Kafka's UtilsTest.testMurmur2.
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert signed(murmur2(key)) == expected


def test_keyed_records_hash_and_null_keys_stick_until_a_new_batch() -> None:
    partitioner = DefaultPartitioner()
    assert partitioner.partition("t", b"foobar", 7, lambda: list(range(7))) == \
        murmur2_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    every = lambda: list(range(7))  # noqa: E731
    first = partitioner.partition("t", None, 7, every)
    assert all(partitioner.partition("t", None, 7, every) == first for _ in range(50))
    partitioner.on_new_batch("t", first)
    second = partitioner.partition("t", None, 7, lambda: list(range(7)))
    assert second != first
    # Only available partitions are chosen for keyless records.
    partitioner.on_new_batch("t", second)
    assert partitioner.partition("t", None, 7, lambda: [3]) == 3


def test_round_robin_and_callables() -> None:
    rr = RoundRobinPartitioner()
    assert [rr.partition("t", b"k", 3, lambda: [0, 1, 2]) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    custom = make_partitioner(lambda key, count, available: len(key or b"") % count)
    assert custom.partition("t", b"abcd", 3, lambda: [0, 1, 2]) == 1
    with pytest.raises(ConfigException, match="partitioner"):
        make_partitioner("no-such-partitioner")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("acks", "2", "acks"),
    ("linger.ms", "soon", "linger.ms"),
    ("batch.size", -1, "batch.size"),
    ("compression.type", "brotli", "compression.type"),
    ("max.in.flight.requests.per.connection", 0, "max.in.flight"),
    ("retries", True, "retries"),
])
def test_bad_producer_config_values_are_clear_errors(key: str, value: object,
                                                     message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        Producer({"bootstrap.servers": "127.0.0.1:1", key: value})


def test_bad_consumer_config_and_missing_bootstrap() -> None:
    with pytest.raises(ConfigException, match=r"auto.offset.reset"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "smallest"})
    with pytest.raises(ConfigException, match=r"bootstrap.servers"):
        Consumer({"group.id": "g"})
    with pytest.raises(ConfigException, match=r"bootstrap.servers"):
        Producer({"bootstrap.servers": "no-port-here"})
    with pytest.raises(ConfigException, match=r"fetch.max.wait.ms"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "fetch.max.wait.ms": 40000})


def test_strings_convert_as_in_a_properties_file() -> None:
    config = ProducerConfig({"bootstrap.servers": "a:1,b:2", "linger.ms": "5",
                             "enable.idempotence": "false", "acks": "all"})
    assert config.get_list("bootstrap.servers") == ["a:1", "b:2"]
    assert config.get_int("linger.ms") == 5
    assert config.get_bool("enable.idempotence") is False
    assert config.get_int("batch.size") == 16384


def test_python_values_as_in_a_confluent_kafka_dict() -> None:
    class Interceptor:
        pass

    interceptor = Interceptor()
    config = ProducerConfig({"bootstrap.servers": ["a:1"], "acks": -1, "linger.ms": 5,
                             "enable.idempotence": False, "key.serializer": str.encode,
                             "interceptor.classes": [interceptor, Interceptor]})
    assert config.get_str("acks") == "-1"
    assert config.get_callable("key.serializer") is str.encode
    assert config.get_callable("value.serializer") is None
    made = config.get_configured_instances("interceptor.classes")
    assert made[0] is interceptor and isinstance(made[1], Interceptor)
    with pytest.raises(ConfigException, match="acks"):
        ProducerConfig({"bootstrap.servers": "a:1", "acks": 2})
    with pytest.raises(ConfigException, match=r"key\.serializer: a callable is required"):
        ProducerConfig({"bootstrap.servers": "a:1", "key.serializer": interceptor}
                       ).get_callable("key.serializer")
