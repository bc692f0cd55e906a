"""Bad input is refused with Kafka's error and leaves the log untouched."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from twisted.internet.task import Clock

from kafkaclone.common.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedForMessageFormatError,
)
from kafkaclone.log.common import AppendOrigin
from kafkaclone.log.log import Log
from kafkaclone.protocol.records import build_legacy_message_set, build_record_batch
from tests.log.conftest import START_SECONDS, LogFactory, make_batch

T0 = int(START_SECONDS * 1000)


def flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0x40
    return bytes(out)


def set_int32(data: bytes, position: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">i", out, position, value)
    return bytes(out)


def assert_refused(log: Log, data: bytes, error: type[KafkaError], code: int,
                   **kwargs: object) -> None:
    before = (log.log_end_offset, log.size, log.leader_epoch_cache.epoch_entries)
    with pytest.raises(error) as excinfo:
        log.append(data, leader_epoch=5, **kwargs)  # type: ignore[arg-type]
    assert excinfo.value.code == code
    assert (log.log_end_offset, log.size, log.leader_epoch_cache.epoch_entries) == before


@pytest.fixture
def log(open_log: LogFactory) -> Log:
    log = open_log({"max.message.bytes": 2000, "segment.bytes": 5000,
                    "message.timestamp.difference.max.ms": 60_000})
    log.append(make_batch(1), leader_epoch=1)
    return log


GOOD = make_batch(3)

BAD_INPUTS: list[tuple[str, Callable[[], bytes], type[KafkaError], int]] = [
    ("crc", lambda: flip(GOOD, 70), CorruptMessageError, 2),
    ("crc of the header", lambda: flip(GOOD, 30), CorruptMessageError, 2),
    ("crc of the second batch", lambda: GOOD + flip(GOOD, 80), CorruptMessageError, 2),
    ("partial batch", lambda: GOOD[:-1], CorruptMessageError, 2),
    ("trailing bytes", lambda: GOOD + b"\x00" * 5, CorruptMessageError, 2),
    ("length too small", lambda: set_int32(GOOD, 8, 10), CorruptMessageError, 2),
    ("unknown magic", lambda: GOOD[:16] + b"\x07" + GOOD[17:], CorruptMessageError, 2),
    ("batch over max.message.bytes", lambda: make_batch(1, value_size=2100),
     MessageTooLargeError, 10),
    ("append over segment.bytes", lambda: make_batch(1, value_size=1500) * 4,
     RecordListTooLargeError, 18),
    ("timestamp too old", lambda: make_batch(1, timestamp=T0 - 60_001),
     InvalidTimestampError, 32),
    ("timestamp too new", lambda: make_batch(1, timestamp=T0 + 60_001),
     InvalidTimestampError, 32),
    ("LogAppendTime from a producer",
     lambda: make_batch(1, timestamp_type=1), InvalidTimestampError, 32),
    ("base offset not 0", lambda: make_batch(1, base_offset=7), InvalidRecordError, 87),
    ("count does not match lastOffsetDelta", lambda: _bad_count(), InvalidRecordError, 87),
    ("control batch from a client", lambda: make_batch(1, is_control=True),
     InvalidRecordError, 87),
    ("producer id without sequence",
     lambda: make_batch(1, producer_id=5, producer_epoch=0, base_sequence=-1),
     InvalidRecordError, 87),
    ("legacy message format",
     lambda: build_legacy_message_set([(None, b"v")], magic=1),
     UnsupportedForMessageFormatError, 43),
]


def _bad_count() -> bytes:
    """recordsCount = 4 while lastOffsetDelta = 2: not covered by the CRC check since the
    CRC is recomputed after the change."""
    from crc32c import crc32c

    out = bytearray(GOOD)
    struct.pack_into(">i", out, 57, 4)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize(("name", "build", "error", "code"), BAD_INPUTS,
                         ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_is_refused_and_nothing_appended(
    log: Log, name: str, build: Callable[[], bytes], error: type[KafkaError], code: int
) -> None:
    assert_refused(log, build(), error, code)


def test_a_bad_batch_after_good_ones_appends_none(log: Log) -> None:
    assert_refused(log, GOOD + GOOD + flip(GOOD, 70), CorruptMessageError, 2)


def test_timestamps_unchecked_under_log_append_time(open_log: LogFactory) -> None:
    log = open_log({"message.timestamp.type": "LogAppendTime",
                    "message.timestamp.difference.max.ms": 1})
    assert log.append(make_batch(1, timestamp=0), leader_epoch=0).log_append_time == T0


def test_no_timestamp_is_accepted(log: Log) -> None:
    log.append(make_batch(1, timestamp=-1), leader_epoch=1)


def test_coordinator_may_write_control_batches(log: Log, clock: Clock) -> None:
    marker = build_record_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", None, T0)],
                                is_control=True, is_transactional=True, producer_id=9,
                                producer_epoch=0, base_sequence=-1)
    info = log.append(marker, leader_epoch=1, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 1


def test_empty_append_is_a_no_op(log: Log) -> None:
    info = log.append(b"", leader_epoch=1)
    assert info.record_count == 0 and log.log_end_offset == 1
