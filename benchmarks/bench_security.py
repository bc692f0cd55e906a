"""Throughput over SSL and SASL_SSL against PLAINTEXT, same broker, same run; SCRAM
handshakes per second. Prints numbers, asserts nothing.

    .venv/bin/python benchmarks/bench_security.py [--records 300000] [--rounds 2]
        [--handshakes 200]

One broker (LocalCluster) with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners; a
3-partition topic per listener; 100-byte values. With confluent-kafka (librdkafka):

- ``produce``: records/s from the first produce to the end of flush (linger.ms 5,
  batch.size 1 MiB, acks=1);
- ``consume``: records/s reading the topic back by assignment from offset 0;
- ``handshakes``: SCRAM-SHA-512 authentications/s on SASL_PLAINTEXT and SASL_SSL (a new
  connection each: TCP or TLS, ApiVersions, SaslHandshake, two SaslAuthenticate), done
  with the project's own client connection (``kafkaclone.clients.connection``), one at a
  time, so the number is the broker's per-handshake cost plus the client's PBKDF2.

Each listener runs ``--rounds`` times, interleaved; the best round counts (the machine is
shared). The ratio is the secured listener's / PLAINTEXT's. The load average is printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.clients.security import ClientSecurity
from kafkaclone.testing.certificates import Pki, make_test_pki
from kafkaclone.testing.cluster import LocalCluster

VALUE = b"x" * 100
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")


def client_conf(listener: str, pki: Pki) -> dict[str, str]:
    if listener == "SSL":
        return {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    if listener in ("SASL_SSL", "SASL_PLAINTEXT"):
        conf = {"security.protocol": listener, "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench", "sasl.password": "bench-secret"}
        if listener == "SASL_SSL":
            conf["ssl.ca.location"] = str(pki.ca)
        return conf
    return {}


def bootstrap(cluster: LocalCluster, listener: str) -> str:
    if listener == "PLAINTEXT":
        return cluster.bootstrap_servers
    return cluster.bootstrap_servers_for(listener)


def produce(servers: str, conf: dict[str, str], topic: str, records: int) -> float:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": servers, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000,
        "enable.idempotence": False, **conf})
    producer.produce(topic, VALUE)
    producer.flush(30)  # connected and authenticated before the clock starts
    start = time.perf_counter()
    for _ in range(records):
        producer.produce(topic, VALUE)
        if len(producer) > 500_000:
            producer.poll(0)
    producer.flush(300)
    return records / (time.perf_counter() - start)


def consume(servers: str, conf: dict[str, str], topic: str, records: int) -> float:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": servers, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
        "max.partition.fetch.bytes": 8 << 20, **conf})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(3)])
    seen = 0
    start = time.perf_counter()
    while seen < records:
        seen += sum(1 for m in consumer.consume(1000, 5.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return seen / elapsed


def handshakes(cluster: LocalCluster, pki: Pki, listener: str, count: int) -> float:
    security = ClientSecurity.from_properties(client_conf(listener, pki))
    port = int(bootstrap(cluster, listener).split(",")[0].rpartition(":")[2])
    start = time.perf_counter()
    for _ in range(count):
        connection = BrokerConnection("127.0.0.1", port, security=security)
        connection.connect()
        connection.close()
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--handshakes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_test_pki(Path(tmp))
        overrides = {
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
            "num.partitions": "3",
        }
        with LocalCluster(1, overrides=overrides,
                          extra_listeners=["SSL", "SASL_SSL", "SASL_PLAINTEXT"]) as cluster:
            subprocess.run(
                [sys.executable, "-m", "kafkaclone.tools.configs_command", "--zookeeper",
                 cluster.zookeeper_connect, "--alter", "--entity-type", "users",
                 "--entity-name", "bench", "--add-config",
                 "SCRAM-SHA-512=[iterations=4096,password=bench-secret]"],
                check=True, capture_output=True)
            time.sleep(1.0)
            best: dict[tuple[str, str], float] = {}
            topics = {listener: f"bench-{listener.lower()}-{uuid.uuid4().hex[:6]}"
                      for listener in LISTENERS}
            for round_number in range(args.rounds):
                for listener in LISTENERS:
                    servers = bootstrap(cluster, listener)
                    conf = client_conf(listener, pki)
                    topic = f"{topics[listener]}-{round_number}"
                    rate = produce(servers, conf, topic, args.records)
                    best[listener, "produce"] = max(best.get((listener, "produce"), 0), rate)
                    rate = consume(servers, conf, topic, args.records)
                    best[listener, "consume"] = max(best.get((listener, "consume"), 0), rate)
            print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, "
                  f"{os.cpu_count()} cores, {args.records} records x 100 B, "
                  f"best of {args.rounds}")
            for phase in ("produce", "consume"):
                base = best["PLAINTEXT", phase]
                for listener in LISTENERS:
                    rate = best[listener, phase]
                    print(f"{phase:8} {listener:10} {rate:12,.0f} records/s  "
                          f"ratio {rate / base:.2f}")
            for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
                rate = handshakes(cluster, pki, listener, args.handshakes)
                print(f"SCRAM-SHA-512 handshakes on {listener}: {rate:,.1f}/s "
                      f"({args.handshakes} sequential connections)")


if __name__ == "__main__":
    main()
