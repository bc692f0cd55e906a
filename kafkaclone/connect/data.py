"""Kafka Connect's data model (``org.apache.kafka.connect.data``), kept small: a
``Schema`` (type, optional, name, fields of a struct) and plain Python values: a struct is
a ``dict`` keyed by field name, an array a ``list``, a map a ``dict``, bytes ``bytes``.

Connectors without schemas (a JSON value read with ``schemas.enable=false``) pass
``None`` as the schema, as Kafka's schemaless records do.

Kafka's ``Decimal`` logical type is a BYTES schema named ``DECIMAL_NAME`` with the
parameter ``scale``; its value in Connect is a ``decimal.Decimal`` of exactly that scale
(Java's ``BigDecimal``), its serialized form (``Decimal.fromLogical``) the unscaled integer
in big-endian two's complement, as few bytes as Java's ``BigInteger.toByteArray``.
"""

from __future__ import annotations

import decimal
import enum
from dataclasses import dataclass, field
from typing import Final


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
    parameters: dict[str, str] = field(default_factory=dict, hash=False)

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

DECIMAL_NAME: Final = "org.apache.kafka.connect.data.Decimal"
DECIMAL_SCALE: Final = "scale"
DECIMAL_PRECISION: Final = "connect.decimal.precision"
"""The precision parameter Confluent's JDBC source adds to a Decimal schema."""


def decimal_schema(scale: int, *, optional: bool = False, precision: int | None = None
                   ) -> Schema:
    """Kafka's ``Decimal.builder(scale)`` (and Confluent's precision parameter)."""
    parameters = {DECIMAL_SCALE: str(scale)}
    if precision is not None:
        parameters[DECIMAL_PRECISION] = str(precision)
    return Schema(SchemaType.BYTES, optional=optional, name=DECIMAL_NAME, version=1,
                  parameters=parameters)


def decimal_scale(schema: Schema) -> int:
    raw = schema.parameters.get(DECIMAL_SCALE)
    if raw is None:
        raise ValueError("Invalid Decimal schema: scale parameter not found.")
    return int(raw)


def decimal_to_bytes(schema: Schema, value: decimal.Decimal) -> bytes:
    """Kafka's ``Decimal.fromLogical``: the scale must be the schema's (ValueError, which
    the converters raise as a DataException)."""
    scale = decimal_scale(schema)
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent != scale:
        raise ValueError("BigDecimal has mismatching scale value for given Decimal schema")
    sign, digits, _ = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    length = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_bytes(schema: Schema, raw: bytes) -> decimal.Decimal:
    """Kafka's ``Decimal.toLogical``."""
    unscaled = int.from_bytes(raw, "big", signed=True)
    return decimal.Decimal(f"{unscaled}E{-decimal_scale(schema)}")


ConnectValue = object
"""A value in Connect's data model (see the module docstring)."""


@dataclass(frozen=True)
class SchemaAndValue:
    schema: Schema | None
    value: ConnectValue


NULL = SchemaAndValue(None, None)
