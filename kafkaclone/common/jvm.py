"""The JVM arithmetic Kafka's placement rules are written in: Java's ``String.hashCode``,
Kafka's ``Utils.abs``, 32-bit wrap-around and ``>>>``. Group and transaction coordinator
placement, the replica fetcher's partition hash and the znode key orders all use these."""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF


def int32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def unsigned_shift_right(value: int, bits: int) -> int:
    """Java's ``>>>`` on an int."""
    return (value & _MASK32) >> bits


def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")  # lone surrogates are code units too
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return int32(h)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)
