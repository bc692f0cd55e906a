"""The key order of the JSON objects Kafka writes to ZooKeeper.

Kafka builds its znode payloads as Scala or Java maps and hands them to Jackson, which writes
the keys in the map's iteration order. That order is not insertion order: it falls out of
each map implementation's hash table. To write byte-for-byte what a Kafka 2.8 broker writes
(Kafka 2.8 built for Scala 2.13, on Java 11), the znode encoders order their keys with the
functions here, each a faithful model of one JVM map's iteration:

- ``scala_mutable_hash_map_order``: ``scala.collection.mutable.HashMap`` (Scala 2.13), e.g.
  the broker registration and the topic assignment, and the partition maps inside it.
- ``scala_immutable_map_order``: ``scala.collection.immutable.Map`` (Scala 2.13): insertion
  order up to four keys (Map1..Map4), the CHAMP trie's order beyond, e.g. the partition state
  and ``listener_security_protocol_map``.
- ``java_properties_order``: ``java.util.Properties`` on Java 9+ (backed by a
  ``ConcurrentHashMap``), the topic and broker config overrides.
- ``java_hash_map_order``: ``java.util.HashMap``, the broker's supported ``features``.

Keys are strings; their hash is Java's ``String.hashCode``. The models were checked against
payloads captured from real Kafka 2.8 clusters (see tests/zk/test_jvm_order.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkaclone.common.jvm import int32 as _int32
from kafkaclone.common.jvm import java_string_hash
from kafkaclone.common.jvm import unsigned_shift_right as _ushr


def _unique(keys: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(keys))


# -- scala.collection.mutable.HashMap (2.13) -----------------------------------------------


def _scala_table_size_for(capacity: int) -> int:
    highest = 1 << (max(capacity - 1, 4).bit_length() - 1)
    return min(highest * 2, 1 << 30)


def scala_mutable_hash_map_order(keys: Iterable[str], *, size_hint: int = 0) -> list[str]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` after inserting ``keys`` in order.

    ``size_hint`` is the element count known when the map was built: ``mutable.Map(a, b, c)``
    sizes its table for its three arguments (``size_hint=3``), ``mutable.Map()`` starts at
    the default 16 buckets (``size_hint=0``). Keys added later grow the table as Scala does.
    """
    load_factor = 0.75
    if size_hint > 0:
        length = _scala_table_size_for(int((size_hint + 1) / load_factor))
    else:
        length = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(length)]
    size = 0
    for key in _unique(keys):
        if size + 1 >= int(length * load_factor):
            length *= 2
            grown: list[list[tuple[int, str]]] = [[] for _ in range(length)]
            for bucket in table:
                for node in bucket:
                    grown[node[0] & (length - 1)].append(node)
            table = grown
        original = java_string_hash(key)
        improved = _int32(original ^ _ushr(original, 16))
        bucket = table[improved & (length - 1)]
        # Buckets are kept sorted by (signed) hash; equal hashes keep insertion order.
        position = 0
        while position < len(bucket) and bucket[position][0] <= improved:
            position += 1
        bucket.insert(position, (improved, key))
        size += 1
    return [key for bucket in table for _, key in bucket]


# -- scala.collection.immutable.Map (2.13) -------------------------------------------------


def _scala_improve(hcode: int) -> int:
    """``scala.collection.Hashing.improve``."""
    h = _int32(hcode + ~_int32(hcode << 9))
    h = _int32(h ^ _ushr(h, 14))
    h = _int32(h + _int32(h << 4))
    return _int32(h ^ _ushr(h, 10))


def _champ_order(entries: Sequence[tuple[int, str]], shift: int) -> list[str]:
    if shift >= 32:  # full hash collision: a collision node keeps insertion order
        return [key for _, key in entries]
    by_mask: dict[int, list[tuple[int, str]]] = {}
    for entry in entries:
        by_mask.setdefault(_ushr(entry[0], shift) & 0x1F, []).append(entry)
    payload: list[str] = []
    sub_nodes: list[list[str]] = []
    for mask in sorted(by_mask):
        group = by_mask[mask]
        if len(group) == 1:
            payload.append(group[0][1])
        else:
            sub_nodes.append(_champ_order(group, shift + 5))
    # A node yields its own entries first, then its sub-nodes depth first.
    return payload + [key for node in sub_nodes for key in node]


def scala_immutable_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a Scala 2.13 ``immutable.Map`` built from ``keys`` in order
    (``Map(k1 -> v1, ...)`` or ``seq.toMap``)."""
    unique = _unique(keys)
    if len(unique) <= 4:
        return unique
    return _champ_order([(_scala_improve(java_string_hash(key)), key) for key in unique], 0)


# -- java.util.Properties (Java 9+: a ConcurrentHashMap inside) ---------------------------


def _chm_spread(h: int) -> int:
    return (h ^ _ushr(h, 16)) & 0x7FFFFFFF


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.Properties`` after ``setProperty`` of ``keys`` in
    order, on Java 9 and later (``new ConcurrentHashMap<>(8)`` inside: 16 bins, appends at
    the tail of a bin, resizes at 3/4 full with ConcurrentHashMap's bin split)."""
    length = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(length)]
    size = 0
    for key in _unique(keys):
        spread = _chm_spread(java_string_hash(key))
        table[spread & (length - 1)].append((spread, key))
        size += 1
        if size >= length - (length >> 2):
            table = _chm_transfer(table, length)
            length *= 2
    return [key for bucket in table for _, key in bucket]


def _chm_transfer(
    table: list[list[tuple[int, str]]], length: int
) -> list[list[tuple[int, str]]]:
    """``ConcurrentHashMap.transfer``: each bin splits into a low and a high bin. The run of
    nodes at the tail that all go the same way moves as is; the nodes before it are pushed
    onto the front of their new bin one by one, which reverses them."""
    grown: list[list[tuple[int, str]]] = [[] for _ in range(length * 2)]
    for index, bucket in enumerate(table):
        if not bucket:
            continue
        last_run = len(bucket) - 1
        run_bit = bucket[last_run][0] & length
        while last_run > 0 and bucket[last_run - 1][0] & length == run_bit:
            last_run -= 1
        low: list[tuple[int, str]] = []
        high: list[tuple[int, str]] = []
        (high if run_bit else low).extend(bucket[last_run:])
        for node in bucket[:last_run]:
            (high if node[0] & length else low).insert(0, node)
        grown[index] = low
        grown[index + length] = high
    return grown


# -- java.util.HashMap ---------------------------------------------------------------------


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` (default capacity) after ``put`` of
    ``keys`` in order: 16 buckets, appends at the tail, doubles at 3/4 full keeping each
    bucket's order."""
    length = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(length)]
    size = 0
    for key in _unique(keys):
        h = java_string_hash(key)
        spread = _int32(h ^ _ushr(h, 16))
        table[spread & (length - 1)].append((spread, key))
        size += 1
        if size > int(length * 0.75):
            length *= 2
            grown: list[list[tuple[int, str]]] = [[] for _ in range(length)]
            for bucket in table:
                for node in bucket:
                    grown[node[0] & (length - 1)].append(node)
            table = grown
    return [key for bucket in table for _, key in bucket]
