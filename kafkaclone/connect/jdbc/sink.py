"""The JDBC sink (Confluent's ``io.confluent.connect.jdbc.JdbcSinkConnector``): each
record of ``topics`` becomes a row of the table ``table.name.format`` (``${topic}``
replaced by the record's topic).

- ``insert.mode``: ``insert`` (plain INSERT), ``upsert`` (``INSERT .. ON CONFLICT (pk)
  DO UPDATE``), ``update`` (``UPDATE .. WHERE pk``).
- ``pk.mode``: ``none``; ``kafka`` (``__connect_topic``, ``__connect_partition``,
  ``__connect_offset``); ``record_key`` (the key's struct fields named by ``pk.fields``,
  all when empty, or a primitive key as the one column ``pk.fields`` names, default
  ``__connect_default``); ``record_value`` (the value's fields named by ``pk.fields``, all
  when empty).
- ``auto.create``: a missing table is created from the record's schema (required fields
  NOT NULL, the key fields the PRIMARY KEY); ``auto.evolve``: missing columns are added
  (``ALTER TABLE .. ADD``, optional fields only).
- ``delete.enabled`` (needs ``pk.mode=record_key``): a tombstone (null value) deletes the
  row of its key.

Records need a value schema (a struct): JsonConverter with ``schemas.enable=true``, as
Confluent's. Each ``put`` is written in one transaction, in batches of ``batch.size``; a
database error rolls it back and is retried ``max.retries`` times every
``retry.backoff.ms`` (a ``RetriableException``, so the worker calls ``put`` again with
the same records), then fails the task. ``fields.whitelist`` limits the value's columns.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    RetriableException,
    SinkConnector,
    SinkRecord,
    SinkTask,
)
from kafkaclone.connect.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, Schema, SchemaType
from kafkaclone.connect.jdbc.dialect import Connection, Dialect, dialect_for
from kafkaclone.connect.jdbc.source import CONNECTION_KEYS, VERSION

logger = logging.getLogger(__name__)

WRITES_GROUP: Final = "Writes"
DATA_MAPPING_GROUP: Final = "Data Mapping"
DDL_GROUP: Final = "DDL Support"
RETRIES_GROUP: Final = "Retries"
DEFAULT_KAFKA_PK_NAMES: Final = ("__connect_topic", "__connect_partition", "__connect_offset")
DEFAULT_KEY_FIELD: Final = "__connect_default"

SINK_CONFIG: Final = ConfigDef([
    *CONNECTION_KEYS,
    ConfigKey("insert.mode", ConfigType.STRING, "insert", Importance.HIGH,
              "The insertion mode to use: insert, upsert or update.",
              one_of("insert", "upsert", "update"), group=WRITES_GROUP),
    ConfigKey("batch.size", ConfigType.INT, 3000, Importance.MEDIUM,
              "Specifies how many records to attempt to batch together for insertion into "
              "the destination table, when possible.", at_least(0), group=WRITES_GROUP),
    ConfigKey("delete.enabled", ConfigType.BOOLEAN, False, Importance.MEDIUM,
              "Whether to treat null record values as deletes. Requires pk.mode to be "
              "record_key.", group=WRITES_GROUP),
    ConfigKey("table.name.format", ConfigType.STRING, "${topic}", Importance.MEDIUM,
              "A format string for the destination table name, which may contain '${topic}' "
              "as a placeholder for the originating topic name.", group=DATA_MAPPING_GROUP),
    ConfigKey("pk.mode", ConfigType.STRING, "none", Importance.HIGH,
              "The primary key mode: none, kafka, record_key, record_value.",
              one_of("none", "kafka", "record_key", "record_value"), group=DATA_MAPPING_GROUP),
    ConfigKey("pk.fields", ConfigType.LIST, (), Importance.MEDIUM,
              "List of comma-separated primary key field names. The runtime interpretation "
              "of this config depends on the pk.mode.", group=DATA_MAPPING_GROUP),
    ConfigKey("fields.whitelist", ConfigType.LIST, (), Importance.MEDIUM,
              "List of comma-separated record value field names. If empty, all fields from "
              "the record value are utilized.", group=DATA_MAPPING_GROUP),
    ConfigKey("auto.create", ConfigType.BOOLEAN, False, Importance.MEDIUM,
              "Whether to automatically create the destination table based on record schema "
              "if it is found to be missing by issuing CREATE.", group=DDL_GROUP),
    ConfigKey("auto.evolve", ConfigType.BOOLEAN, False, Importance.MEDIUM,
              "Whether to automatically add columns in the table schema when found to be "
              "missing relative to the record schema by issuing ALTER.", group=DDL_GROUP),
    ConfigKey("max.retries", ConfigType.INT, 10, Importance.MEDIUM,
              "The maximum number of times to retry on errors before failing the task.",
              at_least(0), group=RETRIES_GROUP),
    ConfigKey("retry.backoff.ms", ConfigType.INT, 3000, Importance.MEDIUM,
              "The time in milliseconds to wait following an error before a retry attempt "
              "is made.", at_least(0), group=RETRIES_GROUP),
])


class JdbcSinkConnector(SinkConnector):
    """Confluent's ``JdbcSinkConnector``: ``tasks.max`` identical tasks (the consumer
    group spreads the partitions)."""

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return SINK_CONFIG

    def required_configs(self) -> Sequence[str]:
        return ("connection.url",)

    def validate(self, props: Mapping[str, str]) -> Config:
        """Confluent's checks beyond each key (``JdbcSinkConnector.validate``)."""
        result = super().validate(props)
        by_name = {value.name: value for value in result.config_values}
        pk_mode = props.get("pk.mode", "none")
        if props.get("delete.enabled", "false").lower() == "true" and pk_mode != "record_key":
            by_name["pk.mode"].errors.append("Deletes are only supported for pk.mode "
                                             "record_key")
        if props.get("insert.mode", "insert") in ("upsert", "update") and pk_mode == "none":
            by_name["pk.mode"].errors.append(
                f"insert.mode {props['insert.mode']} needs a primary key: pk.mode must be "
                "kafka, record_key or record_value")
        url = props.get("connection.url")
        if url and not by_name["connection.url"].errors:
            try:
                dialect_for(url)
            except ConnectException as exc:
                by_name["connection.url"].errors.append(str(exc))
        return result

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[SinkTask]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


@dataclass(frozen=True)
class FieldsMetadata:
    """Confluent's ``FieldsMetadata``: the key and value columns of a record, in order,
    with their schemas."""

    key_fields: tuple[tuple[str, Schema], ...]
    value_fields: tuple[tuple[str, Schema], ...]

    @property
    def all_fields(self) -> tuple[tuple[str, Schema], ...]:
        return self.key_fields + self.value_fields


class JdbcSinkTask(SinkTask):
    """Confluent's ``JdbcSinkTask`` with its ``JdbcDbWriter`` and ``BufferedRecords``."""

    def version(self) -> str:
        return VERSION

    def start(self, props: Mapping[str, str]) -> None:
        values, _ = SINK_CONFIG.parse({k: v for k, v in props.items() if k in SINK_CONFIG})
        self.insert_mode = str(values["insert.mode"])
        self.pk_mode = str(values["pk.mode"])
        pk_fields = values["pk.fields"]
        whitelist = values["fields.whitelist"]
        assert isinstance(pk_fields, tuple) and isinstance(whitelist, tuple)
        self.pk_fields = [str(f) for f in pk_fields]
        self.whitelist = {str(f) for f in whitelist}
        self.table_format = str(values["table.name.format"])
        self.batch_size = int(str(values["batch.size"])) or 1
        self.delete_enabled = values["delete.enabled"] is True
        self.auto_create = values["auto.create"] is True
        self.auto_evolve = values["auto.evolve"] is True
        self.max_retries = int(str(values["max.retries"]))
        self.retry_backoff_ms = int(str(values["retry.backoff.ms"]))
        self.remaining_retries = self.max_retries
        self.dialect: Dialect = dialect_for(props["connection.url"],
                                            props.get("connection.user"),
                                            props.get("connection.password"))
        self.connection: Connection | None = None
        self.table_columns: dict[str, set[str]] = {}
        self.statements: dict[tuple[str, tuple[str, ...], tuple[str, ...]], str] = {}
        self.written = 0

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        try:
            self._write(records)
        except ConnectException:
            self._abandon()
            raise
        except Exception as exc:
            self._abandon()
            logger.warning("Write of %d records failed, remainingRetries=%d: %s",
                           len(records), self.remaining_retries, exc)
            if self.remaining_retries <= 0:
                raise ConnectException(f"Write of {len(records)} records failed after "
                                       f"{self.max_retries} retries: {exc}") from exc
            self.remaining_retries -= 1
            self.context.timeout(self.retry_backoff_ms)
            raise RetriableException(str(exc)) from exc
        self.remaining_retries = self.max_retries

    def _abandon(self) -> None:
        """After a failed write: roll back and drop the connection (reopened by the next
        put), and forget the tables' columns (the DDL may have been rolled back)."""
        self.table_columns.clear()
        if self.connection is not None:
            try:
                self.connection.rollback()
                self.connection.close()
            except Exception as exc:  # a broken connection may fail to close: drop it
                logger.debug("Closing the database connection failed: %s", exc)
            self.connection = None

    def _write(self, records: Sequence[SinkRecord]) -> None:
        if self.connection is None:
            self.connection = self.dialect.connect()
        connection = self.connection
        cursor = connection.cursor()
        # Consecutive records of one table, one kind (upsert or delete) and one shape are
        # sent as one executemany (Confluent's BufferedRecords).
        batch: list[list[object]] = []
        batch_sql = ""
        for record in records:
            table = self.table_format.replace("${topic}", record.topic)
            metadata = self._fields(record)
            if record.value is None:
                sql = self.dialect.delete(table, [n for n, _ in metadata.key_fields])
                params = self._key_values(record, metadata)
            else:
                self._ensure_table(cursor, table, metadata)
                sql, params = self._upsert(table, record, metadata)
            if sql != batch_sql or len(batch) >= self.batch_size:
                if batch:
                    cursor.executemany(batch_sql, batch)
                batch, batch_sql = [], sql
            batch.append(params)
        if batch:
            cursor.executemany(batch_sql, batch)
        connection.commit()
        self.written += len(records)

    def _fields(self, record: SinkRecord) -> FieldsMetadata:
        """Confluent's ``FieldsMetadata.extract``."""
        value_schema = record.value_schema
        if record.value is None:
            if not self.delete_enabled:
                raise ConnectException(
                    f"Sink connector is configured with 'delete.enabled=false' and "
                    f"'pk.mode={self.pk_mode}' and therefore requires records with a "
                    f"non-null Struct value and non-null Struct schema, but found record at "
                    f"({record.topic},{record.kafka_partition},{record.kafka_offset}) with a "
                    f"null value and null value schema.")
        elif value_schema is None or value_schema.type is not SchemaType.STRUCT:
            raise ConnectException(
                f"Sink connector is configured with 'pk.mode={self.pk_mode}' and therefore "
                f"requires records with a non-null Struct value and non-null Struct schema, "
                f"but found record at ({record.topic},{record.kafka_partition},"
                f"{record.kafka_offset}) with a {type(record.value).__name__} value and "
                f"{'null' if value_schema is None else value_schema.type.name} value schema.")
        value_fields = [] if value_schema is None else [
            (f.name, f.schema) for f in value_schema.fields
            if not self.whitelist or f.name in self.whitelist]
        key_fields: list[tuple[str, Schema]] = []
        if self.pk_mode == "kafka":
            names = self.pk_fields or list(DEFAULT_KAFKA_PK_NAMES)
            if len(names) != 3:
                raise ConnectException("PK mode for table is kafka so there should either be "
                                       "no field names defined for defaults to be used, or "
                                       "exactly 3, defining fields for topic, partition and "
                                       "offset.")
            key_fields = list(zip(names, (STRING_SCHEMA, INT32_SCHEMA, INT64_SCHEMA),
                                  strict=True))
        elif self.pk_mode == "record_key":
            key_schema = record.key_schema
            if key_schema is None:
                raise ConnectException(f"PK mode for table is record_key, but record key "
                                       f"schema is missing (record at {record.topic},"
                                       f"{record.kafka_partition},{record.kafka_offset})")
            if key_schema.type is SchemaType.STRUCT:
                wanted = self.pk_fields or [f.name for f in key_schema.fields]
                for name in wanted:
                    found = key_schema.field(name)
                    if found is None:
                        raise ConnectException(f"PK mode for table is record_key with "
                                               f"configured PK fields {self.pk_fields}, but "
                                               f"record key schema does not contain field: "
                                               f"{name}")
                    key_fields.append((name, found.schema))
            else:
                if len(self.pk_fields) > 1:
                    raise ConnectException(f"Need exactly one PK column defined since the key "
                                           f"schema for records is a primitive type, defined "
                                           f"columns are: {self.pk_fields}")
                key_fields = [((self.pk_fields or [DEFAULT_KEY_FIELD])[0], key_schema)]
        elif self.pk_mode == "record_value":
            by_name = dict(value_fields)
            for name in self.pk_fields or list(by_name):
                if name not in by_name:
                    raise ConnectException(f"PK mode for table is record_value with configured "
                                           f"PK fields {self.pk_fields}, but record value "
                                           f"schema does not contain field: {name}")
                key_fields.append((name, by_name[name]))
        key_names = {name for name, _ in key_fields}
        return FieldsMetadata(tuple(key_fields),
                              tuple((n, s) for n, s in value_fields if n not in key_names))

    def _key_values(self, record: SinkRecord, metadata: FieldsMetadata) -> list[object]:
        if self.pk_mode == "kafka":
            return [record.topic, record.kafka_partition, record.kafka_offset]
        source: Any = record.key if self.pk_mode == "record_key" else record.value
        if self.pk_mode == "record_key" and not isinstance(source, dict):
            return [self.dialect.from_connect(metadata.key_fields[0][1], source)]
        assert isinstance(source, dict)
        return [self.dialect.from_connect(schema, source.get(name))
                for name, schema in metadata.key_fields]

    def _upsert(self, table: str, record: SinkRecord, metadata: FieldsMetadata
                ) -> tuple[str, list[object]]:
        value = record.value
        assert isinstance(value, dict)
        keys = tuple(n for n, _ in metadata.key_fields)
        key_values = self._key_values(record, metadata) if keys else []
        from_connect = self.dialect.from_connect
        values = [from_connect(s, value.get(n)) for n, s in metadata.value_fields]
        statement = (table, keys, tuple(n for n, _ in metadata.value_fields))
        sql = self.statements.get(statement)
        if sql is None:
            sql = self.statements[statement] = self._statement(*statement)
        if self.insert_mode == "update":
            return sql, values + key_values
        return sql, key_values + values

    def _statement(self, table: str, keys: tuple[str, ...], columns: tuple[str, ...]) -> str:
        """Confluent's ``BufferedRecords``: the statement of ``insert.mode``."""
        if self.insert_mode == "upsert":
            if not keys:
                raise ConnectException("Write to table '" + table + "' in UPSERT mode requires "
                                       "key field names to be known, check the primary key "
                                       "configuration")
            return self.dialect.upsert(table, keys, keys + columns)
        if self.insert_mode == "update":
            return self.dialect.update(table, keys, keys + columns)
        return self.dialect.insert(table, keys + columns)

    def _ensure_table(self, cursor: Any, table: str, metadata: FieldsMetadata) -> None:
        """Confluent's ``DbStructure.createOrAmendIfNecessary``."""
        known = self.table_columns.get(table)
        wanted = [name for name, _ in metadata.all_fields]
        if known is not None and all(name in known for name in wanted):
            return
        assert self.connection is not None
        columns = {c.name for c in self.dialect.columns(self.connection, table)}
        if not columns:
            if not self.auto_create:
                raise ConnectException(f"Table \"{table}\" is missing and auto-creation is "
                                       "disabled")
            sql = self.dialect.create_table(table, metadata.all_fields,
                                            [name for name, _ in metadata.key_fields])
            logger.info("Creating table with sql: %s", sql)
            cursor.execute(sql)
            columns = set(wanted)
        missing = [(n, s) for n, s in metadata.all_fields if n not in columns]
        if missing:
            if not self.auto_evolve:
                raise ConnectException(f"Table \"{table}\" is missing fields "
                                       f"{[n for n, _ in missing]} and auto-evolution is "
                                       "disabled")
            for name, schema in missing:
                if not schema.optional:
                    raise ConnectException(f"Cannot ALTER TABLE \"{table}\" to add missing "
                                           f"field {name}, as the field is not optional")
                sql = self.dialect.add_column(table, name, schema)
                logger.info("Amending table with sql: %s", sql)
                cursor.execute(sql)
                columns.add(name)
        self.table_columns[table] = columns

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
