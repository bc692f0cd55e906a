"""Single message transforms: Kafka's ``Transformation`` and the shipped ones used most,
under Kafka's names and config keys (``org.apache.kafka.connect.transforms.*``).

A connector lists them in ``transforms=a,b``, each configured by
``transforms.a.type=<class>`` and ``transforms.a.<key>=...``. ``$Key`` / ``$Value``
variants act on the record's key or value. Values without a schema must be maps
(``dict``), with a schema structs (also ``dict``, with the schema updated), as in Kafka.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar, TypeVar

from kafkaclone.common.config_def import (
    AbstractConfig,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
)
from kafkaclone.connect.api import ConnectRecord, DataException, SinkRecord
from kafkaclone.connect.data import (
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    ConnectValue,
    Schema,
    SchemaType,
    struct_schema,
)

R = TypeVar("R", bound=ConnectRecord)


class Transformation(ABC):
    """Kafka's ``Transformation``."""

    def configure(self, props: Mapping[str, str]) -> None:
        self.props = AbstractConfig(self.config(), props)

    @abstractmethod
    def config(self) -> ConfigDef: ...

    @abstractmethod
    def apply(self, record: R) -> R | None:
        """The transformed record; None drops it."""

    def close(self) -> None:  # noqa: B027 (optional, as in Kafka)
        """Release what ``configure`` acquired."""


class KeyOrValueTransformation(Transformation):
    """A transform with ``$Key`` and ``$Value`` variants: ``operating_on_key`` says which."""

    operating_on_key: ClassVar[bool] = False
    purpose: ClassVar[str] = ""

    def apply(self, record: R) -> R | None:
        if self.operating_on_key:
            schema, value = record.key_schema, record.key
        else:
            schema, value = record.value_schema, record.value
        new_schema, new_value = self.transform(record, schema, value)
        if self.operating_on_key:
            return record.new_record(record.topic, record.kafka_partition, new_schema,
                                     new_value, record.value_schema, record.value,
                                     record.timestamp)
        return record.new_record(record.topic, record.kafka_partition, record.key_schema,
                                 record.key, new_schema, new_value, record.timestamp)

    @abstractmethod
    def transform(self, record: ConnectRecord, schema: Schema | None, value: ConnectValue
                  ) -> tuple[Schema | None, ConnectValue]: ...

    def require_map(self, value: ConnectValue) -> dict[str, ConnectValue]:
        if not isinstance(value, dict):
            found = "null" if value is None else type(value).__name__
            raise DataException(f"Only Map objects supported in absence of schema for "
                                f"[{self.purpose}], found: {found}")
        return value

    def require_struct(self, schema: Schema, value: ConnectValue) -> dict[str, ConnectValue]:
        if schema.type is not SchemaType.STRUCT or not isinstance(value, dict):
            raise DataException(f"Only Struct objects supported for [{self.purpose}], "
                                f"found: {schema.type.name}")
        return value


# --- InsertField ----------------------------------------------------------------------------

INSERT_FIELD_CONFIG = ConfigDef([
    ConfigKey("topic.field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name for Kafka topic. Suffix with ! to make this a required field, or ? "
              "to keep it optional (the default)."),
    ConfigKey("partition.field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name for Kafka partition."),
    ConfigKey("offset.field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name for Kafka offset - only applicable to sink connectors."),
    ConfigKey("timestamp.field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name for record timestamp."),
    ConfigKey("static.field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name for static data field."),
    ConfigKey("static.value", ConfigType.STRING, None, Importance.MEDIUM,
              "Static field value, if field name configured."),
])


def _insertion_spec(raw: str | None) -> tuple[str, bool] | None:
    """Kafka's ``InsertionSpec.parse``: (name, optional)."""
    if raw is None:
        return None
    if raw.endswith("?"):
        return raw[:-1], True
    if raw.endswith("!"):
        return raw[:-1], False
    return raw, True


class InsertField(KeyOrValueTransformation):
    """Kafka's ``InsertField``: record metadata (topic, partition, offset, timestamp) or a
    static value as new fields."""

    purpose = "field insertion"

    def config(self) -> ConfigDef:
        return INSERT_FIELD_CONFIG

    def _insertions(self, record: ConnectRecord) -> list[tuple[str, bool, Schema,
                                                              ConnectValue]]:
        out: list[tuple[str, bool, Schema, ConnectValue]] = []

        def add(key: str, schema: Schema, value: ConnectValue) -> None:
            spec = _insertion_spec(self.props.get_optional_str(key))
            if spec is not None:
                name, optional = spec
                out.append((name, optional, Schema(schema.type, optional=optional), value))

        add("topic.field", OPTIONAL_STRING_SCHEMA, record.topic)
        add("partition.field", Schema(SchemaType.INT32, optional=True), record.kafka_partition)
        if isinstance(record, SinkRecord):
            add("offset.field", OPTIONAL_INT64_SCHEMA, record.kafka_offset)
        add("timestamp.field", Schema(SchemaType.INT64, optional=True,
                                      name="org.apache.kafka.connect.data.Timestamp"),
            record.timestamp)
        add("static.field", OPTIONAL_STRING_SCHEMA, self.props.get_optional_str("static.value"))
        return out

    def transform(self, record: ConnectRecord, schema: Schema | None, value: ConnectValue
                  ) -> tuple[Schema | None, ConnectValue]:
        insertions = self._insertions(record)
        if schema is None:
            updated = dict(self.require_map(value))
            updated.update({name: inserted for name, _, _, inserted in insertions})
            return None, updated
        updated = dict(self.require_struct(schema, value))
        fields = [(f.name, f.schema) for f in schema.fields]
        for name, _, field_schema, inserted in insertions:
            fields.append((name, field_schema))
            updated[name] = inserted
        return struct_schema(fields, name=schema.name, optional=schema.optional), updated


class InsertFieldKey(InsertField):
    operating_on_key = True


class InsertFieldValue(InsertField):
    operating_on_key = False


# --- ReplaceField ---------------------------------------------------------------------------

REPLACE_FIELD_CONFIG = ConfigDef([
    ConfigKey("exclude", ConfigType.LIST, (), Importance.MEDIUM,
              "Fields to exclude. This takes precedence over the fields to include."),
    ConfigKey("include", ConfigType.LIST, (), Importance.MEDIUM,
              "Fields to include. If specified, only these fields will be used."),
    ConfigKey("renames", ConfigType.LIST, (), Importance.MEDIUM,
              "Field rename mappings (foo:bar,abc:xyz)."),
    ConfigKey("blacklist", ConfigType.LIST, None, Importance.LOW,
              "Deprecated. Use exclude instead.", deprecated=True),
    ConfigKey("whitelist", ConfigType.LIST, None, Importance.LOW,
              "Deprecated. Use include instead.", deprecated=True),
])


class ReplaceField(KeyOrValueTransformation):
    """Kafka's ``ReplaceField``: drop, keep and rename fields."""

    purpose = "field replacement"

    def config(self) -> ConfigDef:
        return REPLACE_FIELD_CONFIG

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        c = self.props
        self.exclude = set(c.get_list("exclude") or (c.get_list("blacklist")
                                                      if c.get("blacklist") else []))
        self.include = set(c.get_list("include") or (c.get_list("whitelist")
                                                      if c.get("whitelist") else []))
        self.renames: dict[str, str] = {}
        for mapping in c.get_list("renames"):
            parts = mapping.split(":")
            if len(parts) != 2 or not all(parts):
                raise DataException(f"Invalid rename mapping: {mapping}")
            self.renames[parts[0]] = parts[1]

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def transform(self, record: ConnectRecord, schema: Schema | None, value: ConnectValue
                  ) -> tuple[Schema | None, ConnectValue]:
        if schema is None:
            return None, {self.renames.get(k, k): v for k, v in self.require_map(value).items()
                          if self._keep(k)}
        struct = self.require_struct(schema, value)
        kept = [f for f in schema.fields if self._keep(f.name)]
        new_schema = struct_schema([(self.renames.get(f.name, f.name), f.schema) for f in kept],
                                   name=schema.name, optional=schema.optional)
        return new_schema, {self.renames.get(f.name, f.name): struct.get(f.name) for f in kept}


class ReplaceFieldKey(ReplaceField):
    operating_on_key = True


class ReplaceFieldValue(ReplaceField):
    operating_on_key = False


# --- ExtractField ---------------------------------------------------------------------------

EXTRACT_FIELD_CONFIG = ConfigDef([
    ConfigKey("field", ConfigType.STRING, None, Importance.MEDIUM,
              "Field name to extract."),
])


class ExtractField(KeyOrValueTransformation):
    """Kafka's ``ExtractField``: the key or value becomes one of its fields."""

    purpose = "field extraction"

    def config(self) -> ConfigDef:
        return EXTRACT_FIELD_CONFIG

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        name = self.props.get_optional_str("field")
        if not name:
            raise DataException("ExtractField requires the \"field\" configuration")
        self.field_name = name

    def transform(self, record: ConnectRecord, schema: Schema | None, value: ConnectValue
                  ) -> tuple[Schema | None, ConnectValue]:
        if schema is None:
            return None, None if value is None else self.require_map(value).get(self.field_name)
        found = schema.field(self.field_name)
        if found is None:
            raise DataException(f"Unknown field: {self.field_name}")
        if value is None:
            return found.schema, None
        return found.schema, self.require_struct(schema, value).get(self.field_name)


class ExtractFieldKey(ExtractField):
    operating_on_key = True


class ExtractFieldValue(ExtractField):
    operating_on_key = False


# --- ValueToKey -----------------------------------------------------------------------------

VALUE_TO_KEY_CONFIG = ConfigDef([
    ConfigKey("fields", ConfigType.LIST, (), Importance.HIGH,
              "Field names on the record value to extract as the record key."),
])


class ValueToKey(Transformation):
    """Kafka's ``ValueToKey``: the key becomes the value's ``fields``."""

    def config(self) -> ConfigDef:
        return VALUE_TO_KEY_CONFIG

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.fields = self.props.get_list("fields")
        if not self.fields:
            raise DataException("ValueToKey requires a non-empty \"fields\" list")

    def apply(self, record: R) -> R | None:
        value = record.value
        if record.value_schema is None:
            if not isinstance(value, dict):
                kind = "null" if value is None else type(value).__name__
                raise DataException("Only Map objects supported in absence of schema for "
                                    f"[copying fields from value to key], found: {kind}")
            key: dict[str, ConnectValue] = {name: value.get(name) for name in self.fields}
            return record.new_record(record.topic, record.kafka_partition, None, key,
                                     None, value, record.timestamp)
        schema = record.value_schema
        if schema.type is not SchemaType.STRUCT or not isinstance(value, dict):
            raise DataException("Only Struct objects supported for [copying fields from value "
                                f"to key], found: {schema.type.name}")
        key_fields: list[tuple[str, Schema]] = []
        for field_name in self.fields:
            found = schema.field(field_name)
            if found is None:
                raise DataException(f"Field does not exist: {field_name}")
            key_fields.append((field_name, found.schema))
        return record.new_record(record.topic, record.kafka_partition,
                                 struct_schema(key_fields),
                                 {name: value.get(name) for name in self.fields},
                                 schema, value, record.timestamp)


# --- routers --------------------------------------------------------------------------------

TIMESTAMP_ROUTER_CONFIG = ConfigDef([
    ConfigKey("topic.format", ConfigType.STRING, "${topic}-${timestamp}", Importance.HIGH,
              "Format string which can contain ${topic} and ${timestamp} as placeholders for "
              "the topic and timestamp, respectively."),
    ConfigKey("timestamp.format", ConfigType.STRING, "yyyyMMdd", Importance.HIGH,
              "Format string for the timestamp that is compatible with "
              "java.text.SimpleDateFormat."),
])

_SIMPLE_DATE_FORMAT = (("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
                       ("mm", "%M"), ("ss", "%S"), ("SSS", "{millis}"))


def simple_date_format(pattern: str, timestamp_ms: int) -> str:
    """``java.text.SimpleDateFormat`` in UTC for the usual letters (y, M, d, H, m, s, S)
    and quoted literals."""
    parts = re.split(r"('[^']*')", pattern)
    out: list[str] = []
    moment = time.gmtime(timestamp_ms // 1000)
    for part in parts:
        if part.startswith("'") and part.endswith("'") and len(part) >= 2:
            out.append(part[1:-1] or "'")
            continue
        text = part.replace("%", "%%")
        for java, python in _SIMPLE_DATE_FORMAT:
            text = text.replace(java, python)
        out.append(time.strftime(text, moment).replace("{millis}", f"{timestamp_ms % 1000:03d}"))
    return "".join(out)


class TimestampRouter(Transformation):
    """Kafka's ``TimestampRouter``: the topic becomes ``topic.format`` of the record's
    topic and timestamp (UTC, as Kafka's formatter)."""

    def config(self) -> ConfigDef:
        return TIMESTAMP_ROUTER_CONFIG

    def apply(self, record: R) -> R | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = simple_date_format(self.props.get_str("timestamp.format"), record.timestamp)
        topic = self.props.get_str("topic.format").replace("${topic}", record.topic) \
            .replace("${timestamp}", stamp)
        return record.new_record(topic, None, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp)


REGEX_ROUTER_CONFIG = ConfigDef([
    ConfigKey("regex", ConfigType.STRING, "", Importance.HIGH,
              "Regular expression to use for matching."),
    ConfigKey("replacement", ConfigType.STRING, "", Importance.HIGH, "Replacement string."),
])


def java_replacement(replacement: str) -> str:
    """A ``Matcher.replaceFirst`` replacement (``$1``, ``\\$``) as Python's ``re`` one."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$":
            match = re.match(r"\$(\d+|\{\w+\})", replacement[i:])
            if match is None:
                raise DataException(f"Illegal group reference in {replacement!r}")
            group = match.group(1).strip("{}")
            out.append(f"\\g<{group}>")
            i += len(match.group(0))
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


class RegexRouter(Transformation):
    """Kafka's ``RegexRouter``: a topic matching ``regex`` (the whole name) is renamed to
    ``replacement`` (``$1`` for groups)."""

    def config(self) -> ConfigDef:
        return REGEX_ROUTER_CONFIG

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.regex = re.compile(self.props.get_str("regex"))
        self.replacement = java_replacement(self.props.get_str("replacement"))

    def apply(self, record: R) -> R | None:
        if self.regex.fullmatch(record.topic) is None:
            return record
        topic = self.regex.sub(self.replacement, record.topic, count=1)
        return record.new_record(topic, record.kafka_partition, record.key_schema, record.key,
                                 record.value_schema, record.value, record.timestamp)
