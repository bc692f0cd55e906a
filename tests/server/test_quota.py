"""Client quota managers (Kafka's ClientQuotaManager): the sampled rate, the throttle time,
the resolution order of the quota entities, and a throttled connection staying muted.

Time is given explicitly (milliseconds), so every number here is exact.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from kafkaclone.network.socket_server import ConnectionInfo, KafkaServerProtocol
from kafkaclone.server.quota import (
    DEFAULT_ENTITY,
    ClientQuotaManager,
    QuotaEntity,
    QuotaKey,
    QuotaManagers,
    QuotaType,
    QuotaWindow,
    SampledRate,
    entity_from_path,
    throttle_time_ms,
)

pytestmark = pytest.mark.timeout(30)


def test_a_new_rate_counts_at_least_the_full_window() -> None:
    rate = SampledRate(num_samples=11, window_ms=1000)
    rate.record(1000, now_ms=0)
    # 10 full windows at least: 1000 bytes over 10 s.
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)


def test_old_samples_expire() -> None:
    rate = SampledRate(num_samples=3, window_ms=1000)
    rate.record(3000, now_ms=0)
    assert rate.measure(500) == pytest.approx(3000 / 2.5)
    # After num_samples windows the sample is gone.
    assert rate.measure(3000) == 0.0


def test_throttle_time_is_kafkas() -> None:
    # (rate - bound) / bound * window, rounded.
    assert throttle_time_ms(rate=2000.0, bound=1000.0, window_ms=10_000) == 10_000
    assert throttle_time_ms(rate=1100.0, bound=1000.0, window_ms=10_000) == 1000


def test_a_producer_over_its_quota_is_throttled_until_its_rate_is_back() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, QuotaWindow(11, 1))
    manager.update_quota(QuotaEntity(None, "p"), 1000.0)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 5000, 0) == 0
    # 15000 bytes over 10.1 s (10 full windows at least, plus the 100 ms elapsed): its
    # excess over 1000 B/s is 4900 bytes, 4.9 s at the quota.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 10_000, 100) == 4900
    # Another client id has no quota.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "q", 10**9, 100) == 0


def test_no_quota_records_nothing() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    assert not manager.enabled
    assert manager.record_and_get_throttle_time_ms("u", "c", 10**12, 0) == 0
    assert manager.max_value_in_quota_window("u", "c") == float("inf")


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    managers = QuotaManagers(QuotaWindow(11, 1))
    managers.update(QuotaEntity(None, "c"), {"request_percentage": "1"})
    assert managers.request.record_and_get_throttle_time_ms("u", "c", 10_000.0, 0) == 1000


@pytest.mark.parametrize(("quotas", "user", "client", "key", "limit"), [
    ({QuotaEntity("alice", "app"): 1.0, QuotaEntity("alice", None): 2.0},
     "alice", "app", QuotaKey("alice", "app"), 1.0),
    ({QuotaEntity("alice", DEFAULT_ENTITY): 1.0, QuotaEntity("alice", None): 2.0},
     "alice", "app", QuotaKey("alice", "app"), 1.0),
    ({QuotaEntity("alice", None): 2.0, QuotaEntity(None, "app"): 3.0},
     "alice", "app", QuotaKey("alice", ""), 2.0),
    ({QuotaEntity(DEFAULT_ENTITY, "app"): 4.0, QuotaEntity(None, "app"): 3.0},
     "alice", "app", QuotaKey("alice", "app"), 4.0),
    ({QuotaEntity(DEFAULT_ENTITY, DEFAULT_ENTITY): 5.0, QuotaEntity(DEFAULT_ENTITY, None): 6.0},
     "alice", "app", QuotaKey("alice", "app"), 5.0),
    ({QuotaEntity(DEFAULT_ENTITY, None): 6.0, QuotaEntity(None, "app"): 3.0},
     "alice", "app", QuotaKey("alice", ""), 6.0),
    ({QuotaEntity(None, "app"): 3.0, QuotaEntity(None, DEFAULT_ENTITY): 7.0},
     "alice", "app", QuotaKey("", "app"), 3.0),
    ({QuotaEntity(None, DEFAULT_ENTITY): 7.0}, "alice", "other", QuotaKey("", "other"), 7.0),
    ({QuotaEntity("bob", None): 2.0}, "alice", "app", QuotaKey("", "app"), None),
])
def test_resolution_follows_kafkas_order(quotas: dict[QuotaEntity, float], user: str,
                                         client: str, key: QuotaKey,
                                         limit: float | None) -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    for entity, value in quotas.items():
        manager.update_quota(entity, value)
    assert manager.quota_key(user, client) == key
    assert manager.quota_limit(key) == limit


def test_user_quota_is_shared_by_its_clients() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE, QuotaWindow(11, 1))
    manager.update_quota(QuotaEntity("alice", None), 1000.0)
    assert manager.record_and_get_throttle_time_ms("alice", "a", 10_000, 0) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 10_000, 0) > 0


def test_entities_from_config_paths() -> None:
    assert entity_from_path("clients/my%20app") == QuotaEntity(None, "my app")
    assert entity_from_path("users/<default>") == QuotaEntity(DEFAULT_ENTITY, None)
    assert entity_from_path("users/alice/clients/<default>") == QuotaEntity("alice",
                                                                            DEFAULT_ENTITY)
    assert entity_from_path("topics/t") is None


def test_quota_configs_update_and_remove() -> None:
    managers = QuotaManagers()
    entity = QuotaEntity(None, "c")
    managers.update(entity, {"producer_byte_rate": "1024", "consumer_byte_rate": "2048",
                             "SCRAM-SHA-256": "salt=..."})
    assert managers.produce.quotas == {entity: 1024.0}
    assert managers.fetch.quotas == {entity: 2048.0}
    managers.update(entity, {"consumer_byte_rate": "2048"})
    assert not managers.produce.enabled
    assert managers.fetch.enabled


class _Dispatcher:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def dispatch(self, connection: ConnectionInfo,
                 frame: bytes | bytearray) -> Deferred[bytes | None]:
        self.frames.append(bytes(frame))
        assert connection.throttle is not None
        connection.throttle(500)
        done: Deferred[bytes | None] = Deferred()
        done.callback(b"answer")
        return done


def test_a_throttled_connection_is_not_read_until_the_throttle_time_passed() -> None:
    clock = Clock()
    dispatcher = _Dispatcher()
    conn = KafkaServerProtocol(dispatcher, 1 << 20, "c-1", clock=clock)
    transport = StringTransport()
    conn.makeConnection(transport)
    frame = b"\x00\x00\x00\x02ab"
    conn.dataReceived(frame + frame)
    # The first request is answered at once; the second waits for the throttle to end.
    assert dispatcher.frames == [b"ab"]
    assert transport.value() == b"\x00\x00\x00\x06answer"
    assert conn.muted and transport.producerState == "paused"
    clock.advance(0.499)
    assert dispatcher.frames == [b"ab"]
    clock.advance(0.002)
    assert dispatcher.frames == [b"ab", b"ab"]
