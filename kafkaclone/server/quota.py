"""Client quotas (Kafka 2.8's ClientQuotaManager, ClientRequestQuotaManager, DefaultQuotaCallback).

Three quota types, each a rate a group of clients may use:

- ``producer_byte_rate``: bytes of Produce requests per second (the request's size);
- ``consumer_byte_rate``: bytes of Fetch responses per second;
- ``request_percentage``: the percentage of one request handler's time per second (100 is
  one thread's worth), spent handling the clients' requests.

Quotas are set on entities (``/config/users/<user>``, ``/config/clients/<client-id>``,
``/config/users/<user>/clients/<client-id>``, each with ``<default>`` in place of a name) and
applied as Kafka's DefaultQuotaCallback does: a request of (user, client id) is governed by
the first of

1. ``/config/users/<user>/clients/<client-id>``   (its own rate),
2. ``/config/users/<user>/clients/<default>``     (its own rate),
3. ``/config/users/<user>``                       (shared by all clients of the user),
4. ``/config/users/<default>/clients/<client-id>`` (its own rate),
5. ``/config/users/<default>/clients/<default>``  (its own rate),
6. ``/config/users/<default>``                    (per user),
7. ``/config/clients/<client-id>``                (shared by all users of the client id),
8. ``/config/clients/<default>``                  (per client id),

that exists; the "metric tags" (``QuotaKey``) say who shares one rate.

A rate is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples of
``quota.window.size.seconds`` each; a value is recorded first and the rate then checked, and
a rate over the quota gives the throttle time Kafka computes
(``(rate - quota) / quota * window``, :func:`throttle_time_ms`). The broker answers at once
with that ``throttle_time_ms`` and does not read the connection for that long (KIP-219).
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.security import desanitize, sanitize

logger = logging.getLogger(__name__)

DEFAULT_ENTITY: Final = "<default>"
DEFAULT_NUM_SAMPLES: Final = 11  # quota.window.num
DEFAULT_WINDOW_SECONDS: Final = 1  # quota.window.size.seconds
NANOS_TO_PERCENTAGE_PER_SECOND: Final = 100.0 / 1e9


class QuotaType(enum.Enum):
    """The quota config names, as Kafka's DynamicConfig.Client keys."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"


QUOTA_CONFIG_NAMES: Final = frozenset(t.value for t in QuotaType)


@dataclass(frozen=True)
class QuotaEntity:
    """Where a quota is set: a sanitized user (or ``<default>``) and/or a client id (or
    ``<default>``); None for a part the entity does not name."""

    user: str | None
    client_id: str | None


@dataclass(frozen=True)
class QuotaKey:
    """Kafka's quota metric tags: the (sanitized user, client id) sharing one rate; an empty
    string for a part that does not split it."""

    user: str
    client_id: str


class SampledRate:
    """Kafka's ``Rate`` with a ``SampledStat`` of sums: ``num_samples`` windows of
    ``window_ms``; the rate is the sum of the live samples over the elapsed window time
    (at least ``num_samples - 1`` full windows, so a new rate does not start high)."""

    __slots__ = ("_current", "_num_samples", "_samples", "_window_ms")

    def __init__(self, num_samples: int, window_ms: int) -> None:
        self._num_samples = num_samples
        self._window_ms = window_ms
        self._samples: list[list[float]] = []  # [window start ms, value, event count]
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._samples:
            self._samples.append([now_ms, 0.0, 0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self._window_ms:
            self._current = (self._current + 1) % self._num_samples
            if self._current >= len(self._samples):
                sample = [now_ms, 0.0, 0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[0], sample[1], sample[2] = now_ms, 0.0, 0
        sample[1] += value
        sample[2] += 1

    def _purge_obsolete(self, now_ms: float) -> None:
        expire_age = self._num_samples * self._window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire_age:
                sample[0], sample[1], sample[2] = now_ms, 0.0, 0

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's ``Rate.windowSize``."""
        self._purge_obsolete(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = int(elapsed // self._window_ms)
        min_full_windows = self._num_samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self._window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        """The rate per second."""
        self._purge_obsolete(now_ms)
        total = sum(s[1] for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(rate: float, bound: float, window_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime: how long the client must stay away for its rate over
    the window to come down to the bound."""
    return math.floor((rate - bound) / bound * window_ms + 0.5)


@dataclass(frozen=True)
class QuotaWindow:
    num_samples: int = DEFAULT_NUM_SAMPLES
    window_seconds: int = DEFAULT_WINDOW_SECONDS


class ClientQuotaManager:
    """One quota type's quotas and the rates they limit (Kafka's ClientQuotaManager with the
    DefaultQuotaCallback). Without any quota set, recording costs one attribute check."""

    def __init__(self, quota_type: QuotaType, window: QuotaWindow = QuotaWindow()) -> None:
        self.quota_type = quota_type
        self.window = window
        self.quotas: dict[QuotaEntity, float] = {}
        self._rates: dict[QuotaKey, SampledRate] = {}
        self.enabled = False
        self.max_throttle_time_ms: int | None = None
        """A bound on the throttle time (the request quota's: one window, as Kafka's)."""

    # -- configuration -----------------------------------------------------------------------

    def update_quota(self, entity: QuotaEntity, value: float | None) -> None:
        """Set (or with None remove) the quota of ``entity`` (names sanitized, as in the
        znode paths)."""
        if value is None:
            self.quotas.pop(entity, None)
        else:
            self.quotas[entity] = value
        self.enabled = bool(self.quotas)
        # A rate's sharing may change with the entities present: start the rates afresh
        # (Kafka re-creates its sensors' quotas likewise on every update).
        self._rates.clear()
        logger.info("%s quota of %s is now %s", self.quota_type.value, entity, value)

    # -- resolution (DefaultQuotaCallback) ---------------------------------------------------

    def quota_key(self, user: str, client_id: str) -> QuotaKey:
        """Kafka's quotaMetricTags: who shares the rate of (sanitized user, client id)."""
        quotas = self.quotas
        if (QuotaEntity(user, client_id) in quotas
                or QuotaEntity(user, DEFAULT_ENTITY) in quotas):
            return QuotaKey(user, client_id)
        if QuotaEntity(user, None) in quotas:
            return QuotaKey(user, "")
        if (QuotaEntity(DEFAULT_ENTITY, client_id) in quotas
                or QuotaEntity(DEFAULT_ENTITY, DEFAULT_ENTITY) in quotas):
            return QuotaKey(user, client_id)
        if QuotaEntity(DEFAULT_ENTITY, None) in quotas:
            return QuotaKey(user, "")
        return QuotaKey("", client_id)

    def quota_limit(self, key: QuotaKey) -> float | None:
        """Kafka's quotaLimit: the bound of the rate ``key`` names, or None (unlimited)."""
        quotas = self.quotas
        if key.user and key.client_id:
            for entity in (QuotaEntity(key.user, key.client_id),
                           QuotaEntity(key.user, DEFAULT_ENTITY),
                           QuotaEntity(DEFAULT_ENTITY, key.client_id),
                           QuotaEntity(DEFAULT_ENTITY, DEFAULT_ENTITY)):
                if entity in quotas:
                    return quotas[entity]
        elif key.user:
            for entity in (QuotaEntity(key.user, None), QuotaEntity(DEFAULT_ENTITY, None)):
                if entity in quotas:
                    return quotas[entity]
        elif key.client_id:
            for entity in (QuotaEntity(None, key.client_id), QuotaEntity(None, DEFAULT_ENTITY)):
                if entity in quotas:
                    return quotas[entity]
        return None

    def quota_for(self, user_name: str, client_id: str) -> float | None:
        return self.quota_limit(self.quota_key(sanitize(user_name), client_id))

    # -- recording ---------------------------------------------------------------------------

    def _rate(self, key: QuotaKey) -> SampledRate:
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = SampledRate(self.window.num_samples,
                                                  self.window.window_seconds * 1000)
        return rate

    def record_and_get_throttle_time_ms(self, user_name: str, client_id: str, value: float,
                                        now_ms: float) -> int:
        """Record ``value`` against the client's rate; the throttle time (0 within quota)."""
        if not self.enabled:
            return 0
        key = self.quota_key(sanitize(user_name), client_id)
        bound = self.quota_limit(key)
        rate = self._rate(key)
        rate.record(value, now_ms)
        if bound is None:
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            throttle = self.max_throttle_time_ms or self.window.window_seconds * 1000
        else:
            throttle = throttle_time_ms(measured, bound, rate.window_size_ms(now_ms))
        if self.max_throttle_time_ms is not None:
            throttle = min(throttle, self.max_throttle_time_ms)
        return max(throttle, 0)

    def unrecord(self, user_name: str, client_id: str, value: float, now_ms: float) -> None:
        """Take back a recorded value (a throttled Fetch is answered without its data)."""
        if self.enabled:
            self._rate(self.quota_key(sanitize(user_name), client_id)).record(-value, now_ms)

    def max_value_in_quota_window(self, user_name: str, client_id: str) -> float:
        """What the quota allows over the window (Kafka's getMaxValueInQuotaWindow: a Fetch
        never asks for more); infinity without a quota."""
        if not self.enabled:
            return math.inf
        quota = self.quota_for(user_name, client_id)
        if quota is None:
            return math.inf
        return quota * (self.window.num_samples - 1) * self.window.window_seconds


class QuotaManagers:
    """The broker's three client quota managers (Kafka's QuotaFactory.QuotaManagers), fed
    from the ``clients`` and ``users`` config entities."""

    def __init__(self, window: QuotaWindow = QuotaWindow()) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, window)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, window)
        self.request = ClientQuotaManager(QuotaType.REQUEST, window)
        self.request.max_throttle_time_ms = window.window_seconds * 1000
        self._by_type = {QuotaType.PRODUCE: self.produce, QuotaType.FETCH: self.fetch,
                         QuotaType.REQUEST: self.request}

    @property
    def any_enabled(self) -> bool:
        """Whether some client quota is set (else nothing is recorded or throttled)."""
        return self.request.enabled or self.produce.enabled or self.fetch.enabled

    def update(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        """An entity's configs (from its znode) as its quotas: Kafka's QuotaConfigHandler;
        a quota absent from ``configs`` is removed. Values that are not numbers are
        ignored with an error logged."""
        for quota_type, manager in self._by_type.items():
            text = configs.get(quota_type.value)
            value: float | None = None
            if text is not None:
                try:
                    value = float(text)
                except ValueError:
                    logger.error("Ignoring %s=%r of %s: not a number", quota_type.value, text,
                                 entity)
            if manager.quotas.get(entity) != value:
                manager.update_quota(entity, value)


NO_QUOTAS: Final = QuotaManagers()
"""The quota managers of a request handler given none: no quota is ever set on them."""


def entity_from_path(entity_path: str) -> QuotaEntity | None:
    """The quota entity of a config entity path (``clients/<c>``, ``users/<u>``,
    ``users/<u>/clients/<c>``, names sanitized as in the znode paths); None for any other
    path. The user stays sanitized, the client id is read back (as Kafka's
    QuotaConfigHandler keys them)."""
    parts = entity_path.split("/")
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, desanitize(parts[1]))
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(parts[1], None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(parts[1], desanitize(parts[3]))
    return None
