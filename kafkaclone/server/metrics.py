"""A broker's metrics in Prometheus text format, named after Kafka's JMX names.

Each broker owns a :class:`BrokerMetrics`: a ``prometheus_client`` CollectorRegistry of its
own (never the process-wide one: tests run several brokers in one process) holding

- counters and histograms updated where the event happens, kept cheap for the hot path
  (per-API children are bound once, so a request costs one dict lookup, one ``inc`` and one
  ``observe``);
- collectors that compute gauges from broker state when Prometheus scrapes
  (:class:`ReplicaManagerCollector`, :class:`ControllerCollector`,
  :class:`GroupLagCollector`), so nothing is updated on every partition change.

:class:`MetricsResource` serves the registry at ``/metrics`` from the reactor thread
(``metrics.prometheus.port``, ``metrics.prometheus.host``), so no other thread touches
broker state.

JMX name (Kafka 2.8) -> Prometheus name (the mapping docs/operations.md lists):

- ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
  ``kafka_server_replicamanager_underreplicatedpartitions``; likewise ``LeaderCount``,
  ``PartitionCount``; ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` -> counters
  ``kafka_server_replicamanager_isrshrinks_total`` / ``..._isrexpands_total`` (Prometheus
  computes the rate);
- ``kafka.controller:type=KafkaController,name=ActiveControllerCount`` /
  ``OfflinePartitionsCount`` -> ``kafka_controller_kafkacontroller_activecontrollercount`` /
  ``..._offlinepartitionscount``;
- ``kafka.controller:type=ControllerEventManager,name=EventQueueSize`` / ``EventQueueTimeMs``
  -> ``kafka_controller_controllereventmanager_eventqueuesize`` / ``..._eventqueuetimems``;
- ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec`` (``BytesInPerSec``,
  ``BytesOutPerSec``) -> ``kafka_server_brokertopicmetrics_messagesin_total`` (``bytesin``,
  ``bytesout``), clients' traffic only, as Kafka's (replication is not counted);
- ``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=X`` /
  ``TotalTimeMs`` -> ``kafka_network_requestmetrics_requests_total{request="X"}`` /
  histogram ``kafka_network_requestmetrics_totaltimems{request="X"}``;
- ``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs`` -> histogram
  ``kafka_log_logflushstats_logflushrateandtimems``;
- consumer-group lag, which Kafka's broker does not export, under kafka_exporter's name
  ``kafka_consumergroup_lag{consumergroup,topic,partition}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from twisted.web.resource import Resource
from twisted.web.server import Request

from kafkaclone.controller.controller import KafkaController
from kafkaclone.coordinator.group.coordinator import GroupCoordinator
from kafkaclone.protocol.api import APIS
from kafkaclone.server.replica_manager import ReplicaManager
from kafkaclone.server.services import ControllerService

TIME_BUCKETS_MS: Final = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                          2500.0, 5000.0, 10000.0, 30000.0)
"""Buckets of the time histograms, in milliseconds (Kafka's times are in ms)."""


class BrokerMetrics:
    """One broker's registry and the counters its hot paths update."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests answered, per API (JMX "
            "kafka.network:type=RequestMetrics,name=RequestsPerSec).", ["request"],
            registry=registry)
        self.total_time_ms = Histogram(
            "kafka_network_requestmetrics_totaltimems", "Time from a request's arrival to "
            "its response, per API, in ms (RequestMetrics TotalTimeMs).", ["request"],
            buckets=TIME_BUCKETS_MS, registry=registry)
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records appended from clients "
            "(BrokerTopicMetrics MessagesInPerSec).", registry=registry)
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes appended from clients "
            "(BrokerTopicMetrics BytesInPerSec).", registry=registry)
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Bytes read by consumers, followers "
            "excluded (BrokerTopicMetrics BytesOutPerSec).", registry=registry)
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions this broker "
            "leads (ReplicaManager IsrShrinksPerSec).", registry=registry)
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands", "ISR expansions of partitions this "
            "broker leads (ReplicaManager IsrExpandsPerSec).", registry=registry)
        self.log_flush_time_ms = Histogram(
            "kafka_log_logflushstats_logflushrateandtimems", "Log flushes (fsync) and their "
            "time in ms (LogFlushStats LogFlushRateAndTimeMs).", buckets=TIME_BUCKETS_MS,
            registry=registry)
        self.event_queue_time_ms = Histogram(
            "kafka_controller_controllereventmanager_eventqueuetimems", "Time controller "
            "events wait in the queue, in ms (ControllerEventManager EventQueueTimeMs).",
            buckets=TIME_BUCKETS_MS, registry=registry)
        # Bound once per API: label lookup is the expensive part of a labelled metric.
        self._per_api: dict[int, tuple[Counter, Histogram]] = {}

    # -- hot-path hooks ------------------------------------------------------------------

    def record_request(self, api_key: int, started: float) -> None:
        """A request of ``api_key`` answered; ``started`` is its ``time.perf_counter()``."""
        children = self._per_api.get(api_key)
        if children is None:
            name = APIS[api_key].name
            children = (self.requests.labels(name), self.total_time_ms.labels(name))
            self._per_api[api_key] = children
        children[0].inc()
        children[1].observe((time.perf_counter() - started) * 1000.0)

    def record_append(self, records: int, size: int) -> None:
        self.messages_in.inc(records)
        self.bytes_in.inc(size)

    def record_bytes_out(self, size: int) -> None:
        if size:
            self.bytes_out.inc(size)

    def mark_isr_shrink(self) -> None:
        self.isr_shrinks.inc()

    def mark_isr_expand(self) -> None:
        self.isr_expands.inc()

    def record_log_flush(self, elapsed_ms: float) -> None:
        self.log_flush_time_ms.observe(elapsed_ms)

    def record_event_queue_time(self, elapsed_ms: float) -> None:
        self.event_queue_time_ms.observe(elapsed_ms)

    def text(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)


class ReplicaManagerCollector:
    """ReplicaManager's gauges, computed from the hosted partitions at scrape time."""

    def __init__(self, replica_manager: Callable[[], ReplicaManager | None]) -> None:
        self._replica_manager = replica_manager

    def collect(self) -> Iterator[Metric]:
        manager = self._replica_manager()
        partitions = [] if manager is None else list(manager.all_partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under_replicated = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this broker leads whose ISR is smaller than their replica set.",
            value=under_replicated)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                "Partitions this broker leads.", value=len(leaders))
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Partitions this broker hosts (leader or follower).",
                                value=len(partitions))


class ControllerCollector:
    """KafkaController's and ControllerEventManager's gauges, at scrape time. A standby
    controller reports 0 (as Kafka's do)."""

    def __init__(self, controller: Callable[[], ControllerService | None]) -> None:
        self._controller = controller

    def collect(self) -> Iterator[Metric]:
        controller = self._controller()
        active = controller is not None and controller.is_active
        offline = queued = 0
        if isinstance(controller, KafkaController):
            queued = controller.events.queue_size
            if active:
                offline = len(controller.context.partitions_with_offline_leader())
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller, 0 elsewhere.", value=int(active))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a live leader (active controller only).",
                                value=offline)
        yield GaugeMetricFamily("kafka_controller_controllereventmanager_eventqueuesize",
                                "Controller events waiting in the queue.", value=queued)


class GroupLagCollector:
    """Consumer-group lag computed by the group coordinator at scrape time: for each offset
    a group committed through this coordinator, the high watermark of that partition minus
    the committed offset, for the partitions this broker leads (it knows their high
    watermark exactly; the others are reported by their leaders' coordinators only if they
    coordinate the group, so a partition led elsewhere is left out)."""

    def __init__(self, coordinator: Callable[[], GroupCoordinator | None],
                 replica_manager: Callable[[], ReplicaManager | None]) -> None:
        self._coordinator = coordinator
        self._replica_manager = replica_manager

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag", "High watermark minus committed offset, per group and "
            "partition (partitions led by this broker, groups it coordinates).",
            labels=["consumergroup", "topic", "partition"])
        coordinator = self._coordinator()
        manager = self._replica_manager()
        if coordinator is not None and manager is not None:
            for group_id, offsets in coordinator.committed_offsets.items():
                for tp, offset in offsets.items():
                    partition = manager.all_partitions.get(tp)
                    log = None if partition is None else partition.log
                    if partition is None or log is None or not partition.is_leader:
                        continue
                    family.add_metric([group_id, tp.topic, str(tp.partition)],
                                      max(0, log.high_watermark - offset))
        yield family


def register_collectors(metrics: BrokerMetrics, collectors: Iterable[Collector]) -> None:
    """Add scrape-time collectors to the broker's registry."""
    for collector in collectors:
        metrics.registry.register(collector)


class MetricsResource(Resource):
    """``GET /metrics``: the registry as Prometheus text, rendered on the reactor thread."""

    isLeaf = True

    def __init__(self, metrics: BrokerMetrics) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._metrics = metrics

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"Content-Type",  # type: ignore[no-untyped-call]
                          CONTENT_TYPE_LATEST.encode())
        return self._metrics.text()
