"""Consumer group partition assignors, as Kafka 2.8 defines them (the group leader runs
one on every member's subscription): ``range``, ``roundrobin`` and ``sticky``.

Members are ordered by member id, as Kafka's assignors order them, so a group mixing
these consumers with the Java client or librdkafka gets the same split from any leader.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafkaclone.clients.config import ConfigException

Assignment = dict[str, dict[str, list[int]]]
"""member id -> topic -> partitions."""


@dataclass
class Subscription:
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)
    """What the member held before this rebalance (sticky)."""
    generation: int = -1


class RangeAssignor:
    """Per topic: the partitions in order, split into contiguous ranges; the first
    ``partitions % members`` members take one more."""

    name = "range"

    def assign(self, partitions: Mapping[str, int], members: Mapping[str, Subscription]
               ) -> Assignment:
        out: Assignment = {m: {} for m in members}
        for topic in sorted(partitions):
            subscribed = sorted(m for m, s in members.items() if topic in s.topics)
            if not subscribed:
                continue
            count = partitions[topic]
            per, extra = divmod(count, len(subscribed))
            for i, member in enumerate(subscribed):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                if length:
                    out[member][topic] = list(range(start, start + length))
        return out


class RoundRobinAssignor:
    """Every partition of every subscribed topic, sorted, dealt to the members in turn
    (skipping members not subscribed to the partition's topic)."""

    name = "roundrobin"

    def assign(self, partitions: Mapping[str, int], members: Mapping[str, Subscription]
               ) -> Assignment:
        out: Assignment = {m: {} for m in members}
        ordered = sorted(members)
        if not ordered:
            return out
        turn = 0
        for topic in sorted(partitions):
            for partition in range(partitions[topic]):
                for _ in range(len(ordered)):
                    member = ordered[turn % len(ordered)]
                    turn += 1
                    if topic in members[member].topics:
                        out[member].setdefault(topic, []).append(partition)
                        break
        return out


class StickyAssignor:
    """Balanced (partition counts differ by at most one among members with the same
    subscription) while moving as few partitions as possible: each member keeps what it
    owned, unowned partitions go to the least loaded, then partitions move from the most
    to the least loaded member until balanced. A partition two members claim goes to the
    one with the higher generation."""

    name = "sticky"

    def assign(self, partitions: Mapping[str, int], members: Mapping[str, Subscription]
               ) -> Assignment:
        valid = {(t, p) for t, n in partitions.items() for p in range(n)}
        owner: dict[tuple[str, int], str] = {}
        claims = sorted(members.items(), key=lambda item: (item[1].generation, item[0]))
        for member, sub in claims:
            for topic, owned in sub.owned.items():
                for p in owned:
                    if (topic, p) in valid and topic in sub.topics:
                        owner[(topic, p)] = member
        held: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
        for tp, member in owner.items():
            held[member].add(tp)
        for tp in sorted(valid - set(owner)):
            eligible = [m for m in members if tp[0] in members[m].topics]
            if eligible:
                chosen = min(eligible, key=lambda m: (len(held[m]), m))
                held[chosen].add(tp)
        for _ in range(len(valid) + 1):
            moved = False
            for heavy in sorted(held, key=lambda m: (-len(held[m]), m)):
                for tp in sorted(held[heavy]):
                    eligible = [m for m in members
                                if tp[0] in members[m].topics and m != heavy]
                    if not eligible:
                        continue
                    light = min(eligible, key=lambda m: (len(held[m]), m))
                    if len(held[heavy]) - len(held[light]) > 1:
                        held[heavy].remove(tp)
                        held[light].add(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                break
        out: Assignment = {m: {} for m in members}
        for member, tps in held.items():
            for topic, p in sorted(tps):
                out[member].setdefault(topic, []).append(p)
        return out


class Assignor(Protocol):
    name: str

    def assign(self, partitions: Mapping[str, int], members: Mapping[str, Subscription]
               ) -> Assignment: ...


ASSIGNORS: dict[str, Callable[[], Assignor]] = {
    "range": RangeAssignor, "roundrobin": RoundRobinAssignor, "sticky": StickyAssignor}
_CLASS_NAMES = {"org.apache.kafka.clients.consumer.rangeassignor": "range",
                "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
                "org.apache.kafka.clients.consumer.stickyassignor": "sticky"}


def assignor_names(strategies: Sequence[str]) -> list[str]:
    """The ``partition.assignment.strategy`` list as protocol names (Kafka's class names
    accepted)."""
    out = []
    for item in strategies:
        name = _CLASS_NAMES.get(item.strip().lower(), item.strip().lower())
        if name not in ASSIGNORS:
            raise ConfigException(
                f"Invalid value {item} for configuration partition.assignment.strategy: "
                f"one of {', '.join(ASSIGNORS)}")
        out.append(name)
    return out


# Kafka's StickyAssignor user data (StickyAssignorUserData V1, an unversioned struct):
# [topic string, partitions [int32]] then generation int32.

def encode_sticky_user_data(owned: Mapping[str, Sequence[int]], generation: int) -> bytes:
    out = bytearray(struct.pack(">i", len(owned)))
    for topic, parts in owned.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    out += struct.pack(">i", generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes | None) -> tuple[dict[str, list[int]], int]:
    if not data:
        return {}, -1
    try:
        pos = 0
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        owned: dict[str, list[int]] = {}
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = bytes(data[pos:pos + length]).decode()
            pos += length
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            owned[topic] = list(struct.unpack_from(f">{n}i", data, pos))
            pos += 4 * n
        generation = struct.unpack_from(">i", data, pos)[0] if pos + 4 <= len(data) else -1
        return owned, generation
    except (struct.error, UnicodeDecodeError):
        return {}, -1
