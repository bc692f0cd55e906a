"""Client quotas end to end: quotas set with kafka-configs.sh hold flat-out confluent-kafka
(librdkafka) producers and consumers to their rate on every broker, and leave other
clients alone.

Two brokers, a topic with one partition on each. Quotas are per broker, as in Kafka, so a
client producing to both partitions gets its quota from each broker. A new client may
first use a whole window's worth (``quota.window.num - 1`` windows at the quota, Kafka's
minimum window) at full speed, and the window then holds that burst: the rate is measured
once the burst left the window (a few windows after the first throttle), over a bounded
window. The cluster keeps 4 windows of a second (Kafka's default is 11) so that the burst
is short. The bounds are loose enough for a loaded machine; ``benchmarks/bench_quotas.py``
measures with Kafka's defaults and checks the rate within 20%.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TOPIC = "quota-topic"
QUOTA = 1024 * 1024
MEASURE_S = 8.0
WINDOWS = 4
SETTLE_S = float(WINDOWS)
"""From the first throttle until the burst before it has left the quota window."""
VALUE = b"q" * 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, overrides={"quota.window.num": str(WINDOWS)}) as local:
        admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})
        run_script("kafka-topics.sh", "--bootstrap-server", local.bootstrap_servers, "--create",
                   "--topic", TOPIC, "--replica-assignment", "1,2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
            if len(partitions) == 2 and all(p.leader > 0 for p in partitions.values()):
                break
            time.sleep(0.2)
        yield local


def run_script(script: str, *args: str) -> str:
    done = subprocess.run([str(SCRIPTS / script), *args], capture_output=True, text=True,
                          timeout=90, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def kafka_configs(cluster: LocalCluster, *args: str) -> str:
    return run_script("kafka-configs.sh", *args)


class ThrottleLog:
    """librdkafka's throttle events (the throttle_time_ms brokers answered with)."""

    def __init__(self) -> None:
        self.by_broker: dict[int, int] = {}
        self.first: float | None = None

    def __call__(self, event: Any) -> None:
        if event.throttle_time > 0:
            self.by_broker[event.broker_id] = self.by_broker.get(event.broker_id, 0) + 1
            if self.first is None:
                self.first = time.monotonic()


def wait_for(condition: Any, timeout: float, poll: Any) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        poll()
    assert condition()


def test_producer_quota_holds_the_rate_on_every_broker_and_spares_others(
        cluster: LocalCluster) -> None:
    out = kafka_configs(cluster, "--bootstrap-server", cluster.broker(1).bootstrap_server,
                        "--alter", "--entity-type", "clients", "--entity-name", "slow-producer",
                        "--add-config", f"producer_byte_rate={QUOTA}")
    assert "Completed updating config" in out
    described = kafka_configs(cluster, "--bootstrap-server", cluster.bootstrap_servers,
                              "--describe", "--entity-type", "clients",
                              "--entity-name", "slow-producer")
    assert described == (f"Quota configs for client-id 'slow-producer' are "
                         f"producer_byte_rate={float(QUOTA)}\n")

    throttles = ThrottleLog()
    acked = {0: 0, 1: 0}
    stamps: list[tuple[float, int, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.partition()] += len(msg.value())
            stamps.append((time.monotonic(), msg.partition(), len(msg.value())))

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "client.id": "slow-producer", "linger.ms": 5,
                         "throttle_cb": throttles, "queue.buffering.max.kbytes": 4096})
    other = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "other",
                      "linger.ms": 0, "throttle_cb": (other_throttles := ThrottleLog())})
    round_trips: list[float] = []
    stop = threading.Event()

    def other_client() -> None:
        # Sequential one-record round trips to the same broker as the throttled producer.
        while not stop.is_set() and len(round_trips) < 200:
            started = time.monotonic()
            other.produce(TOPIC, b"ping", partition=0)
            other.flush(30)
            round_trips.append(time.monotonic() - started)
            time.sleep(0.05)

    def produce_for(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for partition in (0, 1):
                try:
                    producer.produce(TOPIC, VALUE, partition=partition, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)

    # Until both brokers throttle: the quota set through broker 1 reached broker 2 too.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(throttles.by_broker) < 2:
        produce_for(0.5)
    assert set(throttles.by_broker) == {1, 2}, throttles.by_broker
    produce_for(SETTLE_S)

    thread = threading.Thread(target=other_client, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        produce_for(MEASURE_S)
        end = time.monotonic()
    finally:
        stop.set()
        thread.join(60)
    producer.flush(60)
    rates = {p: sum(n for t, q, n in stamps if q == p and start <= t < end) / (end - start)
             for p in (0, 1)}
    for partition, rate in rates.items():
        # Within the quota per broker (loosely: a produce request in flight at the edges),
        # and not starved either.
        assert 0.4 * QUOTA < rate < 1.35 * QUOTA, (partition, rates)
    assert other_throttles.by_broker == {}
    assert round_trips, "the other client made no round trip"
    round_trips.sort()
    assert round_trips[len(round_trips) // 2] < 1.0, round_trips


def test_consumer_quota_holds_the_fetch_rate(cluster: LocalCluster) -> None:
    loader = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "loader",
                       "linger.ms": 20})
    total = 0
    while total < (2 * WINDOWS + 2 * MEASURE_S) * QUOTA:
        try:
            loader.produce(TOPIC, VALUE, partition=1)
            total += len(VALUE)
        except BufferError:
            loader.poll(0.05)
    assert loader.flush(120) == 0
    kafka_configs(cluster, "--bootstrap-server", cluster.broker(2).bootstrap_server, "--alter",
                  "--entity-type", "clients", "--entity-name", "slow-consumer",
                  "--add-config", f"consumer_byte_rate={QUOTA}")

    throttles = ThrottleLog()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": "quota-test", "client.id": "slow-consumer",
                         "enable.auto.commit": False, "throttle_cb": throttles,
                         # a small local queue: the rate seen is the broker's
                         "queued.max.messages.kbytes": 1024})
    try:
        consumer.assign([CkTopicPartition(TOPIC, 1, 0)])
        stamps: list[tuple[float, int]] = []

        def poll() -> None:
            for msg in consumer.consume(500, timeout=0.2):
                if msg.error() is None:
                    stamps.append((time.monotonic(), len(msg.value() or b"")))

        wait_for(lambda: throttles.first is not None, 90, poll)
        settled = time.monotonic() + SETTLE_S
        while time.monotonic() < settled:
            poll()
        start = time.monotonic()
        end = start + MEASURE_S
        while time.monotonic() < end:
            poll()
        rate = sum(n for t, n in stamps if start <= t < end) / MEASURE_S
        assert 0.4 * QUOTA < rate < 1.35 * QUOTA, rate
        assert set(throttles.by_broker) == {2}
    finally:
        consumer.close()


def test_request_percentage_throttles_by_handling_time(cluster: LocalCluster) -> None:
    kafka_configs(cluster, "--zookeeper", cluster.zookeeper_connect, "--alter",
                  "--entity-type", "clients", "--entity-name", "busy",
                  "--add-config", "request_percentage=0.01")
    host, port = cluster.broker(1).bootstrap_server.split(":")
    metadata = api.APIS[ApiKey.METADATA].request
    body = metadata(topics=None, allow_auto_topic_creation=False)

    def throttle_of(connection: BrokerConnection) -> int:
        _, response = connection.request(ApiKey.METADATA, body, 9)
        return int(response.throttle_time_ms)

    with BrokerConnection(host, int(port), client_id="busy") as busy, \
            BrokerConnection(host, int(port), client_id="idle") as idle:
        # 0.01% of a handler is 0.1 ms per second: a few Metadata requests exceed it once
        # the quota reached the broker; the throttle is at most one window (1 s).
        deadline = time.monotonic() + 60
        throttle = 0
        while time.monotonic() < deadline and throttle == 0:
            throttle = throttle_of(busy)
        assert 0 < throttle <= 1000
        assert throttle_of(idle) == 0
