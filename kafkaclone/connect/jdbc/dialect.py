"""Database dialects of the JDBC connectors (Confluent's ``DatabaseDialect``): how to
connect from a ``connection.url``, how to read a table's columns, how to map column types
to Connect schemas and back, and the SQL each database speaks.

- ``jdbc:sqlite:<path>``: SQLite through the stdlib ``sqlite3``. Timestamps are text
  (``YYYY-MM-DD HH:MM:SS[.ffffff]``, UTC, what ``CURRENT_TIMESTAMP`` writes), compared as
  text, so the source's bounds are written in the same form.
- ``jdbc:postgresql://host:port/db[?user=..&password=..]``: PostgreSQL through psycopg 3,
  the session in UTC (``TimeZone=UTC``), so a ``timestamp`` column is read as UTC, as the
  connector's ``db.timezone`` default does.

Connect values of the logical types are Kafka's: ``Timestamp`` milliseconds since the
epoch (INT64), ``Date`` days since the epoch (INT32), ``Time`` milliseconds of the day
(INT32), ``Decimal`` a ``decimal.Decimal`` of the column's scale.

NUMERIC / DECIMAL columns follow the source's ``numeric.mapping``, Confluent's rules
(``GenericDatabaseDialect.addFieldToSchema``) on the declared precision and scale:

- ``none`` (the default): ``Decimal`` with the column's scale (and Confluent's
  ``connect.decimal.precision`` parameter);
- ``precision_only``: scale 0 and precision <= 18: INT8 / INT16 / INT32 / INT64 for
  precision <= 2 / 4 / 9 / 18; else ``Decimal``;
- ``best_fit``: precision <= 18 and scale in [-84, 0]: those integers; precision <= 18
  and scale > 0: FLOAT64; else ``Decimal``;
- ``best_fit_eager_double``: scale > 0: FLOAT64; precision <= 18 and scale in [-84, 0]:
  the integers; else ``Decimal``.

The mapping applies to NUMERIC columns (PostgreSQL's ``decimal`` is ``numeric``); a
SQLite column declared DECIMAL is always ``Decimal``, as JDBC's ``Types.DECIMAL``. A
column without a declared precision and scale (PostgreSQL's bare ``numeric``, SQLite's
bare ``NUMERIC``) has no fixed scale for a Decimal schema; it is read as FLOAT64 (where
Confluent's result depends on the JDBC driver: PostgreSQL's reports scale 0 and rounds).
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import sqlite3
import urllib.parse
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kafkaclone.connect.api import ConnectException
from kafkaclone.connect.data import (
    DECIMAL_NAME,
    DECIMAL_PRECISION,
    Schema,
    SchemaType,
    decimal_from_bytes,
    decimal_scale,
    decimal_schema,
)

TIMESTAMP_NAME: Final = "org.apache.kafka.connect.data.Timestamp"
DATE_NAME: Final = "org.apache.kafka.connect.data.Date"
TIME_NAME: Final = "org.apache.kafka.connect.data.Time"
EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
EPOCH_DATE: Final = datetime.date(1970, 1, 1)
_COMPOSITE: Final = frozenset({SchemaType.STRUCT, SchemaType.ARRAY, SchemaType.MAP})
NUMERIC_MAPPINGS: Final = ("none", "precision_only", "best_fit", "best_fit_eager_double")
MAX_INTEGER_TYPE_PRECISION: Final = 18
NUMERIC_TYPE_SCALE_LOW: Final = -84
_DECLARED: Final = re.compile(r"\(\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?\)")
_WIDE: Final = decimal.Context(prec=2000)
"""Room for any NUMERIC (PostgreSQL's reach 131072 digits before the point; 1000 is
the most a declared precision may be)."""


LOGICAL_SQL_TYPES: Final[Mapping[str, str]] = {
    TIMESTAMP_NAME: "TIMESTAMP", DATE_NAME: "DATE", TIME_NAME: "TIME"}
"""The column type of Kafka Connect's logical types, the same in every dialect."""


class Cursor(Protocol):
    """The DB-API 2 cursor calls the connectors make (sqlite3 and psycopg alike)."""

    @property
    def description(self) -> Sequence[Any] | None: ...

    def execute(self, sql: Any, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: Any, params_seq: Sequence[Sequence[Any]], /) -> Any: ...

    def fetchmany(self, size: int = ..., /) -> list[Any]: ...

    def fetchall(self) -> list[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    def cursor(self) -> Any: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Column:
    """One column of a table (Confluent's ``ColumnDefinition``, in small)."""

    name: str
    type_name: str
    """The type as the database names it, lower case (``integer``, ``timestamp``)."""
    nullable: bool
    primary_key: bool = False
    precision: int | None = None
    """A NUMERIC / DECIMAL column's declared precision and scale (None: not declared)."""
    scale: int | None = None


def declared_precision(type_name: str) -> tuple[int | None, int | None]:
    """``numeric(12,2)`` -> (12, 2); ``numeric(5)`` -> (5, 0); ``numeric`` -> (None, None)."""
    match = _DECLARED.search(type_name)
    if match is None:
        return None, None
    return int(match.group(1)), int(match.group(2) or 0)


def _integer_schema(precision: int, optional: bool) -> Schema:
    """Confluent's integer type for a NUMERIC of scale 0 by its precision."""
    kind = SchemaType.INT64 if precision > 9 else SchemaType.INT32 if precision > 4 else \
        SchemaType.INT16 if precision > 2 else SchemaType.INT8
    return Schema(kind, optional=optional)


def numeric_schema(column: Column, base: str, mapping: str) -> Schema:
    """The schema of a NUMERIC / DECIMAL column under ``numeric.mapping`` (module doc)."""
    optional = column.nullable
    precision, scale = column.precision, column.scale
    if precision is None or scale is None:
        return Schema(SchemaType.FLOAT64, optional=optional)
    if base == "numeric":
        integral = NUMERIC_TYPE_SCALE_LOW <= scale < 1
        fits = precision <= MAX_INTEGER_TYPE_PRECISION
        if mapping == "precision_only" and scale == 0 and fits:
            return _integer_schema(precision, optional)
        if mapping == "best_fit" and fits:
            if integral:
                return _integer_schema(precision, optional)
            if scale > 0:
                return Schema(SchemaType.FLOAT64, optional=optional)
        if mapping == "best_fit_eager_double":
            if scale > 0:
                return Schema(SchemaType.FLOAT64, optional=optional)
            if fits and integral:
                return _integer_schema(precision, optional)
    return decimal_schema(scale, optional=optional, precision=precision)


def to_decimal(schema: Schema, value: object) -> decimal.Decimal:
    """A value read from the database at the Decimal schema's scale (JDBC's
    ``getBigDecimal(column, scale)``: HALF_UP)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return decimal_from_bytes(schema, bytes(value))
    exact = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    quantum = decimal.Decimal(1).scaleb(-decimal_scale(schema))
    return exact.quantize(quantum, rounding=decimal.ROUND_HALF_UP, context=_WIDE)


def timestamp_millis(value: datetime.datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    delta = aware - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_sqlite_timestamp(text: str) -> datetime.datetime:
    parsed = datetime.datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)


def format_sqlite_timestamp(value: datetime.datetime) -> str:
    """The form SQLite's ``CURRENT_TIMESTAMP`` writes (fraction only when not zero)."""
    utc = value.astimezone(datetime.UTC) if value.tzinfo is not None else value
    return utc.replace(tzinfo=None).isoformat(sep=" ")


class Dialect(ABC):
    """One database's SQL and type mapping."""

    name: str
    placeholder: str
    """The driver's parameter marker (``?`` for sqlite3, ``%s`` for psycopg)."""

    @abstractmethod
    def connect(self) -> Connection: ...

    @staticmethod
    def quote(identifier: str) -> str:
        """ANSI quoting (``"name"``), as Confluent's ``quote.sql.identifiers=always``."""
        return '"' + identifier.replace('"', '""') + '"'

    @abstractmethod
    def tables(self, connection: Connection) -> list[str]:
        """The user tables, sorted."""

    @abstractmethod
    def columns(self, connection: Connection, table: str) -> list[Column]:
        """The table's columns in order; empty if there is no such table."""

    @abstractmethod
    def current_timestamp(self, connection: Connection) -> datetime.datetime:
        """The database's clock (the source's upper bound), as an aware UTC datetime."""

    @abstractmethod
    def timestamp_param(self, value: datetime.datetime) -> object:
        """An aware UTC datetime as a query parameter compared with timestamp columns."""

    def schema_for(self, column: Column, numeric_mapping: str = "none") -> Schema:
        """Confluent's ``GenericDatabaseDialect.addFieldToSchema``."""
        name = column.type_name
        base = name.split("(")[0].strip()
        optional = column.nullable
        if base in ("numeric", "decimal"):
            return numeric_schema(column, base, numeric_mapping)
        if base in ("smallint", "int2", "tinyint"):
            return Schema(SchemaType.INT16, optional=optional)
        if base in ("integer", "int", "int4", "serial", "mediumint"):
            return Schema(SchemaType.INT32, optional=optional)
        if base in ("bigint", "int8", "bigserial"):
            return Schema(SchemaType.INT64, optional=optional)
        if base in ("boolean", "bool"):
            return Schema(SchemaType.BOOLEAN, optional=optional)
        if base in ("real", "float4"):
            return Schema(SchemaType.FLOAT32, optional=optional)
        if base in ("double precision", "double", "float8", "float"):
            return Schema(SchemaType.FLOAT64, optional=optional)
        if base in ("bytea", "blob", "binary", "varbinary"):
            return Schema(SchemaType.BYTES, optional=optional)
        if base.startswith("timestamp") or base == "datetime":
            return Schema(SchemaType.INT64, optional=optional, name=TIMESTAMP_NAME, version=1)
        if base == "date":
            return Schema(SchemaType.INT32, optional=optional, name=DATE_NAME, version=1)
        if base.startswith("time"):
            return Schema(SchemaType.INT32, optional=optional, name=TIME_NAME, version=1)
        return Schema(SchemaType.STRING, optional=optional)

    def to_connect(self, schema: Schema, value: object) -> object:
        """A value read from the database as a Connect value of ``schema``."""
        if value is None:
            return None
        if schema.name == DECIMAL_NAME:
            return to_decimal(schema, value)
        if schema.name == TIMESTAMP_NAME:
            if isinstance(value, str):
                value = parse_sqlite_timestamp(value)
            if isinstance(value, datetime.datetime):
                return timestamp_millis(value)
        if schema.name == DATE_NAME:
            if isinstance(value, str):
                value = datetime.date.fromisoformat(value)
            if isinstance(value, datetime.date):
                return (value - EPOCH_DATE).days
        if schema.name == TIME_NAME:
            if isinstance(value, str):
                value = datetime.time.fromisoformat(value)
            if isinstance(value, datetime.time):
                return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + \
                    value.microsecond // 1000
        if isinstance(value, decimal.Decimal | float) and schema.type in (
                SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
            return int(value)
        if isinstance(value, decimal.Decimal):
            return float(value)
        if isinstance(value, memoryview | bytearray):
            return bytes(value)
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, dict | list) and schema.type is SchemaType.STRING:
            return json.dumps(value)
        if schema.type is SchemaType.BOOLEAN and isinstance(value, int):
            return bool(value)
        if schema.type in (SchemaType.FLOAT32, SchemaType.FLOAT64) and isinstance(value, int):
            return float(value)
        if schema.type is SchemaType.STRING and not isinstance(value, str):
            return str(value)
        return value

    def from_connect(self, schema: Schema, value: object) -> object:
        """A Connect value as a parameter of an INSERT / UPDATE."""
        if value is None or (schema.name is None and schema.type not in _COMPOSITE):
            return value
        if schema.name == TIMESTAMP_NAME and isinstance(value, int):
            return self.timestamp_param(EPOCH + datetime.timedelta(milliseconds=value))
        if schema.name == DATE_NAME and isinstance(value, int):
            return EPOCH_DATE + datetime.timedelta(days=value)
        if schema.name == TIME_NAME and isinstance(value, int):
            return (datetime.datetime.min + datetime.timedelta(milliseconds=value)).time()
        if schema.name == DECIMAL_NAME:
            return self.decimal_param(to_decimal(schema, value))
        if schema.type in (SchemaType.STRUCT, SchemaType.ARRAY, SchemaType.MAP):
            raise ConnectException(f"Unsupported source data type: {schema.type.name}")
        return value

    def decimal_param(self, value: decimal.Decimal) -> object:
        """A Decimal as a query parameter (the driver's own adaptation by default)."""
        return value

    SQL_TYPES: Mapping[SchemaType, str]
    """The column type of each primitive schema type (TEXT for any other)."""

    def decimal_sql_type(self, schema: Schema) -> str:
        return "DECIMAL"

    def sql_type(self, schema: Schema) -> str:
        """The column type ``auto.create`` / ``auto.evolve`` give a field: the logical
        types by name, the primitive ones from the dialect's ``SQL_TYPES``."""
        if schema.name == DECIMAL_NAME:
            return self.decimal_sql_type(schema)
        logical = LOGICAL_SQL_TYPES.get(schema.name or "")
        if logical is not None:
            return logical
        return self.SQL_TYPES.get(schema.type, "TEXT")

    def create_table(self, table: str, fields: Sequence[tuple[str, Schema]],
                     key_fields: Sequence[str]) -> str:
        """Confluent's ``buildCreateTableStatement``."""
        lines = [f"{self.quote(name)} {self.sql_type(schema)}"
                 + ("" if schema.optional else " NOT NULL") for name, schema in fields]
        if key_fields:
            lines.append("PRIMARY KEY(" + ", ".join(map(self.quote, key_fields)) + ")")
        return f"CREATE TABLE {self.quote(table)} (\n" + ",\n".join(lines) + ")"

    def add_column(self, table: str, name: str, schema: Schema) -> str:
        return f"ALTER TABLE {self.quote(table)} ADD {self.quote(name)} {self.sql_type(schema)}"

    def insert(self, table: str, columns: Sequence[str]) -> str:
        return (f"INSERT INTO {self.quote(table)}(" + ",".join(map(self.quote, columns))
                + ") VALUES(" + ",".join([self.placeholder] * len(columns)) + ")")

    def upsert(self, table: str, key_columns: Sequence[str], columns: Sequence[str]) -> str:
        """``INSERT .. ON CONFLICT (key) DO UPDATE`` (PostgreSQL's, SQLite's since 3.24)."""
        others = [c for c in columns if c not in key_columns]
        action = "DO NOTHING" if not others else "DO UPDATE SET " + ",".join(
            f"{self.quote(c)}=EXCLUDED.{self.quote(c)}" for c in others)
        return (self.insert(table, columns) + " ON CONFLICT ("
                + ",".join(map(self.quote, key_columns)) + ") " + action)

    def update(self, table: str, key_columns: Sequence[str], columns: Sequence[str]) -> str:
        others = [c for c in columns if c not in key_columns]
        return (f"UPDATE {self.quote(table)} SET "
                + ",".join(f"{self.quote(c)} = {self.placeholder}" for c in others)
                + " WHERE " + " AND ".join(f"{self.quote(c)} = {self.placeholder}"
                                           for c in key_columns))

    def delete(self, table: str, key_columns: Sequence[str]) -> str:
        return (f"DELETE FROM {self.quote(table)} WHERE "
                + " AND ".join(f"{self.quote(c)} = {self.placeholder}" for c in key_columns))


class SqliteDialect(Dialect):
    SQL_TYPES = {SchemaType.INT8: "INTEGER", SchemaType.INT16: "INTEGER",
                 SchemaType.INT32: "INTEGER", SchemaType.INT64: "INTEGER",
                 SchemaType.FLOAT32: "REAL", SchemaType.FLOAT64: "REAL",
                 SchemaType.BOOLEAN: "INTEGER", SchemaType.STRING: "TEXT",
                 SchemaType.BYTES: "BLOB"}
    """Confluent's ``SqliteDatabaseDialect``."""

    name = "Sqlite"
    placeholder = "?"

    def __init__(self, path: str) -> None:
        self.path = path

    def connect(self) -> Connection:
        connection = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
        return connection

    def tables(self, connection: Connection) -> list[str]:
        cursor = connection.cursor()
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                       "AND name NOT LIKE 'sqlite_%' ORDER BY name")
        return [str(row[0]) for row in cursor.fetchall()]

    def columns(self, connection: Connection, table: str) -> list[Column]:
        cursor = connection.cursor()
        cursor.execute(f"PRAGMA table_info({self.quote(table)})")
        return [Column(str(name), str(type_name).lower(), not notnull and not pk, bool(pk),
                       *declared_precision(str(type_name)))
                for _, name, type_name, notnull, _, pk in cursor.fetchall()]

    def current_timestamp(self, connection: Connection) -> datetime.datetime:
        cursor = connection.cursor()
        cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        return parse_sqlite_timestamp(str(cursor.fetchall()[0][0]))

    def timestamp_param(self, value: datetime.datetime) -> object:
        return format_sqlite_timestamp(value)

    def decimal_param(self, value: decimal.Decimal) -> object:
        """Its text: sqlite3 has no adapter for Decimal; a NUMERIC column's affinity turns
        the text into its number."""
        return str(value)

    def decimal_sql_type(self, schema: Schema) -> str:
        """Confluent's ``SqliteDatabaseDialect``: NUMERIC."""
        return "NUMERIC"



class PostgresDialect(Dialect):
    SQL_TYPES = {SchemaType.INT8: "SMALLINT", SchemaType.INT16: "SMALLINT",
                 SchemaType.INT32: "INT", SchemaType.INT64: "BIGINT",
                 SchemaType.FLOAT32: "REAL", SchemaType.FLOAT64: "DOUBLE PRECISION",
                 SchemaType.BOOLEAN: "BOOLEAN", SchemaType.STRING: "TEXT",
                 SchemaType.BYTES: "BYTEA"}
    """Confluent's ``PostgreSqlDatabaseDialect``."""

    name = "PostgreSql"
    placeholder = "%s"

    def __init__(self, host: str, port: int, database: str, user: str | None,
                 password: str | None) -> None:
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password

    def connect(self) -> Connection:
        import psycopg  # the optional driver (extra "jdbc"), needed only for PostgreSQL

        try:
            connection: Connection = psycopg.connect(
                host=self.host, port=self.port, dbname=self.database, user=self.user,
                password=self.password, options="-c TimeZone=UTC", connect_timeout=10)
        except psycopg.Error as exc:
            raise ConnectException(f"Could not connect to PostgreSQL at {self.host}:"
                                   f"{self.port}/{self.database}: {exc}") from exc
        return connection

    def tables(self, connection: Connection) -> list[str]:
        cursor = connection.cursor()
        cursor.execute("SELECT table_name FROM information_schema.tables "
                       "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
                       "ORDER BY table_name")
        return [str(row[0]) for row in cursor.fetchall()]

    def columns(self, connection: Connection, table: str) -> list[Column]:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT c.column_name, c.data_type, c.is_nullable, c.numeric_precision, "
            "  c.numeric_scale, "
            "  EXISTS (SELECT 1 FROM information_schema.key_column_usage k "
            "          JOIN information_schema.table_constraints t "
            "            ON t.constraint_name = k.constraint_name "
            "           AND t.table_schema = k.table_schema "
            "          WHERE t.constraint_type = 'PRIMARY KEY' "
            "            AND k.table_schema = c.table_schema "
            "            AND k.table_name = c.table_name "
            "            AND k.column_name = c.column_name) "
            "FROM information_schema.columns c "
            "WHERE c.table_schema = current_schema() AND c.table_name = %s "
            "ORDER BY c.ordinal_position", (table,))
        return [Column(str(name), str(type_name).lower(), nullable == "YES", bool(pk),
                       *((precision, scale) if type_name == "numeric" else (None, None)))
                for name, type_name, nullable, precision, scale, pk in cursor.fetchall()]

    def current_timestamp(self, connection: Connection) -> datetime.datetime:
        cursor = connection.cursor()
        cursor.execute("SELECT CURRENT_TIMESTAMP")
        value = cursor.fetchall()[0][0]
        assert isinstance(value, datetime.datetime)
        return value.astimezone(datetime.UTC)

    def timestamp_param(self, value: datetime.datetime) -> object:
        return value

    def decimal_sql_type(self, schema: Schema) -> str:
        """``DECIMAL(precision,scale)`` when the schema carries Confluent's precision
        parameter (a Decimal read by the JDBC source); else ``DECIMAL``, which keeps each
        value exactly with its own scale (Confluent's PostgreSQL dialect always writes
        that)."""
        scale = decimal_scale(schema)
        raw = schema.parameters.get(DECIMAL_PRECISION, "")
        if raw.isdigit() and 0 <= scale <= int(raw) <= 1000 and int(raw) > 0:
            return f"DECIMAL({int(raw)},{scale})"
        return "DECIMAL"



def dialect_for(url: str, user: str | None = None, password: str | None = None) -> Dialect:
    """The dialect of a ``connection.url`` (Confluent's ``DatabaseDialects.findBestFor``);
    ``connection.user`` / ``connection.password`` win over the URL's ``user`` /
    ``password`` parameters."""
    if url.startswith("jdbc:sqlite:"):
        path = url[len("jdbc:sqlite:"):]
        if not path:
            raise ConnectException(f"No database path in {url}")
        return SqliteDialect(path)
    if url.startswith("jdbc:postgresql:"):
        parsed = urllib.parse.urlsplit(url[len("jdbc:"):])
        params = dict(urllib.parse.parse_qsl(parsed.query))
        database = parsed.path.lstrip("/")
        if not parsed.hostname or not database:
            raise ConnectException(f"Expected jdbc:postgresql://host[:port]/database, "
                                   f"got {url}")
        return PostgresDialect(parsed.hostname, parsed.port or 5432, database,
                               user or params.get("user"), password or params.get("password"))
    raise ConnectException(f"Unable to find dialect for the JDBC URL {url!r} "
                           "(kafkaclone has jdbc:sqlite: and jdbc:postgresql:)")
