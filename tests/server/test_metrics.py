"""The broker's Prometheus metrics (kafkaclone.server.metrics): scraped over HTTP and parsed
with prometheus_client's own parser, on one broker in this process and on a local cluster
of three broker processes where a broker dies and comes back."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.server.broker import KafkaBroker
from kafkaclone.server.config import KafkaConfig
from kafkaclone.server.metrics import BrokerMetrics, GroupLagCollector, ReplicaManagerCollector
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.reactor import run
from kafkaclone.testing.wait import wait_until
from kafkaclone.testing.zookeeper import free_port
from tests.server.test_broker import StandInController, serve_client

pytestmark = pytest.mark.timeout(240)

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> Samples:
    """Every sample by name, then by its sorted labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(response.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name][tuple(sorted(labels.items()))]


@pytest.fixture
def broker(zk_connect: str, tmp_path: Path) -> Iterator[KafkaBroker]:
    props = {"broker.id": "1", "zookeeper.connect": zk_connect,
             "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
             "controlled.shutdown.enable": "false", "zookeeper.session.timeout.ms": "6000",
             "metrics.prometheus.port": "0"}

    def controller_factory(config: Any, zk: Any, bid: int, epoch: int,
                           the_reactor: Any) -> StandInController:
        return StandInController(bid, epoch, active=True)

    started = KafkaBroker(KafkaConfig(props), reactor, controller_factory=controller_factory)
    run(started.startup(), timeout=30)
    yield started
    run(started.shutdown(), timeout=30)


def test_a_broker_serves_prometheus_text_named_after_kafkas_jmx_names(
        broker: KafkaBroker) -> None:
    metrics_port = broker.metrics_port()
    assert metrics_port > 0 and metrics_port != broker.bound_port()

    def client() -> Samples:
        request = APIS[ApiKey.METADATA].request(
            topics=[], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False)
        with BrokerConnection("127.0.0.1", broker.bound_port(),
                              request_timeout_ms=5000) as conn:
            for _ in range(3):
                conn.request(ApiKey.METADATA, request, max_version=9)
        return scrape(metrics_port)

    samples = serve_client(client)
    assert value(samples, "kafka_network_requestmetrics_requests_total",
                 request="Metadata") == 3
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Metadata") == 3
    assert value(samples, "kafka_network_requestmetrics_totaltimems_bucket",
                 request="Metadata", le="+Inf") == 3
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    # The stand-in controller is not a KafkaController: no queue, no offline partitions.
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_controller_controllereventmanager_eventqueuesize") == 0
    for gauge in ("underreplicatedpartitions", "leadercount", "partitioncount"):
        assert value(samples, f"kafka_server_replicamanager_{gauge}") == 0
    for counter in ("kafka_server_brokertopicmetrics_messagesin_total",
                    "kafka_server_brokertopicmetrics_bytesin_total",
                    "kafka_server_brokertopicmetrics_bytesout_total",
                    "kafka_server_replicamanager_isrshrinks_total",
                    "kafka_server_replicamanager_isrexpands_total"):
        assert value(samples, counter) == 0
    assert value(samples, "kafka_log_logflushstats_logflushrateandtimems_count") == 0
    assert "kafka_consumergroup_lag" not in samples  # no group committed here


def test_metrics_are_off_by_default(zk_connect: str, tmp_path: Path) -> None:
    config = KafkaConfig({"broker.id": "1", "zookeeper.connect": zk_connect,
                          "log.dirs": str(tmp_path)})
    assert config.metrics_prometheus_port == -1
    assert config.metrics_prometheus_host == "127.0.0.1"
    broker = KafkaBroker(config, reactor)
    assert broker.metrics is None and broker.request_handler.metrics is None


def test_two_brokers_in_one_process_keep_their_own_registries() -> None:
    first, second = BrokerMetrics(), BrokerMetrics()
    first.record_append(5, 500)
    assert parse(first.text().decode())[
        "kafka_server_brokertopicmetrics_messagesin_total"][()] == 5
    assert parse(second.text().decode())[
        "kafka_server_brokertopicmetrics_messagesin_total"][()] == 0


def test_replica_manager_gauges_are_computed_at_scrape_time() -> None:
    class FakePartition:
        def __init__(self, is_leader: bool, isr: tuple[int, ...]) -> None:
            self.is_leader = is_leader
            self.isr = isr
            self.replicas = (1, 2, 3)

    class FakeReplicaManager:
        all_partitions = {
            TopicPartition("t", 0): FakePartition(True, (1, 2, 3)),
            TopicPartition("t", 1): FakePartition(True, (1, 2)),
            TopicPartition("t", 2): FakePartition(False, (2,)),
        }

    metrics = BrokerMetrics()
    manager: Any = FakeReplicaManager()
    metrics.registry.register(ReplicaManagerCollector(lambda: manager))
    samples = parse(metrics.text().decode())
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(samples, "kafka_server_replicamanager_leadercount") == 2
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 3


def test_group_lag_is_the_high_watermark_minus_the_committed_offset() -> None:
    class FakeLog:
        high_watermark = 42

    class FakePartition:
        def __init__(self, is_leader: bool) -> None:
            self.is_leader = is_leader
            self.log = FakeLog()

    class FakeReplicaManager:
        all_partitions = {TopicPartition("t", 0): FakePartition(True),
                          TopicPartition("t", 1): FakePartition(False)}

    class FakeCoordinator:
        committed_offsets = {"g": {TopicPartition("t", 0): 40, TopicPartition("t", 1): 1,
                                   TopicPartition("other", 0): 0}}

    metrics = BrokerMetrics()
    manager: Any = FakeReplicaManager()
    coordinator: Any = FakeCoordinator()
    metrics.registry.register(GroupLagCollector(lambda: coordinator, lambda: manager))
    samples = parse(metrics.text().decode())
    # Only t-0 is led here: t-1's high watermark is its leader's to know.
    assert samples["kafka_consumergroup_lag"] == {
        (("consumergroup", "g"), ("partition", "0"), ("topic", "t")): 2}


# -- a local cluster ---------------------------------------------------------------------------


@pytest.mark.slow
def test_under_replicated_partitions_follow_a_dead_broker_and_its_return() -> None:
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    overrides = {b: {"metrics.prometheus.port": str(p)} for b, p in ports.items()}
    with LocalCluster(3, broker_overrides=overrides) as cluster:
        def total(name: str, brokers: tuple[int, ...] = (1, 2, 3)) -> float:
            return sum(value(scrape(ports[b]), name) for b in brokers)

        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        # The controller's events (its startup, the brokers joining) went through its queue.
        assert total("kafka_controller_controllereventmanager_eventqueuetimems_count") >= 1
        done = subprocess.run(
            [str(SCRIPTS / "kafka-topics.sh"), "--bootstrap-server", cluster.bootstrap_servers,
             "--create", "--topic", "watched", "--replica-assignment", "1:2:3,1:2:3"],
            capture_output=True, text=True, timeout=60, cwd="/")
        assert done.returncode == 0, done.stdout + done.stderr
        wait_until(lambda: total("kafka_server_replicamanager_partitioncount") == 6, 30,
                   "every replica hosted")
        wait_until(lambda: value(scrape(ports[1]), "kafka_server_replicamanager_leadercount")
                   == 2, 30, "broker 1 leads both partitions")
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(10):
            producer.produce("watched", value=b"x" * 100, partition=i % 2)
        assert producer.flush(30) == 0
        assert total("kafka_server_brokertopicmetrics_messagesin_total") >= 10
        assert total("kafka_server_brokertopicmetrics_bytesin_total") >= 1000
        produced = value(scrape(ports[1]), "kafka_network_requestmetrics_requests_total",
                         request="Produce")
        assert produced >= 1
        assert wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions")
                          == 0, 30, "fully replicated")

        cluster.broker(3).kill()
        wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions",
                                 (1, 2)) == 2, 60, "both partitions under-replicated")
        assert total("kafka_controller_kafkacontroller_activecontrollercount", (1, 2)) == 1

        cluster.restart_broker(3)
        wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions")
                   == 0, 60, "under-replicated partitions back to 0")
        samples = scrape(ports[1])
        assert value(samples, "kafka_server_replicamanager_isrexpands_total") >= 2
        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
