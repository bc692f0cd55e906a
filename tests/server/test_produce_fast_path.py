"""Produce's one-partition fast path (``produce_one_partition``) answers exactly as the
handler: every request is sent to two brokers with the same logs and clock, one whose
dispatcher has the fast path and one whose has not, and the answers (the response bytes,
or the connection closed with the same message) and the logs must be the same. Each case
also says whether the fast path served it or declined it to the handler."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from kafkaclone.network.socket_server import response_bytes
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, build_record_batch
from kafkaclone.server.handlers.registry import DECLINED, RequestContext, load_handlers
from kafkaclone.server.quota import QuotaEntity, QuotaManagers, QuotaWindow
from kafkaclone.server.request_handler import RequestHandler
from tests.server.data_path_helpers import (
    CONNECTION,
    START_MS,
    DataPathBroker,
    batch,
    close_broker,
    fetch_request,
    make_broker,
    produce_errors,
    produce_request,
)

pytestmark = pytest.mark.timeout(60)

NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, 2, 3, 6
REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 7, 19, 20
MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION, RECORD_LIST_TOO_LARGE = 10, 17, 18
INVALID_REQUIRED_ACKS, INVALID_TIMESTAMP, OUT_OF_ORDER_SEQUENCE_NUMBER = 21, 32, 45
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, UNSUPPORTED_COMPRESSION_TYPE = 53, 76
INVALID_RECORD = 87


class Pair:
    """Two brokers fed the same requests: ``fast`` with the fast path, ``general``
    without it."""

    def __init__(self, tmp_path: Path) -> None:
        self.fast = make_broker(tmp_path / "fast")
        self.general = make_broker(tmp_path / "general")
        handlers = load_handlers()
        produce = handlers[ApiKey.PRODUCE]
        fast_path = produce.fast
        assert fast_path is not None and produce.fast_versions == (3, 9)
        self.served: list[bool] = []

        def spy(ctx: RequestContext, frame: bytearray, position: int) -> Any:
            self.served.append(True)  # unless declined (a raise is an answer: closed)
            answer = fast_path(ctx, frame, position)
            self.served[-1] = answer is not DECLINED
            return answer

        self.fast_dispatcher = RequestHandler(
            self.fast, handlers={**handlers, ApiKey.PRODUCE: replace(produce, fast=spy)})
        self.general_dispatcher = RequestHandler(
            self.general, handlers={**handlers, ApiKey.PRODUCE: replace(produce, fast=None)})

    def both(self) -> tuple[DataPathBroker, DataPathBroker]:
        return self.fast, self.general

    def host(self, topic: str, partitions: list[int], **kwargs: Any) -> None:
        for broker in self.both():
            broker.host(topic, partitions, **kwargs)

    def send_frame(self, frame: bytes) -> tuple[Any, bool | None]:
        """The answer both gave (the response frame, None, or ("closed", why)) and whether
        the fast path served it (None: it was not tried)."""
        answers, served = self.start_frame(frame)
        return self.settle(answers), served

    def start_frame(self, frame: bytes) -> tuple[list[Deferred[Any]], bool | None]:
        """The request sent to both: their Deferred answers, and whether the fast path
        served it."""
        self.served.clear()
        # A copy each: the append assigns offsets in the frame's batch in place.
        answers = [dispatcher.dispatch(CONNECTION, bytearray(frame))
                   for dispatcher in (self.fast_dispatcher, self.general_dispatcher)]
        assert len(self.served) <= 1
        return answers, (self.served[0] if self.served else None)

    def settle(self, answers: list[Deferred[Any]]) -> Any:
        """The one answer both gave (they must have), the logs compared."""
        outcomes = []
        for result in answers:
            done: list[Any] = []
            result.addBoth(done.append)
            assert done, "the produce is still waiting"
            outcome = done[0]
            if isinstance(outcome, Failure):
                outcome = ("closed", str(outcome.value))
            elif outcome is not None:
                outcome = response_bytes(outcome)
            outcomes.append(outcome)
        assert outcomes[0] == outcomes[1]
        for log in self.fast.log_manager.all_logs():
            other = self.general.log_manager.get_log(log.topic_partition)
            assert other is not None
            assert (log.log_end_offset, log.high_watermark, log.size) == (
                other.log_end_offset, other.high_watermark, other.size)
        return outcomes[0]

    def produce(self, version: int, entries: Mapping[tuple[str, int], bytes | None], *,
                acks: int = 1, transactional_id: str | None = None, timeout_ms: int = 5000,
                trailing: bytes = b"") -> tuple[Any, bool | None]:
        answers, served = self.start(version, entries, acks=acks,
                                     transactional_id=transactional_id,
                                     timeout_ms=timeout_ms, trailing=trailing)
        return self.settle(answers), served

    def start(self, version: int, entries: Mapping[tuple[str, int], bytes | None], *,
              acks: int = 1, transactional_id: str | None = None, timeout_ms: int = 5000,
              trailing: bytes = b"") -> tuple[list[Deferred[Any]], bool | None]:
        body = produce_request(entries, acks=acks, timeout_ms=timeout_ms)
        body.transactional_id = transactional_id
        return self.start_frame(
            api.encode_request(ApiKey.PRODUCE, version, 7, "fast-path", body) + trailing)

    def decoded(self, version: int, answer: bytes) -> Any:
        correlation_id, response = api.decode_response(ApiKey.PRODUCE, version, answer)
        assert correlation_id == 7
        return response


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    p = Pair(tmp_path)
    yield p
    close_broker(p.fast)
    close_broker(p.general)


@pytest.mark.parametrize("version", range(3, 10))
def test_one_partition_served_byte_for_byte(pair: Pair, version: int) -> None:
    pair.host("t", [0])
    records = batch(b"a", b"b", timestamp=START_MS)
    for expected_offset in (0, 2, 4):
        answer, served = pair.produce(version, {("t", 0): records})
        assert served is True
        partition = pair.decoded(version, answer).responses[0].partition_responses[0]
        assert (partition.index, partition.error_code, partition.base_offset) == (
            0, NONE, expected_offset)


def test_log_append_time_served(pair: Pair) -> None:
    pair.host("t", [0], configs={"message.timestamp.type": "LogAppendTime"})
    answer, served = pair.produce(8, {("t", 0): batch(b"a", timestamp=START_MS - 5)})
    assert served is True
    partition = pair.decoded(8, answer).responses[0].partition_responses[0]
    assert partition.log_append_time_ms == START_MS


def test_acks_0_served_and_closed_on_error(pair: Pair) -> None:
    pair.host("t", [0])
    pair.host("f", [0], leader=2, replicas=(2, 1))
    assert pair.produce(8, {("t", 0): batch(b"a")}, acks=0) == (None, True)
    # Not the leader: found by the append, the fast path closes as the handler does.
    answer, served = pair.produce(8, {("f", 0): batch(b"a")}, acks=0)
    assert served is True and answer[0] == "closed" and "errors on f-0" in answer[1]
    # Unknown: declined before anything, the handler closes.
    answer, served = pair.produce(8, {("nope", 0): batch(b"a")}, acks=0)
    assert served is False and answer[0] == "closed"


@pytest.mark.parametrize("version", [3, 5, 8, 9])
def test_append_errors_answered_by_the_fast_path(pair: Pair, version: int) -> None:
    pair.host("f", [0], leader=2, replicas=(2, 1))
    pair.host("small", [0], configs={"max.message.bytes": "200"})
    pair.host("tiny-segments", [0], configs={"segment.bytes": "14"})
    pair.host("strict", [0], configs={"message.timestamp.difference.max.ms": "60000"})
    pair.host("__consumer_offsets", [0])
    pair.host("t", [0])
    corrupt = bytearray(batch(b"a", b"b"))
    corrupt[-1] ^= 0xFF
    shifted = bytearray(batch(b"a"))
    shifted[7] = 5  # baseOffset 5
    cases = {
        ("f", 0): (batch(b"a"), NOT_LEADER_OR_FOLLOWER),
        ("small", 0): (batch(b"x" * 300), MESSAGE_TOO_LARGE),
        ("tiny-segments", 0): (batch(b"x" * 300), RECORD_LIST_TOO_LARGE),
        ("strict", 0): (batch(b"a", timestamp=START_MS - 3_600_000), INVALID_TIMESTAMP),
        ("__consumer_offsets", 0): (batch(b"a"), INVALID_TOPIC_EXCEPTION),
        ("t", 0): (bytes(corrupt), CORRUPT_MESSAGE),
    }
    for tp, (records, error) in cases.items():
        answer, served = pair.produce(version, {tp: records})
        assert served is True
        assert produce_errors(pair.decoded(version, answer)) == {tp: error}
    answer, served = pair.produce(version, {("t", 0): bytes(shifted)})
    assert served is True
    assert produce_errors(pair.decoded(version, answer)) == {("t", 0): INVALID_RECORD}


def test_idempotent_batches_served_with_their_sequence_checks(pair: Pair) -> None:
    pair.host("t", [0])

    def idempotent(sequence: int) -> bytes:
        return build_record_batch([(None, b"v", None, START_MS)], producer_id=1000,
                                  producer_epoch=0, base_sequence=sequence)

    first, served = pair.produce(8, {("t", 0): idempotent(0)})
    assert served is True
    assert pair.produce(8, {("t", 0): batch(b"plain")})[1] is True
    duplicate, served = pair.produce(8, {("t", 0): idempotent(0)})
    assert served is True
    # Answered with the offset it got the first time.
    assert [pair.decoded(8, answer).responses[0].partition_responses[0].base_offset
            for answer in (first, duplicate)] == [0, 0]
    answer, served = pair.produce(8, {("t", 0): idempotent(5)})
    assert served is True
    assert produce_errors(pair.decoded(8, answer)) == {("t", 0): OUT_OF_ORDER_SEQUENCE_NUMBER}


@pytest.mark.parametrize("version", [7, 9])
def test_acks_all_served_when_the_high_watermark_passes(pair: Pair, version: int) -> None:
    pair.host("alone", [0])
    answer, served = pair.produce(version, {("alone", 0): batch(b"a")}, acks=-1)
    assert served is True  # the ISR is the leader alone: answered at once
    assert produce_errors(pair.decoded(version, answer)) == {("alone", 0): NONE}

    pair.host("t", [0], replicas=(1, 2), configs={"min.insync.replicas": "2"})
    answers, served = pair.start(version, {("t", 0): batch(b"a", b"b")}, acks=-1)
    assert served is True
    assert not any(answer.called for answer in answers)
    for broker in pair.both():  # the follower fetches the batch, then from its end
        broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 0}, replica_id=2))
        broker.call(ApiKey.FETCH, 11, fetch_request({("t", 0): 2}, replica_id=2))
    answer = pair.settle(answers)
    assert produce_errors(pair.decoded(version, answer)) == {("t", 0): NONE}


def test_acks_all_errors_served(pair: Pair) -> None:
    pair.host("slow", [0], replicas=(1, 2))
    answers, served = pair.start(8, {("slow", 0): batch(b"a")}, acks=-1, timeout_ms=1500)
    assert served is True
    for broker in pair.both():
        broker.advance_ms(1600)
    answer = pair.settle(answers)
    assert produce_errors(pair.decoded(8, answer)) == {("slow", 0): REQUEST_TIMED_OUT}
    pair.host("few", [0], replicas=(1, 2), isr=(1,), configs={"min.insync.replicas": "2"})
    answer, served = pair.produce(8, {("few", 0): batch(b"a")}, acks=-1)
    assert served is True
    assert produce_errors(pair.decoded(8, answer)) == {("few", 0): NOT_ENOUGH_REPLICAS}


def test_acks_all_isr_shrinks_below_min_insync_replicas(pair: Pair) -> None:
    pair.host("shrinks", [0], replicas=(1, 2), configs={"min.insync.replicas": "2"})
    answers, served = pair.start(8, {("shrinks", 0): batch(b"a")}, acks=-1,
                                 timeout_ms=60_000)
    assert served is True
    for broker in pair.both():  # the follower never fetches and leaves the ISR
        broker.advance_ms(10_001)
        broker.replica_manager.maybe_shrink_isr()
    answer = pair.settle(answers)
    assert produce_errors(pair.decoded(8, answer)) == {
        ("shrinks", 0): NOT_ENOUGH_REPLICAS_AFTER_APPEND}


@pytest.mark.parametrize("version", [8, 9])
def test_declined_shapes_go_to_the_handler(pair: Pair, version: int) -> None:
    pair.host("t", [0, 1])
    pair.host("u", [0])
    transactional = build_record_batch([(None, b"v", None, START_MS)], producer_id=1000,
                                       producer_epoch=0, base_sequence=0,
                                       is_transactional=True)
    v = version
    declined: list[tuple[int, dict[tuple[str, int], bytes | None], dict[str, Any], int]] = [
        (v, {("t", 0): batch(b"a"), ("t", 1): batch(b"b")}, {}, NONE),
        (v, {("t", 0): batch(b"a"), ("u", 0): batch(b"b")}, {}, NONE),
        (v, {("t", 5): batch(b"a")}, {}, UNKNOWN_TOPIC_OR_PARTITION),
        (v, {("missing", 0): batch(b"a")}, {}, UNKNOWN_TOPIC_OR_PARTITION),
        (v, {("t", 0): batch(b"a") + batch(b"b")}, {}, INVALID_RECORD),
        (v, {("t", 0): b""}, {}, INVALID_RECORD),
        (v, {("t", 0): None}, {}, INVALID_RECORD),
        (6, {("t", 0): batch(b"a", codec=Codec.ZSTD)}, {}, UNSUPPORTED_COMPRESSION_TYPE),
        (v, {("t", 0): transactional}, {}, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        (v, {("t", 0): batch(b"a")}, {"acks": 2}, INVALID_REQUIRED_ACKS),
        (v, {("t", 0): batch(b"a")}, {"transactional_id": "txn"}, NONE),
        (v, {("t", 0): batch(b"a")}, {"trailing": b"\0\0"}, NONE),
    ]
    for version, entries, options, error in declined:
        answer, served = pair.produce(version, entries, **options)
        assert served is False, (entries, options)
        assert set(produce_errors(pair.decoded(version, answer)).values()) == {error}


@pytest.mark.parametrize("version", [0, 2])
def test_legacy_versions_not_tried(pair: Pair, version: int) -> None:
    pair.host("t", [0])
    answer, served = pair.produce(version, {("t", 0): batch(b"a")})  # appended as it is
    assert served is None
    assert produce_errors(pair.decoded(version, answer)) == {("t", 0): NONE}


def test_not_tried_with_an_authorizer(pair: Pair) -> None:
    class AllowAll:
        def authorize(self, *args: Any) -> bool:
            return True

    pair.host("t", [0])
    for broker in pair.both():
        broker.authorizer = AllowAll()
    answer, served = pair.produce(8, {("t", 0): batch(b"a")})
    assert served is False
    assert produce_errors(pair.decoded(8, answer)) == {("t", 0): NONE}


def test_not_tried_with_a_client_quota(pair: Pair) -> None:
    pair.host("t", [0])
    for dispatcher in (pair.fast_dispatcher, pair.general_dispatcher):
        dispatcher.quotas = QuotaManagers(QuotaWindow(11, 1))  # one each: they record
        dispatcher.quotas.update(QuotaEntity(None, "fast-path"), {"producer_byte_rate": "10"})
    answer, served = pair.produce(8, {("t", 0): batch(b"a" * 200)})
    assert served is None
    assert produce_errors(pair.decoded(8, answer)) == {("t", 0): NONE}
    # Throttled: the handler recorded the bytes against the client's quota.
    assert pair.decoded(8, answer).throttle_time_ms > 0
