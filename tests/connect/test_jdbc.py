"""The JDBC connectors' tasks driven directly (no broker), on SQLite and on a real
PostgreSQL: the source's modes, its offsets and a restarted task resuming from them; the
sink's insert / upsert, auto.create, auto.evolve, deletes; the connectors' validation."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

from kafkaclone.clients import TopicPartition
from kafkaclone.connect.api import (
    Config,
    ConnectException,
    DataException,
    SinkRecord,
    SourceRecord,
)
from kafkaclone.connect.converters import JsonConverter
from kafkaclone.connect.data import (
    DECIMAL_NAME,
    INT64_SCHEMA,
    Schema,
    SchemaType,
    decimal_from_bytes,
    decimal_schema,
    decimal_to_bytes,
    struct_schema,
)
from kafkaclone.connect.jdbc.dialect import TIMESTAMP_NAME
from kafkaclone.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from kafkaclone.connect.jdbc.source import JdbcSourceConnector, JdbcSourceTask
from kafkaclone.connect.offsets import partition_key
from kafkaclone.testing.postgres import PostgresServer

pytestmark = pytest.mark.timeout(120)


@dataclass
class Database:
    """A fresh database on one engine, with a way to run SQL in it."""

    url: str
    placeholder: str
    sqlite_path: Path | None = None
    postgres: PostgresServer | None = None
    name: str = ""

    def execute(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        if self.postgres is not None:
            return self.postgres.execute(self.name, sql.replace("?", "%s"), params)
        assert self.sqlite_path is not None
        connection = sqlite3.connect(self.sqlite_path)
        try:
            rows = connection.execute(sql, params).fetchall()
            connection.commit()
            return rows
        finally:
            connection.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "test.db"
        yield Database(f"jdbc:sqlite:{path}", "?", sqlite_path=path)
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = f"db_{uuid.uuid4().hex[:12]}"
    server.create_database(name)
    yield Database(server.jdbc_url(name), "%s", postgres=server, name=name)
    server.execute("postgres", f'DROP DATABASE "{name}" WITH (FORCE)')


@dataclass
class Offsets:
    stored: dict[tuple[tuple[str, object], ...], Mapping[str, object]] = field(
        default_factory=dict)

    def offset(self, partition: Mapping[str, object]) -> Mapping[str, object] | None:
        return self.stored.get(partition_key(partition))

    def offsets(self, partitions: Sequence[Mapping[str, object]]
                ) -> dict[tuple[tuple[str, object], ...], Mapping[str, object]]:
        return {partition_key(p): self.stored[partition_key(p)] for p in partitions
                if partition_key(p) in self.stored}


@dataclass
class SourceContext:
    configs: Mapping[str, str]
    reader: Offsets

    def offset_storage_reader(self) -> Offsets:
        return self.reader


class ConnectorContext:
    """Counts the connector's requests for new task configs."""

    def __init__(self) -> None:
        self.requests = 0

    def request_task_reconfiguration(self) -> None:
        self.requests += 1

    def raise_error(self, error: Exception) -> None:
        raise AssertionError(f"the connector failed: {error}")


def start_source(props: dict[str, str], offsets: Offsets) -> JdbcSourceTask:
    connector = JdbcSourceConnector()
    assert connector.validate(props).config_values  # parses
    connector.initialize(ConnectorContext())
    connector.start(props)
    try:
        [task_props] = connector.task_configs(4)
    finally:
        connector.stop()
    task = JdbcSourceTask()
    task.initialize(SourceContext(task_props, offsets))
    task.start(task_props)
    return task


def poll_until(task: JdbcSourceTask, count: int, timeout: float = 30) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    deadline = time.monotonic() + timeout
    while len(records) < count:
        assert time.monotonic() < deadline, f"{len(records)} of {count} records"
        records += task.poll() or []
    return records


def create_items(db: Database) -> None:
    id_type = "SERIAL PRIMARY KEY" if db.postgres else "INTEGER PRIMARY KEY"
    db.execute(f"CREATE TABLE items (id {id_type}, name VARCHAR(40) NOT NULL, "
               "price DOUBLE PRECISION, updated_at TIMESTAMP NOT NULL)")


def insert_item(db: Database, name: str, price: float, second: int) -> None:
    db.execute("INSERT INTO items (name, price, updated_at) VALUES (?, ?, ?)",
               (name, price, f"2024-01-01 00:00:{second:02d}"))


def test_source_timestamp_incrementing_resumes_from_its_offsets(database: Database) -> None:
    create_items(database)
    for i in range(5):
        insert_item(database, f"item{i}", i * 1.5, 10)  # one timestamp: ids break the tie
    props = {"name": "src", "connection.url": database.url, "mode": "timestamp+incrementing",
             "incrementing.column.name": "id", "timestamp.column.name": "updated_at",
             "table.whitelist": "items", "topic.prefix": "db-", "poll.interval.ms": "50",
             "batch.max.rows": "2"}
    offsets = Offsets()
    task = start_source(props, offsets)
    try:
        records = poll_until(task, 5)
        assert [r.value["name"] for r in records] == [f"item{i}" for i in range(5)]  # type: ignore[index]
        first = records[0]
        assert first.topic == "db-items"
        assert first.source_partition == {"table": "items"}
        assert first.key is None
        schema = first.value_schema
        assert schema is not None and schema.name == "items"
        types = {f.name: (f.schema.type, f.schema.optional, f.schema.name)
                 for f in schema.fields}
        assert types == {"id": (SchemaType.INT32, False, None),
                         "name": (SchemaType.STRING, False, None),
                         "price": (SchemaType.FLOAT64, True, None),
                         "updated_at": (SchemaType.INT64, False, TIMESTAMP_NAME)}
        assert first.value == {"id": 1, "name": "item0", "price": 0.0,
                               "updated_at": 1704067210000}
        assert records[-1].source_offset == {"incrementing": 5, "timestamp": 1704067210000,
                                             "timestamp_nanos": 0}
        offsets.stored[partition_key({"table": "items"})] = records[2].source_offset
        # an update (later timestamp) and a new row: both read, in timestamp order
        database.execute("UPDATE items SET price = 99.5, updated_at = ? WHERE id = 2",
                         ("2024-01-01 00:00:30",))
        insert_item(database, "item5", 7.0, 20)
        changed = poll_until(task, 2)
        assert [(r.value["id"], r.value["price"]) for r in changed] == [  # type: ignore[index]
            (6, 7.0), (2, 99.5)]
    finally:
        task.stop()
        task.poll()
    # A new task from the stored offset (after id 3): ids 4, 5, then the changes.
    restarted = start_source(props, offsets)
    try:
        again = poll_until(restarted, 4)
        assert [r.value["id"] for r in again] == [4, 5, 6, 2]  # type: ignore[index]
    finally:
        restarted.stop()
        restarted.poll()


@pytest.mark.parametrize("mode", ["bulk", "incrementing", "timestamp"])
def test_source_other_modes(database: Database, mode: str) -> None:
    create_items(database)
    for i in range(3):
        insert_item(database, f"item{i}", 1.0, 10 + i)
    props = {"name": "src", "connection.url": database.url, "mode": mode,
             "incrementing.column.name": "id", "timestamp.column.name": "updated_at",
             "topic.prefix": "p.", "poll.interval.ms": "50"}  # no whitelist: every table
    task = start_source(props, Offsets())
    try:
        assert [r.value["id"] for r in poll_until(task, 3)] == [1, 2, 3]  # type: ignore[index]
        insert_item(database, "late", 2.0, 40)
        expected = {"bulk": [1, 2, 3, 4], "incrementing": [4], "timestamp": [4]}[mode]
        later = poll_until(task, len(expected))
        deadline = time.monotonic() + 30
        while mode == "bulk" and len(later) == 3:  # a whole-table read before the insert
            assert time.monotonic() < deadline
            later = poll_until(task, 1)
        assert [r.value["id"] for r in later] == expected  # type: ignore[index]
        assert later[-1].source_offset == {
            "bulk": {}, "incrementing": {"incrementing": 4},
            "timestamp": {"timestamp": 1704067240000, "timestamp_nanos": 0}}[mode]
    finally:
        task.stop()
        task.poll()


@dataclass
class SinkContext:
    configs: Mapping[str, str]
    timeouts: list[int] = field(default_factory=list)

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        pass

    def timeout(self, timeout_ms: int) -> None:
        self.timeouts.append(timeout_ms)

    def assignment(self) -> set[TopicPartition]:
        return set()

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        pass

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        pass

    def request_commit(self) -> None:
        pass


KEY_SCHEMA = struct_schema([("id", INT64_SCHEMA)])
VALUE_SCHEMA = struct_schema([
    ("id", INT64_SCHEMA), ("name", Schema(SchemaType.STRING)),
    ("at", Schema(SchemaType.INT64, name=TIMESTAMP_NAME, version=1))])
EVOLVED_SCHEMA = struct_schema([
    *[(f.name, f.schema) for f in VALUE_SCHEMA.fields],
    ("note", Schema(SchemaType.STRING, optional=True))])


def sink_record(offset: int, key: int, value: dict[str, object] | None,
                schema: Schema | None = VALUE_SCHEMA) -> SinkRecord:
    return SinkRecord(topic="orders", kafka_partition=0, key_schema=KEY_SCHEMA,
                      key={"id": key}, value_schema=None if value is None else schema,
                      value=value, kafka_offset=offset)


def start_sink(props: dict[str, str]) -> JdbcSinkTask:
    task = JdbcSinkTask()
    task.initialize(SinkContext(props))
    task.start(props)
    return task


def test_sink_upsert_auto_create_evolve_delete(database: Database) -> None:
    task = start_sink({"connection.url": database.url, "insert.mode": "upsert",
                       "pk.mode": "record_key", "auto.create": "true", "auto.evolve": "true",
                       "delete.enabled": "true", "table.name.format": "t_${topic}"})
    try:
        task.put([sink_record(i, i, {"id": i, "name": f"n{i}", "at": 1704067200000 + i})
                  for i in range(1, 5)])
        task.put([sink_record(5, 2, {"id": 2, "name": "changed", "at": 1704067300123})])
        task.put([sink_record(6, 5, {"id": 5, "name": "new", "at": 0, "note": "hi"},
                              EVOLVED_SCHEMA),
                  sink_record(7, 3, None)])
        rows = database.execute("SELECT id, name, note FROM t_orders ORDER BY id")
        assert rows == [(1, "n1", None), (2, "changed", None), (4, "n4", None),
                        (5, "new", "hi")]
        at = database.execute("SELECT at FROM t_orders WHERE id = 2")[0][0]
        assert str(at).startswith("2024-01-01 00:01:40.123")
    finally:
        task.stop()


def test_sink_insert_mode_and_refusals(database: Database) -> None:
    database.execute("CREATE TABLE orders (id BIGINT, name TEXT, at TIMESTAMP)")
    task = start_sink({"connection.url": database.url, "max.retries": "1",
                       "retry.backoff.ms": "10"})
    try:
        task.put([sink_record(0, 1, {"id": 1, "name": "a", "at": 0}),
                  sink_record(1, 1, {"id": 1, "name": "b", "at": 0})])
        assert database.execute("SELECT name FROM orders ORDER BY name") == [("a",), ("b",)]
        with pytest.raises(ConnectException, match="auto-evolution is disabled"):
            task.put([sink_record(2, 2, {"id": 2, "name": "c", "at": 0, "note": "x"},
                                  EVOLVED_SCHEMA)])
        with pytest.raises(ConnectException, match="non-null Struct value"):
            task.put([sink_record(3, 3, {"id": 3}, None)])
        with pytest.raises(ConnectException, match="null value"):
            task.put([sink_record(4, 3, None)])
    finally:
        task.stop()
    missing = start_sink({"connection.url": database.url, "table.name.format": "nope"})
    try:
        with pytest.raises(ConnectException, match='Table "nope" is missing'):
            missing.put([sink_record(0, 1, {"id": 1, "name": "a", "at": 0})])
    finally:
        missing.stop()


def errors(result: Config) -> dict[str, list[str]]:
    return {v.name: v.errors for v in result.config_values if v.errors}


def test_validation_refuses_what_confluent_refuses() -> None:
    source = JdbcSourceConnector()
    assert errors(source.validate({"mode": "incrementing", "topic.prefix": "x",
                                   "connection.url": "jdbc:sqlite:/tmp/x.db"})) == {
        "incrementing.column.name": ["Incrementing column name must be set for mode "
                                     "incrementing"]}
    found = errors(source.validate({"mode": "sometimes", "connection.url": "jdbc:oracle:x"}))
    assert set(found) == {"mode", "topic.prefix", "connection.url"}
    sink = JdbcSinkConnector()
    assert errors(sink.validate({"connection.url": "jdbc:sqlite:/tmp/x.db",
                                 "delete.enabled": "true", "pk.mode": "record_value"})) == {
        "pk.mode": ["Deletes are only supported for pk.mode record_key"]}
    assert "insert.mode" in errors(sink.validate({"connection.url": "jdbc:sqlite:x",
                                                  "insert.mode": "merge"}))


def test_source_follows_a_table_that_changes_shape(database: Database) -> None:
    create_items(database)
    insert_item(database, "before", 1.0, 10)
    props = {"name": "src", "connection.url": database.url, "mode": "incrementing",
             "incrementing.column.name": "id", "table.whitelist": "items",
             "topic.prefix": "", "poll.interval.ms": "50"}
    task = start_source(props, Offsets())
    try:
        [before] = poll_until(task, 1)
        assert before.value_schema is not None
        assert [f.name for f in before.value_schema.fields] == [
            "id", "name", "price", "updated_at"]
        database.execute("ALTER TABLE items ADD COLUMN note TEXT")
        database.execute("INSERT INTO items (name, price, updated_at, note) "
                         "VALUES ('after', 2.0, '2024-01-01 00:00:11', 'new')")
        [after] = poll_until(task, 1)
        assert after.topic == "items"
        assert after.value_schema is not None
        note = after.value_schema.field("note")
        assert note is not None and note.schema.optional
        assert after.value["note"] == "new"  # type: ignore[index]
    finally:
        task.stop()
        task.poll()


def test_decimal_bytes_and_the_json_converter() -> None:
    """Kafka's Decimal: the unscaled value in as few two's complement bytes as Java's
    BigInteger.toByteArray; in JsonConverter the schema with its scale, the value base64."""
    schema = decimal_schema(2)
    cases = {"0.10": "0a", "-1.50": "ff6a", "12345678.99": "499602db", "0.00": "00",
             "1.28": "0080", "-1.28": "80", "-1.29": "ff7f"}
    for text, raw in cases.items():
        assert decimal_to_bytes(schema, Decimal(text)).hex() == raw
        assert str(decimal_from_bytes(schema, bytes.fromhex(raw))) == text
    converter = JsonConverter()
    converter.configure({}, False)
    value_schema = struct_schema([("price", decimal_schema(2, optional=True))], name="prices")
    data = converter.from_connect_data("t", value_schema, {"price": Decimal("-1.50")})
    assert data is not None
    assert json.loads(data) == {
        "schema": {"type": "struct", "optional": False, "name": "prices", "fields": [
            {"type": "bytes", "optional": True, "name": DECIMAL_NAME, "version": 1,
             "parameters": {"scale": "2"}, "field": "price"}]},
        "payload": {"price": "/2o="}}
    back = converter.to_connect_data("t", data)
    assert isinstance(back.value, dict) and str(back.value["price"]) == "-1.50"
    assert back.schema is not None and back.schema.fields[0].schema.parameters == {
        "scale": "2"}
    with pytest.raises(DataException, match="mismatching scale"):
        converter.from_connect_data("t", schema, Decimal("1.5"))


NUMERIC_TABLE = ("CREATE TABLE amounts (id INTEGER PRIMARY KEY, n2 NUMERIC(2,0), "
                 "n4 NUMERIC(4,0), n9 NUMERIC(9,0), n18 NUMERIC(18,0), n20 NUMERIC(20,0), "
                 "money NUMERIC(12,2) NOT NULL, wide NUMERIC(20,4), d DECIMAL(10,3), "
                 "bare NUMERIC)")
NUMERIC_ROW = (1, 12, 1234, 123456789, 123456789012345678, 1234567890123456789,
               "12345678.99", "12345.6789", "1234567.891", 2.5)


def test_numeric_mapping(database: Database) -> None:
    """Confluent's four numeric.mapping rules on declared precision and scale; a SQLite
    DECIMAL column is JDBC's DECIMAL (always Decimal), PostgreSQL's decimal is numeric."""
    database.execute(NUMERIC_TABLE)
    database.execute("INSERT INTO amounts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     NUMERIC_ROW)
    i8, i16, i32, i64 = (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32,
                         SchemaType.INT64)
    f64 = SchemaType.FLOAT64
    d_fit = 3 if database.postgres is None else f64  # SQLite's DECIMAL stays a Decimal
    expected: dict[str, list[object]] = {
        # n2, n4, n9, n18, n20, money, wide, d, bare (an int: a Decimal of that scale)
        "none": [0, 0, 0, 0, 0, 2, 4, 3, f64],
        "precision_only": [i8, i16, i32, i64, 0, 2, 4, 3, f64],
        "best_fit": [i8, i16, i32, i64, 0, f64, 4, d_fit, f64],
        "best_fit_eager_double": [i8, i16, i32, i64, 0, f64, f64, d_fit, f64],
    }
    names = ["n2", "n4", "n9", "n18", "n20", "money", "wide", "d", "bare"]
    for mapping, kinds in expected.items():
        props = {"name": "src", "connection.url": database.url, "mode": "bulk",
                 "table.whitelist": "amounts", "topic.prefix": "db-",
                 "poll.interval.ms": "50", "numeric.mapping": mapping}
        task = start_source(props, Offsets())
        try:
            [record] = poll_until(task, 1)
        finally:
            task.stop()
            task.poll()
        assert record.value_schema is not None and isinstance(record.value, dict)
        for name, kind in zip(names, kinds, strict=True):
            schema = record.value_schema.fields[names.index(name) + 1].schema
            value = record.value[name]
            if isinstance(kind, int):
                assert (schema.type, schema.name, schema.parameters["scale"]) == (
                    SchemaType.BYTES, DECIMAL_NAME, str(kind)), (mapping, name)
                assert isinstance(value, Decimal) and value.as_tuple().exponent == -kind
            else:
                assert (schema.type, schema.name) == (kind, None), (mapping, name)
                assert isinstance(value, float if kind is f64 else int), (mapping, name)
        assert Decimal(str(record.value["money"])) == Decimal("12345678.99")
        assert Decimal(str(record.value["wide"])) == Decimal("12345.6789")
        assert Decimal(str(record.value["n18"])) == 123456789012345678
        assert Decimal(str(record.value["n20"])) == 1234567890123456789
    # the deprecated switch: precision_only when numeric.mapping is not set
    props["numeric.precision.mapping"] = "true"
    del props["numeric.mapping"]
    task = start_source(props, Offsets())
    try:
        [record] = poll_until(task, 1)
    finally:
        task.stop()
        task.poll()
    assert record.value_schema is not None
    assert record.value_schema.fields[1].schema.type is SchemaType.INT8
    refused = errors(JdbcSourceConnector().validate({**props, "numeric.mapping": "exact"}))
    assert refused["numeric.mapping"]


def test_decimal_round_trip_through_the_json_converter(database: Database) -> None:
    """NUMERIC(12,2) read as Decimal, through JsonConverter's bytes, written by the sink
    into the table auto.create made: the same values exactly."""
    database.execute("CREATE TABLE prices (id INTEGER PRIMARY KEY, price NUMERIC(12,2))")
    texts = ["0.10", "12345678.99", "-1.50", None, "7"]
    for i, text in enumerate(texts, 1):
        database.execute("INSERT INTO prices (id, price) VALUES (?, ?)", (i, text))
    task = start_source({"name": "src", "connection.url": database.url,
                         "mode": "incrementing", "incrementing.column.name": "id",
                         "table.whitelist": "prices", "topic.prefix": "db-",
                         "poll.interval.ms": "50"}, Offsets())
    try:
        records = poll_until(task, len(texts))
    finally:
        task.stop()
        task.poll()
    read = [r.value["price"] for r in records]  # type: ignore[index]
    assert [None if v is None else str(v) for v in read] == [
        "0.10", "12345678.99", "-1.50", None, "7.00"]
    converter = JsonConverter()
    converter.configure({}, False)
    sink_records = []
    for offset, record in enumerate(records):
        back = converter.to_connect_data("prices", converter.from_connect_data(
            "prices", record.value_schema, record.value))
        sink_records.append(SinkRecord(topic="prices", kafka_partition=0, key_schema=None,
                                       key=None, value_schema=back.schema, value=back.value,
                                       kafka_offset=offset))
    sink = start_sink({"connection.url": database.url, "insert.mode": "insert",
                       "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
                       "table.name.format": "${topic}_copy"})
    try:
        sink.put(sink_records)
    finally:
        sink.stop()
    rows = database.execute("SELECT id, price FROM prices_copy ORDER BY id")
    if database.postgres is not None:
        assert [None if p is None else str(p) for _, p in rows] == [
            "0.10", "12345678.99", "-1.50", None, "7.00"]
        assert database.execute(
            "SELECT numeric_precision, numeric_scale FROM information_schema.columns "
            "WHERE table_name = 'prices_copy' AND column_name = 'price'") == [(12, 2)]
    else:  # SQLite keeps a NUMERIC as a REAL or an INTEGER: the same numbers
        assert rows == [(1, 0.1), (2, 12345678.99), (3, -1.5), (4, None), (5, 7)]
        assert database.execute("SELECT type FROM pragma_table_info('prices_copy') "
                                "WHERE name = 'price'") == [("NUMERIC",)]


def test_source_connector_follows_created_and_dropped_tables(database: Database) -> None:
    """The table monitor: a whitelisted table created later joins the task configs, a
    dropped one leaves them, each change one request for a reconfiguration."""
    database.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
    connector = JdbcSourceConnector()
    context = ConnectorContext()
    connector.initialize(context)
    connector.start({"name": "src", "connection.url": database.url, "mode": "bulk",
                     "table.whitelist": "a,b", "topic.prefix": "p.",
                     "table.poll.interval.ms": "100"})

    def wait_for_requests(count: int) -> None:
        deadline = time.monotonic() + 30
        while context.requests < count:
            assert time.monotonic() < deadline, f"{context.requests} requests"
            time.sleep(0.05)

    try:
        assert [c["tables"] for c in connector.task_configs(2)] == ["a"]
        database.execute("CREATE TABLE b (id INTEGER PRIMARY KEY)")
        wait_for_requests(1)
        assert [c["tables"] for c in connector.task_configs(2)] == ["a", "b"]
        assert [c["tables"] for c in connector.task_configs(1)] == ["a,b"]
        database.execute("CREATE TABLE c (id INTEGER PRIMARY KEY)")  # not whitelisted
        database.execute("DROP TABLE a")
        wait_for_requests(2)
        assert [c["tables"] for c in connector.task_configs(2)] == ["b"]
        database.execute("DROP TABLE b")
        wait_for_requests(3)
        assert connector.task_configs(2) == []
    finally:
        connector.stop()
    assert context.requests == 3
