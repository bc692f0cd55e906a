"""Request timing per API, under Kafka's RequestChannel metric names.

For every request the socket server answers it records, in milliseconds:

- ``RequestQueueTimeMs``: from the frame being read to its dispatch (it waits while the
  connection is muted: in-flight bound, full write buffer, ``queued.max.requests``);
- ``LocalTimeMs``: the handler's synchronous part (the dispatch call);
- ``RemoteTimeMs``: from then until the handler's answer (purgatory: acks=all
  DelayedProduce, DelayedFetch long polls, ZooKeeper round trips);
- ``ResponseQueueTimeMs``: from the answer until it is written (answers leave in request
  order, so it waits for slower requests before it on the connection);
- ``ResponseSendTimeMs``: the write into the transport (Twisted sends the bytes on its
  next write event; the kernel's part is not seen here);
- ``TotalTimeMs``: all of it.

Each goes into a small fixed-bucket histogram per API (:class:`RequestMetrics`);
:meth:`RequestMetrics.snapshot` gives the numbers to whoever exports them (Prometheus). At
DEBUG, each request is logged in the format of Kafka's request logger (``Completed
request:... from connection ...;totalTime:...``).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from typing import Final

from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

REQUEST_QUEUE_TIME: Final = "RequestQueueTimeMs"
LOCAL_TIME: Final = "LocalTimeMs"
REMOTE_TIME: Final = "RemoteTimeMs"
RESPONSE_QUEUE_TIME: Final = "ResponseQueueTimeMs"
RESPONSE_SEND_TIME: Final = "ResponseSendTimeMs"
TOTAL_TIME: Final = "TotalTimeMs"
METRIC_NAMES: Final = (REQUEST_QUEUE_TIME, LOCAL_TIME, REMOTE_TIME, RESPONSE_QUEUE_TIME,
                       RESPONSE_SEND_TIME, TOTAL_TIME)

BUCKET_BOUNDS_MS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
                           250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0)
"""Upper bounds of the histogram buckets; one more bucket holds everything above."""


@dataclass(slots=True)
class Histogram:
    """Counts per bucket of :data:`BUCKET_BOUNDS_MS`, with the count, sum and maximum."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKET_BOUNDS_MS) + 1))
    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0

    def record(self, value_ms: float) -> None:
        self.buckets[bisect.bisect_left(BUCKET_BOUNDS_MS, value_ms)] += 1
        self.count += 1
        self.total_ms += value_ms
        if value_ms > self.max_ms:
            self.max_ms = value_ms

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The upper bound of the bucket holding the ``q`` quantile (0 < q <= 1); the
        maximum for the last bucket."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                return BUCKET_BOUNDS_MS[index] if index < len(BUCKET_BOUNDS_MS) else self.max_ms
        return self.max_ms


_API_NAMES: Final = {int(key): api.name for key, api in APIS.items()}


def api_name(key: int) -> str:
    """Kafka's request name of an API key (the ``request`` tag of the metrics)."""
    return _API_NAMES.get(key, "Unknown")


class RequestMetrics:
    """The request timings of one broker, per API name and metric name."""

    def __init__(self) -> None:
        self.histograms: dict[str, dict[str, Histogram]] = {}
        self._by_key: dict[int, tuple[Histogram, ...]] = {}
        """An API key's histograms in METRIC_NAMES order (the per-request lookup)."""

    def _of(self, api: str) -> dict[str, Histogram]:
        found = self.histograms.get(api)
        if found is None:
            found = self.histograms[api] = {name: Histogram() for name in METRIC_NAMES}
        return found

    def record(self, api: str, queue_ms: float, local_ms: float, remote_ms: float,
               response_queue_ms: float, send_ms: float) -> None:
        histograms = self._of(api)
        self._record(tuple(histograms[name] for name in METRIC_NAMES), queue_ms, local_ms,
                     remote_ms, response_queue_ms, send_ms)

    def record_key(self, api_key: int, queue_ms: float, local_ms: float, remote_ms: float,
                   response_queue_ms: float, send_ms: float) -> None:
        """:meth:`record` by API key (what the socket server calls for every request)."""
        histograms = self._by_key.get(api_key)
        if histograms is None:
            by_name = self._of(api_name(api_key))
            histograms = self._by_key[api_key] = tuple(by_name[name] for name in METRIC_NAMES)
        self._record(histograms, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms)

    @staticmethod
    def _record(histograms: tuple[Histogram, ...], queue_ms: float, local_ms: float,
                remote_ms: float, response_queue_ms: float, send_ms: float) -> None:
        # Histogram.record six times over, inline: this runs for every request.
        total_ms = queue_ms + local_ms + remote_ms + response_queue_ms + send_ms
        bucket_of = bisect.bisect_left
        for histogram, value_ms in zip(histograms, (queue_ms, local_ms, remote_ms,
                                                    response_queue_ms, send_ms, total_ms),
                                       strict=True):
            histogram.buckets[bucket_of(BUCKET_BOUNDS_MS, value_ms)] += 1
            histogram.count += 1
            histogram.total_ms += value_ms
            if value_ms > histogram.max_ms:
                histogram.max_ms = value_ms

    def snapshot(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{api: {metric: {"count", "mean", "p50", "p99", "max"}}}`` in milliseconds."""
        return {
            api: {
                name: {"count": h.count, "mean": h.mean_ms, "p50": h.percentile(0.5),
                       "p99": h.percentile(0.99), "max": h.max_ms}
                for name, h in histograms.items()
            }
            for api, histograms in self.histograms.items()
        }


    def summary(self) -> str:
        """One line per API: count and TotalTimeMs p50/p99/max, then the mean of each stage
        (what the broker logs at shutdown, so a benchmark run leaves its numbers)."""
        lines = []
        for api, histograms in sorted(self.histograms.items()):
            total = histograms[TOTAL_TIME]
            stages = ",".join(f"{name.removesuffix('Ms')}:{histograms[name].mean_ms:.3f}"
                              for name in METRIC_NAMES[:-1])
            lines.append(f"{api} count:{total.count} TotalTimeMs p50:<={total.percentile(0.5)}"
                         f" p99:<={total.percentile(0.99)} max:{total.max_ms:.3f} mean {stages}")
        return "\n".join(lines)


def request_description(frame: bytes | bytearray) -> str:
    """``RequestHeader(apiKey=..., apiVersion=..., clientId=..., correlationId=...)`` from
    a request frame's header (only for the DEBUG request log)."""
    if len(frame) < 10:
        return "RequestHeader(unreadable)"
    key = int.from_bytes(frame[0:2], "big", signed=True)
    version = int.from_bytes(frame[2:4], "big", signed=True)
    correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
    length = int.from_bytes(frame[8:10], "big", signed=True)
    client_id = (bytes(frame[10:10 + length]).decode("utf-8", "replace") if length >= 0
                 else "null")
    try:
        key_name = ApiKey(key).name
    except ValueError:
        key_name = str(key)
    return (f"RequestHeader(apiKey={key_name}, apiVersion={version}, clientId={client_id}, "
            f"correlationId={correlation_id})")
