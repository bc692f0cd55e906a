"""A producer whose own cost is nearly nothing, for measuring what idempotence costs the
brokers alone (``bench_idempotence.py``).

librdkafka spends more CPU per record with idempotence on, against any broker (against its
own mock cluster too), so on a 2-core machine its idempotent rate measures the client as
much as the brokers. This load sends the same pre-encoded record batch over and over, as the
Java producer sends: one connection per partition leader, each request carrying one batch
for every partition that broker leads, at most :data:`IN_FLIGHT` requests unanswered per
connection (the Java producer's default ``max.in.flight.requests.per.connection``, with
idempotence on or off), acks=all. In idempotent mode the load first takes a producer id
(InitProducerId) and numbers each partition's batches (baseSequence), as an idempotent
producer does; both modes rewrite each batch's sequence field and CRC before it is sent, so
they cost the client the same. Every answer is decoded and must carry no error.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from confluent_kafka import Producer

from kafkaclone.clients.records import finish_batch
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import Codec, build_record_batch
from kafkaclone.protocol.records.batch import RECORD_BATCH_OVERHEAD

IN_FLIGHT = 5
PRODUCE_VERSION = 8
INIT_PRODUCER_ID_VERSION = 1
CLIENT_ID = "bench-batch-load"
TIMEOUT_S = 120.0
"""A round that has not finished by then stops and fails."""


@dataclass(frozen=True)
class Leader:
    host: str
    port: int
    partitions: tuple[int, ...]


def leaders(bootstrap: str, topic: str) -> list[Leader]:
    """Each broker leading partitions of ``topic``, with those partitions."""
    metadata = Producer({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    led: dict[int, list[int]] = {}
    for partition in metadata.topics[topic].partitions.values():
        led.setdefault(partition.leader, []).append(partition.id)
    return [Leader(metadata.brokers[broker].host, metadata.brokers[broker].port,
                   tuple(sorted(partitions)))
            for broker, partitions in sorted(led.items())]


@dataclass(frozen=True)
class Records:
    """The encoded records of one batch, without the batch header."""

    body: bytes
    count: int
    timestamp: int


def template_records(count: int, value_bytes: int = 100) -> Records:
    """``count`` uncompressed values of ``value_bytes``, all with the current time."""
    now = int(time.time() * 1000)
    batch = build_record_batch([(None, b"x" * value_bytes, None, now) for _ in range(count)])
    return Records(batch[RECORD_BATCH_OVERHEAD:], count, now)


def stamped(records: Records, producer_id: int, epoch: int, sequence: int) -> bytearray:
    """The batch of ``records`` with a producer id, epoch and base sequence (the project's
    producer's header and CRC)."""
    return finish_batch(records.body, records.count, records.timestamp, records.timestamp,
                        Codec.NONE, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence)


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes
                    ) -> bytes:
    writer.write(len(frame).to_bytes(4, "big") + frame)
    return await _read_frame(reader)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    length = int.from_bytes(await reader.readexactly(4), "big")
    return await reader.readexactly(length)


async def init_producer_id(host: str, port: int) -> tuple[int, int]:
    """A new producer id and epoch from the broker at ``host:port``."""
    request = api.APIS[ApiKey.INIT_PRODUCER_ID].request
    body = request.cls(transactional_id=None, transaction_timeout_ms=60_000)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        answer = await _exchange(reader, writer, api.encode_request(
            ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, 0, CLIENT_ID, body))
    finally:
        writer.close()
        await writer.wait_closed()
    _, response = api.decode_response(ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION,
                                      answer)
    if response.error_code:
        raise RuntimeError(f"InitProducerId answered error {response.error_code}")
    return response.producer_id, response.producer_epoch


def _produce_frame(correlation_id: int, topic: str, batches: dict[int, bytearray]
                   ) -> bytes:
    request = api.APIS[ApiKey.PRODUCE].request
    structs = request.structs
    body = request.cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        structs["TopicProduceData"](name=topic, partition_data=[
            structs["PartitionProduceData"](index=index, records=batch)
            for index, batch in batches.items()])])
    return api.encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, CLIENT_ID,
                              body)


async def _connection(leader: Leader, topic: str, records: Records, requests: int,
                      producer: tuple[int, int] | None, deadline: float) -> None:
    """``requests`` Produce requests to one leader, at most IN_FLIGHT unanswered."""
    producer_id, epoch = producer if producer is not None else (-1, -1)
    reader, writer = await asyncio.open_connection(leader.host, leader.port)
    sent = answered = 0
    try:
        while answered < requests:
            while sent < requests and sent - answered < IN_FLIGHT:
                sequence = sent * records.count if producer is not None else -1
                batches = {p: stamped(records, producer_id, epoch, sequence)
                           for p in leader.partitions}
                frame = _produce_frame(sent, topic, batches)
                writer.write(len(frame).to_bytes(4, "big") + frame)
                sent += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{answered} of {requests} requests answered in "
                                   f"{TIMEOUT_S} s")
            answer = await asyncio.wait_for(_read_frame(reader), left)
            _, response = api.decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, answer)
            errors = {p.error_code for t in response.responses
                      for p in t.partition_responses} - {0}
            if errors:
                raise RuntimeError(f"Produce answered errors {errors}")
            answered += 1
    finally:
        writer.close()
        await writer.wait_closed()


async def _round(found: list[Leader], topic: str, records: Records, requests: int,
                 idempotent: bool) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    producer = (await init_producer_id(found[0].host, found[0].port) if idempotent
                else None)
    await asyncio.gather(*(_connection(leader, topic, records, requests, producer,
                                       deadline) for leader in found))


def produce_round(found: list[Leader], topic: str, records: Records, about: int,
                  idempotent: bool) -> tuple[int, float]:
    """About ``about`` records (whole requests of ``records`` per partition) sent and
    acknowledged: the records and the seconds it took."""
    partitions = sum(len(leader.partitions) for leader in found)
    requests = max(1, about // (partitions * records.count))
    started = time.perf_counter()
    asyncio.run(_round(found, topic, records, requests, idempotent))
    return requests * partitions * records.count, time.perf_counter() - started
