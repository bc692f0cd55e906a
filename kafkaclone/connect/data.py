"""Kafka Connect's data model (``org.apache.kafka.connect.data``), kept small: a
``Schema`` (type, optional, name, fields of a struct) and plain Python values: a struct is
a ``dict`` keyed by field name, an array a ``list``, a map a ``dict``, bytes ``bytes``.

Connectors without schemas (a JSON value read with ``schemas.enable=false``) pass
``None`` as the schema, as Kafka's schemaless records do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class SchemaType(enum.Enum):
    """Kafka's ``Schema.Type``; the value is the JsonConverter's type name."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """Kafka's ``ConnectSchema``."""

    type: SchemaType
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    parameters: dict[str, str] = field(default_factory=dict, compare=False)

    def field(self, name: str) -> Field | None:
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        return None


def struct_schema(fields: list[tuple[str, Schema]], *, name: str | None = None,
                  optional: bool = False) -> Schema:
    """A STRUCT schema with ``fields`` in order (Kafka's ``SchemaBuilder.struct()``)."""
    return Schema(SchemaType.STRUCT, optional=optional, name=name,
                  fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)))


STRING_SCHEMA = Schema(SchemaType.STRING)
OPTIONAL_STRING_SCHEMA = Schema(SchemaType.STRING, optional=True)
INT64_SCHEMA = Schema(SchemaType.INT64)
OPTIONAL_INT64_SCHEMA = Schema(SchemaType.INT64, optional=True)
INT32_SCHEMA = Schema(SchemaType.INT32)
BYTES_SCHEMA = Schema(SchemaType.BYTES)
OPTIONAL_BYTES_SCHEMA = Schema(SchemaType.BYTES, optional=True)
BOOLEAN_SCHEMA = Schema(SchemaType.BOOLEAN)
FLOAT64_SCHEMA = Schema(SchemaType.FLOAT64)

ConnectValue = object
"""A value in Connect's data model (see the module docstring)."""


@dataclass(frozen=True)
class SchemaAndValue:
    schema: Schema | None
    value: ConnectValue


NULL = SchemaAndValue(None, None)
