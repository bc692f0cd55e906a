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
from crc32c import crc32c

from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.records import build_record_batch

IN_FLIGHT = 5
PRODUCE_VERSION = 8
INIT_PRODUCER_ID_VERSION = 1
CLIENT_ID = "bench-batch-load"
TIMEOUT_S = 120.0
"""A round that has not finished by then stops and fails."""

# Byte positions in a v2 batch header.
_CRC = slice(17, 21)
_ATTRIBUTES = 21
_PRODUCER_ID = slice(43, 51)
_PRODUCER_EPOCH = slice(51, 53)
_BASE_SEQUENCE = slice(53, 57)


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


def template_batch(records: int, value_bytes: int = 100) -> bytes:
    """One uncompressed batch of ``records`` values of ``value_bytes``, no producer id."""
    now = int(time.time() * 1000)
    return build_record_batch([(None, b"x" * value_bytes, None, now)
                               for _ in range(records)])


def stamped(template: bytes, producer_id: int, epoch: int, sequence: int) -> bytes:
    """``template`` with a producer id, epoch and base sequence, and its CRC redone (the CRC
    covers the batch from its attributes on)."""
    batch = bytearray(template)
    batch[_PRODUCER_ID] = producer_id.to_bytes(8, "big", signed=True)
    batch[_PRODUCER_EPOCH] = epoch.to_bytes(2, "big", signed=True)
    batch[_BASE_SEQUENCE] = sequence.to_bytes(4, "big", signed=True)
    batch[_CRC] = crc32c(memoryview(batch)[_ATTRIBUTES:]).to_bytes(4, "big")
    return bytes(batch)


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


def _produce_frame(correlation_id: int, topic: str, batches: dict[int, bytes]) -> bytes:
    request = api.APIS[ApiKey.PRODUCE].request
    structs = request.structs
    body = request.cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        structs["TopicProduceData"](name=topic, partition_data=[
            structs["PartitionProduceData"](index=index, records=batch)
            for index, batch in batches.items()])])
    return api.encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, correlation_id, CLIENT_ID,
                              body)


async def _connection(leader: Leader, topic: str, template: bytes, requests: int,
                      producer: tuple[int, int] | None, deadline: float) -> None:
    """``requests`` Produce requests to one leader, at most IN_FLIGHT unanswered."""
    producer_id, epoch = producer if producer is not None else (-1, -1)
    per_batch = int.from_bytes(template[57:61], "big")
    reader, writer = await asyncio.open_connection(leader.host, leader.port)
    sent = answered = 0
    try:
        while answered < requests:
            while sent < requests and sent - answered < IN_FLIGHT:
                sequence = sent * per_batch if producer is not None else -1
                batches = {p: stamped(template, producer_id, epoch, sequence)
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


async def _round(found: list[Leader], topic: str, template: bytes, requests: int,
                 idempotent: bool) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    producer = (await init_producer_id(found[0].host, found[0].port) if idempotent
                else None)
    await asyncio.gather(*(_connection(leader, topic, template, requests, producer,
                                       deadline) for leader in found))


def produce_round(found: list[Leader], topic: str, template: bytes, records: int,
                  idempotent: bool) -> float:
    """About ``records`` records (whole requests) sent and acknowledged: records/s."""
    partitions = sum(len(leader.partitions) for leader in found)
    per_batch = int.from_bytes(template[57:61], "big")
    requests = max(1, records // (partitions * per_batch))
    started = time.perf_counter()
    asyncio.run(_round(found, topic, template, requests, idempotent))
    return requests * partitions * per_batch / (time.perf_counter() - started)
