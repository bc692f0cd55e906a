"""The read_committed consumer's filter (Kafka's Fetcher): a fetch answer's batches minus
those of its aborted transactions, by producer id and first offset; and the choice of the
replica to fetch from (KIP-392)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from kafkaclone.clients import Consumer
from kafkaclone.clients.consumer import drop_aborted_batches
from kafkaclone.clients.network import BrokerMetadata
from kafkaclone.clients.subscription_state import TopicPartitionState
from kafkaclone.protocol.records import ControlRecordType, iter_batches
from kafkaclone.protocol.records.batch import (
    build_end_transaction_marker_batch,
    build_record_batch,
)
from kafkaclone.protocol.records.columnar import decode_columns

pytestmark = pytest.mark.timeout(30)


def data(offset: int, value: bytes, producer_id: int = -1) -> bytes:
    return build_record_batch([(None, value)], base_offset=offset, producer_id=producer_id,
                              producer_epoch=0 if producer_id >= 0 else -1,
                              base_sequence=0 if producer_id >= 0 else -1,
                              is_transactional=producer_id >= 0)


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_end_transaction_marker_batch(kind, producer_id=producer_id,
                                              producer_epoch=0, coordinator_epoch=0,
                                              base_offset=offset)


def aborted(producer_id: int, first_offset: int) -> SimpleNamespace:
    return SimpleNamespace(producer_id=producer_id, first_offset=first_offset)


def values(raw: memoryview) -> list[bytes | None]:
    return [row[4] for row in decode_columns(raw).rows()]


def test_aborted_batches_are_dropped_until_their_producers_abort_marker() -> None:
    raw = memoryview(b"".join([
        data(0, b"plain-0"),
        data(1, b"a-1", producer_id=7),        # aborted below
        data(2, b"b-2", producer_id=8),        # committed
        data(3, b"a-3", producer_id=7),
        marker(4, 7, ControlRecordType.ABORT),
        marker(5, 8, ControlRecordType.COMMIT),
        data(6, b"a-6", producer_id=7),        # a later transaction of 7: committed
        data(7, b"c-7", producer_id=9),        # 9's aborted transaction starts here
        marker(8, 7, ControlRecordType.COMMIT),
        marker(9, 9, ControlRecordType.ABORT),
    ]))
    kept = drop_aborted_batches(raw, [aborted(9, 7), aborted(7, 1)])
    assert values(kept) == [b"plain-0", b"b-2", b"a-6"]
    # Control batches stay, so the next fetch offset is past every marker.
    assert [b.base_offset for b in iter_batches(kept, allow_partial_tail=False)][-1] == 9
    assert values(drop_aborted_batches(raw, [])) == [
        b"plain-0", b"a-1", b"b-2", b"a-3", b"a-6", b"c-7"]


def test_an_aborted_transaction_starting_after_the_fetch_drops_nothing_before_it() -> None:
    raw = memoryview(data(0, b"x-0", producer_id=3) + data(1, b"x-1", producer_id=3))
    assert values(drop_aborted_batches(raw, [aborted(3, 1)])) == [b"x-0"]


def test_the_read_replica_is_the_preferred_one_while_fresh_and_known() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "client.rack": "r2"})
    try:
        consumer.metadata.brokers = {b: BrokerMetadata(b, "127.0.0.1", 1) for b in (1, 2)}
        state = TopicPartitionState()
        assert consumer._select_read_replica(state, 1) == 1
        state.preferred_read_replica, state.preferred_read_replica_expires = \
            2, time.monotonic() + 60
        assert consumer._select_read_replica(state, 1) == 2
        del consumer.metadata.brokers[2]  # gone from the metadata: back to the leader
        assert consumer._select_read_replica(state, 1) == 1
        assert state.preferred_read_replica is None
        consumer.metadata.brokers[2] = BrokerMetadata(2, "127.0.0.1", 1)
        state.preferred_read_replica, state.preferred_read_replica_expires = \
            2, time.monotonic() - 1  # expired (metadata.max.age.ms)
        assert consumer._select_read_replica(state, 1) == 1
    finally:
        consumer.close()
