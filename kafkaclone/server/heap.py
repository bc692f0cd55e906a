"""The broker process's garbage collection around thousands of long-lived partitions.

CPython's full (generation 2) collection walks every tracked object, and runs again each
time the objects that survived younger collections grow by a quarter of the heap. A broker
that hosts 10,000 partitions (their Partition, Log, segments, indexes, fetch and epoch
state) holds millions of such objects: measured in ``benchmarks/lair_apply.py``, full
collections while a failover's LeaderAndIsr requests were applied stopped the reactor for
up to 0.74 s each (7 of them, 2.8 s in all, at 10,000 partitions).

With :func:`enable` (the broker process, ``kafka-server-start``), the objects alive after a
LeaderAndIsr that added partitions are moved out of the collector's generations
(``gc.freeze``): later full collections walk only what was allocated since. They stay
reference counted (freed when unreferenced); only cycles among them are not collected
while frozen, so a StopReplica that deletes partitions puts them back (``gc.unfreeze``)
and the next full collection, once, walks the whole heap again. Off by default: in-process
tests and embedders keep CPython's plain collector.
"""

from __future__ import annotations

import gc

_enabled = False


def enable() -> None:
    global _enabled
    _enabled = True


def disable() -> None:
    """Back to the plain collector (what is frozen is returned to it)."""
    global _enabled
    _enabled = False
    gc.unfreeze()


def long_lived_objects_added() -> None:
    """Many long-lived objects were made (partitions hosted): stop walking them."""
    if _enabled:
        gc.freeze()


def long_lived_objects_released() -> None:
    """Long-lived objects were let go (partitions deleted): collect their cycles again."""
    if _enabled:
        gc.unfreeze()
