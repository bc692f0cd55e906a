"""The Spark writer's producer path alone, no Spark: prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_send_batch.py [--records 2000000] [--rounds 3]

On a 1-broker LocalCluster, a new 4-partition topic per round, the producer as the writer
makes it (idempotent, acks=all, batch.size 512 KiB) sends ``--records`` 100-byte values
with ``send_batch``, 16,384 a call, the partitions in turn (the writer's chunks), and waits
for every acknowledgement. Printed per round: rows/s of wall time, the CPU time of this
process (the caller's thread and the sender thread: encoding, requests, socket) and of
the broker (``/proc/<pid>/stat``). CPU times move less with the machine's load than the
wall time does, so they are the numbers to compare between two versions of the code.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from proc_stat import cpu_seconds  # benchmarks/ is on the path

from kafkaclone.clients import Producer
from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.protocol.records.columnar_builder import CHUNK_RECORDS, BinaryColumn
from kafkaclone.testing.cluster import LocalCluster

PARTITIONS = 4
VALUE_BYTES = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    values = BinaryColumn(np.arange(CHUNK_RECORDS + 1, dtype=np.int64) * VALUE_BYTES,
                          np.frombuffer(bytes(VALUE_BYTES) * CHUNK_RECORDS, dtype=np.uint8))
    with LocalCluster(1) as cluster:
        servers = cluster.bootstrap_servers
        broker_pid = next(iter(cluster.brokers.values())).pid
        for round_number in range(1, args.rounds + 1):
            topic = f"send-batch-{round_number}"
            with AdminClient(servers) as admin:
                assert admin.create_topics([NewTopic(topic, PARTITIONS, 1)]) == {topic: None}
            producer = Producer({"bootstrap.servers": servers, "acks": "all",
                                 "batch.size": 512 * 1024})
            producer.partitions_for(topic)
            time.sleep(1.0)  # the new partitions' leaders settle
            broker_before, cpu_before = cpu_seconds([broker_pid]), time.process_time()
            started = time.perf_counter()
            futures = []
            for n, first in enumerate(range(0, args.records, CHUNK_RECORDS)):
                count = min(CHUNK_RECORDS, args.records - first)
                column = values if count == CHUNK_RECORDS else \
                    BinaryColumn(values.offsets[:count + 1], values.data)
                futures += producer.send_batch(topic, n % PARTITIONS, column)
            assert producer.flush(300) == 0
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            broker = cpu_seconds([broker_pid]) - broker_before
            assert all(f.exception(0) is None for f in futures)
            producer.close()
            print(f"round {round_number}: {args.records / elapsed:>11,.0f} rows/s "
                  f"({elapsed:.2f} s), client CPU {cpu:.2f} s, broker CPU {broker:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
