"""The records of ``__transaction_state``: Kafka 2.8's ``TransactionLog`` (its
TransactionLogKey / TransactionLogValue schemas, version 0).

Key, version 0::

    version int16 (0), transactional_id string

Value, version 0 (null for a tombstone: the id expired)::

    version int16 (0), producer_id int64, producer_epoch int16,
    transaction_timeout_ms int32, transaction_status int8,
    transaction_partitions nullable array of [topic string, partition_ids array of int32]
      (null in state Empty),
    transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

Strings are an int16 length then UTF-8; arrays an int32 count (-1: null).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from dataclasses import dataclass
from typing import Final

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionState,
    TxnTransitMetadata,
)

KEY_VERSION: Final = 0
VALUE_VERSION: Final = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")
"""version, producer_id, producer_epoch, transaction_timeout_ms, transaction_status."""
_VALUE_TAIL = struct.Struct(">qq")
"""transaction_last_update_timestamp_ms, transaction_start_timestamp_ms."""


class TransactionLogFormatError(ValueError):
    """A record of ``__transaction_state`` that is not a transaction log record."""


def _string(value: str) -> bytes:
    data = value.encode()
    return _INT16.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        try:
            values = fmt.unpack_from(self._data, self._pos)
        except struct.error as exc:
            raise TransactionLogFormatError(str(exc)) from exc
        self._pos += fmt.size
        return tuple(int(v) for v in values)

    def string(self) -> str:
        (length,) = self.unpack(_INT16)
        if length < 0 or self._pos + length > len(self._data):
            raise TransactionLogFormatError(f"bad string length {length}")
        text = self._data[self._pos:self._pos + length].decode()
        self._pos += length
        return text

    def end(self) -> None:
        if self._pos != len(self._data):
            raise TransactionLogFormatError(f"{len(self._data) - self._pos} trailing bytes")


def key_to_bytes(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + _string(transactional_id)


def read_txn_record_key(data: bytes) -> str:
    reader = _Reader(data)
    (version,) = reader.unpack(_INT16)
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"Unknown version {version} from the transaction log "
                                        "message key")
    transactional_id = reader.string()
    reader.end()
    return transactional_id


def value_to_bytes(transit: TxnTransitMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, transit.producer_id,
                                     transit.producer_epoch, transit.txn_timeout_ms,
                                     transit.txn_state.value))
    if transit.txn_state is TransactionState.EMPTY:
        if transit.topic_partitions:
            raise ValueError(f"Transaction is not expected to have any partitions since its "
                             f"state is Empty: {sorted(map(str, transit.topic_partitions))}")
        out += _INT32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in sorted(transit.topic_partitions):
            by_topic[tp.topic].append(tp.partition)
        out += _INT32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic)
            out += _INT32.pack(len(partitions))
            for partition in partitions:
                out += _INT32.pack(partition)
    out += _VALUE_TAIL.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    return bytes(out)


@dataclass(frozen=True)
class TransactionLogRecord:
    """A decoded record: ``value`` None for a tombstone."""

    transactional_id: str
    value: TxnTransitMetadata | None


def read_txn_record_value(data: bytes) -> TxnTransitMetadata:
    reader = _Reader(data)
    version, producer_id, producer_epoch, timeout_ms, status = reader.unpack(_VALUE_HEAD)
    if version != VALUE_VERSION:
        raise TransactionLogFormatError(f"Unknown version {version} from the transaction log "
                                        "message value")
    try:
        state = TransactionState(status)
    except ValueError as exc:
        raise TransactionLogFormatError(f"Unknown transaction status {status}") from exc
    partitions: set[TopicPartition] = set()
    (count,) = reader.unpack(_INT32)
    for _ in range(max(count, 0)):
        topic = reader.string()
        (partition_count,) = reader.unpack(_INT32)
        for _ in range(max(partition_count, 0)):
            (partition,) = reader.unpack(_INT32)
            partitions.add(TopicPartition(topic, partition))
    last_update, start = reader.unpack(_VALUE_TAIL)
    reader.end()
    return TxnTransitMetadata(producer_id=producer_id, last_producer_id=NO_PRODUCER_ID,
                              producer_epoch=producer_epoch,
                              last_producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=timeout_ms,
                              txn_state=state, topic_partitions=frozenset(partitions),
                              txn_start_timestamp=start, txn_last_update_timestamp=last_update)


def read_txn_record(key: bytes | None, value: bytes | None) -> TransactionLogRecord:
    if key is None:
        raise TransactionLogFormatError("a transaction log record without a key")
    transactional_id = read_txn_record_key(key)
    return TransactionLogRecord(transactional_id,
                                None if value is None else read_txn_record_value(value))
