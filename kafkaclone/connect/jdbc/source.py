"""The JDBC source (Confluent's ``io.confluent.connect.jdbc.JdbcSourceConnector``): each
table of ``table.whitelist`` (all tables when empty, less ``table.blacklist``), or one
``query``, polled every ``poll.interval.ms`` into the topic ``topic.prefix`` + table name
(``topic.prefix`` alone for a query).

``mode`` chooses what a poll reads, as Confluent's ``TimestampIncrementingTableQuerier``:

- ``bulk``: the whole table every poll;
- ``incrementing``: ``WHERE inc > ? ORDER BY inc``: new rows;
- ``timestamp``: ``WHERE ts > ? AND ts < now ORDER BY ts``: new and changed rows;
- ``timestamp+incrementing``: ``WHERE ts < now AND ((ts = ? AND inc > ?) OR ts > ?)
  ORDER BY ts, inc``: new and changed rows, none lost to two rows sharing a timestamp.

``now`` is the database's clock less ``timestamp.delay.interval.ms``. A record's value is a
struct named after the table, its fields the columns with their types (nullable columns
optional); its key is null, as Confluent's (``ValueToKey`` makes one). Its source
partition is ``{"table": <table>}`` (``{"query": "query"}``), its offset Confluent's
``{"incrementing": id}`` / ``{"timestamp": ms, "timestamp_nanos": ns}``, so a restarted
task resumes after the last row whose offset the worker committed.

Tables are spread over up to ``tasks.max`` tasks (each task config has ``tables``). The
tables are those that exist (of ``table.whitelist`` when set); the connector's table
monitor thread (Confluent's ``TableMonitorThread``) lists them again every
``table.poll.interval.ms`` and, when the set changed (a table created, one dropped),
asks the worker for new task configs (``ConnectorContext.request_task_reconfiguration``).

NUMERIC / DECIMAL columns follow ``numeric.mapping`` (see
:mod:`kafkaclone.connect.jdbc.dialect`); the deprecated ``numeric.precision.mapping=true``
is ``precision_only`` when ``numeric.mapping`` is not set, as Confluent's.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kafkaclone.common.config_def import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
    at_least,
    one_of,
)
from kafkaclone.connect.api import (
    Config,
    ConnectException,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kafkaclone.connect.data import Field, Schema, struct_schema
from kafkaclone.connect.jdbc.dialect import (
    EPOCH,
    NUMERIC_MAPPINGS,
    Column,
    Connection,
    Cursor,
    Dialect,
    declared_precision,
    dialect_for,
)

logger = logging.getLogger(__name__)

VERSION: Final = "10.0.0-kafkaclone"
MODES: Final = ("bulk", "timestamp", "incrementing", "timestamp+incrementing")
DATABASE_GROUP: Final = "Database"
MODE_GROUP: Final = "Mode"
CONNECTOR_GROUP: Final = "Connector"
INCREMENTING_FIELD: Final = "incrementing"
TIMESTAMP_FIELD: Final = "timestamp"
TIMESTAMP_NANOS_FIELD: Final = "timestamp_nanos"

CONNECTION_KEYS: Final = [
    ConfigKey("connection.url", ConfigType.STRING, None, Importance.HIGH,
              "JDBC connection URL: jdbc:sqlite:<path> or "
              "jdbc:postgresql://<host>:<port>/<database>.", group=DATABASE_GROUP),
    ConfigKey("connection.user", ConfigType.STRING, None, Importance.HIGH,
              "JDBC connection user.", group=DATABASE_GROUP),
    ConfigKey("connection.password", ConfigType.PASSWORD, None, Importance.HIGH,
              "JDBC connection password.", group=DATABASE_GROUP),
    ConfigKey("connection.attempts", ConfigType.INT, 3, Importance.LOW,
              "Maximum number of attempts to retrieve a valid JDBC connection.", at_least(1),
              group=DATABASE_GROUP),
    ConfigKey("connection.backoff.ms", ConfigType.LONG, 10000, Importance.LOW,
              "Backoff time in milliseconds between connection attempts.",
              group=DATABASE_GROUP),
]

SOURCE_CONFIG: Final = ConfigDef([
    *CONNECTION_KEYS,
    ConfigKey("table.whitelist", ConfigType.LIST, (), Importance.MEDIUM,
              "List of tables to include in copying. If specified, table.blacklist may not "
              "be set.", group=DATABASE_GROUP),
    ConfigKey("table.blacklist", ConfigType.LIST, (), Importance.MEDIUM,
              "List of tables to exclude from copying. If specified, table.whitelist may "
              "not be set.", group=DATABASE_GROUP),
    ConfigKey("numeric.precision.mapping", ConfigType.BOOLEAN, False, Importance.LOW,
              "Whether or not to attempt mapping NUMERIC values by precision to integral "
              "types. This option is now deprecated. A future version may remove it "
              "completely. Please use ``numeric.mapping`` instead.", group=DATABASE_GROUP),
    ConfigKey("numeric.mapping", ConfigType.STRING, None, Importance.LOW,
              "Map NUMERIC values by precision and optionally scale to integral or decimal "
              "types: none, precision_only, best_fit, best_fit_eager_double.",
              group=DATABASE_GROUP),
    ConfigKey("mode", ConfigType.STRING, None, Importance.HIGH,
              "The mode for updating a table each time it is polled: bulk, incrementing, "
              "timestamp, timestamp+incrementing.", one_of(*MODES), group=MODE_GROUP),
    ConfigKey("incrementing.column.name", ConfigType.STRING, "", Importance.MEDIUM,
              "The name of the strictly incrementing column to use to detect new rows.",
              group=MODE_GROUP),
    ConfigKey("timestamp.column.name", ConfigType.LIST, (), Importance.MEDIUM,
              "Comma separated list of one or more timestamp columns to detect new or "
              "modified rows (the first non-null is used).", group=MODE_GROUP),
    ConfigKey("query", ConfigType.STRING, "", Importance.MEDIUM,
              "If specified, the query to perform to select new or updated rows.",
              group=MODE_GROUP),
    ConfigKey("poll.interval.ms", ConfigType.INT, 5000, Importance.HIGH,
              "Frequency in ms to poll for new data in each table.", at_least(1),
              group=CONNECTOR_GROUP),
    ConfigKey("table.poll.interval.ms", ConfigType.LONG, 60000, Importance.LOW,
              "Frequency in ms to poll for new or removed tables, which may result in "
              "updated task configurations to start polling for data in added tables or "
              "stop polling for data in removed tables.", at_least(1),
              group=CONNECTOR_GROUP),
    ConfigKey("batch.max.rows", ConfigType.INT, 100, Importance.LOW,
              "Maximum number of rows to include in a single batch when polling for new "
              "data.", at_least(1), group=CONNECTOR_GROUP),
    ConfigKey("topic.prefix", ConfigType.STRING, None, Importance.HIGH,
              "Prefix to prepend to table names to generate the name of the Kafka topic to "
              "publish data to, or in the case of a custom query, the full name of the "
              "topic to publish to.", group=CONNECTOR_GROUP),
    ConfigKey("timestamp.delay.interval.ms", ConfigType.LONG, 0, Importance.HIGH,
              "How long to wait after a row with certain timestamp appears before we "
              "include it in the result.", at_least(0), group=CONNECTOR_GROUP),
])


def _value(values: Mapping[str, object], name: str) -> str:
    value = values.get(name)
    return "" if value is None else str(value)


def numeric_mapping(values: Mapping[str, object]) -> str:
    """Confluent's ``NumericMapping.get``: ``numeric.mapping``, else
    ``numeric.precision.mapping``."""
    mapping = values.get("numeric.mapping")
    if mapping is not None:
        return str(mapping).lower()
    return "precision_only" if values.get("numeric.precision.mapping") is True else "none"


class JdbcSourceConnector(SourceConnector):
    """Confluent's ``JdbcSourceConnector``."""

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG

    def required_configs(self) -> Sequence[str]:
        return ("connection.url", "mode", "topic.prefix")

    def validate(self, props: Mapping[str, str]) -> Config:
        """Confluent's checks beyond each key: the mode's columns, whitelist against
        blacklist, query against tables."""
        result = super().validate(props)
        by_name = {value.name: value for value in result.config_values}
        mode = props.get("mode", "")
        if mode in ("incrementing", "timestamp+incrementing") and \
                not props.get("incrementing.column.name"):
            by_name["incrementing.column.name"].errors.append(
                f"Incrementing column name must be set for mode {mode}")
        if mode in ("timestamp", "timestamp+incrementing") and \
                not props.get("timestamp.column.name", "").strip():
            by_name["timestamp.column.name"].errors.append(
                f"Timestamp column name must be set for mode {mode}")
        mapping = props.get("numeric.mapping")
        if mapping is not None and mapping.lower() not in NUMERIC_MAPPINGS:
            by_name["numeric.mapping"].errors.append(
                f"Invalid value {mapping} for configuration numeric.mapping: String must be "
                f"one of: {', '.join(NUMERIC_MAPPINGS)}")
        if props.get("table.whitelist") and props.get("table.blacklist"):
            by_name["table.blacklist"].errors.append(
                "table.whitelist and table.blacklist are exclusive.")
        if props.get("query") and (props.get("table.whitelist") or
                                   props.get("table.blacklist")):
            by_name["query"].errors.append(
                "Do not specify table filtering for query based source.")
        url = props.get("connection.url")
        if url and not by_name["connection.url"].errors:
            try:
                dialect_for(url)
            except ConnectException as exc:
                by_name["connection.url"].errors.append(str(exc))
        return result

    def start(self, props: Mapping[str, str]) -> None:
        values, _ = SOURCE_CONFIG.parse({k: v for k, v in props.items() if k in SOURCE_CONFIG})
        self.props = dict(props)
        self.query = _value(values, "query")
        self.tables: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.monitor: threading.Thread | None = None
        if self.query:
            return
        whitelist = values["table.whitelist"]
        blacklist = values["table.blacklist"]
        assert isinstance(whitelist, tuple) and isinstance(blacklist, tuple)
        self.whitelist = {str(t) for t in whitelist}
        self.blacklist = {str(t) for t in blacklist}
        self.dialect = dialect_for(props["connection.url"], props.get("connection.user"),
                                   props.get("connection.password"))
        self.table_poll_s = int(str(values["table.poll.interval.ms"])) / 1000.0
        self.tables = self._list_tables()
        self.monitor = threading.Thread(target=self._monitor, daemon=True,
                                        name=f"TableMonitorThread-{props.get('name', '')}")
        self.monitor.start()

    def _list_tables(self) -> list[str]:
        """The tables to copy: those that exist, of the whitelist when set, less the
        blacklist (Confluent's ``TableMonitorThread.updateTables``)."""
        connection = self.dialect.connect()
        try:
            found = self.dialect.tables(connection)
        finally:
            connection.close()
        if self.whitelist:
            return [t for t in found if t in self.whitelist]
        return [t for t in found if t not in self.blacklist]

    def _monitor(self) -> None:
        """Confluent's ``TableMonitorThread.run``: list the tables every
        ``table.poll.interval.ms``; on a change, ask for new task configs."""
        while not self.stopping.wait(self.table_poll_s):
            try:
                tables = self._list_tables()
            except Exception as exc:  # the database away for a while: try at the next poll
                logger.error("Error while trying to get updated table list, ignoring and "
                             "waiting for next table poll interval: %s", exc)
                continue
            with self.lock:
                if tables == self.tables:
                    continue
                logger.info("Based on the supplied filtering rules, the tables available to "
                            "read from changed from %s to %s", self.tables, tables)
                self.tables = tables
            if not self.stopping.is_set():
                self.context.request_task_reconfiguration()

    def task_class(self) -> type[SourceTask]:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Confluent's: one task for a query; else the tables in up to ``max_tasks``
        contiguous groups (``ConnectorUtils.groupPartitions``)."""
        if self.query:
            return [dict(self.props)]
        with self.lock:
            tables = list(self.tables)
        if not tables:
            logger.warning("No tables were found so there's no work to be done.")
            return []
        groups = min(max_tasks, len(tables))
        per_group, extra = divmod(len(tables), groups)
        configs: list[dict[str, str]] = []
        start = 0
        for index in range(groups):
            size = per_group + (1 if index < extra else 0)
            configs.append({**self.props, "tables": ",".join(tables[start:start + size])})
            start += size
        return configs

    def stop(self) -> None:
        self.stopping.set()
        if self.monitor is not None:
            self.monitor.join(15)  # a listing in progress ends within connect_timeout


@dataclass
class TableQuerier:
    """One table's (or the query's) reading state: Confluent's
    ``TimestampIncrementingTableQuerier``."""

    table: str | None
    partition: dict[str, object]
    topic: str
    incrementing: int | None = None
    timestamp: datetime.datetime | None = None
    next_poll: float = 0.0
    cursor: Cursor | None = None
    schema: Schema | None = None
    columns: list[Column] = field(default_factory=list)

    def offset(self, mode: str) -> dict[str, object]:
        out: dict[str, object] = {}
        if mode in ("incrementing", "timestamp+incrementing"):
            out[INCREMENTING_FIELD] = -1 if self.incrementing is None else self.incrementing
        if mode in ("timestamp", "timestamp+incrementing"):
            stamp = self.timestamp or EPOCH
            delta = stamp - EPOCH
            seconds = delta.days * 86_400 + delta.seconds
            out[TIMESTAMP_FIELD] = seconds * 1000 + delta.microseconds // 1000
            out[TIMESTAMP_NANOS_FIELD] = delta.microseconds * 1000
        return out

    def restore(self, offset: Mapping[str, object]) -> None:
        incrementing = offset.get(INCREMENTING_FIELD)
        if isinstance(incrementing, int):
            self.incrementing = incrementing
        millis = offset.get(TIMESTAMP_FIELD)
        if isinstance(millis, int):
            nanos = offset.get(TIMESTAMP_NANOS_FIELD)
            seconds = millis // 1000
            micros = nanos // 1000 if isinstance(nanos, int) else (millis % 1000) * 1000
            self.timestamp = EPOCH + datetime.timedelta(seconds=seconds, microseconds=micros)


class JdbcSourceTask(SourceTask):
    """Confluent's ``JdbcSourceTask``: round robin over its tables, each due every
    ``poll.interval.ms``, ``batch.max.rows`` rows at most per ``poll``."""

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        values, _ = SOURCE_CONFIG.parse({k: v for k, v in props.items() if k in SOURCE_CONFIG})
        self.mode = _value(values, "mode")
        self.incrementing_column = _value(values, "incrementing.column.name")
        timestamp_columns = values["timestamp.column.name"]
        assert isinstance(timestamp_columns, tuple)
        self.timestamp_columns = [str(c) for c in timestamp_columns]
        self.query = _value(values, "query")
        self.numeric_mapping = numeric_mapping(values)
        self.poll_interval_s = int(str(values["poll.interval.ms"])) / 1000.0
        self.batch_max_rows = int(str(values["batch.max.rows"]))
        self.delay = datetime.timedelta(
            milliseconds=int(str(values["timestamp.delay.interval.ms"])))
        prefix = _value(values, "topic.prefix")
        self.dialect: Dialect = dialect_for(props["connection.url"],
                                            props.get("connection.user"),
                                            props.get("connection.password"))
        self.connection: Connection | None = None
        self.stopping = threading.Event()
        if self.query:
            self.queriers = [TableQuerier(None, {"query": "query"}, prefix)]
        else:
            tables = [t for t in props.get("tables", "").split(",") if t]
            if not tables:
                raise ConnectException("Invalid configuration: each JdbcSourceTask must have "
                                       "at least one table assigned to it")
            self.queriers = [TableQuerier(t, {"table": t}, prefix + t) for t in tables]
        reader = self.context.offset_storage_reader()
        for querier in self.queriers:
            stored = reader.offset(querier.partition)
            if stored is not None:
                logger.info("Found offset %s for partition %s", stored, querier.partition)
                querier.restore(stored)

    def _connection(self) -> Connection:
        if self.connection is None:
            self.connection = self.dialect.connect()
        return self.connection

    def poll(self) -> list[SourceRecord] | None:
        while not self.stopping.is_set():
            querier = min(self.queriers, key=lambda q: q.next_poll)
            wait = querier.next_poll - time.monotonic()
            if wait > 0 and querier.cursor is None:
                self.stopping.wait(min(wait, 0.5))
                continue
            try:
                records = self._read(querier)
            except ConnectException:
                raise
            except Exception as exc:
                # Confluent's: an SQLException closes the connection and the table is
                # tried again at its next poll; the task keeps running.
                logger.error("Failed to run query for table %s: %s", querier.table, exc)
                self._reset(querier)
                self._close_connection()
                querier.next_poll = time.monotonic() + self.poll_interval_s
                return None
            if records:
                return records
        self._shutdown()
        return None

    def _shutdown(self) -> None:
        for querier in self.queriers:
            self._reset(querier)
        self._close_connection()

    def _reset(self, querier: TableQuerier) -> None:
        if querier.cursor is not None:
            querier.cursor.close()
            querier.cursor = None

    def _read(self, querier: TableQuerier) -> list[SourceRecord]:
        connection = self._connection()
        if querier.cursor is None:
            querier.cursor = self._execute(connection, querier)
        rows = querier.cursor.fetchmany(self.batch_max_rows)
        if len(rows) < self.batch_max_rows:
            self._reset(querier)
            connection.commit()  # ends the read's transaction: the next sees new rows
            querier.next_poll = time.monotonic() + self.poll_interval_s
        return [self._record(querier, row) for row in rows]

    def _execute(self, connection: Connection, querier: TableQuerier) -> Cursor:
        d = self.dialect
        where: list[str] = []
        params: list[Any] = []
        if self.mode in ("timestamp", "timestamp+incrementing"):
            now = d.current_timestamp(connection) - self.delay
            ts = self._timestamp_expression()
            low = d.timestamp_param(querier.timestamp or EPOCH)
            if self.mode == "timestamp":
                where.append(f"{ts} > {d.placeholder} AND {ts} < {d.placeholder}")
                params += [low, d.timestamp_param(now)]
            else:
                inc = d.quote(self.incrementing_column)
                where.append(f"{ts} < {d.placeholder} AND (({ts} = {d.placeholder} AND "
                             f"{inc} > {d.placeholder}) OR {ts} > {d.placeholder})")
                params += [d.timestamp_param(now), low,
                           -1 if querier.incrementing is None else querier.incrementing, low]
        elif self.mode == "incrementing":
            where.append(f"{d.quote(self.incrementing_column)} > {d.placeholder}")
            params.append(-1 if querier.incrementing is None else querier.incrementing)
        order = {"incrementing": [d.quote(self.incrementing_column)],
                 "timestamp": [self._timestamp_expression()],
                 "timestamp+incrementing": [self._timestamp_expression(),
                                            d.quote(self.incrementing_column)]
                 }.get(self.mode, [])
        sql = self.query if querier.table is None else f"SELECT * FROM {d.quote(querier.table)}"
        if where:  # a query gets the WHERE appended, as Confluent's (no WHERE of its own)
            sql += " WHERE " + " AND ".join(where)
        if order:
            sql += " ORDER BY " + ", ".join(f"{o} ASC" for o in order)
        cursor: Cursor = connection.cursor()
        cursor.execute(sql, params)
        names = [str(item[0]) for item in cursor.description or []]
        if querier.schema is None or [f.name for f in querier.schema.fields] != names:
            # the first read, or the table changed shape: the schema from its columns again
            if querier.table is not None:
                querier.columns = d.columns(connection, querier.table)
            querier.schema = self._schema(querier, cursor)
        return cursor

    def _timestamp_expression(self) -> str:
        quoted = [self.dialect.quote(c) for c in self.timestamp_columns]
        return quoted[0] if len(quoted) == 1 else "COALESCE(" + ",".join(quoted) + ")"

    def _schema(self, querier: TableQuerier, cursor: Cursor) -> Schema:
        """The value schema: from the table's columns, or for a query from the result's
        columns (all optional, STRING where the driver gives no type)."""
        description = cursor.description or []
        by_name = {c.name: c for c in querier.columns}
        fields: list[tuple[str, Schema]] = []
        for item in description:
            name = str(item[0])
            column = by_name.get(name) or _result_column(name, item)
            fields.append((name, self.dialect.schema_for(column, self.numeric_mapping)))
        return struct_schema(fields, name=querier.table or None)

    def _record(self, querier: TableQuerier, row: Sequence[object]) -> SourceRecord:
        schema = querier.schema
        assert schema is not None
        value = {f.name: self.dialect.to_connect(f.schema, raw)
                 for f, raw in zip(schema.fields, row, strict=True)}
        self._advance(querier, schema.fields, row)
        return SourceRecord(
            topic=querier.topic, kafka_partition=None, key_schema=None, key=None,
            value_schema=schema, value=value, timestamp=None,
            source_partition=querier.partition, source_offset=querier.offset(self.mode))

    def _advance(self, querier: TableQuerier, fields: Sequence[Field],
                 row: Sequence[object]) -> None:
        by_name = {f.name: raw for f, raw in zip(fields, row, strict=True)}
        if self.mode in ("incrementing", "timestamp+incrementing"):
            raw = by_name.get(self.incrementing_column)
            if not isinstance(raw, int):
                raise ConnectException(
                    f"Invalid type for incrementing column: {type(raw).__name__}")
            querier.incrementing = raw
        if self.mode in ("timestamp", "timestamp+incrementing"):
            for column in self.timestamp_columns:
                raw = by_name.get(column)
                if raw is None:
                    continue
                stamp = raw if isinstance(raw, datetime.datetime) else \
                    datetime.datetime.fromisoformat(str(raw))
                querier.timestamp = stamp if stamp.tzinfo is not None else \
                    stamp.replace(tzinfo=datetime.UTC)
                break

    def _close_connection(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception as exc:  # a broken connection may fail to close: drop it
                logger.debug("Closing the database connection failed: %s", exc)
            self.connection = None

    def stop(self) -> None:
        # Called from another thread: only ask poll to return (Kafka's contract); poll
        # closes the cursors and the connection on its own thread as it returns.
        self.stopping.set()


def _result_column(name: str, description_item: Any) -> Column:
    """A query's result column: psycopg gives a NUMERIC's declared precision and scale."""
    type_name = _type_name(description_item)
    precision, scale = declared_precision(type_name)
    if type_name == "numeric":
        declared = getattr(description_item, "precision", None)
        if isinstance(declared, int):
            precision, scale = declared, getattr(description_item, "scale", None) or 0
    return Column(name, type_name, True, False, precision, scale)


def _type_name(description_item: Any) -> str:
    """A result column's type name for a query: psycopg gives the type OID."""
    oid = description_item[1]
    return {16: "boolean", 20: "bigint", 21: "smallint", 23: "integer", 700: "real",
            701: "double precision", 1700: "numeric", 17: "bytea", 1114: "timestamp",
            1184: "timestamp with time zone", 1082: "date", 1083: "time"
            }.get(oid, "text") if isinstance(oid, int) else "text"

