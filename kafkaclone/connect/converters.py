"""Converters: Kafka Connect's ``Converter`` and the three shipped with Kafka.

The worker configures one per role from ``key.converter`` / ``value.converter`` (a class
name, as in Kafka) and the keys under the same prefix (``value.converter.schemas.enable``).

- ``org.apache.kafka.connect.json.JsonConverter``: JSON bytes. With ``schemas.enable=true``
  (Kafka's default) every message is Kafka's envelope ``{"schema": ..., "payload": ...}``;
  bytes values are base64 in JSON, as in Kafka; a ``Decimal`` value too, as its unscaled
  bytes (Kafka's default ``decimal.format=BASE64``), or with ``decimal.format=NUMERIC``
  (KIP-481) as an exact JSON number; either form is read back as a Decimal, as Kafka's
  reader accepts both.
- ``org.apache.kafka.connect.storage.StringConverter``: UTF-8 text (``converter.encoding``).
- ``org.apache.kafka.connect.converters.ByteArrayConverter``: bytes as they are.
"""

from __future__ import annotations

import base64
import decimal
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import NamedTuple

from kafkaclone.common.config_def import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
    one_of,
    one_of_ignoring_case,
)
from kafkaclone.connect.api import DataException
from kafkaclone.connect.data import (
    DECIMAL_NAME,
    NULL,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    ConnectValue,
    Field,
    Schema,
    SchemaAndValue,
    SchemaType,
    decimal_from_bytes,
    decimal_to_bytes,
)


class Converter(ABC):
    """Kafka's ``Converter``: Connect data to and from the bytes of a Kafka record."""

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:  # noqa: B027
        """``configs``: the keys under this converter's prefix, prefix removed."""

    def config(self) -> ConfigDef:
        return ConfigDef([])

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: ConnectValue
                          ) -> bytes | None: ...

    @abstractmethod
    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue: ...


class ByteArrayConverter(Converter):
    """Kafka's ``ByteArrayConverter``."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: ConnectValue
                          ) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is not None and not isinstance(value, bytes | bytearray):
            raise DataException(
                f"ByteArrayConverter is not compatible with objects of type {type(value)}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, value)


STRING_CONVERTER_CONFIG = ConfigDef([
    ConfigKey("converter.encoding", ConfigType.STRING, "UTF8", Importance.HIGH,
              "The name of the character encoding used to convert strings."),
    ConfigKey("converter.type", ConfigType.STRING, "key", Importance.LOW,
              "How this converter will be used.", one_of("key", "value", "header")),
])


class StringConverter(Converter):
    """Kafka's ``StringConverter``: any value as its text, bytes read as text."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        return STRING_CONVERTER_CONFIG

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        encoding = configs.get("converter.encoding",
                               configs.get("serializer.encoding" if is_key else
                                           "deserializer.encoding", "UTF8"))
        self.encoding = "utf-8" if encoding.upper() in ("UTF8", "UTF-8") else encoding

    def from_connect_data(self, topic: str, schema: Schema | None, value: ConnectValue
                          ) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        return _text(value).encode(self.encoding)

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, value.decode(self.encoding))


def _text(value: ConnectValue) -> str:
    """Java's ``toString`` for the usual values (true, not True)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


JSON_CONVERTER_CONFIG = ConfigDef([
    ConfigKey("schemas.enable", ConfigType.BOOLEAN, True, Importance.HIGH,
              "Include schemas within each of the serialized values and keys."),
    ConfigKey("schemas.cache.size", ConfigType.INT, 1000, Importance.HIGH,
              "The maximum number of schemas that can be cached in this converter."),
    ConfigKey("converter.type", ConfigType.STRING, "key", Importance.LOW,
              "How this converter will be used.", one_of("key", "value", "header")),
    ConfigKey("decimal.format", ConfigType.STRING, "BASE64", Importance.LOW,
              "Controls which format this converter will serialize decimals in. This value "
              "is case insensitive and can be either 'BASE64' (default) or 'NUMERIC'",
              one_of_ignoring_case("BASE64", "NUMERIC")),
])

ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields "
                  "and may not contain additional fields. If you are trying to deserialize plain "
                  "JSON data, set schemas.enable=false in your converter configuration.")


class JsonConverter(Converter):
    """Kafka's ``JsonConverter``."""

    def __init__(self) -> None:
        self.schemas_enable = True
        self.cache_size = 1000
        self.numeric_decimals = False
        """``decimal.format=NUMERIC``: Decimals written as exact JSON numbers."""
        self._schemas: dict[str, Schema] = {}
        """Kafka's ``toConnectSchemaCache``: parsed schemas by their JSON text (parsing a
        struct schema costs ten times the rest of a record)."""

    def config(self) -> ConfigDef:
        return JSON_CONVERTER_CONFIG

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        raw = configs.get("schemas.enable", "true")
        self.schemas_enable = JSON_CONVERTER_CONFIG["schemas.enable"].parse(raw) is True
        size = JSON_CONVERTER_CONFIG["schemas.cache.size"].parse(
            configs.get("schemas.cache.size", "1000"))
        assert isinstance(size, int)
        self.cache_size = size
        decimal_format = JSON_CONVERTER_CONFIG["decimal.format"].parse(
            configs.get("decimal.format", "BASE64"))
        self.numeric_decimals = str(decimal_format).upper() == "NUMERIC"

    def from_connect_data(self, topic: str, schema: Schema | None, value: ConnectValue
                          ) -> bytes | None:
        if schema is None and value is None:
            # Kafka: a null schema and value is a null message (a tombstone stays one).
            return None
        payload = payload_to_json(schema, value, self.numeric_decimals)
        document: object = payload
        if self.schemas_enable:
            document = {"schema": None if schema is None else schema_to_json(schema),
                        "payload": payload}
        if self.numeric_decimals:
            return _dumps_exact(document).encode("utf-8")
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL
        try:
            if self.schemas_enable and _DECIMAL_NAME_BYTES in value:
                # A Decimal may come as a JSON number (decimal.format=NUMERIC): read every
                # fraction exactly; payload_from_json turns the other ones into floats.
                document = json.loads(value, parse_float=decimal.Decimal)
            else:
                document = json.loads(value)
        except ValueError as exc:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error: {exc}") from exc
        if not self.schemas_enable:
            return SchemaAndValue(None, document)
        if not isinstance(document, dict) or set(document) != {"schema", "payload"}:
            raise DataException(ENVELOPE_ERROR)
        raw_schema = document["schema"]
        if raw_schema is None:
            return SchemaAndValue(None, document["payload"])
        schema = self._schema(raw_schema)
        return SchemaAndValue(schema, payload_from_json(schema, document["payload"]))

    def _schema(self, raw_schema: object) -> Schema:
        cache_key = json.dumps(raw_schema, sort_keys=True)
        schema = self._schemas.get(cache_key)
        if schema is None:
            schema = schema_from_json(raw_schema)
            if len(self._schemas) >= self.cache_size:
                self._schemas.pop(next(iter(self._schemas)))  # the oldest goes
            self._schemas[cache_key] = schema
        return schema


def schema_to_json(schema: Schema) -> dict[str, object]:
    """Kafka's ``JsonConverter.asJsonSchema``."""
    out: dict[str, object] = {"type": schema.type.value}
    if schema.type is SchemaType.STRUCT:
        out["fields"] = [dict(schema_to_json(f.schema), field=f.name) for f in schema.fields]
    elif schema.type is SchemaType.ARRAY and schema.value_schema is not None:
        out["items"] = schema_to_json(schema.value_schema)
    elif schema.type is SchemaType.MAP and schema.key_schema is not None and \
            schema.value_schema is not None:
        out["keys"] = schema_to_json(schema.key_schema)
        out["values"] = schema_to_json(schema.value_schema)
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    return out


def schema_from_json(raw: object) -> Schema:
    """Kafka's ``JsonConverter.asConnectSchema``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise DataException("Schema must contain 'type' field")
    try:
        schema_type = SchemaType(raw["type"])
    except ValueError:
        raise DataException(f"Unknown schema type: {raw['type']}") from None
    fields: tuple[Field, ...] = ()
    key_schema = value_schema = None
    if schema_type is SchemaType.STRUCT:
        raw_fields = raw.get("fields")
        if not isinstance(raw_fields, list):
            raise DataException("Struct schema's \"fields\" argument is not an array.")
        fields = tuple(Field(str(f.get("field")), i, schema_from_json(f))
                       for i, f in enumerate(raw_fields) if isinstance(f, dict))
    elif schema_type is SchemaType.ARRAY:
        value_schema = schema_from_json(raw.get("items"))
    elif schema_type is SchemaType.MAP:
        key_schema = schema_from_json(raw.get("keys"))
        value_schema = schema_from_json(raw.get("values"))
    name = raw.get("name")
    version = raw.get("version")
    doc = raw.get("doc")
    parameters = raw.get("parameters")
    return Schema(schema_type, optional=raw.get("optional") is True,
                  name=name if isinstance(name, str) else None,
                  version=version if isinstance(version, int) else None,
                  doc=doc if isinstance(doc, str) else None, fields=fields,
                  key_schema=key_schema, value_schema=value_schema,
                  parameters={str(k): str(v) for k, v in parameters.items()}
                  if isinstance(parameters, dict) else {})


_DECIMAL_NAME_BYTES = DECIMAL_NAME.encode("ascii")


class _ExactNumber(NamedTuple):
    """A Decimal to be written as a JSON number with all its digits (``json`` writes only
    floats)."""

    value: decimal.Decimal


def _dumps_exact(document: object) -> str:
    """``json.dumps`` with compact separators that writes :class:`_ExactNumber` plainly."""
    if isinstance(document, _ExactNumber):
        return format(document.value, "f")
    if isinstance(document, dict):
        return "{" + ",".join(json.dumps(str(k)) + ":" + _dumps_exact(v)
                              for k, v in document.items()) + "}"
    if isinstance(document, list):
        return "[" + ",".join(_dumps_exact(v) for v in document) + "]"
    return json.dumps(document, separators=(",", ":"))


def payload_to_json(schema: Schema | None, value: ConnectValue,
                    numeric_decimals: bool = False) -> object:
    """A Connect value as JSON (bytes as base64, as Kafka writes them; a Decimal as its
    unscaled bytes in base64, or as a number with ``numeric_decimals``)."""
    if value is None:
        if schema is not None and not schema.optional:
            raise DataException("Conversion error: null value for field that is required and "
                                "has no default value")
        return None
    if isinstance(value, decimal.Decimal):
        if schema is None or schema.name != DECIMAL_NAME:
            raise DataException(f"Couldn't convert {value!r} to JSON: a Decimal value needs "
                                "the Decimal schema.")
        try:
            raw = decimal_to_bytes(schema, value)  # checks the scale
        except ValueError as exc:
            raise DataException(str(exc)) from exc
        if numeric_decimals:
            return _ExactNumber(value)
        value = raw
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if schema is not None and schema.type is SchemaType.STRUCT:
        if not isinstance(value, dict):
            raise DataException(f"Struct schema with a value of type {type(value).__name__}")
        return {f.name: payload_to_json(f.schema, value.get(f.name), numeric_decimals)
                for f in schema.fields}
    if isinstance(value, dict):
        items = None if schema is None else schema.value_schema
        return {str(k): payload_to_json(items, v, numeric_decimals) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = None if schema is None else schema.value_schema
        return [payload_to_json(items, v, numeric_decimals) for v in value]
    if isinstance(value, bool | int | float | str):
        return value
    raise DataException(f"Couldn't convert {value!r} to JSON.")


def payload_from_json(schema: Schema, value: object) -> ConnectValue:
    if value is None:
        return None
    if schema.type is SchemaType.BYTES:
        if schema.name == DECIMAL_NAME and isinstance(value, int | float | decimal.Decimal) \
                and not isinstance(value, bool):
            return value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        if not isinstance(value, str):
            raise DataException("Invalid bytes field")
        raw = base64.b64decode(value)
        if schema.name == DECIMAL_NAME:
            try:
                return decimal_from_bytes(schema, raw)
            except ValueError as exc:
                raise DataException(str(exc)) from exc
        return raw
    if schema.type is SchemaType.STRUCT:
        if not isinstance(value, dict):
            raise DataException("Structs should be encoded as JSON objects")
        return {f.name: payload_from_json(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type is SchemaType.ARRAY and isinstance(value, list) and \
            schema.value_schema is not None:
        items = schema.value_schema
        return [payload_from_json(items, v) for v in value]
    if isinstance(value, decimal.Decimal | dict | list):
        return _floats(value)
    return value


def _floats(value: object) -> ConnectValue:
    """``value`` with the fractions an exact read made Decimals back as floats (what the
    default read gives: they are not Decimal fields)."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return value
