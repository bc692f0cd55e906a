"""Producer partitioners: Kafka's murmur2 of the key, sticky partitions for null keys
(KIP-480), round robin, librdkafka's consistent (CRC32) and random ones, or a callable.

``murmur2`` is the Java client's ``Utils.murmur2`` (seed 0x9747b28c, 32-bit arithmetic) and
a key's partition is ``(murmur2(key) & 0x7fffffff) % partitions``: the Java client's
DefaultPartitioner and librdkafka's ``murmur2_random`` put a key on the same partition.
"""

from __future__ import annotations

import itertools
import random
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kafkaclone.clients.config import ConfigException

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 hash of ``data`` (as an unsigned 32-bit int)."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length - length % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


Available = Callable[[], Sequence[int]]
"""The partitions of the topic that have a leader now (computed only when asked)."""


class Partitioner(Protocol):
    def partition(self, topic: str, key: bytes | None, partitions: int,
                  available: Available) -> int: ...

    def on_new_batch(self, topic: str, previous: int) -> None: ...


class StickyPartitionCache:
    """KIP-480: records without a key stick to one partition until its batch is sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sticky: dict[str, int] = {}
        self._left: dict[str, int] = {}
        """The partition each topic's last full batch went to (the next one avoids it)."""

    def partition(self, topic: str, partitions: int, available: Available) -> int:
        current = self._sticky.get(topic)
        if current is not None and current < partitions:
            return current
        return self.next_partition(topic, partitions, available(), self._left.get(topic))

    def next_partition(self, topic: str, partitions: int, available: Sequence[int],
                       previous: int | None) -> int:
        with self._lock:
            current = self._sticky.get(topic)
            if current is not None and current != previous and current < partitions:
                return current
            choices = [p for p in available if p < partitions] or list(range(partitions))
            if len(choices) > 1 and previous is not None:
                choices = [p for p in choices if p != previous] or choices
            chosen = random.choice(choices)
            self._sticky[topic] = chosen
            return chosen

    def forget(self, topic: str, previous: int) -> None:
        with self._lock:
            if self._sticky.get(topic) == previous:
                del self._sticky[topic]
                self._left[topic] = previous


class DefaultPartitioner:
    """murmur2 for keyed records; ``null_key``: "sticky" (Kafka 2.4+), "random" or
    "consistent" (librdkafka's murmur2 hashes an empty key)."""

    def __init__(self, null_key: str = "sticky") -> None:
        self.null_key = null_key
        self.sticky = StickyPartitionCache()

    def partition(self, topic: str, key: bytes | None, partitions: int,
                  available: Available) -> int:
        if key is None:
            if self.null_key == "sticky":
                return self.sticky.partition(topic, partitions, available)
            if self.null_key == "random":
                return random.choice(list(available()) or range(partitions))
            key = b""
        return murmur2_partition(key, partitions)

    def on_new_batch(self, topic: str, previous: int) -> None:
        """The batch of ``previous`` is full or sent: the next keyless record of the topic
        goes to another partition."""
        if self.null_key == "sticky":
            self.sticky.forget(topic, previous)


class RoundRobinPartitioner:
    """Kafka's RoundRobinPartitioner: every record to the next available partition."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def partition(self, topic: str, key: bytes | None, partitions: int,
                  available: Available) -> int:
        with self._lock:
            counter = self._counters.setdefault(topic, itertools.count())
            n = next(counter)
        live = available()
        if live:
            return live[n % len(live)]
        return n % partitions

    def on_new_batch(self, topic: str, previous: int) -> None:
        pass


class ConsistentPartitioner:
    """librdkafka's consistent(_random): CRC32 of the key (null keys random or hashed)."""

    def __init__(self, random_null: bool) -> None:
        self.random_null = random_null

    def partition(self, topic: str, key: bytes | None, partitions: int,
                  available: Available) -> int:
        if key is None and self.random_null:
            return random.choice(list(available()) or range(partitions))
        return zlib.crc32(key or b"") % partitions

    def on_new_batch(self, topic: str, previous: int) -> None:
        pass


class CallablePartitioner:
    """A user function ``(key, partition_count, available_partitions) -> partition``, or
    an object with Kafka's ``partition(topic, key, partitions, available)``."""

    def __init__(self, user: Any) -> None:
        self.user = user

    def partition(self, topic: str, key: bytes | None, partitions: int,
                  available: Available) -> int:
        if hasattr(self.user, "partition"):
            chosen = self.user.partition(topic, key, partitions, list(available()))
        else:
            chosen = self.user(key, partitions, list(available()))
        return int(chosen)

    def on_new_batch(self, topic: str, previous: int) -> None:
        hook: Callable[[str, int], None] | None = getattr(self.user, "on_new_batch", None)
        if hook is not None:
            hook(topic, previous)


NAMED: dict[str, Callable[[], Partitioner]] = {
    "murmur2_random": lambda: DefaultPartitioner("sticky"),
    "default": lambda: DefaultPartitioner("sticky"),
    "sticky": lambda: DefaultPartitioner("sticky"),
    "murmur2": lambda: DefaultPartitioner("consistent"),
    "round_robin": RoundRobinPartitioner,
    "roundrobin": RoundRobinPartitioner,
    "random": lambda: DefaultPartitioner("random"),
    "consistent": lambda: ConsistentPartitioner(False),
    "consistent_random": lambda: ConsistentPartitioner(True),
}


def make_partitioner(spec: Any) -> Partitioner:
    """The partitioner for the ``partitioner`` config: a name from ``NAMED``, Kafka's
    class names, a class, an object or a function."""
    if spec is None:
        return DefaultPartitioner("sticky")
    if isinstance(spec, str):
        name = spec.rsplit(".", 1)[-1].lower()
        aliases = {"defaultpartitioner": "murmur2_random",
                   "roundrobinpartitioner": "round_robin",
                   "uniformstickypartitioner": "sticky"}
        name = aliases.get(name, name)
        factory = NAMED.get(name)
        if factory is None:
            raise ConfigException(
                f"Invalid value {spec!r} for configuration partitioner: one of "
                f"{', '.join(sorted(NAMED))} or a callable")
        made: Partitioner = factory()
        return made
    if isinstance(spec, type):
        spec = spec()
    if callable(spec) or hasattr(spec, "partition"):
        return CallablePartitioner(spec)
    raise ConfigException(f"Invalid value {spec!r} for configuration partitioner")
