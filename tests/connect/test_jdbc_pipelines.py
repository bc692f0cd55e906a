"""The JDBC connectors end to end through real workers on a local 1-broker cluster:

- standalone: a SQLite table -> topic -> another SQLite table (timestamp+incrementing
  source, ValueToKey for the key, upsert sink with auto.create), rows inserted and updated
  while it runs; bad configs refused by /config/validate and POST /connectors with Kafka's
  error JSON, nothing started;
- distributed, 2 workers: a PostgreSQL table -> topic -> a table of another PostgreSQL
  database, rows inserted and updated while it runs, one worker killed with SIGKILL; its
  connector moves to the other; at the end the target table equals the source table.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from kafkaclone.clients.admin import AdminClient, NewTopic
from kafkaclone.testing.cluster import LocalCluster
from kafkaclone.testing.postgres import PostgresServer
from tests.connect.test_distributed import DistributedWorker, owner_of
from tests.connect.test_standalone import Worker

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
VALUE_TO_KEY = {"transforms": "key",
                "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
                "transforms.key.fields": "id"}


def use_json(worker: Worker) -> None:
    """The worker's converters: JsonConverter with schemas (the JDBC sink needs them)."""
    worker.worker_props.write_text(worker.worker_props.read_text().replace(STRING, JSON))


def properties(path: Path, config: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return path


def wait_until_equal(read_source: Callable[[], object], read_target: Callable[[], object],
                     timeout: float) -> None:
    deadline = time.monotonic() + timeout
    source: object = None
    target: object = None
    while time.monotonic() < deadline:
        source, target = read_source(), read_target()
        if source == target:
            return
        time.sleep(0.5)
    raise AssertionError(f"target differs from source:\n{source}\n{target}")


def sqlite_rows(path: Path, table: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path, timeout=30)
    try:
        exists = connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                    (table,)).fetchall()
        if not exists:
            return []
        return connection.execute(f"SELECT id, name, balance, updated_at FROM {table} "
                                  "ORDER BY id").fetchall()
    finally:
        connection.close()


def sqlite_write(path: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    connection = sqlite3.connect(path, timeout=30)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


def test_sqlite_standalone_pipeline_and_refused_configs(tmp_path: Path) -> None:
    source_db = tmp_path / "source.db"
    target_db = tmp_path / "target.db"
    sqlite_write(source_db, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT "
                 "NULL, balance REAL, updated_at TIMESTAMP NOT NULL)")
    clock = iter(range(100_000))

    def stamp() -> str:
        second = next(clock)
        return f"2024-01-{1 + second // 86400:02d} {second // 3600 % 24:02d}:" \
               f"{second // 60 % 60:02d}:{second % 60:02d}"

    for i in range(50):
        sqlite_write(source_db, "INSERT INTO customers (name, balance, updated_at) "
                     "VALUES (?, ?, ?)", (f"customer {i}", i * 10.0, stamp()))
    source = properties(tmp_path / "source.properties", {
        "name": "sqlite-source",
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:sqlite:{source_db}", "mode": "timestamp+incrementing",
        "incrementing.column.name": "id", "timestamp.column.name": "updated_at",
        "table.whitelist": "customers", "topic.prefix": "sqlite-",
        "poll.interval.ms": "200", **VALUE_TO_KEY})
    sink = properties(tmp_path / "sink.properties", {
        "name": "sqlite-sink", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": f"jdbc:sqlite:{target_db}", "topics": "sqlite-customers",
        "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id",
        "auto.create": "true", "table.name.format": "customers_copy"})
    with LocalCluster(1) as cluster:
        worker = Worker(tmp_path, cluster.bootstrap_servers, [source, sink])
        use_json(worker)
        try:
            worker.start()
            wait_until_equal(lambda: sqlite_rows(source_db, "customers"),
                             lambda: sqlite_rows(target_db, "customers_copy"), 60)
            for i in range(50, 70):
                sqlite_write(source_db, "INSERT INTO customers (name, balance, updated_at) "
                             "VALUES (?, ?, ?)", (f"customer {i}", i * 10.0, stamp()))
                if i % 2 == 0:
                    sqlite_write(source_db, "UPDATE customers SET balance = balance + 1, "
                                 "updated_at = ? WHERE id = ?", (stamp(), i // 2))
            wait_until_equal(lambda: sqlite_rows(source_db, "customers"),
                             lambda: sqlite_rows(target_db, "customers_copy"), 60)
            assert len(sqlite_rows(target_db, "customers_copy")) == 70

            status, infos = worker.call(
                "PUT", "/connector-plugins/JdbcSourceConnector/config/validate", {
                    "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
                    "name": "bad", "connection.url": f"jdbc:sqlite:{source_db}",
                    "mode": "incrementing", "topic.prefix": "x"})
            assert status == 200
            assert isinstance(infos, dict)
            assert infos["name"] == "io.confluent.connect.jdbc.JdbcSourceConnector"
            assert infos["error_count"] == 1
            [bad] = [c["value"] for c in infos["configs"]
                     if c["value"]["name"] == "incrementing.column.name"]
            assert bad["errors"] == ["Incrementing column name must be set for mode "
                                     "incrementing"]
            status, refused = worker.call("POST", "/connectors", {"name": "bad-sink", "config": {
                "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "connection.url": "jdbc:mysql://nowhere/db", "topics": "t",
                "delete.enabled": "true", "pk.mode": "record_value"}})
            assert status == 400
            assert isinstance(refused, dict)
            assert refused["error_code"] == 400
            message = str(refused["message"])
            assert message.startswith("Connector configuration is invalid and contains the "
                                      "following 2 error(s):")
            assert "pk.mode: Deletes are only supported for pk.mode record_key" in message
            assert "connection.url: Unable to find dialect" in message
            assert worker.call("GET", "/connectors") == (200, ["sqlite-sink", "sqlite-source"])
            file_to_database(worker, tmp_path)
        finally:
            worker.stop()


ORDER_SCHEMA = {"type": "struct", "name": "orders", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "customer", "type": "string", "optional": False},
    {"field": "amount", "type": "double", "optional": True}]}


def file_to_database(worker: Worker, tmp: Path) -> None:
    """docs/connect.md's file -> topic -> database pipeline, created over REST as there:
    lines that are JSON envelopes, passed through by the file source (StringConverter),
    read with schemas by the sink (JsonConverter), upserted by the value's id."""
    lines = tmp / "orders.json"
    database = tmp / "shop.db"

    def order(order_id: int, customer: str, amount: float) -> str:
        return json.dumps({"schema": ORDER_SCHEMA, "payload": {
            "id": order_id, "customer": customer, "amount": amount}}) + "\n"

    lines.write_text(order(1, "ada", 12.5) + order(2, "grace", 7.0))
    assert worker.call("POST", "/connectors", {"name": "orders-file", "config": {
        "connector.class": "FileStreamSource", "file": str(lines), "topic": "orders",
        "value.converter": STRING}})[0] == 201
    assert worker.call("POST", "/connectors", {"name": "orders-db", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "orders",
        "connection.url": f"jdbc:sqlite:{database}", "value.converter": JSON,
        "value.converter.schemas.enable": "true", "insert.mode": "upsert",
        "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "auto.evolve": "true"}})[0] == 201
    with open(lines, "a") as growing:
        growing.write(order(1, "ada", 99.0))

    def rows() -> list[tuple[object, ...]]:
        if not database.exists():
            return []
        connection = sqlite3.connect(database, timeout=30)
        try:
            if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'orders'"
                                      ).fetchall():
                return []
            return connection.execute("SELECT id, customer, amount FROM orders ORDER BY id"
                                      ).fetchall()
        finally:
            connection.close()

    wait_until_equal(lambda: [(1, "ada", 99.0), (2, "grace", 7.0)], rows, 60)


def pg_rows(postgres: PostgresServer, database: str) -> list[tuple[object, ...]]:
    exists = postgres.execute(database, "SELECT to_regclass('orders') IS NOT NULL")
    if not exists[0][0]:
        return []
    return postgres.execute(database, "SELECT id, customer, amount, updated_at FROM orders "
                            "ORDER BY id")


def test_postgres_distributed_failover(tmp_path: Path, postgres: PostgresServer) -> None:
    postgres.create_database("shop")
    postgres.create_database("warehouse")
    postgres.execute("shop", "CREATE TABLE orders (id SERIAL PRIMARY KEY, customer TEXT NOT "
                     "NULL, amount DOUBLE PRECISION, updated_at TIMESTAMP(3) NOT NULL "
                     "DEFAULT clock_timestamp())")
    for i in range(100):
        postgres.execute("shop", "INSERT INTO orders (customer, amount) VALUES (%s, %s)",
                         (f"c{i}", i * 1.5))
    with LocalCluster(1, overrides={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        workers = [DistributedWorker(tmp_path, cluster.bootstrap_servers, i) for i in (1, 2)]
        writer: threading.Thread | None = None
        try:
            for worker in workers:
                use_json(worker)
                worker.start()
            first, second = workers
            created = first.call("POST", "/connectors", {"name": "pg-source", "config": {
                "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
                "connection.url": postgres.jdbc_url("shop"), "connection.user": "postgres",
                "mode": "timestamp+incrementing", "incrementing.column.name": "id",
                "timestamp.column.name": "updated_at", "table.whitelist": "orders",
                "topic.prefix": "pg-", "poll.interval.ms": "200",
                # an update may get the millisecond of the row inserted just before it
                # (timestamp(3)): rows are read once a second has passed, ties complete
                "timestamp.delay.interval.ms": "1000", **VALUE_TO_KEY}})
            assert created[0] == 201, created
            created = second.call("POST", "/connectors", {"name": "pg-sink", "config": {
                "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "connection.url": postgres.jdbc_url("warehouse"), "topics": "pg-orders",
                "insert.mode": "upsert", "pk.mode": "record_key", "auto.create": "true",
                "table.name.format": "orders"}})
            assert created[0] == 201, created
            wait_until_equal(lambda: pg_rows(postgres, "shop"),
                             lambda: pg_rows(postgres, "warehouse"), 90)

            written = threading.Event()
            failures: list[BaseException] = []

            def write_while_running() -> None:
                try:
                    for i in range(100, 250):
                        postgres.execute("shop", "INSERT INTO orders (customer, amount) "
                                         "VALUES (%s, %s)", (f"c{i}", i * 1.5))
                        postgres.execute("shop", "UPDATE orders SET amount = amount + 1, "
                                         "updated_at = clock_timestamp() WHERE id = %s",
                                         (1 + i % 100,))
                        time.sleep(0.02)
                except BaseException as exc:
                    failures.append(exc)
                finally:
                    written.set()

            writer = threading.Thread(target=write_while_running, daemon=True)
            writer.start()
            source_owner = owner_of(first, "pg-source")
            victim = next(w for w in workers if f"127.0.0.1:{w.port}" == source_owner)
            survivor = second if victim is first else first
            time.sleep(1.0)  # mid-run: the writer is busy
            victim.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
            victim.process.wait(10)  # type: ignore[union-attr]
            assert written.wait(120)
            assert failures == []
            wait_until_equal(lambda: pg_rows(postgres, "shop"),
                             lambda: pg_rows(postgres, "warehouse"), 120)
            assert len(pg_rows(postgres, "warehouse")) == 250
            assert owner_of(survivor, "pg-source") == f"127.0.0.1:{survivor.port}"
            assert owner_of(survivor, "pg-sink") == f"127.0.0.1:{survivor.port}"
        finally:
            if writer is not None:
                writer.join(60)
            for worker in workers:
                worker.stop()


def prices(postgres: PostgresServer, database: str) -> list[tuple[object, ...]]:
    exists = postgres.execute(database, "SELECT to_regclass('prices') IS NOT NULL")
    if not exists[0][0]:
        return []
    return [(i, None if p is None else str(p)) for i, p in postgres.execute(
        database, "SELECT id, price FROM prices ORDER BY id")]


def test_postgres_standalone_new_table_and_exact_decimals(tmp_path: Path,
                                                          postgres: PostgresServer) -> None:
    """A standalone source over every table of a PostgreSQL database, its table monitor
    every 500 ms: a table created while it runs joins its task (a reconfiguration), its
    NUMERIC(12,2) rows go through the topic as Decimal (JsonConverter's bytes) and the
    sink writes them into the DECIMAL(12,2) table auto.create made, values exact."""
    postgres.create_database("catalog")
    postgres.create_database("mirror")
    postgres.execute("catalog", "CREATE TABLE seed (id SERIAL PRIMARY KEY, note TEXT)")
    postgres.execute("catalog", "INSERT INTO seed (note) VALUES ('first')")
    source = properties(tmp_path / "source.properties", {
        "name": "pg-source", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": postgres.jdbc_url("catalog"), "mode": "incrementing",
        "incrementing.column.name": "id", "topic.prefix": "pg2-", "poll.interval.ms": "200",
        "table.poll.interval.ms": "500"})
    sink = properties(tmp_path / "sink.properties", {
        "name": "pg-sink", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": postgres.jdbc_url("mirror"), "topics": "pg2-prices",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "auto.create": "true", "table.name.format": "prices"})
    with LocalCluster(1) as cluster:
        with AdminClient(cluster.bootstrap_servers) as admin:
            assert admin.create_topics([NewTopic("pg2-prices", 1, 1)]) == {"pg2-prices": None}
        worker = Worker(tmp_path, cluster.bootstrap_servers, [source, sink])
        use_json(worker)
        try:
            worker.start()
            deadline = time.monotonic() + 60
            while True:  # the source runs its task over the one table there is
                status, tasks = worker.call("GET", "/connectors/pg-source/tasks")
                if status == 200 and tasks:
                    assert isinstance(tasks, list) and tasks[0]["config"]["tables"] == "seed"
                    break
                assert time.monotonic() < deadline, (status, tasks)
                time.sleep(0.3)
            postgres.execute("catalog", "CREATE TABLE prices (id SERIAL PRIMARY KEY, "
                             "price NUMERIC(12,2))")
            for text in ("0.10", "12345678.99", "-1.50", None, "42"):
                postgres.execute("catalog", "INSERT INTO prices (price) VALUES (%s::numeric)",
                                 (text,))
            wait_until_equal(lambda: prices(postgres, "catalog"),
                             lambda: prices(postgres, "mirror"), 60)
            assert prices(postgres, "mirror") == [
                (1, "0.10"), (2, "12345678.99"), (3, "-1.50"), (4, None), (5, "42.00")]
            assert postgres.execute(
                "mirror", "SELECT numeric_precision, numeric_scale FROM "
                "information_schema.columns WHERE table_name = 'prices' AND "
                "column_name = 'price'") == [(12, 2)]
            status, tasks = worker.call("GET", "/connectors/pg-source/tasks")
            assert isinstance(tasks, list) and [t["config"]["tables"] for t in tasks] == [
                "prices,seed"]
        finally:
            worker.stop()


def task_tables(worker: Worker, name: str) -> list[str]:
    status, tasks = worker.call("GET", f"/connectors/{name}/tasks")
    if status != 200 or not isinstance(tasks, list):
        return []
    return [str(t["config"]["tables"]) for t in tasks]


def wait_for_tables(worker: Worker, name: str, expected: list[str], timeout: float = 60
                    ) -> None:
    deadline = time.monotonic() + timeout
    while (found := task_tables(worker, name)) != expected:
        assert time.monotonic() < deadline, f"task tables {found}, expected {expected}"
        time.sleep(0.3)


def test_sqlite_distributed_table_monitor(tmp_path: Path) -> None:
    """One distributed worker, a SQLite source with tasks.max=2 and a 300 ms table monitor:
    a table created later gets a second task (new task configs through the leader and the
    config topic, a rebalance for the new task) whose rows reach the topic (read with
    confluent-kafka); a dropped table leaves the task configs."""
    database = tmp_path / "lite.db"
    sqlite_write(database, "CREATE TABLE a (id INTEGER PRIMARY KEY, name TEXT)")
    sqlite_write(database, "INSERT INTO a (name) VALUES ('a1')")
    with LocalCluster(1, overrides={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        worker = DistributedWorker(tmp_path, cluster.bootstrap_servers, 1)
        use_json(worker)
        consumer: Consumer | None = None
        try:
            worker.start()
            created = worker.call("POST", "/connectors", {"name": "lite", "config": {
                "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
                "connection.url": f"jdbc:sqlite:{database}", "mode": "incrementing",
                "incrementing.column.name": "id", "topic.prefix": "lite-",
                "poll.interval.ms": "200", "table.poll.interval.ms": "300",
                "tasks.max": "2"}})
            assert created[0] == 201, created
            wait_for_tables(worker, "lite", ["a"])
            sqlite_write(database, "CREATE TABLE b (id INTEGER PRIMARY KEY, name TEXT)")
            for i in range(3):
                sqlite_write(database, "INSERT INTO b (name) VALUES (?)", (f"b{i}",))
            wait_for_tables(worker, "lite", ["a", "b"])
            owner_of(worker, "lite")
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "group.id": "monitor-check", "auto.offset.reset": "earliest"})
            consumer.subscribe(["lite-b"])
            names: list[str] = []
            deadline = time.monotonic() + 60
            while len(names) < 3:
                assert time.monotonic() < deadline, names
                message = consumer.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                value = message.value()
                assert value is not None
                names.append(json.loads(value)["payload"]["name"])
            assert names == ["b0", "b1", "b2"]
            sqlite_write(database, "DROP TABLE a")
            wait_for_tables(worker, "lite", ["b"])
        finally:
            if consumer is not None:
                consumer.close()
            worker.stop()
